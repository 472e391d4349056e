// RES-02, launch and resource budget (tolerance-free).
//
// Dynamic: one nominal probe, three calls (inputs A, A again, then B) into different random
// poisons; every call must succeed. A failure is a failure whatever the output looks like: a
// nonzero status after which the output still passes ORD-01 is named "stale output after
// failed launch", because a caller that ignores the status would use it. A launch that fails
// silently (status 0) is caught by what it left behind: an output still holding its poison
// everywhere, or the previous call's result returned for new inputs.
//
// Static, where the candidate exports kcv_kernel_resources: shared memory (static + dynamic)
// within the opt-in maximum per block, registers within 255 per thread and 64 Ki per block,
// TMEM columns within 512 per CTA in 32-column units. Local-memory (spill) bytes are reported
// only: spilling is slow, not wrong.
#include <algorithm>
#include <cmath>
#include <string>

#include "gates/gate_common.hpp"
#include "kcv/rng.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "RES-02";

// Hopper's (and datacenter Blackwell's) opt-in maximum of shared memory per block, 227 KiB.
constexpr int64_t kSmemOptInMax = 232448;
constexpr int32_t kMaxRegistersPerThread = 255;
constexpr int64_t kMaxRegistersPerBlock = 65536;
constexpr int32_t kTmemColumns = 512;
constexpr int32_t kTmemUnit = 32;

// A, A again, then B, each into its own random poison. The repeat of A makes a stale result
// look correct, so that a failed launch hiding behind one is named; B makes a stale result wrong,
// so that a launch failing silently (status 0) shows. Random poisons, because a constant one can
// absorb a result (0xFF is a NaN, and NaN + y keeps its bits): an output still equal to a random
// poison everywhere was never written.
std::vector<Probe> plan(const Contract& c, const Settings& s) {
    Probe p = make_probe(c, s, kGate, "launches");
    CallSpec a = p.calls.front();
    a.output_poison = Poison::random(derive_seed(a.input_seed, "output-poison", 0));
    CallSpec again = a;
    again.output_poison = Poison::random(derive_seed(a.input_seed, "output-poison", 1));
    CallSpec b = a;
    b.input_seed = derive_seed(a.input_seed, "B");
    b.output_poison = Poison::random(derive_seed(a.input_seed, "output-poison", 2));
    p.calls = {a, again, b};
    p.with_controls = needs_controls(c);
    return {p};
}

bool holds_poison(const Tensor& t, int64_t i, const Poison& p) {
    const size_t sz = size_t(info(t.dtype).storage_bytes);
    const size_t off = size_t(t.storage_index(i)) * sz;
    for (size_t b = 0; b < sz; ++b)
        if (t.buf->data()[off + b] != p.at(off + b)) return false;
    return true;
}

bool has_reference(const Contract& c, const CallOutcome& co) {
    return co.reference.size() == c.outputs.size() && co.outputs.size() == c.outputs.size();
}

// An output that is its poison at every element and is not what the reference asks for there.
bool never_written(const Tensor& y, const Tensor& ref, const Poison& p) {
    if (y.numel() == 0) return false;
    bool all_expected = true;
    for (int64_t i = 0; i < y.numel(); ++i) {
        if (!holds_poison(y, i, p)) return false;
        const double e = info(y.dtype).is_float ? round_to(y.dtype, ref.get(i)) : ref.get(i);
        const double v = y.get(i);
        all_expected = all_expected && (v == e || (std::isnan(v) && std::isnan(e)));
    }
    return !all_expected;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    if (a.numel() != b.numel() || a.dtype != b.dtype) return false;
    for (int64_t i = 0; i < a.numel(); ++i)
        if (a.bits(i) != b.bits(i)) return false;
    return true;
}

