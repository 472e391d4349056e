// ORD-01, reordered-reduction tolerance: the main numeric gate. At the nominal shape, on the
// task's own input distribution and on signed N(0, 1), every output is within the contract's
// error model (r ≤ 1), whatever order the candidate reduces in.
//
// Its judge is also the "ORD-01 holds at every probe" criterion of CMP-01, CMP-02, PRC-01 and
// PRC-03: those gates plan their own probes and judge them with this function. A probe may name
// the signature class its failure stands for in probe.note["signature_class"]
// ("fails at N=17", "ambient-state: ftz"); without one, a failure is classed by what was seen.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "gates/gate_common.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "ORD-01";

bool worse(double a, double b) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
    return a > b;
}

std::string num(double v) { return format_number(v, "%.4g"); }

// Outputs under the envelope model are judged against the positive controls on the same inputs.
std::vector<Probe> plan(const Contract& c, const Settings& s) {
    // At least five seeds in all: the task's own distribution first, then signed N(0, 1).
    const int task_seeds = std::max(1, c.measurement.seeds);
    const int normal_seeds = std::max(2, 5 - task_seeds);
    std::vector<Probe> probes;
    for (int i = 0; i < task_seeds; ++i) {
        Probe p = make_probe(c, s, kGate, "task/seed=" + std::to_string(i));
        p.family = Family::of(Family::Kind::task);
        p.with_controls = needs_controls(c);
        probes.push_back(std::move(p));
    }
    for (int i = 0; i < normal_seeds; ++i) {
        Probe p = make_probe(c, s, kGate, "normal/seed=" + std::to_string(i));
        p.family = Family::of(Family::Kind::signed_normal);
        p.with_controls = needs_controls(c);
        probes.push_back(std::move(p));
    }
    return probes;
}

std::string class_of(const ProbeOutcome& o, const std::string& fallback) {
    if (o.probe.note.is_object() && o.probe.note.contains("signature_class"))
        return o.probe.note["signature_class"].get<std::string>();
    return fallback;
}

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = make_result(ord01());
    r.probes = static_cast<int>(outcomes.size());
    double metric = 0;
    std::string worst_probe;
    int failing = 0;
    for (const ProbeOutcome& o : outcomes) {
        if (probe_failed(o, r)) return r;
        for (size_t call = 0; call < o.calls.size(); ++call) {
            const CallFacts& f = o.calls[call].facts;
            if (f.status != 0) {
                // A correct kernel never fails to launch on a shape of its domain.
                Evidence e;
                e.probe = o.probe.id;
                e.signature = "call " + std::to_string(call) + " returned status " + std::to_string(f.status) +
                              (f.error.empty() ? "" : ": " + f.error);
                e.detail["status"] = f.status;
                r.evidence.push_back(std::move(e));
                add_signature(r, class_of(o, "launch-error"));
                ++failing;
                break;
            }
            NumericCheck nc = check_outputs(c, s, o, call);
            if (worse(nc.r, metric) || worst_probe.empty()) {
                metric = nc.r;
                worst_probe = o.probe.id;
            }
            if (!nc.pass) {
                add_signature(r, class_of(o, std::isfinite(nc.evidence.actual) ? "error-bound" : "nonfinite-output"));
                nc.evidence.detail["call"] = call;
                r.evidence.push_back(std::move(nc.evidence));
                ++failing;
                break;
            }
        }
    }
    r.metric = metric;
    r.detail["worst_probe"] = worst_probe;
    if (failing > 0) {
        r.verdict = Verdict::fail;
        r.reason = std::to_string(failing) + " of " + std::to_string(outcomes.size()) +
                   " probes outside the error model; largest r = " + num(metric) + " (" + worst_probe + ")";
    } else {
        r.verdict = Verdict::pass;
        r.reason = "r = " + num(metric) + " <= 1 on " + std::to_string(outcomes.size()) + " probes";
    }
    return r;
}

std::string not_applicable(const Contract&) { return ""; }

}  // namespace

const GateDef& ord01() {
    static const GateDef def{kGate, "reordered-reduction tolerance", false, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
