// ORD-03, thin margin: on the ORD-01 inputs, the candidate's relative error must stay within
// the margin (settings.ord03_margin, 1.2 by default, or the contract's measurement.ord03_margin
// where that is wider) of the worst positive control's on the very same inputs, or within one
// unit in the last place of it:
//   err(cand) ≤ max(margin · max(err(controls), f), max(err(controls)) + f),   f = 2u(out).
// It catches the few-ulp systematic errors that fit under the analytic bound but that no correct
// implementation makes. The ulp is the order of a summation: two correct implementations of one
// algorithm that sum in different orders round their worst element differently, on top of the
// error both share, by under an ulp wherever measured (docs/gates.md, "ORD-03"). The envelope comes from the controls only,
// never from the candidate (fairness rule 3); a control that cannot run or is itself non-finite
// leaves no envelope, and the gate is n/a. The record keeps every call's and output's errors and
// ratios (detail.errors), a failing output's neighbours included, and each control's ratio
// against the others alone, so that how far correct implementations stray from each other can be
// read from any candidate's records (bench/ord03_sweep.py).
// Integer outputs are exact under every model, so they leave nothing to compare.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gates/gate_common.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "ORD-03";

bool worse(double a, double b) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
    return a > b;
}

std::string num(double v) { return format_number(v, "%.4g"); }

bool float_output(const OutputSpec& o) { return info(o.dtype).is_float; }

// The ORD-01 probes, on the same inputs (same call seeds), also run on the controls.
std::vector<Probe> plan(const Contract& c, const Settings& s) {
    std::vector<Probe> probes = ord01().plan(c, s);
    for (Probe& p : probes) {
        p.gate = kGate;
        p.id = kGate + p.id.substr(p.id.find('/'));
        p.with_controls = true;
    }
    return probes;
}

// The ratio the margin judges: err / max(envelope, floor), except that an error within one floor
// of the envelope counts at most 1, since any margin (at least 1) admits it. So "passes at margin
// m" is "judged ratio ≤ m" for every m, and the calibration can re-judge from the metric alone.
double judged_ratio(double err, double envelope, double floor) {
    const double ratio = envelope_ratio(err, envelope, floor, 1.0);
    return err <= envelope + floor ? std::min(ratio, 1.0) : ratio;
}

// Each control's judged ratio against the envelope of the others alone ("leave one out"): how
// far one correct implementation strays above an envelope it is no part of. Recorded for the
// contract's own margin (docs/gates.md), never judged; with one control there is nothing to
// leave out.
nlohmann::json leave_one_out(const std::vector<double>& errs, double floor) {
    nlohmann::json ratios = nlohmann::json::array();
    if (errs.size() < 2) return ratios;
    for (size_t j = 0; j < errs.size(); ++j) {
        double others = 0;
        for (size_t i = 0; i < errs.size(); ++i)
            if (i != j) others = std::max(others, errs[i]);
        ratios.push_back(judged_ratio(errs[j], others, floor));
    }
    return ratios;
}

