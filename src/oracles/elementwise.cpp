// Elementwise maps in float64; the output has the input's shape (div: both inputs the same
// shape). Special values follow IEEE as PyTorch applies them:
//   relu(x) = x < 0 ? +0 : x. NaN stays NaN, -0 stays -0 (torch.relu(-0.0) is -0.0: PyTorch
//     replaces only values below zero), -Inf and negative subnormals become +0.
//   gelu(x) = x·Φ(x), evaluated as 0.5·x·erfc(−x/√2): the same function as 0.5·x·(1 + erf(x/√2))
//     without that form's cancellation for negative x, so y* keeps its tiny negative tail
//     (gelu(−10) ≈ −7.6e−23) where the erf form gives −0. gelu(−Inf) = NaN (−Inf·0) and
//     gelu(+Inf) = +Inf, as PyTorch.
//   silu(x) = x·σ(x), evaluated as x/(1 + e^−x) for x ≥ 0 and x·e^x/(1 + e^x) for x < 0, so
//     that no intermediate overflows while the result is still representable. silu(−Inf) = NaN
//     (−Inf·0), silu(+Inf) = +Inf, as PyTorch.
//   exp, log (log(±0) = −Inf, log(x<0) = NaN), sqrt (sqrt(−0) = −0, sqrt(x<0) = NaN),
//   reciprocal (1/±0 = ±Inf), div: the IEEE operations and C library functions.
//
// Scales: a correct elementwise kernel rounds each result a few times relative to itself, so
// s_i = |y*_i| with K = 1 — except gelu. Its defining formula 0.5·x + 0.5·x·erf(x/√2) is a sum
// of two terms, and a correct kernel that evaluates it as written (PyTorch's does) cancels
// them for negative x: its absolute error is about u·0.5·|x|·(1 + |erf|), far more than
// u·|y*| in the tail. As for any sum, gelu's scale is the sum of its terms' magnitudes:
//   gelu: s_i = 0.5·|x_i|·(1 + |erf(x_i/√2)|)   (≥ |y*_i|).
#include <numbers>

#include "registry.hpp"

namespace kcv::oracles {
namespace {

struct Result {
    double y, s;
};

template <typename Map>
void unary(const OracleArgs& a, const Signature& sig, Map map) {
    check_operands(a, sig);
    const Tensor& x = a.inputs[0];
    check_output_shapes(a, sig, x.shape);
    const std::vector<double> xv = read_values(x);
    std::vector<double> y(xv.size()), s(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
        const Result r = map(xv[i]);
        y[i] = r.y;
        s[i] = r.s;
    }
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

Result relative(double y) { return {y, std::fabs(y)}; }

}  // namespace

void relu(const OracleArgs& a) {
    static const Signature sig{"relu", {{"x"}}, {{"y"}}};
    unary(a, sig, [](double x) { return relative(x < 0 ? 0.0 : x); });
}

void gelu(const OracleArgs& a) {
    static const Signature sig{"gelu", {{"x"}}, {{"y"}}};
    unary(a, sig, [](double x) {
        const double t = x * (std::numbers::sqrt2 / 2);
        return Result{0.5 * x * std::erfc(-t), 0.5 * std::fabs(x) * (1 + std::fabs(std::erf(t)))};
    });
}

void silu(const OracleArgs& a) {
    static const Signature sig{"silu", {{"x"}}, {{"y"}}};
    unary(a, sig, [](double x) {
        if (x < 0) {
            const double e = std::exp(x);
            return relative(x * e / (1 + e));
        }
        return relative(x / (1 + std::exp(-x)));
    });
}

void exp(const OracleArgs& a) {
    static const Signature sig{"exp", {{"x"}}, {{"y"}}};
    unary(a, sig, [](double x) { return relative(std::exp(x)); });
}

void log(const OracleArgs& a) {
    static const Signature sig{"log", {{"x"}}, {{"y"}}};
    unary(a, sig, [](double x) { return relative(std::log(x)); });
}

void sqrt(const OracleArgs& a) {
    static const Signature sig{"sqrt", {{"x"}}, {{"y"}}};
    unary(a, sig, [](double x) { return relative(std::sqrt(x)); });
}

void reciprocal(const OracleArgs& a) {
    static const Signature sig{"reciprocal", {{"x"}}, {{"y"}}};
    unary(a, sig, [](double x) { return relative(1.0 / x); });
}

void div(const OracleArgs& a) {
    static const Signature sig{"div", {{"a"}, {"b"}}, {{"y"}}};
    check_operands(a, sig);
    const Tensor& num = a.inputs[0];
    check_shape(sig, "input", 1, a.inputs[1], num.shape);
    check_output_shapes(a, sig, num.shape);
    const std::vector<double> av = read_values(num), bv = read_values(a.inputs[1]);
    std::vector<double> y(av.size()), s(av.size());
    for (size_t i = 0; i < av.size(); ++i) {
        y[i] = av[i] / bv[i];
        s[i] = std::fabs(y[i]);
    }
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

}  // namespace kcv::oracles
