// ORD-02, determinism and buffer integrity (tolerance-free). Two probes:
//
// - "poisons": the same inputs, run after run, into outputs pre-filled with 0x00, 0xFF and random
//   bytes, then 0xFF again. Runs that share a poison but disagree are run-to-run
//   nondeterminism; runs that agree within every poison but not across poisons read memory
//   they were meant to overwrite (poison-dependent).
// - "A-B-A": inputs A, then B, then A again, all into the same random poison. A result that
//   depends on an earlier call (a cache keyed on the shape, state kept in the library) shows as
//   B repeating A's bits where the references differ, or as the second A differing from the
//   first.
//
// Every call of both probes is also checked for outputs overlapping an input or an earlier
// output (aliasing) and for inputs whose storage changed (input mutation).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "gates/gate_common.hpp"
#include "kcv/rng.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "ORD-02";
constexpr const char* kPoisons = "poisons";
constexpr const char* kAba = "A-B-A";

std::string num(double v) { return format_number(v, "%.6g"); }

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string describe(const Poison& p) {
    if (p.kind == Poison::Kind::byte) return "poison " + hex(p.byte);
    return "random poison (seed " + hex(p.seed) + ")";
}

bool same_poison(const Poison& a, const Poison& b) {
    if (a.kind != b.kind) return false;
    return a.kind == Poison::Kind::byte ? a.byte == b.byte : a.seed == b.seed;
}

// True when every byte of element i still holds the value the output was pre-filled with:
// the candidate never wrote it.
bool holds_poison(const Tensor& t, int64_t i, const Poison& p) {
    const size_t sz = size_t(info(t.dtype).storage_bytes);
    const size_t off = size_t(t.storage_index(i)) * sz;
    for (size_t b = 0; b < sz; ++b)
        if (t.buf->data()[off + b] != p.at(off + b)) return false;
    return true;
}

using RunDiff = BitDifference;

std::optional<RunDiff> first_difference(const CallOutcome& a, const CallOutcome& b) {
    return first_bit_difference(a, b, "ORD-02");
}

bool is_kind(const ProbeOutcome& o, const char* kind) {
    return o.probe.note.is_object() && o.probe.note.value("kind", "") == kind;
}

CallSpec call_with(uint64_t seed, Poison p) {
    CallSpec cs;
    cs.input_seed = seed;
    cs.output_poison = p;
    return cs;
}

std::vector<Probe> plan(const Contract& c, const Settings& s) {
    // Three poisons; the 0xFF one is repeated so that same-poison runs can be compared: the
    // contract's run count is how many 0xFF runs there are.
    Probe poisons = make_probe(c, s, kGate, kPoisons);
    const uint64_t a = poisons.calls.front().input_seed;
    poisons.calls = {call_with(a, Poison::bytes(0x00)), call_with(a, Poison::bytes(0xFF)),
                     call_with(a, Poison::random(derive_seed(a, "output-poison")))};
    const int ff_runs = std::max(3, c.measurement.runs);
    for (int i = 1; i < ff_runs; ++i) poisons.calls.push_back(call_with(a, Poison::bytes(0xFF)));
    poisons.note = {{"kind", kPoisons}};
    poisons.with_controls = needs_controls(c);

    // One random poison for all three calls: an element the candidate never writes then
    // holds the same bytes in every call and is recognisable as unwritten, not as stale.
    Probe aba = make_probe(c, s, kGate, kAba);
    const uint64_t a2 = aba.calls.front().input_seed, b = derive_seed(a2, "B");
    const Poison p = Poison::random(derive_seed(a2, "output-poison"));
    aba.calls = {call_with(a2, p), call_with(b, p), call_with(a2, p)};
    aba.note = {{"kind", kAba}};
    aba.with_controls = needs_controls(c);
    return {poisons, aba};
}

// Collects classes and evidence.
struct Findings {
    GateResult& r;
    void add(const std::string& cls, Evidence e) {
        if (std::find(r.signature.begin(), r.signature.end(), cls) == r.signature.end()) r.signature.push_back(cls);
        r.evidence.push_back(std::move(e));
    }
};

