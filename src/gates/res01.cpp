// RES-01, memory bounds (tolerance-free). Every buffer the verifier hands the candidate sits
// between guard bands of 4 KiB. Two probes run the same inputs twice each, one with guard
// poison 0xA5 and one with 0x5A, every output pre-filled with the same 0xFF:
//
// - a changed guard byte after any call is an out-of-bounds write (oob-write);
// - outputs that agree within each probe but differ between the two read memory outside the
//   tensors (oob-read). Only the guard poison changes between the probes, so an output that
//   depends on its own prior contents (ORD-02's poison-dependent) does not show here, and the
//   repeat within each probe separates a guard read from run-to-run nondeterminism.
//
// Gather-like contracts also get out-of-range indices: under "raise" the call must fail (a
// nonzero status), under "clamp" and "zero" the output must equal the reference, which
// implements the policy, exactly (index-policy).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "gates/gate_common.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "RES-01";
constexpr const char* kGuard = "guard";
constexpr const char* kIndex = "index";

std::string num(double v) { return format_number(v, "%.6g"); }

std::string byte_hex(uint8_t b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", b);
    return buf;
}

using RunDiff = BitDifference;

std::optional<RunDiff> first_difference(const CallOutcome& a, const CallOutcome& b) {
    return first_bit_difference(a, b, "RES-01");
}

std::string kind_of(const ProbeOutcome& o) {
    return o.probe.note.is_object() ? o.probe.note.value("kind", "") : "";
}

Probe guard_probe(const Contract& c, const Settings& s, const std::string& label, uint8_t guard,
                  std::optional<uint64_t> seed) {
    Probe p = make_probe(c, s, kGate, label);
    p.guard_bytes = 4096;
    p.guard_poison = Poison::bytes(guard);
    CallSpec call = p.calls.front();
    if (seed) call.input_seed = *seed;
    call.output_poison = Poison::bytes(0xFF);
    p.calls = {call, call};
    p.note = {{"kind", kGuard}};
    return p;
}

std::vector<Probe> plan(const Contract& c, const Settings& s) {
    std::vector<Probe> probes;
    probes.push_back(guard_probe(c, s, "guard-A5", 0xA5, std::nullopt));
    probes.push_back(guard_probe(c, s, "guard-5A", 0x5A, probes.front().calls.front().input_seed));
    if (c.semantics.index_policy != "none") {
        Probe p = make_probe(c, s, kGate, "index-" + c.semantics.index_policy);
        p.out_of_range_indices = true;
        p.note = {{"kind", kIndex}, {"policy", c.semantics.index_policy}};
        probes.push_back(std::move(p));
    }
    // Every probe's calls are judged for guard damage (judge_guards), and only this gate's.
    for (Probe& p : probes) p.check_guards = true;
    return probes;
}

struct Findings {
    GateResult& r;
    void add(const std::string& cls, Evidence e) {
        if (std::find(r.signature.begin(), r.signature.end(), cls) == r.signature.end()) r.signature.push_back(cls);
        r.evidence.push_back(std::move(e));
    }
};

Evidence bare(const ProbeOutcome& o, const std::string& signature) {
    Evidence e;
    e.probe = o.probe.id;
    e.signature = signature;
    return e;
}

std::string status_text(const CallFacts& f) {
    return "status " + std::to_string(f.status) + (f.error.empty() ? "" : " (" + f.error + ")");
}

void judge_guards(const ProbeOutcome& o, Findings& f) {
    for (size_t k = 0; k < o.calls.size(); ++k) {
        const auto& damage = o.calls[k].facts.guard_damage;
        if (damage.empty()) continue;
        Evidence e = bare(o, "oob-write: call " + std::to_string(k) + " changed a guard band: " + damage.front() +
                                 (damage.size() > 1 ? " (and " + std::to_string(damage.size() - 1) + " more)" : ""));
        e.detail = {{"call", k}, {"guard_damage", damage}, {"guard_poison", o.probe.guard_poison.byte}};
        f.add("oob-write", std::move(e));
        return;   // one per probe: later calls repeat the same writes
    }
}

void judge_index_policy(const Contract& c, const ProbeOutcome& o, Findings& f) {
    const std::string& policy = c.semantics.index_policy;
    for (size_t k = 0; k < o.calls.size(); ++k) {
        const CallOutcome& co = o.calls[k];
        if (policy == "raise") {
            if (co.facts.status == 0)
                f.add("index-policy", bare(o, "index-policy: call " + std::to_string(k) +
                                                  " returned status 0 with out-of-range indices; the contract's "
                                                  "policy is raise"));
            continue;
        }
        if (co.facts.status != 0) {
            f.add("index-policy", bare(o, "index-policy: call " + std::to_string(k) + " returned " +
                                              status_text(co.facts) + " with out-of-range indices; the policy " +
                                              policy + " defines a result"));
            continue;
        }
        if (co.reference.size() != c.outputs.size() || co.outputs.size() != c.outputs.size())
            throw std::runtime_error("RES-01: probe " + o.probe.id + " has no reference under policy " + policy +
                                     (co.reference_error.empty() ? "" : ": " + co.reference_error));
        for (size_t j = 0; j < c.outputs.size(); ++j) {
            const Tensor &y = co.outputs[j], &ref = co.reference[j];
            const bool is_float = info(y.dtype).is_float;
            int64_t first = -1, count = 0;
            for (int64_t i = 0; i < y.numel(); ++i) {
                const double expected = is_float ? round_to(y.dtype, ref.get(i)) : ref.get(i);
                const double actual = y.get(i);
                // Values compared, not bits: +0 and -0 are the same "zero", and NaN payloads are
                // not the policy's business.
                if (actual == expected || (std::isnan(actual) && std::isnan(expected))) continue;
                if (first < 0) first = i;
                ++count;
            }
            if (count == 0) continue;
            const double expected = is_float ? round_to(y.dtype, ref.get(first)) : ref.get(first);
            Evidence e = evidence_at(o, k, j, first, first,
                                     "index-policy: " + element_name(c.outputs[j].name, y, first) + " = " +
                                         num(y.get(first)) + " where the " + policy + " policy gives " + num(expected) +
                                         "; " + std::to_string(count) + " element" + (count == 1 ? "" : "s") +
                                         " differ",
                                     c);
            e.detail["call"] = k;
            e.detail["differing"] = count;
            f.add("index-policy", std::move(e));
        }
    }
}