GateResult not_judgeable(std::string reason) {
    GateResult r = make_result(ord03());
    r.verdict = Verdict::na;
    r.reason = std::move(reason);
    return r;
}

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = make_result(ord03());
    r.probes = static_cast<int>(outcomes.size());
    const double margin = std::max(s.ord03_margin, c.measurement.ord03_margin);
    double metric = 0;
    std::string worst_probe;
    int failing = 0;
    nlohmann::json errors = nlohmann::json::array();
    for (const ProbeOutcome& o : outcomes) {
        if (probe_failed(o, r)) return r;
        // A probe fails once, with the first output beyond the envelope as its evidence; the
        // outputs and calls after it are still measured and recorded.
        bool beyond = false;
        for (size_t call = 0; call < o.calls.size(); ++call) {
            const CallOutcome& co = o.calls[call];
            if (launch_error(r, o, co)) {
                if (!beyond) ++failing;
                break;
            }
            if (co.controls.empty()) return not_judgeable(o.probe.id + ": no positive control ran");
            if (co.reference.size() != c.outputs.size())
                return not_judgeable(o.probe.id + ": no reference (" + co.reference_error + ")");
            for (size_t j = 0; j < co.control_status.size(); ++j) {
                if (co.control_status[j] != 0)
                    return not_judgeable(o.probe.id + ": positive control " +
                                         (j < c.controls.size() ? c.controls[j] : std::to_string(j)) +
                                         " returned status " + std::to_string(co.control_status[j]));
            }
            for (size_t out = 0; out < c.outputs.size(); ++out) {
                if (!float_output(c.outputs[out])) continue;
                const Tensor& ystar = co.reference[out];
                double envelope = 0;
                std::vector<double> per_control;
                for (size_t j = 0; j < co.controls.size(); ++j) {
                    const double e = envelope_err(co.controls[j].at(out), ystar).err;
                    if (!std::isfinite(e))
                        return not_judgeable(o.probe.id + ": positive control " +
                                             (j < c.controls.size() ? c.controls[j] : std::to_string(j)) +
                                             " has a non-finite error on " + c.outputs[out].name);
                    envelope = std::max(envelope, e);
                    per_control.push_back(e);
                }
                // One unit in the last place of the output (2u relative, at the bottom of a
                // binade): within one floor of the envelope the gate would judge the order of
                // a summation, which any correct kernel may choose, not precision lost.
                const double floor = 2 * params_for(c.outputs[out], s.c).u_out;
                const EnvelopeErr cand = envelope_err(co.outputs[out], ystar);
                const double ratio = judged_ratio(cand.err, envelope, floor);
                errors.push_back({{"probe", o.probe.id}, {"call", call}, {"output", c.outputs[out].name},
                                  {"candidate", cand.err}, {"controls", per_control}, {"floor", floor},
                                  {"ratio", ratio}, {"control_ratios", leave_one_out(per_control, floor)}});
                if (worse(ratio, metric) || worst_probe.empty()) {
                    metric = ratio;
                    worst_probe = o.probe.id;
                }
                if (!(ratio <= margin) && !beyond) {
                    const std::string line = "err(candidate) = " + num(cand.err) + " is " + num(ratio) +
                                             " x the controls' envelope " + num(std::max(envelope, floor)) +
                                             " (margin " + num(margin) + ") and more than one ulp (" +
                                             num(floor) + ") above the worst control's " + num(envelope);
                    Evidence e = evidence_at(o, call, out, cand.worst, cand.worst, line, c);
                    e.ratio = ratio;
                    e.detail["err_candidate"] = cand.err;
                    e.detail["err_controls"] = per_control;
                    e.detail["err_floor"] = floor;
                    e.detail["margin"] = margin;
                    e.detail["call"] = call;
                    r.evidence.push_back(std::move(e));
                    add_signature(r, "thin-margin");
                    ++failing;
                    beyond = true;
                }
            }
        }
    }
    r.metric = metric;
    r.detail["margin"] = margin;
    if (c.measurement.ord03_margin != 0) r.detail["contract_margin"] = c.measurement.ord03_margin;
    r.detail["errors"] = std::move(errors);
    r.detail["worst_probe"] = worst_probe;
    if (failing > 0) {
        r.verdict = Verdict::fail;
        r.reason = std::to_string(failing) + " of " + std::to_string(outcomes.size()) +
                   " probes beyond the controls' envelope; largest err ratio = " + num(metric) + " > " + num(margin);
    } else {
        r.verdict = Verdict::pass;
        r.reason = "err ratio = " + num(metric) + " <= " + num(margin) + " on " + std::to_string(outcomes.size()) +
                   " probes";
    }
    return r;
}

std::string not_applicable(const Contract& c) {
    if (c.controls.empty()) return "the contract names no positive controls";
    if (std::none_of(c.outputs.begin(), c.outputs.end(), float_output))
        return "integer outputs only: exact under every model";
    return "";
}

}  // namespace

const GateDef& ord03() {
    static const GateDef def{kGate, "thin margin", false, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