Evidence diff_evidence(const Contract& c, const ProbeOutcome& o, size_t run_a, size_t run_b, const RunDiff& d,
                       const std::string& signature) {
    Evidence e = evidence_at(o, run_b, d.output, d.index, d.index, signature, c);
    const Tensor& ya = o.calls[run_a].outputs[d.output];
    const Tensor& yb = o.calls[run_b].outputs[d.output];
    e.detail["run_a"] = run_a;
    e.detail["run_b"] = run_b;
    e.detail["bits_a"] = bits_hex(ya.dtype, ya.bits(d.index));
    e.detail["bits_b"] = bits_hex(yb.dtype, yb.bits(d.index));
    e.detail["differing_elements"] = d.count;
    e.detail["poison_a"] = describe(o.calls[run_a].spec.output_poison);
    e.detail["poison_b"] = describe(o.calls[run_b].spec.output_poison);
    return e;
}

std::string diff_text(const Contract& c, const ProbeOutcome& o, size_t run_a, size_t run_b, const RunDiff& d) {
    const Tensor& ya = o.calls[run_a].outputs[d.output];
    const Tensor& yb = o.calls[run_b].outputs[d.output];
    return element_name(c.outputs[d.output].name, yb, d.index) + " = " + bits_hex(yb.dtype, yb.bits(d.index)) +
           " in run " + std::to_string(run_b) + " but " + bits_hex(ya.dtype, ya.bits(d.index)) + " in run " +
           std::to_string(run_a) + " (" + std::to_string(d.count) + " elements differ)";
}

struct PoisonsVerdict {
    bool run_to_run = false;         // same inputs and same poison gave different bytes
    bool poison_dependent = false;   // runs agree within each poison, not across poisons
};

// (a) Identical bytes across runs and poisons; under a contract without determinism, every run
// passes ORD-01 instead.
PoisonsVerdict judge_poisons(const Contract& c, const ProbeOutcome& o, const std::vector<NumericCheck>& checks,
                             Findings& f) {
    PoisonsVerdict v;
    const size_t n = o.calls.size();
    std::vector<size_t> group(n);   // the first run with the same poison
    for (size_t k = 0; k < n; ++k) {
        group[k] = k;
        for (size_t j = 0; j < k; ++j) {
            if (same_poison(o.calls[j].spec.output_poison, o.calls[k].spec.output_poison)) {
                group[k] = j;
                break;
            }
        }
    }
    std::optional<std::pair<size_t, RunDiff>> same_diff, cross_diff;
    for (size_t k = 0; k < n && !same_diff; ++k) {
        if (group[k] == k) continue;
        if (auto d = first_difference(o.calls[group[k]], o.calls[k])) same_diff = {{k, *d}};
    }
    for (size_t k = 1; k < n && !cross_diff; ++k) {
        if (group[k] != k) continue;
        if (auto d = first_difference(o.calls[0], o.calls[k])) cross_diff = {{k, *d}};
    }
    v.run_to_run = same_diff.has_value();
    v.poison_dependent = !same_diff && cross_diff;
    if (!same_diff && !cross_diff) return v;

    if (c.semantics.determinism == Determinism::not_guaranteed) {
        // Differences are allowed; inaccurate runs are not. The class says whether ORD-01's
        // outcome follows the poison (constant within each poison, not across) or not.
        std::optional<size_t> failing;
        bool follows_poison = true, varies = false;
        for (size_t k = 0; k < n; ++k) {
            if (!checks[k].pass && !failing) failing = k;
            if (checks[k].pass != checks[group[k]].pass) follows_poison = false;
            if (checks[k].pass != checks[0].pass) varies = true;
        }
        if (!failing) return v;
        const std::string cls = follows_poison && varies ? "poison-dependent" : "run-to-run";
        Evidence e = checks[*failing].evidence;
        e.signature = cls + ": run " + std::to_string(*failing) + " (" +
                      describe(o.calls[*failing].spec.output_poison) +
                      ") fails ORD-01 where the contract allows nondeterminism only within ORD-01: " + e.signature;
        e.detail["run"] = *failing;
        f.add(cls, std::move(e));
        return v;
    }

    if (same_diff) {
        const auto& [k, d] = *same_diff;
        const size_t a = group[k];
        f.add("run-to-run",
              diff_evidence(c, o, a, k, d,
                            "run-to-run: " + diff_text(c, o, a, k, d) + ", same inputs and the same " +
                                describe(o.calls[k].spec.output_poison)));
        return v;
    }
    const auto& [k, d] = *cross_diff;
    const Tensor& yk = o.calls[k].outputs[d.output];
    const Tensor& y0 = o.calls[0].outputs[d.output];
    std::string why = ", same inputs; runs with equal poisons agree, so the output depends on its prior contents";
    if (holds_poison(yk, d.index, o.calls[k].spec.output_poison) ||
        holds_poison(y0, d.index, o.calls[0].spec.output_poison))
        why += " (the element still holds the poison: it was never written)";
    f.add("poison-dependent", diff_evidence(c, o, 0, k, d,
                                            "poison-dependent: " + diff_text(c, o, 0, k, d) + " with " +
                                                describe(o.calls[k].spec.output_poison) + " vs " +
                                                describe(o.calls[0].spec.output_poison) + why));
    return v;
}

