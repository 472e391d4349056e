// "ORD-01 holds": one call of a probe judged over every output under the contract's error
// model. The analytic model uses the contract's declared dtypes and accumulation lengths; the
// envelope model compares the candidate's relative error with the positive controls' on the
// same inputs (their outputs are in the call when the probe ran with_controls).
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "gates/gate_common.hpp"
#include "kcv/dtype.hpp"

namespace kcv::gates {
namespace {

std::string num(double v) { return format_number(v, "%.6g"); }

// NaN ranks above everything, so a NaN anywhere is the reported worst.
bool worse(double a, double b) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
    return a > b;
}

struct OutputCheck {
    double r = 0;
    int64_t worst = -1, first = -1;
    std::string signature;
    nlohmann::json detail;
};

std::string violation_line(const std::string& where, double actual, double ystar, double err, double bound,
                           double r) {
    if (std::isnan(actual)) return "nan where y* is finite: " + where + " = nan, y* = " + num(ystar);
    if (std::isinf(actual))
        return "inf where y* is finite: " + where + " = " + num(actual) + ", y* = " + num(ystar);
    return "r = " + num(r) + " > 1 at " + where + ": |y - y*| = " + num(err) + ", bound " + num(bound);
}

OutputCheck analytic_check(const Contract& c, const Settings& s, const ProbeOutcome& o, const CallOutcome& co,
                           size_t out) {
    const OutputSpec& spec = c.outputs[out];
    const int64_t k = out < o.k.size() ? o.k[out] : eval_dim_expr(spec.k, o.probe.dims);
    const ErrorModelParams p = params_for(c, out, s.c);
    const Tensor no_scale;
    const Tensor& scale = out < co.scale.size() ? co.scale[out] : no_scale;
    const Tensor& y = co.outputs[out];
    const AnalyticResult a = analytic_ratio(y, co.reference[out], scale, k, p);

    OutputCheck r;
    r.r = a.r;
    r.worst = a.worst;
    r.first = a.first_violation;
    r.detail = {{"model", "analytic"},  {"k", k},
                {"c", p.c},             {"u_acc", p.u_acc},
                {"eta_acc", p.eta_acc}, {"u_out", p.u_out},
                {"ulp_min_normal", p.ulp_min_normal}, {"u_op", p.u_op},
                {"operand_roundings", p.operand_roundings}, {"compared", a.compared},
                {"violations", a.violations}};
    if (a.worst >= 0) {
        r.detail["err"] = a.err_at_worst;
        r.detail["tau"] = a.tau_at_worst;
        r.detail["scale"] = scale.buf ? scale.get(a.worst) : std::fabs(co.reference[out].get(a.worst));
    }
    if (!a.pass() && a.worst >= 0)
        r.signature = violation_line(element_name(spec.name, y, a.worst), y.get(a.worst), co.reference[out].get(a.worst),
                                     a.err_at_worst, a.tau_at_worst, a.r);
    return r;
}

// The envelope is the worst positive control on these very inputs. A control that failed to
// run or produced a non-finite error leaves no envelope to judge against (fairness rule 1):
// that is the verifier's problem, not the candidate's, so it throws.
OutputCheck envelope_check(const Contract& c, const Settings& s, const ProbeOutcome& o, const CallOutcome& co,
                           size_t out) {
    const OutputSpec& spec = c.outputs[out];
    if (c.controls.empty())
        throw std::runtime_error("contract " + c.id + ": output " + spec.name +
                                 " uses the envelope model but the contract names no positive controls");
    if (co.controls.empty())
        throw std::runtime_error("probe " + o.probe.id + ": output " + spec.name +
                                 " uses the envelope model; the probe must run with_controls");
    const Tensor& ystar = co.reference[out];
    double controls_max = 0;
    nlohmann::json per_control = nlohmann::json::array();
    for (size_t j = 0; j < co.controls.size(); ++j) {
        const std::string who = j < c.controls.size() ? c.controls[j] : "#" + std::to_string(j);
        if (j < co.control_status.size() && co.control_status[j] != 0)
            throw std::runtime_error("probe " + o.probe.id + ": positive control " + who + " returned status " +
                                     std::to_string(co.control_status[j]));
        const double e = envelope_err(co.controls[j].at(out), ystar).err;
        if (!std::isfinite(e))
            throw std::runtime_error("probe " + o.probe.id + ": positive control " + who +
                                     " has a non-finite error on output " + spec.name);
        controls_max = std::max(controls_max, e);
        per_control.push_back(e);
    }
    const double floor = params_for(spec, s.c).u_out;
    const Tensor& y = co.outputs[out];
    const EnvelopeErr ec = envelope_err(y, ystar);

    OutputCheck r;
    r.r = envelope_ratio(ec.err, controls_max, floor, s.envelope_factor);
    r.worst = ec.worst;
    r.first = ec.worst;
    r.detail = {{"model", "envelope"}, {"err", ec.err}, {"err_controls", per_control},
                {"err_floor", floor}, {"factor", s.envelope_factor}};
    if (!(r.r <= 1.0) && ec.worst >= 0) {
        const double bound = s.envelope_factor * std::max(controls_max, floor);
        const std::string where = element_name(spec.name, y, ec.worst);
        const double actual = y.get(ec.worst);
        r.signature = std::isfinite(actual)
                          ? "r = " + num(r.r) + " > 1: relative error " + num(ec.err) + " vs envelope " + num(bound) +
                                ", worst at " + where
                          : violation_line(where, actual, ystar.get(ec.worst), ec.err, bound, r.r);
    }
    return r;
}

}  // namespace

NumericCheck check_outputs(const Contract& c, const Settings& s, const ProbeOutcome& o, size_t call) {
    if (call >= o.calls.size())
        throw std::out_of_range("check_outputs: probe " + o.probe.id + " has no call " + std::to_string(call));
    const CallOutcome& co = o.calls[call];
    if (co.reference.size() != c.outputs.size())
        throw std::runtime_error("probe " + o.probe.id + ": no reference to compare with" +
                                 (co.reference_error.empty() ? "" : ": " + co.reference_error));
    if (co.outputs.size() != c.outputs.size())
        throw std::runtime_error("probe " + o.probe.id + ": expected " + std::to_string(c.outputs.size()) +
                                 " outputs, got " + std::to_string(co.outputs.size()));

    NumericCheck res;
    OutputCheck worst;
    for (size_t out = 0; out < c.outputs.size(); ++out) {
        const bool envelope = c.outputs[out].model == ErrorModelKind::envelope;
        OutputCheck oc = envelope ? envelope_check(c, s, o, co, out) : analytic_check(c, s, o, co, out);
        if (!(oc.r <= 1.0)) res.pass = false;
        if (out == 0 || worse(oc.r, worst.r)) {
            res.output = out;
            res.model = envelope ? "envelope" : "analytic";
            worst = std::move(oc);
        }
    }
    res.r = worst.r;
    // Evidence is filled on a pass too: gates that fit trends (PRC-01) read err and scale from it.
    res.evidence = evidence_at(o, call, res.output, worst.worst, worst.first, worst.signature, c);
    res.evidence.ratio = worst.r;
    for (auto& [key, value] : worst.detail.items()) res.evidence.detail[key] = value;
    return res;
}

}  // namespace kcv::gates