bool same_rounded_reference(const Tensor& y, const Tensor& ra, const Tensor& rb) {
    for (int64_t i = 0; i < y.numel(); ++i)
        if (encode(y.dtype, ra.get(i)) != encode(y.dtype, rb.get(i))) return false;
    return true;
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

void judge_launches(const Contract& c, const Settings& s, const ProbeOutcome& o, Findings& f) {
    for (size_t k = 0; k < o.calls.size(); ++k) {
        const CallOutcome& co = o.calls[k];
        const std::string call = "call " + std::to_string(k);
        if (co.facts.status != 0) {
            std::string sig = "launch-error: " + call + " returned status " + std::to_string(co.facts.status) +
                              (co.facts.error.empty() ? "" : " (" + co.facts.error + ")");
            bool looks_correct = false;
            if (has_reference(c, co)) {
                looks_correct = check_outputs(c, s, o, k).pass;
                if (looks_correct)
                    sig += "; stale output after failed launch: the output still passes ORD-01, so a caller "
                           "ignoring the status would use it";
            }
            Evidence e = bare(o, sig);
            e.detail = {{"call", k}, {"status", co.facts.status}, {"output_passes_ord01", looks_correct}};
            f.add("launch-error", std::move(e));
            continue;
        }
        if (!has_reference(c, co)) continue;
        for (size_t j = 0; j < co.outputs.size(); ++j) {
            if (!never_written(co.outputs[j], co.reference[j], co.spec.output_poison)) continue;
            Evidence e = bare(o, "launch-error: " + call + " returned status 0 but wrote no element of output " +
                                     c.outputs[j].name + " (every element still holds its poison): a launch that "
                                     "failed silently");
            e.output = c.outputs[j].name;
            e.detail = {{"call", k}};
            f.add("launch-error", std::move(e));
            break;
        }
        if (k == 0 || co.spec.input_seed == o.calls[k - 1].spec.input_seed) continue;
        const CallOutcome& prev = o.calls[k - 1];
        if (prev.facts.status != 0 || !has_reference(c, prev)) continue;
        bool repeated = true, references_differ = false;
        for (size_t j = 0; j < co.outputs.size(); ++j) {
            repeated = repeated && same_bits(co.outputs[j], prev.outputs[j]);
            references_differ =
                references_differ || !same_rounded_reference(co.outputs[j], co.reference[j], prev.reference[j]);
        }
        if (!repeated || !references_differ || check_outputs(c, s, o, k).pass) continue;
        Evidence e = bare(o, "launch-error: " + call + " returned status 0 and exactly the result of call " +
                                 std::to_string(k - 1) + " for different inputs: a stale output left by a launch "
                                 "that failed silently");
        e.detail = {{"call", k}};
        f.add("launch-error", std::move(e));
    }
}

void judge_resources(const ProbeOutcome& o, const kcv_resources& res, Findings& f, nlohmann::json& detail) {
    detail["resources"] = {{"registers_per_thread", res.registers_per_thread},
                           {"threads_per_block", res.threads_per_block},
                           {"static_smem_bytes", res.static_smem_bytes},
                           {"dynamic_smem_bytes", res.dynamic_smem_bytes},
                           {"local_bytes_per_thread", res.local_bytes_per_thread},
                           {"tmem_columns", res.tmem_columns}};
    // -1 is "unknown": a budget is judged on what is known.
    const int64_t smem = std::max<int64_t>(res.static_smem_bytes, 0) + std::max<int64_t>(res.dynamic_smem_bytes, 0);
    if (smem > kSmemOptInMax)
        f.add("smem-budget", bare(o, "smem-budget: " + std::to_string(smem) + " B of shared memory per block (static " +
                                         std::to_string(res.static_smem_bytes) + " + dynamic " +
                                         std::to_string(res.dynamic_smem_bytes) + ") exceeds the opt-in maximum of " +
                                         std::to_string(kSmemOptInMax) + " B"));
    if (res.registers_per_thread > kMaxRegistersPerThread)
        f.add("register-budget", bare(o, "register-budget: " + std::to_string(res.registers_per_thread) +
                                             " registers per thread exceed " +
                                             std::to_string(kMaxRegistersPerThread)));
    if (res.registers_per_thread > 0 && res.threads_per_block > 0 &&
        int64_t(res.registers_per_thread) * res.threads_per_block > kMaxRegistersPerBlock)
        f.add("register-budget",
              bare(o, "register-budget: " + std::to_string(res.registers_per_thread) + " registers x " +
                          std::to_string(res.threads_per_block) + " threads = " +
                          std::to_string(int64_t(res.registers_per_thread) * res.threads_per_block) +
                          " registers per block exceed " + std::to_string(kMaxRegistersPerBlock)));
    if (res.tmem_columns > kTmemColumns || (res.tmem_columns > 0 && res.tmem_columns % kTmemUnit != 0))
        f.add("tmem-budget", bare(o, "tmem-budget: " + std::to_string(res.tmem_columns) +
                                         " TMEM columns per CTA; tcgen05.alloc takes at most " +
                                         std::to_string(kTmemColumns) + " in units of " + std::to_string(kTmemUnit)));
    if (res.local_bytes_per_thread > 0) detail["spill_note"] = "local memory in use (spills or stack): reported only";
}

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = make_result(res02());
    r.probes = static_cast<int>(outcomes.size());
    Findings f{r};
    const ProbeOutcome* with_resources = nullptr;
    for (const ProbeOutcome& o : outcomes) {
        if (probe_failed(o, r)) return r;
        judge_launches(c, s, o, f);
        if (!with_resources && o.resources) with_resources = &o;
    }
    if (with_resources) judge_resources(*with_resources, *with_resources->resources, f, r.detail);
    else r.detail["resources"] = "not exported: static budgets not judged";

    if (!r.evidence.empty()) {
        r.verdict = Verdict::fail;
        r.reason = r.evidence.front().signature;
    } else {
        r.verdict = Verdict::pass;
        r.reason = std::string("every launch succeeded") +
                   (with_resources ? "; shared memory, registers and TMEM within budget" : "");
    }
    return r;
}

std::string not_applicable(const Contract&) { return ""; }

}  // namespace

const GateDef& res02() {
    static const GateDef def{kGate, "launch and resource budget", true, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