// (d) The second A equals the first; B does not repeat A where the references differ.
void judge_aba(const Contract& c, const ProbeOutcome& o, const std::vector<NumericCheck>& checks,
               const PoisonsVerdict& seen, Findings& f, nlohmann::json& detail) {
    if (o.calls.size() != 3 || o.calls[0].spec.input_seed != o.calls[2].spec.input_seed ||
        o.calls[0].spec.input_seed == o.calls[1].spec.input_seed)
        throw std::logic_error("ORD-02: probe " + o.probe.id + " is not an A-B-A sequence of three calls");
    const bool deterministic = c.semantics.determinism != Determinism::not_guaranteed;

    if (auto d = first_difference(o.calls[0], o.calls[2])) {
        if (deterministic && seen.run_to_run) {
            f.add("run-to-run", diff_evidence(c, o, 0, 2, *d,
                                              "run-to-run: " + diff_text(c, o, 0, 2, *d) +
                                                  ", same inputs A; the poisons probe shows the same "
                                                  "nondeterminism without an intervening call"));
        } else if (deterministic) {
            f.add("stale-or-cached",
                  diff_evidence(c, o, 0, 2, *d,
                                "stale-or-cached: " + diff_text(c, o, 0, 2, *d) +
                                    ", same inputs A before and after inputs B: state from an earlier call "
                                    "changes the result"));
        } else if (checks[0].pass && !checks[2].pass) {
            Evidence e = checks[2].evidence;
            e.signature = "stale-or-cached: the second A fails ORD-01 where the first passes, after inputs B: " +
                          e.signature;
            e.detail["run"] = 2;
            f.add("stale-or-cached", std::move(e));
        }
    }

    const NumericCheck& b = checks[1];
    detail["b_passes_ord01"] = b.pass;
    if (b.pass) return;
    const size_t j = b.output;
    const Tensor &ya = o.calls[0].outputs[j], &yb = o.calls[1].outputs[j];
    const Tensor &ra = o.calls[0].reference.at(j), &rb = o.calls[1].reference.at(j);
    const DType t = yb.dtype;
    int64_t differ = 0, repeated = 0, first_repeat = -1;
    bool repeat_at_worst = false;
    const int64_t w = b.evidence.worst_index;
    for (int64_t i = 0; i < yb.numel(); ++i) {
        if (encode(t, ra.get(i)) == encode(t, rb.get(i))) continue;
        ++differ;
        if (ya.bits(i) != yb.bits(i)) continue;
        ++repeated;
        if (first_repeat < 0) first_repeat = i;
        if (i == w) repeat_at_worst = true;
    }
    if (!repeat_at_worst && !(differ > 0 && repeated == differ)) return;
    const int64_t at = repeat_at_worst ? w : first_repeat;
    const std::string where = element_name(c.outputs[j].name, yb, at);
    const std::string counts = std::to_string(repeated) + " of the " + std::to_string(differ) +
                               " elements whose reference differs between A and B repeat A's bits";
    // A and B write into the same poison, so an output that depends on its prior contents can
    // repeat A's bits without any cache: never written, or swamped by a large poison value.
    if (holds_poison(yb, at, o.calls[1].spec.output_poison)) {
        f.add("poison-dependent",
              evidence_at(o, 1, j, at, first_repeat,
                          "poison-dependent: " + where + " still holds the output poison after inputs B, as after A (" +
                              counts + "): never written, not cached",
                          c));
        return;
    }
    if (seen.poison_dependent) {
        f.add("poison-dependent",
              evidence_at(o, 1, j, at, first_repeat,
                          "poison-dependent: " + where + " = " + bits_hex(t, yb.bits(at)) + " after inputs B, as after A (" +
                              counts + "); the poisons probe shows the output depends on its prior contents, which "
                              "A and B share here, and that explains it better than a cache",
                          c));
        return;
    }
    Evidence e = evidence_at(o, 1, j, at, first_repeat,
                             "stale-or-cached: for inputs B, " + where + " = " + bits_hex(t, yb.bits(at)) +
                                 ", the result for inputs A, where y*(B) = " + num(rb.get(at)) + " and y*(A) = " +
                                 num(ra.get(at)) + " (" + counts + ")",
                             c);
    e.detail["reference_differs"] = differ;
    e.detail["repeats_a"] = repeated;
    e.detail["ord01"] = b.evidence.signature;
    f.add("stale-or-cached", std::move(e));
}