// One call of a guard probe and the guard poison it ran between.
struct GuardRun {
    const ProbeOutcome* o;
    size_t call;
    uint8_t guard;
};

// Outputs independent of the guard poison, judged only where the runs with the same guard poison
// agree with each other. Runs are grouped by their guard poison wherever they come from, so the
// comparison works alike across probes and within one.
void judge_reads(const Contract& c, const std::vector<GuardRun>& runs, Findings& f, nlohmann::json& detail) {
    std::vector<const GuardRun*> firsts;   // the first run of each guard poison
    for (const GuardRun& run : runs) {
        const GuardRun* first = nullptr;
        for (const GuardRun* g : firsts)
            if (g->guard == run.guard) first = g;
        if (!first) {
            firsts.push_back(&run);
            continue;
        }
        if (auto d = first_difference(first->o->calls[first->call], run.o->calls[run.call])) {
            detail["oob_read"] = "inconclusive: " + run.o->probe.id + " call " + std::to_string(run.call) + " and " +
                                 first->o->probe.id + " call " + std::to_string(first->call) +
                                 " differ with the same guard poison (" + std::to_string(d->count) +
                                 " elements); ORD-02 judges that";
            return;
        }
    }
    if (firsts.size() < 2) return;
    const GuardRun& a = *firsts.front();
    for (size_t p = 1; p < firsts.size(); ++p) {
        const GuardRun& b = *firsts[p];
        const auto d = first_difference(a.o->calls[a.call], b.o->calls[b.call]);
        if (!d) continue;
        const Tensor& ya = a.o->calls[a.call].outputs[d->output];
        const Tensor& yb = b.o->calls[b.call].outputs[d->output];
        Evidence e = evidence_at(*b.o, b.call, d->output, d->index, d->index,
                                 "oob-read: " + element_name(c.outputs[d->output].name, yb, d->index) + " = " +
                                     bits_hex(yb.dtype, yb.bits(d->index)) + " with guard poison " + byte_hex(b.guard) +
                                     " but " + bits_hex(ya.dtype, ya.bits(d->index)) + " with " + byte_hex(a.guard) +
                                     ", same inputs (" + std::to_string(d->count) +
                                     " elements differ): the output depends on memory outside the tensors",
                                 c);
        e.detail["compared_with"] = a.o->probe.id;
        e.detail["compared_call"] = a.call;
        e.detail["call"] = b.call;
        e.detail["bits_other"] = bits_hex(ya.dtype, ya.bits(d->index));
        e.detail["differing"] = d->count;
        f.add("oob-read", std::move(e));
        return;
    }
}

GateResult judge(const Contract& c, const Settings&, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = make_result(res01());
    r.probes = static_cast<int>(outcomes.size());
    Findings f{r};
    std::vector<GuardRun> guards;
    for (const ProbeOutcome& o : outcomes) {
        if (probe_failed(o, r)) return r;
        judge_guards(o, f);
        const std::string kind = kind_of(o);
        if (kind == kIndex) {
            judge_index_policy(c, o, f);
            continue;
        }
        bool launched = true;
        for (size_t k = 0; k < o.calls.size() && launched; ++k) {
            if (o.calls[k].facts.status == 0) continue;
            Evidence e = bare(o, "launch-error: call " + std::to_string(k) + " returned " + status_text(o.calls[k].facts));
            e.detail["status"] = o.calls[k].facts.status;
            f.add("launch-error", std::move(e));
            launched = false;
        }
        if (kind == kGuard && launched)
            for (size_t k = 0; k < o.calls.size(); ++k) guards.push_back({&o, k, o.probe.guard_poison.byte});
    }
    judge_reads(c, guards, f, r.detail);

    if (!r.evidence.empty()) {
        r.verdict = Verdict::fail;
        r.reason = r.evidence.front().signature;
    } else {
        r.verdict = Verdict::pass;
        r.reason = "guard bands intact" +
                   std::string(r.detail.contains("oob_read") ? "" : "; outputs independent of the guard poison") +
                   (c.semantics.index_policy != "none" ? "; index policy " + c.semantics.index_policy + " honoured"
                                                      : "");
    }
    return r;
}

std::string not_applicable(const Contract&) { return ""; }

}  // namespace

const GateDef& res01() {
    static const GateDef def{kGate, "memory bounds", true, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
