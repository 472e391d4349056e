// CMP-02, environment invariance: the result must not depend on ambient state the caller may
// have set. For native CPU kernels the state is the MXCSR flush-to-zero and denormals-are-zero
// bits and the OpenMP thread count; each probe is one call under one toggle, and ORD-01 must
// hold under every toggle.
//
// Under FTZ/DAZ a correct kernel on normal-range values computes the same result, so the values
// stay away from the subnormal range: signed N(0, 1), or the task's own distribution where an
// input's domain has no negative values (log, sqrt), which N(0, 1) would pile onto the bound.
#include <algorithm>
#include <string>

#include "gates/gate_common.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "CMP-02";

struct Toggle {
    const char* label;
    Env env;
};

Family family_for(const Contract& c) {
    for (const InputSpec& in : c.inputs) {
        if (!in.index && info(in.dtype).is_float && in.domain.lo >= 0) return Family::of(Family::Kind::task);
    }
    return Family::of(Family::Kind::signed_normal);
}

// Outputs under the envelope model are judged against the positive controls on the same inputs.
std::vector<Probe> plan(const Contract& c, const Settings& s) {
    const Toggle toggles[] = {
        {"ftz", Env{true, false, 0}},
        {"daz", Env{false, true, 0}},
        {"threads=1", Env{false, false, 1}},
        {"threads=3", Env{false, false, 3}},
    };
    std::vector<Probe> probes;
    for (const Toggle& t : toggles) {
        Probe p = make_probe(c, s, kGate, t.label);
        p.family = family_for(c);
        p.calls.front().env = t.env;
        p.with_controls = needs_controls(c);
        p.note = {{"signature_class", std::string("ambient-state: ") + t.label}};
        probes.push_back(std::move(p));
    }
    return probes;
}

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = ord01().judge(c, s, outcomes);
    r.id = kGate;
    return r;
}

std::string not_applicable(const Contract&) { return ""; }

}  // namespace

const GateDef& cmp02() {
    static const GateDef def{kGate, "environment invariance", false, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
