// PRC-02, range safety: a kernel must stay finite and accurate wherever the exact result is
// finite, also for large inputs. Probes scale the task distribution by 10 .. 1e4, offset the
// data by 1e4 (E[x²] − E[x]² variances cancel catastrophically there), push logits to ~100
// where the contract is a softmax (exp overflows fp32 near 88.7 without max subtraction), and
// fill narrow float inputs (fp16, fp8) near their largest finite value (fp16 intermediates
// overflow).
//
// A probe whose reference is non-finite anywhere, or overflows the output dtype, is skipped:
// only a finite y* makes the check meaningful. Pass: no non-finite y where y* is finite, and
// r ≤ 1. Signature classes: nonfinite-in-range, error-blowup.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "gates/gate_common.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "PRC-02";
// Largest finite value at or below which an input format is "narrow" enough for near_max.
constexpr double kNarrowMax = 65504.0;
// Target magnitude of the logits probe: beyond exp's overflow in fp32 (88.7).
constexpr double kLogitMagnitude = 100.0;

bool worse(double a, double b) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
    return a > b;
}

std::string num(double v) { return format_number(v, "%.4g"); }

bool is_float_input(const InputSpec& in) { return !in.index && info(in.dtype).is_float; }

// The magnitude the task distribution's values typically reach (about four standard deviations).
double typical_magnitude(const Distribution& d) {
    if (d.kind == "normal") return std::fabs(d.a) + 4 * d.b;
    if (d.kind == "logits") return 4 * d.b;
    return std::max(std::fabs(d.a), std::fabs(d.b));
}

bool is_softmax_like(const Contract& c) {
    if (c.oracle == "softmax" || c.oracle == "log_softmax") return true;
    return std::any_of(c.inputs.begin(), c.inputs.end(),
                       [](const InputSpec& in) { return is_float_input(in) && in.distribution.kind == "logits"; });
}

// Outputs under the envelope model are judged against the positive controls on the same inputs.
std::vector<Probe> plan(const Contract& c, const Settings& s) {
    std::vector<Probe> probes;
    auto add = [&](const std::string& label, Family f) {
        Probe p = make_probe(c, s, kGate, label);
        p.family = f;
        p.note = {{"range", label}};
        p.with_controls = needs_controls(c);
        probes.push_back(std::move(p));
    };
    for (int e = 1; e <= 4; ++e) add("band=1e" + std::to_string(e), Family::of(Family::Kind::band, std::pow(10.0, e)));
    add("offset=1e4", Family::of(Family::Kind::offset, 1e4));
    if (is_softmax_like(c)) {
        double m = 0;
        for (const InputSpec& in : c.inputs)
            if (is_float_input(in)) m = std::max(m, typical_magnitude(in.distribution));
        if (m > 0) add("logits=100", Family::of(Family::Kind::band, kLogitMagnitude / m));
    }
    const bool narrow = std::any_of(c.inputs.begin(), c.inputs.end(), [](const InputSpec& in) {
        return is_float_input(in) && info(in.dtype).max_finite <= kNarrowMax;
    });
    if (narrow) add("near_max", Family::of(Family::Kind::near_max));
    return probes;
}

// Why a call's reference cannot anchor a range check, or "" when it is finite everywhere.
std::string unusable_reference(const Contract& c, const CallOutcome& co) {
    if (co.reference.size() != c.outputs.size())
        return co.reference_error.empty() ? "no reference" : co.reference_error;
    for (size_t out = 0; out < c.outputs.size(); ++out) {
        const Tensor& ystar = co.reference[out];
        for (int64_t i = 0; i < ystar.numel(); ++i) {
            const double ys = ystar.get(i);
            if (!std::isfinite(ys)) return c.outputs[out].name + ": y* = " + num(ys);
            if (!std::isfinite(round_to(c.outputs[out].dtype, ys)))
                return c.outputs[out].name + ": y* = " + num(ys) + " overflows " + name(c.outputs[out].dtype);
        }
    }
    return "";
}

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = make_result(prc02());
    r.probes = static_cast<int>(outcomes.size());
    double metric = 0;
    int judged = 0, failing = 0;
    nlohmann::json skipped = nlohmann::json::object();
    for (const ProbeOutcome& o : outcomes) {
        if (probe_failed(o, r)) return r;
        const std::string range = o.probe.note.is_object() ? o.probe.note.value("range", o.probe.id) : o.probe.id;
        for (size_t call = 0; call < o.calls.size(); ++call) {
            const CallOutcome& co = o.calls[call];
            if (co.facts.status != 0) {
                Evidence e;
                e.probe = o.probe.id;
                e.signature = "launch-error at " + range + ": status " + std::to_string(co.facts.status) +
                              (co.facts.error.empty() ? "" : ": " + co.facts.error);
                e.detail["status"] = co.facts.status;
                r.evidence.push_back(std::move(e));
                add_signature(r, "launch-error");
                ++failing;
                break;
            }
            if (std::string why = unusable_reference(c, co); !why.empty()) {
                skipped[o.probe.id] = why;
                break;
            }
            NumericCheck nc = check_outputs(c, s, o, call);
            ++judged;
            if (worse(nc.r, metric)) metric = nc.r;
            if (!nc.pass) {
                const std::string cls = std::isfinite(nc.evidence.actual) ? "error-blowup" : "nonfinite-in-range";
                nc.evidence.signature = cls + " at " + range + ": " + nc.evidence.signature;
                nc.evidence.detail["call"] = call;
                r.evidence.push_back(std::move(nc.evidence));
                add_signature(r, cls);
                ++failing;
                break;
            }
        }
    }
    r.metric = metric;
    r.detail["judged"] = judged;
    r.detail["skipped"] = skipped;
    const std::string skipped_note =
        skipped.empty() ? "" : " (" + std::to_string(skipped.size()) + " skipped: reference non-finite)";
    if (failing > 0) {
        r.verdict = Verdict::fail;
        r.reason = std::to_string(failing) + " of " + std::to_string(outcomes.size()) +
                   " range probes fail; largest r = " + num(metric) + skipped_note;
    } else if (judged == 0) {
        r.verdict = Verdict::na;
        r.reason = "the reference is non-finite at every range probe";
    } else {
        r.verdict = Verdict::pass;
        r.reason = "r = " + num(metric) + " <= 1 on " + std::to_string(judged) + " range probes" + skipped_note;
    }
    return r;
}

std::string not_applicable(const Contract& c) {
    if (std::none_of(c.inputs.begin(), c.inputs.end(), is_float_input)) return "no floating-point input to scale";
    return "";
}

}  // namespace

const GateDef& prc02() {
    static const GateDef def{kGate, "range safety", false, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
