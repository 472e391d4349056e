// The analytic and the envelope error models of GATES.md ("Shared definitions").
//
// Conventions shared by both models, so that every gate reads a comparison the same way:
// - y is widened exactly to float64 and compared with the float64 reference y*;
// - positions where y* is NaN or ±Inf are not compared: EXC-01 judges non-finite classes;
// - a y that equals y* correctly rounded to the output dtype is exact, whatever the model
//   says; this only matters where y* overflows the output dtype (a correct fp16 kernel must
//   return Inf for a finite y* above 65520), everywhere else the u(out)·|y*| and
//   ulp_out(min normal) terms already cover the rounding;
// - a NaN y where y* is finite makes the result NaN, which fails (NaN ≤ 1 is false).
#include "kcv/error_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kcv/dtype.hpp"

namespace kcv {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void require_same_size(const Tensor& y, const Tensor& ystar, const char* what) {
    if (y.numel() != ystar.numel())
        throw std::invalid_argument(std::string(what) + ": output has " + std::to_string(y.numel()) +
                                    " elements, reference " + std::to_string(ystar.numel()));
}

// |y − y*| with the correctly-rounded convention above; NaN when y is NaN.
double abs_error(const Tensor& y, int64_t i, double ystar) {
    const double v = y.get(i);
    if (v == round_to(y.dtype, ystar)) return 0.0;
    return std::fabs(v - ystar);
}

// err / τ, where τ = 0 (integer outputs) demands exact equality.
double ratio_of(double err, double tau) {
    if (std::isnan(err)) return kNaN;
    if (err == 0) return 0.0;
    if (std::isinf(err) || tau == 0) return kInf;
    return err / tau;
}

}  // namespace

bool accumulates(const OutputSpec& o) {
    return o.model == ErrorModelKind::reduction || o.model == ErrorModelKind::scan;
}

ErrorModelParams params_for(const OutputSpec& o, double c) {
    ErrorModelParams p;
    p.c = c;
    const DTypeInfo& out = info(o.dtype);
    const DTypeInfo& acc = info(o.accumulator);
    // Integer outputs (argmax indices) carry no rounding: all terms vanish and the model
    // demands exact equality.
    p.u_acc = out.is_float && acc.is_float ? acc.unit_roundoff : 0.0;
    p.eta_acc = accumulates(o) && out.is_float && acc.is_float ? ulp(o.accumulator, acc.min_normal) / 2 : 0.0;
    p.u_out = out.is_float ? out.unit_roundoff : 0.0;
    p.ulp_min_normal = out.is_float ? ulp(o.dtype, out.min_normal) : 0.0;
    return p;
}

DType allowed_operands(const Semantics& s) {
    if (s.bf16_operands) return DType::bf16;
    if (s.tf32_operands) return DType::tf32;
    return DType::f32;
}

double operand_floor(const Contract& contract) {
    const DType operands = allowed_operands(contract.semantics);
    return operands == DType::f32 ? 0.0 : info(operands).min_normal;
}

ErrorModelParams params_for(const Contract& contract, size_t out, double c) {
    const OutputSpec& o = contract.outputs.at(out);
    ErrorModelParams p = params_for(o, c);
    const DType operands = allowed_operands(contract.semantics);
    if (operands != DType::f32 && accumulates(o) && p.u_acc > 0) p.u_op = info(operands).unit_roundoff;
    p.operand_roundings = o.operand_roundings;
    return p;
}

double analytic_tau(const ErrorModelParams& p, int64_t k, double s, double abs_ystar) {
    return p.c * std::sqrt(static_cast<double>(k)) * (p.u_acc * s + p.eta_acc) + p.operand_roundings * p.u_op * s +
           p.u_out * abs_ystar + p.ulp_min_normal;
}

AnalyticResult analytic_ratio(const Tensor& y, const Tensor& ystar, const Tensor& scale, int64_t k,
                              const ErrorModelParams& p) {
    require_same_size(y, ystar, "analytic_ratio");
    // A tensor without a buffer means the oracle gave no scale: s_i = |y*_i| (elementwise maps).
    const bool has_scale = scale.buf != nullptr;
    if (has_scale) require_same_size(scale, ystar, "analytic_ratio scale");
    if (k < 0) throw std::invalid_argument("analytic_ratio: negative accumulation length " + std::to_string(k));

    AnalyticResult res;
    double worst_ratio = -1;
    int64_t first_nan = -1;
    double tau_at_nan = 0;
    const int64_t n = ystar.numel();
    for (int64_t i = 0; i < n; ++i) {
        const double ys = ystar.get(i);
        if (!std::isfinite(ys)) continue;
        ++res.compared;
        const double s = has_scale ? scale.get(i) : std::fabs(ys);
        const double tau = analytic_tau(p, k, s, std::fabs(ys));
        const double err = abs_error(y, i, ys);
        const double ratio = ratio_of(err, tau);
        if (std::isnan(ratio) || ratio > 1.0) {
            ++res.violations;
            if (res.first_violation < 0) res.first_violation = i;
        }
        if (std::isnan(ratio)) {
            if (first_nan < 0) {
                first_nan = i;
                tau_at_nan = tau;
            }
        } else if (ratio > worst_ratio) {
            worst_ratio = ratio;
            res.worst = i;
            res.tau_at_worst = tau;
            res.err_at_worst = err;
        }
    }
    if (first_nan >= 0) {
        res.r = kNaN;
        res.worst = first_nan;
        res.tau_at_worst = tau_at_nan;
        res.err_at_worst = kNaN;
    } else {
        res.r = std::max(worst_ratio, 0.0);
    }
    return res;
}

EnvelopeErr envelope_err(const Tensor& y, const Tensor& ystar) {
    require_same_size(y, ystar, "envelope_err");
    // Keeps the denominator positive when y* is all zeros; the output dtype's smallest normal is
    // the smallest magnitude at which a relative error means anything in that dtype.
    const DTypeInfo& out = info(y.dtype);
    const double tiny = out.is_float ? out.min_normal : std::numeric_limits<double>::min();

    EnvelopeErr res;
    double max_ref = 0, max_diff = -1;
    int64_t first_nan = -1;
    const int64_t n = ystar.numel();
    for (int64_t i = 0; i < n; ++i) {
        const double ys = ystar.get(i);
        if (!std::isfinite(ys)) continue;
        max_ref = std::max(max_ref, std::fabs(ys));
        const double d = abs_error(y, i, ys);
        if (std::isnan(d)) {
            if (first_nan < 0) first_nan = i;
        } else if (d > max_diff) {
            max_diff = d;
            res.worst = i;
        }
    }
    if (first_nan >= 0) {
        res.err = kNaN;
        res.worst = first_nan;
    } else if (max_diff > 0) {
        res.err = max_diff / (max_ref + tiny);
    }
    return res;
}

double envelope_ratio(double err_candidate, double err_controls_max, double err_floor, double factor) {
    if (std::isnan(err_candidate) || std::isnan(err_controls_max)) return kNaN;
    if (err_candidate == 0) return 0.0;
    const double envelope = factor * std::max(err_controls_max, err_floor);
    if (envelope == 0 || std::isinf(err_candidate)) return kInf;
    return err_candidate / envelope;
}

}  // namespace kcv