bool overlap(const std::pair<uintptr_t, uintptr_t>& a, const std::pair<uintptr_t, uintptr_t>& b) {
    return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}

std::string range_text(const std::pair<uintptr_t, uintptr_t>& r) {
    return "[" + hex(r.first) + ", " + hex(r.second) + ")";
}

// (b) No output overlaps an input of its call, another output, or an output of an earlier call
// of the probe (the verifier keeps every earlier output alive, so no address is reused). The
// first overlap of a probe is reported.
void judge_aliasing(const Contract& c, const ProbeOutcome& o, Findings& f) {
    using Range = std::pair<uintptr_t, uintptr_t>;
    auto report = [&](size_t call, size_t out, const std::string& other, const Range& mine, const Range& theirs) {
        Evidence e;
        e.probe = o.probe.id;
        e.output = c.outputs[out].name;
        e.signature = "aliasing: output " + c.outputs[out].name + " of call " + std::to_string(call) + " " +
                      range_text(mine) + " overlaps " + other + " " + range_text(theirs);
        e.detail = {{"call", call}, {"output_range", range_text(mine)}, {"other", other},
                    {"other_range", range_text(theirs)}};
        f.add("aliasing", std::move(e));
    };
    for (size_t k = 0; k < o.calls.size(); ++k) {
        const CallFacts& fk = o.calls[k].facts;
        for (size_t j = 0; j < fk.output_ranges.size() && j < c.outputs.size(); ++j) {
            const Range& mine = fk.output_ranges[j];
            for (size_t i = 0; i < fk.input_ranges.size() && i < c.inputs.size(); ++i) {
                if (!overlap(mine, fk.input_ranges[i])) continue;
                report(k, j, "input " + c.inputs[i].name, mine, fk.input_ranges[i]);
                return;
            }
            for (size_t q = 0; q < j; ++q) {
                if (!overlap(mine, fk.output_ranges[q])) continue;
                report(k, j, "output " + c.outputs[q].name + " of the same call", mine, fk.output_ranges[q]);
                return;
            }
            for (size_t p = 0; p < k; ++p) {
                const auto& earlier = o.calls[p].facts.output_ranges;
                for (size_t q = 0; q < earlier.size() && q < c.outputs.size(); ++q) {
                    if (!overlap(mine, earlier[q])) continue;
                    report(k, j, "output " + c.outputs[q].name + " of call " + std::to_string(p), mine, earlier[q]);
                    return;
                }
            }
        }
    }
}

// (c) Inputs unchanged unless declared in place (fairness rule 10).
void judge_inputs(const Contract& c, const ProbeOutcome& o, Findings& f) {
    const auto& in_place = c.semantics.in_place;
    std::vector<bool> reported(c.inputs.size(), false);
    for (size_t k = 0; k < o.calls.size(); ++k) {
        const CallFacts& fk = o.calls[k].facts;
        const size_t n = std::min({fk.input_hash_before.size(), fk.input_hash_after.size(), c.inputs.size()});
        for (size_t i = 0; i < n; ++i) {
            if (fk.input_hash_before[i] == fk.input_hash_after[i] || reported[i]) continue;
            if (std::find(in_place.begin(), in_place.end(), c.inputs[i].name) != in_place.end()) continue;
            reported[i] = true;
            Evidence e;
            e.probe = o.probe.id;
            e.signature = "input-mutation: input " + c.inputs[i].name + " changed during call " + std::to_string(k) +
                          " (storage hash " + hex(fk.input_hash_before[i]) + " before, " +
                          hex(fk.input_hash_after[i]) + " after) and the contract does not declare it in place";
            e.detail = {{"call", k}, {"input", c.inputs[i].name}, {"hash_before", hex(fk.input_hash_before[i])},
                        {"hash_after", hex(fk.input_hash_after[i])}};
            f.add("input-mutation", std::move(e));
        }
    }
}

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = make_result(ord02());
    r.probes = static_cast<int>(outcomes.size());
    Findings f{r};
    for (const ProbeOutcome& o : outcomes)
        if (probe_failed(o, r)) return r;

    // ORD-01 on every run, recorded in every case: the relaxed profile accepts run-to-run
    // nondeterminism only when every run passes it.
    bool launched = true, all_pass = true;
    std::vector<std::vector<NumericCheck>> checks(outcomes.size());
    for (size_t p = 0; p < outcomes.size(); ++p) {
        const ProbeOutcome& o = outcomes[p];
        for (size_t k = 0; k < o.calls.size(); ++k) {
            const CallFacts& fk = o.calls[k].facts;
            if (fk.status != 0) {
                Evidence e;
                e.probe = o.probe.id;
                e.signature = "launch-error: call " + std::to_string(k) + " returned status " +
                              std::to_string(fk.status) + (fk.error.empty() ? "" : ": " + fk.error);
                e.detail["status"] = fk.status;
                f.add("launch-error", std::move(e));
                launched = false;
                checks[p].clear();
                break;
            }
            checks[p].push_back(check_outputs(c, s, o, k));
            all_pass = all_pass && checks[p].back().pass;
        }
    }
    r.detail["runs_pass_ord01"] = launched && all_pass;
    r.detail["determinism"] = name(c.semantics.determinism);

    PoisonsVerdict seen;
    for (size_t p = 0; p < outcomes.size(); ++p) {
        if (!is_kind(outcomes[p], kPoisons) || checks[p].size() != outcomes[p].calls.size()) continue;
        const PoisonsVerdict v = judge_poisons(c, outcomes[p], checks[p], f);
        seen.run_to_run = seen.run_to_run || v.run_to_run;
        seen.poison_dependent = seen.poison_dependent || v.poison_dependent;
    }
    for (size_t p = 0; p < outcomes.size(); ++p) {
        if (is_kind(outcomes[p], kAba) && checks[p].size() == outcomes[p].calls.size())
            judge_aba(c, outcomes[p], checks[p], seen, f, r.detail);
    }
    for (const ProbeOutcome& o : outcomes) {
        judge_aliasing(c, o, f);
        judge_inputs(c, o, f);
    }

    if (r.evidence.empty()) {
        r.verdict = Verdict::pass;
        r.reason = c.semantics.determinism == Determinism::not_guaranteed
                       ? "every run passes ORD-01 (the contract allows nondeterminism); A-B-A consistent; no "
                         "aliasing; inputs unchanged"
                       : "identical bytes across runs and poisons; A-B-A consistent; no aliasing; inputs unchanged";
    } else {
        r.verdict = Verdict::fail;
        r.reason = r.evidence.front().signature;
    }
    return r;
}

std::string not_applicable(const Contract&) { return ""; }

}  // namespace

const GateDef& ord02() {
    static const GateDef def{kGate, "determinism and buffer integrity", true, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
