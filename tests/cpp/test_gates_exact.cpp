// The five tolerance-free gates (ORD-02, EXC-01, EXC-02, RES-01, RES-02): their plans, and
// their judges on hand-built outcomes, a pass and a fail for every signature class, with exact
// indices and bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "../../gdn/blackwell_plan.hpp"
#include "gates/gate_common.hpp"
#include "kcv/oracle.hpp"

namespace kcv {
namespace {

using gates::exc01;
using gates::exc02;
using gates::ord02;
using gates::res01;
using gates::res02;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double pow2(int k) { return std::ldexp(1.0, k); }

Contract vector_contract(const std::string& oracle, DType in, DType out, ErrorModelKind model, int64_t n) {
    Contract c;
    c.id = "test-" + oracle;
    c.oracle = oracle;
    c.dims = {Dim{"N", n}};
    InputSpec x;
    x.name = "x";
    x.dtype = in;
    x.shape = {"N"};
    c.inputs = {x};
    OutputSpec y;
    y.name = "y";
    y.dtype = out;
    y.shape = {"N"};
    y.model = model;
    c.outputs = {y};
    return c;
}

Contract relu_f32(int64_t n = 8) { return vector_contract("relu", DType::f32, DType::f32, ErrorModelKind::elementwise, n); }

Tensor tensor_of(DType t, const std::vector<int64_t>& shape, const std::vector<double>& v, Poison fill = Poison::bytes(0)) {
    Tensor x = Tensor::empty(t, shape, Layout{}, fill);
    for (size_t i = 0; i < v.size(); ++i) x.set(int64_t(i), v[i]);
    return x;
}

// Writes the element's pre-fill poison back, as if the kernel never wrote it.
void unwrite(Tensor& t, int64_t i, const Poison& p) {
    const size_t sz = size_t(info(t.dtype).storage_bytes);
    const size_t off = size_t(t.storage_index(i)) * sz;
    for (size_t b = 0; b < sz; ++b) t.buf->data()[off + b] = p.at(off + b);
}

// One call of a one-input, one-output contract: x, y* and y given as values; every fact of a
// clean call (status 0, hashes unchanged, distinct buffers).
CallOutcome call_of(const Contract& c, const CallSpec& spec, const std::vector<double>& x,
                    const std::vector<double>& ref, const std::vector<double>& y,
                    const std::vector<int64_t>& shape = {}) {
    const std::vector<int64_t> sh = shape.empty() ? std::vector<int64_t>{int64_t(ref.size())} : shape;
    const std::vector<int64_t> in_shape = shape.empty() ? std::vector<int64_t>{int64_t(x.size())} : shape;
    CallOutcome co;
    co.spec = spec;
    co.inputs.push_back(tensor_of(c.inputs[0].dtype, in_shape, x));
    co.reference.push_back(tensor_of(DType::f64, sh, ref));
    co.outputs.push_back(tensor_of(c.outputs[0].dtype, sh, y, spec.output_poison));
    co.facts.input_hash_before = {co.inputs[0].hash_storage()};
    co.facts.input_hash_after = co.facts.input_hash_before;
    co.facts.input_ranges = {co.inputs[0].address_range()};
    co.facts.output_ranges = {co.outputs[0].address_range()};
    return co;
}

ProbeOutcome outcome_of(const Contract& c, const Probe& p) {
    ProbeOutcome o;
    o.probe = p;
    DimValues dims = nominal_dims(c);
    for (const auto& [k, v] : p.dims) dims[k] = v;
    for (const auto& out : c.outputs) {
        o.output_shapes.push_back(eval_shape(out.shape, dims));
        o.k.push_back(eval_dim_expr(out.k, dims));
    }
    return o;
}

const Probe& probe_named(const std::vector<Probe>& ps, const std::string& id) {
    for (const auto& p : ps)
        if (p.id == id) return p;
    throw std::runtime_error("no probe " + id);
}

std::string dump(const GateResult& r) {
    const char* verdicts[] = {"pass", "fail", "n/a", "error"};
    std::string s = std::string(verdicts[int(r.verdict)]) + " [";
    for (const auto& c : r.signature) s += c + " ";
    s += "] " + r.reason;
    for (const auto& e : r.evidence) s += "\n  " + e.probe + ": " + e.signature;
    return s;
}

bool same_poison(const Poison& a, const Poison& b) {
    return a.kind == b.kind && (a.kind == Poison::Kind::byte ? a.byte == b.byte : a.seed == b.seed);
}

const Settings kSettings{};

// ---------------------------------------------------------------------------------------------
// ORD-02

// Outcomes of ORD-02's two planned probes where every call returns `y` for A (reference `a`)
// and `yb` for B (reference `b`); tests then damage single calls.
struct Ord02Case {
    Contract c = relu_f32();
    std::vector<Probe> probes = ord02().plan(c, kSettings);
    std::vector<double> x = {1, -2, 3, -4, 5, 6, 7, 8};
    std::vector<double> a = {1, 0, 3, 0, 5, 6, 7, 8};
    std::vector<double> xb = {-1, 2, -3, 4, 9, 10, -11, 12};
    std::vector<double> b = {0, 2, 0, 4, 9, 10, 0, 12};

    ProbeOutcome poisons() const {
        const Probe& p = probe_named(probes, "ORD-02/poisons");
        ProbeOutcome o = outcome_of(c, p);
        for (const auto& spec : p.calls) o.calls.push_back(call_of(c, spec, x, a, a));
        return o;
    }
    ProbeOutcome aba() const {
        const Probe& p = probe_named(probes, "ORD-02/A-B-A");
        ProbeOutcome o = outcome_of(c, p);
        o.calls.push_back(call_of(c, p.calls[0], x, a, a));
        o.calls.push_back(call_of(c, p.calls[1], xb, b, b));
        o.calls.push_back(call_of(c, p.calls[2], x, a, a));
        return o;
    }
    GateResult judge(const std::vector<ProbeOutcome>& os) const { return ord02().judge(c, kSettings, os); }
};

TEST(Ord02, PlanHasPoisonsAndAba) {
    const Contract c = relu_f32();
    const auto ps = ord02().plan(c, kSettings);
    ASSERT_EQ(ps.size(), 2u);
    const Probe& p = probe_named(ps, "ORD-02/poisons");
    ASSERT_EQ(p.calls.size(), 5u);
    EXPECT_TRUE(same_poison(p.calls[0].output_poison, Poison::bytes(0x00)));
    EXPECT_TRUE(same_poison(p.calls[1].output_poison, Poison::bytes(0xFF)));
    EXPECT_EQ(p.calls[2].output_poison.kind, Poison::Kind::random);
    EXPECT_TRUE(same_poison(p.calls[3].output_poison, Poison::bytes(0xFF)));
    EXPECT_TRUE(same_poison(p.calls[4].output_poison, Poison::bytes(0xFF)));
    for (const auto& call : p.calls) EXPECT_EQ(call.input_seed, p.calls[0].input_seed);

    const Probe& q = probe_named(ps, "ORD-02/A-B-A");
    ASSERT_EQ(q.calls.size(), 3u);
    EXPECT_EQ(q.calls[0].input_seed, q.calls[2].input_seed);
    EXPECT_NE(q.calls[0].input_seed, q.calls[1].input_seed);
    for (const auto& call : q.calls) EXPECT_TRUE(same_poison(call.output_poison, q.calls[0].output_poison));
    EXPECT_EQ(q.calls[0].output_poison.kind, Poison::Kind::random);

    // More runs in the contract: more 0xFF repeats. Another master seed: other input seeds.
    Contract more = c;
    more.measurement.runs = 5;
    EXPECT_EQ(probe_named(ord02().plan(more, kSettings), "ORD-02/poisons").calls.size(), 7u);
    Settings other;
    other.seed = 1;
    EXPECT_NE(probe_named(ord02().plan(c, other), "ORD-02/poisons").calls[0].input_seed, p.calls[0].input_seed);
}

TEST(Ord02, IdenticalRunsPass) {
    Ord02Case t;
    const GateResult r = t.judge({t.poisons(), t.aba()});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_TRUE(r.signature.empty());
    EXPECT_TRUE(r.detail.at("runs_pass_ord01").get<bool>());
    EXPECT_EQ(r.id, "ORD-02");
}

TEST(Ord02, UnwrittenElementIsPoisonDependent) {
    Ord02Case t;
    ProbeOutcome o = t.poisons();
    // The kernel never writes element 5: it holds 0x00, 0xFF.., random bytes, per run.
    for (auto& call : o.calls) unwrite(call.outputs[0], 5, call.spec.output_poison);
    const GateResult r = t.judge({o, t.aba()});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"poison-dependent"}) << dump(r);
    ASSERT_FALSE(r.evidence.empty());
    const Evidence& e = r.evidence.front();
    EXPECT_EQ(e.probe, "ORD-02/poisons");
    EXPECT_EQ(e.first_index, 5);
    EXPECT_EQ(e.detail.at("run_a").get<int>(), 0);
    EXPECT_EQ(e.detail.at("run_b").get<int>(), 1);
    EXPECT_EQ(e.detail.at("bits_a").get<std::string>(), "0x00000000");
    EXPECT_EQ(e.detail.at("bits_b").get<std::string>(), "0xffffffff");
    EXPECT_NE(e.signature.find("never written"), std::string::npos) << e.signature;
    // The 0xFF runs hold a NaN at 5 where y* = 6: not every run passes ORD-01.
    EXPECT_FALSE(r.detail.at("runs_pass_ord01").get<bool>());
}

TEST(Ord02, SamePoisonDisagreementIsRunToRun) {
    Ord02Case t;
    ProbeOutcome o = t.poisons();
    // Run 3 (0xFF again) ends one ulp away at element 2: the same poison as run 1, other bits.
    o.calls[3].outputs[0].set_bits(2, 0x40400001);
    const GateResult r = t.judge({o, t.aba()});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"run-to-run"});
    const Evidence& e = r.evidence.front();
    EXPECT_EQ(e.first_index, 2);
    EXPECT_EQ(e.actual_bits, "0x40400001");
    EXPECT_EQ(e.detail.at("bits_a").get<std::string>(), "0x40400000");
    EXPECT_EQ(e.detail.at("run_a").get<int>(), 1);
    EXPECT_EQ(e.detail.at("run_b").get<int>(), 3);
    // One ulp is within ORD-01: the relaxed profile may accept this.
    EXPECT_TRUE(r.detail.at("runs_pass_ord01").get<bool>());
}

TEST(Ord02, NondeterminismAllowedOnlyWithinOrd01) {
    Ord02Case t;
    t.c.semantics.determinism = Determinism::not_guaranteed;
    ProbeOutcome o = t.poisons();
    o.calls[3].outputs[0].set_bits(2, 0x40400001);
    GateResult r = t.judge({o, t.aba()});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_TRUE(r.detail.at("runs_pass_ord01").get<bool>());

    // Run 3 is far off; run 1, with the same poison, is fine: not the poison's doing.
    o.calls[3].outputs[0].set(2, 3.5);
    r = t.judge({o, t.aba()});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"run-to-run"});
    EXPECT_FALSE(r.detail.at("runs_pass_ord01").get<bool>());
    EXPECT_EQ(r.evidence.front().detail.at("run").get<int>(), 3);

    // Every 0xFF run is off and every other run is fine: ORD-01 follows the poison.
    o = t.poisons();
    for (size_t k : {1u, 3u, 4u}) o.calls[k].outputs[0].set(2, 3.5);
    r = t.judge({o, t.aba()});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"poison-dependent"});
}

TEST(Ord02, CacheKeyedOnShapeIsStale) {
    Ord02Case t;
    ProbeOutcome o = t.aba();
    // B returns A's result.
    o.calls[1].outputs[0] = tensor_of(DType::f32, {8}, t.a, o.calls[1].spec.output_poison);
    o.calls[1].facts.output_ranges = {o.calls[1].outputs[0].address_range()};
    const GateResult r = t.judge({t.poisons(), o});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"stale-or-cached"});
    const Evidence& e = r.evidence.front();
    EXPECT_EQ(e.probe, "ORD-02/A-B-A");
    // |y - y*(B)| is largest at element 6 (0 vs 7): B repeats A's 7 there.
    EXPECT_EQ(e.worst_index, 6);
    EXPECT_EQ(e.actual_bits, "0x40e00000");
    EXPECT_EQ(e.detail.at("reference_differs").get<int>(), 8);
    EXPECT_EQ(e.detail.at("repeats_a").get<int>(), 8);
    EXPECT_FALSE(r.detail.at("b_passes_ord01").get<bool>());
}

TEST(Ord02, WrongBThatDoesNotRepeatAIsNotStale) {
    Ord02Case t;
    ProbeOutcome o = t.aba();
    o.calls[1].outputs[0].set(6, 100);   // wrong, but not A's value: ORD-01's business
    const GateResult r = t.judge({t.poisons(), o});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_FALSE(r.detail.at("b_passes_ord01").get<bool>());
    EXPECT_FALSE(r.detail.at("runs_pass_ord01").get<bool>());
}

TEST(Ord02, SecondADifferentIsStaleUnlessRunToRun) {
    Ord02Case t;
    ProbeOutcome o = t.aba();
    o.calls[2].outputs[0].set_bits(0, 0x3f800001);
    GateResult r = t.judge({t.poisons(), o});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"stale-or-cached"});
    EXPECT_EQ(r.evidence.front().first_index, 0);
    EXPECT_EQ(r.evidence.front().actual_bits, "0x3f800001");

    // The poisons probe shows the same nondeterminism without an intervening B.
    ProbeOutcome p = t.poisons();
    p.calls[4].outputs[0].set_bits(7, 0x41000001);
    r = t.judge({p, o});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"run-to-run"});
    EXPECT_EQ(r.evidence.size(), 2u);
}

TEST(Ord02, UnwrittenInBothAAndBIsPoisonNotCache) {
    Ord02Case t;
    ProbeOutcome o = t.aba();
    for (auto& call : o.calls) unwrite(call.outputs[0], 4, call.spec.output_poison);
    const GateResult r = t.judge({t.poisons(), o});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"poison-dependent"}) << dump(r);
    EXPECT_EQ(r.evidence.front().worst_index, 4);
}

TEST(Ord02, BRepeatingAIsPoisonDependenceWhenThePoisonsSaySo) {
    // An unzeroed accumulator: a huge poison value swamps the result, so B's element 6 equals
    // A's (both 2^100 + y rounds to 2^100) without holding the poison bytes.
    Ord02Case t;
    ProbeOutcome aba = t.aba();
    for (auto& call : aba.calls) call.outputs[0].set(6, pow2(100));
    ProbeOutcome poisons = t.poisons();
    for (auto& call : poisons.calls) unwrite(call.outputs[0], 5, call.spec.output_poison);
    GateResult r = t.judge({poisons, aba});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"poison-dependent"}) << dump(r);
    ASSERT_EQ(r.evidence.size(), 2u);
    EXPECT_EQ(r.evidence[1].probe, "ORD-02/A-B-A");
    EXPECT_EQ(r.evidence[1].worst_index, 6);
    // Judged without the poisons probe, the A-B-A probe can only call it a stale result.
    r = t.judge({aba});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"stale-or-cached"});
}

TEST(Ord02, AliasingOfInputAndOfEarlierOutput) {
    Ord02Case t;
    ProbeOutcome o = t.poisons();
    o.calls[2].facts.output_ranges = o.calls[2].facts.input_ranges;   // returns a view of its input
    GateResult r = t.judge({o, t.aba()});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"aliasing"});
    EXPECT_NE(r.evidence.front().signature.find("overlaps input x"), std::string::npos);
    EXPECT_EQ(r.evidence.front().detail.at("call").get<int>(), 2);

    o = t.poisons();
    // A persistent buffer: call 3 returns the memory of call 1's output, shifted by one element.
    auto range = o.calls[1].facts.output_ranges[0];
    o.calls[3].facts.output_ranges = {{range.first + 4, range.second + 4}};
    r = t.judge({o, t.aba()});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"aliasing"});
    EXPECT_NE(r.evidence.front().signature.find("output y of call 1"), std::string::npos);

    // Adjacent, not overlapping: [lo, hi) ranges that touch are fine.
    o = t.poisons();
    o.calls[3].facts.output_ranges = {{range.second, range.second + 32}};
    r = t.judge({o, t.aba()});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
}

TEST(Ord02, InputMutationUnlessInPlace) {
    Ord02Case t;
    ProbeOutcome o = t.aba();
    o.calls[1].inputs[0].set(3, 0);
    o.calls[1].facts.input_hash_after = {o.calls[1].inputs[0].hash_storage()};
    GateResult r = t.judge({t.poisons(), o});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"input-mutation"});
    EXPECT_EQ(r.evidence.front().detail.at("input").get<std::string>(), "x");
    EXPECT_EQ(r.evidence.front().detail.at("call").get<int>(), 1);

    t.c.semantics.in_place = {"x"};
    r = t.judge({t.poisons(), o});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
}

TEST(Ord02, LaunchErrorAndProbeError) {
    Ord02Case t;
    ProbeOutcome o = t.poisons();
    o.calls[1].facts.status = 3;
    GateResult r = t.judge({o, t.aba()});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"launch-error"});
    EXPECT_FALSE(r.detail.at("runs_pass_ord01").get<bool>());

    ProbeOutcome broken;
    broken.probe = t.probes[0];
    broken.error = "oracle refused";
    r = t.judge({broken, t.aba()});
    EXPECT_EQ(r.verdict, Verdict::error);
}

// Boundary sizes plus random ones, a difference planted at a random element: the judge names
// exactly that element and counts exactly one.
std::vector<int64_t> sizes_to_test(std::mt19937_64& rng) {
    std::vector<int64_t> n = {1, 2, 3, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000};
    for (int i = 0; i < 4; ++i) n.push_back(int64_t(rng() % 5000) + 1);
    return n;
}

TEST(Ord02, RunToRunAtAnyElementOfAnySize) {
    const uint64_t seed = 20240611;
    std::mt19937_64 rng(seed);
    for (int64_t n : sizes_to_test(rng)) {
        const int64_t at = int64_t(rng() % uint64_t(n));
        SCOPED_TRACE("seed " + std::to_string(seed) + ", n " + std::to_string(n) + ", element " + std::to_string(at));
        Ord02Case t;
        t.c = relu_f32(n);
        t.probes = ord02().plan(t.c, kSettings);
        t.x.assign(size_t(n), 0);
        t.a.assign(size_t(n), 0);
        t.xb.assign(size_t(n), 0);
        t.b.assign(size_t(n), 0);
        for (int64_t i = 0; i < n; ++i) {
            t.x[size_t(i)] = t.a[size_t(i)] = double(i % 97 + 1);
            t.xb[size_t(i)] = t.b[size_t(i)] = double(i % 89 + 2);
        }
        ProbeOutcome o = t.poisons();
        o.calls[4].outputs[0].set_bits(at, o.calls[4].outputs[0].bits(at) ^ 1);
        const GateResult r = t.judge({o, t.aba()});
        ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
        EXPECT_EQ(r.signature, std::vector<std::string>{"run-to-run"});
        EXPECT_EQ(r.evidence[0].first_index, at);
        EXPECT_EQ(r.evidence[0].detail.at("differing_elements").get<int64_t>(), 1);
        EXPECT_TRUE(r.detail.at("runs_pass_ord01").get<bool>()) << "one ulp is within ORD-01";
    }
}

// ---------------------------------------------------------------------------------------------
// EXC-01

ProbeOutcome exc01_outcome(const Contract& c, const std::vector<double>& ref, const std::vector<double>& y) {
    const Probe p = exc01().plan(c, kSettings).front();
    ProbeOutcome o = outcome_of(c, p);
    o.calls.push_back(call_of(c, p.calls[0], std::vector<double>(ref.size(), 1.0), ref, y));
    return o;
}

TEST(Exc01, PlanFollowsTheContract) {
    Contract c = relu_f32();
    auto ps = exc01().plan(c, kSettings);
    std::set<std::string> ids;
    for (const auto& p : ps) {
        ids.insert(p.id);
        ASSERT_EQ(p.overrides.size(), 1u) << p.id;
        EXPECT_EQ(p.overrides[0].input, "");
        ASSERT_TRUE(p.overrides[0].specials.has_value());
    }
    EXPECT_EQ(ids, (std::set<std::string>{"EXC-01/scattered-0.005", "EXC-01/scattered-0.01",
                                           "EXC-01/signed-zero-max"}));
    EXPECT_EQ(probe_named(ps, "EXC-01/scattered-0.005").overrides[0].specials->rate, 0.005);
    EXPECT_EQ(probe_named(ps, "EXC-01/signed-zero-max").overrides[0].specials->kinds,
              (std::vector<std::string>{"+0", "-0", "+max", "-max"}));

    Contract sm = vector_contract("softmax", DType::f32, DType::f32, ErrorModelKind::reduction, 8);
    ids.clear();
    for (const auto& p : exc01().plan(sm, kSettings)) ids.insert(p.id);
    EXPECT_EQ(ids, (std::set<std::string>{"EXC-01/scattered-0.005", "EXC-01/scattered-0.01", "EXC-01/row-neg-inf",
                                           "EXC-01/single-nan"}));
    EXPECT_EQ(probe_named(exc01().plan(sm, kSettings), "EXC-01/row-neg-inf").overrides[0].specials->pattern,
              Specials::Pattern::row_neg_inf);

    // An elementwise-model output smaller than its input reduces it (argmax): one NaN inside.
    Contract am = vector_contract("argmax", DType::f32, DType::i64, ErrorModelKind::elementwise, 8);
    am.dims.push_back(Dim{"R", 2});
    am.inputs[0].shape = {"R", "N"};
    am.outputs[0].shape = {"R"};
    ids.clear();
    for (const auto& p : exc01().plan(am, kSettings)) ids.insert(p.id);
    EXPECT_TRUE(ids.count("EXC-01/single-nan")) << "argmax reduces its input";

    EXPECT_EQ(exc01().not_applicable(c), "");
    c.inputs[0].domain.nonfinite = false;
    EXPECT_NE(exc01().not_applicable(c), "");
    Contract idx = c;
    idx.inputs[0].domain.nonfinite = true;
    idx.inputs[0].index = true;
    EXPECT_NE(exc01().not_applicable(idx), "");
}

TEST(Exc01, MatchingClassesPass) {
    const Contract c = relu_f32(8);
    // Includes a finite y* beyond fp32's range, which rounds to +Inf, and a -Inf.
    const std::vector<double> ref = {kNaN, kInf, -kInf, 1e39, -1e39, 0.0, -0.0, 3};
    const std::vector<double> y = {kNaN, kInf, -kInf, kInf, -kInf, 0.0, -0.0, 3};
    const GateResult r = exc01().judge(c, kSettings, {exc01_outcome(c, ref, y)});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_EQ(r.detail.at("probes").at("EXC-01/scattered-0.005").at("expected_inf").get<int>(), 4);
}

struct Exc01Case {
    std::string cls;
    double ref, y;
    std::string actual_bits;
};

TEST(Exc01, EveryClassFailsAtItsIndex) {
    const Contract c = relu_f32(6);
    const Exc01Case cases[] = {
        {"nan-swallowed", kNaN, 0.0, "0x00000000"},
        {"nan-invented", 2.0, kNaN, "0x7fc00000"},
        {"inf-lost", kInf, 3.4028234663852886e38, "0x7f7fffff"},
        {"inf-lost", 1e39, 3.4028234663852886e38, "0x7f7fffff"},   // y* overflows fp32
        {"inf-invented", 5.0, kInf, "0x7f800000"},
        {"inf-sign", -kInf, kInf, "0x7f800000"},
    };
    for (const auto& k : cases) {
        for (int64_t at : {0, 3, 5}) {
            std::vector<double> ref = {1, 2, 3, 4, 5, 6}, y = ref;
            ref[size_t(at)] = k.ref;
            y[size_t(at)] = k.y;
            const GateResult r = exc01().judge(c, kSettings, {exc01_outcome(c, ref, y)});
            ASSERT_EQ(r.verdict, Verdict::fail) << k.cls << " at " << at << ": " << dump(r);
            EXPECT_EQ(r.signature, std::vector<std::string>{k.cls}) << dump(r);
            ASSERT_EQ(r.evidence.size(), 1u);
            EXPECT_EQ(r.evidence[0].first_index, at);
            EXPECT_EQ(r.evidence[0].actual_bits, k.actual_bits) << k.cls;
            EXPECT_EQ(r.evidence[0].detail.at("count").get<int>(), 1);
        }
    }
}

TEST(Exc01, E4m3OverflowExpectsNaN) {
    // e4m3fn has no Inf: a y* beyond 448 rounds to NaN, and a saturated 448 swallows it.
    const Contract c = vector_contract("relu", DType::f32, DType::e4m3, ErrorModelKind::elementwise, 2);
    GateResult r = exc01().judge(c, kSettings, {exc01_outcome(c, {1000, 1}, {448, 1})});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"nan-swallowed"});
    EXPECT_EQ(r.evidence[0].actual_bits, "0x7e");
    r = exc01().judge(c, kSettings, {exc01_outcome(c, {1000, 1}, {kNaN, 1})});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
}

TEST(Exc01, SwallowedNaNsAtRandomPositionsOfAnySize) {
    const uint64_t seed = 7;
    std::mt19937_64 rng(seed);
    for (int64_t n : sizes_to_test(rng)) {
        SCOPED_TRACE("seed " + std::to_string(seed) + ", n " + std::to_string(n));
        const Contract c = relu_f32(n);
        std::vector<double> ref(static_cast<size_t>(n)), y(static_cast<size_t>(n));
        int64_t first = -1, count = 0;
        for (int64_t i = 0; i < n; ++i) {
            ref[size_t(i)] = y[size_t(i)] = double(i % 13) - 6;
            if (rng() % 100 < 3 || i == n - 1) {
                ref[size_t(i)] = kNaN;
                y[size_t(i)] = std::max(0.0, double(i % 13) - 6);   // fmaxf(x, 0) drops the NaN
                if (first < 0) first = i;
                ++count;
            }
        }
        GateResult r = exc01().judge(c, kSettings, {exc01_outcome(c, ref, y)});
        ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
        EXPECT_EQ(r.signature, std::vector<std::string>{"nan-swallowed"});
        EXPECT_EQ(r.evidence[0].first_index, first);
        EXPECT_EQ(r.evidence[0].detail.at("count").get<int64_t>(), count);
        EXPECT_EQ(r.evidence[0].expected_bits, "0x7fc00000");
        // Propagating them passes.
        for (int64_t i = 0; i < n; ++i)
            if (std::isnan(ref[size_t(i)])) y[size_t(i)] = kNaN;
        r = exc01().judge(c, kSettings, {exc01_outcome(c, ref, y)});
        EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    }
}

TEST(Exc01, ArgmaxExactWhereTheRowHoldsANaN) {
    Contract c;
    c.id = "argmax-test";
    c.oracle = "argmax";
    c.dims = {Dim{"R", 3}, Dim{"N", 4}};
    InputSpec x;
    x.name = "x";
    x.shape = {"R", "N"};
    c.inputs = {x};
    OutputSpec y;
    y.name = "index";
    y.dtype = DType::i64;
    y.shape = {"R"};
    y.model = ErrorModelKind::reduction;
    c.outputs = {y};

    const Probe p = exc01().plan(c, kSettings).front();
    auto judge_with = [&](const std::vector<double>& idx) {
        ProbeOutcome o = outcome_of(c, p);
        CallOutcome co;
        co.spec = p.calls[0];
        // Row 0: no NaN; row 1: NaN at 1 and 3 (the first NaN wins); row 2: no NaN, max at 2.
        co.inputs.push_back(tensor_of(DType::f32, {3, 4}, {0, 5, 1, 2, 0, kNaN, 9, kNaN, 1, 2, 3, 0}));
        co.reference.push_back(tensor_of(DType::f64, {3}, {1, 1, 2}));
        co.outputs.push_back(tensor_of(DType::i64, {3}, idx));
        o.calls.push_back(std::move(co));
        return exc01().judge(c, kSettings, {o});
    };
    GateResult r = judge_with({1, 1, 2});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    // Row 0 disagrees but holds no NaN: ORD-01's business, not EXC-01's.
    r = judge_with({0, 1, 2});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    // Row 1 skips the NaN: the 9 at index 2.
    r = judge_with({1, 2, 2});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"nan-swallowed"});
    EXPECT_EQ(r.evidence[0].first_index, 1);
    EXPECT_NE(r.evidence[0].signature.find("not NaN"), std::string::npos) << r.evidence[0].signature;
    // Row 1 picks the later NaN.
    r = judge_with({1, 3, 2});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_NE(r.evidence[0].signature.find("another NaN"), std::string::npos) << r.evidence[0].signature;
    // The reduced axis from the "dim" attribute: over R, lanes are the 4 columns; y is shaped
    // [R] = 3, which does not match: index outputs are then not judged, and say so.
    c.attributes["dim"] = 0;
    r = judge_with({1, 2, 2});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_TRUE(r.detail.contains("index_outputs"));
}

TEST(Exc01, LaunchErrorFails) {
    const Contract c = relu_f32(2);
    ProbeOutcome o = exc01_outcome(c, {1, 2}, {1, 2});
    o.calls[0].facts.status = -1;
    const GateResult r = exc01().judge(c, kSettings, {o});
    ASSERT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.signature, std::vector<std::string>{"launch-error"});
}

// ---------------------------------------------------------------------------------------------
// EXC-02

Probe exc02_probe(const char* kind) {
    Probe p;
    p.gate = "EXC-02";
    p.id = std::string("EXC-02/") + kind;
    p.note = {{"kind", kind}};
    p.calls.push_back(CallSpec{});
    return p;
}

ProbeOutcome exc02_outcome(const Contract& c, const char* kind, const std::vector<double>& ref,
                           const std::vector<double>& y) {
    ProbeOutcome o = outcome_of(c, exc02_probe(kind));
    o.calls.push_back(call_of(c, o.probe.calls[0], std::vector<double>(ref.size(), 1.0), ref, y));
    return o;
}

TEST(Exc02, KeptSubnormalsPassFlushedFail) {
    const Contract c = relu_f32(4);
    const double s1 = 3 * pow2(-149), s2 = -pow2(-127), s3 = 0x1.fffffcp-127;   // all fp32 subnormals
    GateResult r = exc02().judge(c, kSettings, {exc02_outcome(c, "ftz-output", {1, s1, s2, s3}, {1, s1, s2, s3})});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_EQ(r.detail.at("probes").at("EXC-02/ftz-output").at("judged").get<int>(), 3);

    for (int64_t at : {1, 2, 3}) {
        std::vector<double> ref = {1, s1, s2, s3}, y = ref;
        y[size_t(at)] = ref[size_t(at)] < 0 ? -0.0 : 0.0;
        r = exc02().judge(c, kSettings, {exc02_outcome(c, "ftz-output", ref, y)});
        ASSERT_EQ(r.verdict, Verdict::fail) << at << dump(r);
        EXPECT_EQ(r.signature, std::vector<std::string>{"ftz-output"});
        EXPECT_EQ(r.evidence[0].first_index, at);
        EXPECT_EQ(r.evidence[0].actual_bits, ref[size_t(at)] < 0 ? "0x80000000" : "0x00000000");
        EXPECT_EQ(r.evidence[0].expected_bits,
                  at == 1 ? "0x00000003" : at == 2 ? "0x80400000" : "0x007fffff");
        EXPECT_EQ(r.evidence[0].detail.at("count").get<int>(), 1);
    }
    // A wrong sign or a NaN is lost too, but is no flush: it carries ORD-01's classes, which no
    // profile accepts.
    r = exc02().judge(c, kSettings, {exc02_outcome(c, "ftz-output", {1, s1, s2, s3}, {1, -s1, s2, s3})});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"error-bound"});
    EXPECT_EQ(r.evidence[0].actual_bits, "0x80000003");
    r = exc02().judge(c, kSettings, {exc02_outcome(c, "ftz-output", {1, s1, s2, s3}, {1, 0.0, kNaN, s3})});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, (std::vector<std::string>{"ftz-output", "nonfinite-output"}));
    ASSERT_EQ(r.evidence.size(), 2u);
    EXPECT_EQ(r.evidence[1].first_index, 2);
    EXPECT_EQ(r.evidence[1].actual_bits, "0x7fc00000");
}

TEST(Exc02, OnlyBeyondTheOrd01BoundIsJudged) {
    // y* = 2^-149 (x/2 of the smallest subnormal, rounded up) may legitimately come out as 0 from
    // 0.5f·x: within τ ≥ ulp(min normal) of zero, nothing is judged, and with nothing judged
    // and no daz probe the gate does not apply.
    const Contract c = relu_f32(2);
    const double tie = pow2(-150) + pow2(-170);
    GateResult r = exc02().judge(c, kSettings, {exc02_outcome(c, "ftz-output", {1, tie}, {1, 0.0})});
    EXPECT_EQ(r.verdict, Verdict::na) << dump(r);
    EXPECT_EQ(r.detail.at("probes").at("EXC-02/ftz-output").at("subnormal_results").get<int>(), 1);
    // Two subnormal ulps is beyond the bound: zero is then a flush.
    r = exc02().judge(c, kSettings, {exc02_outcome(c, "ftz-output", {1, 2 * pow2(-149)}, {1, 0.0})});
    EXPECT_EQ(r.verdict, Verdict::fail) << dump(r);
}

// A daz-input outcome of a one-input contract whose input x holds `x`; the reference is the
// real oracle's.
ProbeOutcome daz_outcome(const Contract& c, const std::vector<double>& x, const std::vector<double>& y) {
    Probe p = exc02_probe("daz-input");
    p.overrides.push_back(InputOverride{"x", Family::of(Family::Kind::subnormal), std::nullopt});
    ProbeOutcome o = outcome_of(c, p);
    CallOutcome co;
    co.spec = p.calls[0];
    co.inputs.push_back(tensor_of(c.inputs[0].dtype, {int64_t(x.size())}, x));
    co.outputs.push_back(tensor_of(c.outputs[0].dtype, o.output_shapes[0], y));
    run_oracle(c.oracle, co.inputs, c.attributes, o.output_shapes, co.reference, co.scale);
    o.calls.push_back(std::move(co));
    return o;
}

TEST(Exc02, DazInputFlushesAndFailsOrd01) {
    const double a = 5 * pow2(-149), b = -3 * pow2(-149), d = pow2(-130);
    const Contract relu = relu_f32(4);
    // relu keeps positive subnormals exactly.
    GateResult r = exc02().judge(relu, kSettings, {daz_outcome(relu, {a, b, d, 1.5}, {a, 0, d, 1.5})});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_EQ(r.detail.at("probes").at("EXC-02/daz-input").at("judged").get<int>(), 2);
    // Denormals-are-zero: relu(0) = 0 at 0 and 2. Flushed positions and the ORD-01 failure are
    // both daz-input, the latter because zero inputs give exactly this output.
    r = exc02().judge(relu, kSettings, {daz_outcome(relu, {a, b, d, 1.5}, {0, 0, 0, 1.5})});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"daz-input"});
    ASSERT_EQ(r.evidence.size(), 2u);
    EXPECT_EQ(r.evidence[0].first_index, 0);
    EXPECT_EQ(r.evidence[0].actual_bits, "0x00000000");
    EXPECT_EQ(r.evidence[0].expected_bits, "0x00000005");
    EXPECT_EQ(r.evidence[0].detail.at("count").get<int>(), 2);
    EXPECT_TRUE(r.evidence[1].detail.at("explained_by_flush").get<bool>());
    // Subnormals kept but doubled (2^-129 for 2^-130): ORD-01 fails, and a flush only moves a
    // single result towards zero, so it is no flush.
    r = exc02().judge(relu, kSettings, {daz_outcome(relu, {a, b, d, 1.5}, {a, 0, 2 * d, 1.5})});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"error-bound"});
    EXPECT_FALSE(r.evidence[0].detail.at("explained_by_flush").get<bool>());

    // Flush-to-zero of intermediate results in a reduction: some of the K products underflow and
    // are lost, the others stay. The result is off by less than K·min_normal: a flush.
    Contract sum = vector_contract("sum", DType::f32, DType::f32, ErrorModelKind::reduction, 8);
    sum.outputs[0].shape = {};
    sum.outputs[0].k = "N";
    const std::vector<double> xs = {a, d, 4 * d, -d, pow2(-127), a, a, b};
    ProbeOutcome o = daz_outcome(sum, xs, {0});
    const double exact = o.calls[0].reference[0].get(0);
    o.calls[0].outputs[0].set(0, exact - pow2(-127));   // one term lost
    r = exc02().judge(sum, kSettings, {o});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"daz-input"}) << dump(r);
    EXPECT_TRUE(r.evidence.back().detail.at("explained_by_flush").get<bool>());
    // Losing a larger term flips the sign of the small result: on a daz-input probe that is still
    // a flush's doing.
    o.calls[0].outputs[0].set(0, exact - pow2(-126));
    ASSERT_LT(o.calls[0].outputs[0].get(0), 0);
    r = exc02().judge(sum, kSettings, {o});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"daz-input"}) << dump(r);
    EXPECT_NE(r.evidence[0].signature.find("wrong sign"), std::string::npos) << r.evidence[0].signature;
    // Off by more than K terms of min normal could cause: no flush.
    o.calls[0].outputs[0].set(0, exact - 18 * pow2(-126));   // 2·K + 1 = 17 allowed
    r = exc02().judge(sum, kSettings, {o});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"error-bound"}) << dump(r);

    // sqrt of subnormals is normal (2^-70, 2^-65): no subnormal result to keep, and a kernel
    // treating the inputs as zero fails ORD-01 only.
    const Contract sq = vector_contract("sqrt", DType::f32, DType::f32, ErrorModelKind::elementwise, 2);
    r = exc02().judge(sq, kSettings, {daz_outcome(sq, {pow2(-140), pow2(-130)}, {pow2(-70), pow2(-65)})});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    r = exc02().judge(sq, kSettings, {daz_outcome(sq, {pow2(-140), pow2(-130)}, {0, 0})});
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"daz-input"});
    ASSERT_EQ(r.evidence.size(), 1u);
    EXPECT_EQ(r.evidence[0].first_index, 0);
    EXPECT_EQ(r.evidence[0].expected_bits, "0x1c800000");
}

TEST(Exc02, PlanPerOracle) {
    // relu: one daz-input probe filling x with subnormals.
    auto ps = exc02().plan(relu_f32(), kSettings);
    ASSERT_EQ(ps.size(), 1u);
    EXPECT_EQ(ps[0].id, "EXC-02/daz-input");
    ASSERT_EQ(ps[0].overrides.size(), 1u);
    EXPECT_EQ(ps[0].overrides[0].input, "x");
    EXPECT_EQ(ps[0].overrides[0].family.kind, Family::Kind::subnormal);

    // exp: subnormal inputs are invisible (exp(x) = 1); arguments in exp's underflow range.
    Contract e = vector_contract("exp", DType::f32, DType::f32, ErrorModelKind::elementwise, 8);
    ps = exc02().plan(e, kSettings);
    ASSERT_EQ(ps.size(), 1u);
    EXPECT_EQ(ps[0].id, "EXC-02/ftz-output/exp-underflow");
    EXPECT_EQ(ps[0].family.kind, Family::Kind::band);
    // 126 ln 2: N(0,1) times it reaches (-103.3, -87.3), where expf is subnormal.
    EXPECT_DOUBLE_EQ(ps[0].family.scale, 126 * 0.6931471805599453);

    // matmul: a daz probe per operand, and same-sign operands whose products are subnormal.
    Contract mm;
    mm.id = "matmul-test";
    mm.oracle = "matmul";
    mm.dims = {Dim{"M", 4}, Dim{"K", 1000}, Dim{"N", 4}};
    InputSpec a, b;
    a.name = "a";
    a.shape = {"M", "K"};
    b.name = "b";
    b.shape = {"K", "N"};
    mm.inputs = {a, b};
    OutputSpec y;
    y.name = "c";
    y.shape = {"M", "N"};
    y.model = ErrorModelKind::reduction;
    y.k = "K";
    mm.outputs = {y};
    ps = exc02().plan(mm, kSettings);
    std::set<std::string> ids;
    for (const auto& p : ps) ids.insert(p.id);
    EXPECT_EQ(ids, (std::set<std::string>{"EXC-02/daz-input/a", "EXC-02/daz-input/b", "EXC-02/ftz-output/products"}));
    const Probe& prod = probe_named(ps, "EXC-02/ftz-output/products");
    ASSERT_EQ(prod.overrides.size(), 2u);
    const double sigma = prod.overrides[0].family.scale;
    EXPECT_EQ(prod.overrides[0].family.kind, Family::Kind::positive);
    // A power of two with K·σ² ≤ min_normal/2 < 4·K·σ²: the exact sum stays subnormal, not tiny.
    int ex = 0;
    EXPECT_EQ(std::frexp(sigma, &ex), 0.5);
    EXPECT_LE(1000 * sigma * sigma, pow2(-127));
    EXPECT_GT(4 * 1000 * sigma * sigma, pow2(-127));
    EXPECT_EQ(sigma, pow2(-69));

    // Quick mode keeps one daz probe.
    Settings quick;
    quick.quick = true;
    EXPECT_EQ(exc02().plan(mm, quick).size(), 2u);

    // Division: a large divisor, one rounding.
    Contract dv = vector_contract("div", DType::f32, DType::f32, ErrorModelKind::elementwise, 8);
    InputSpec d = dv.inputs[0];
    d.name = "d";
    dv.inputs.push_back(d);
    const auto dps = exc02().plan(dv, kSettings);
    const Probe& big = probe_named(dps, "EXC-02/ftz-output/large-divisor");
    ASSERT_EQ(big.overrides.size(), 1u);
    EXPECT_EQ(big.overrides[0].input, "d");
    // N(0, 1) reaches 4: 4·2^125 stays below fp32's max, 4·2^126 does not.
    EXPECT_EQ(big.overrides[0].family.scale, pow2(125));

    // A reciprocal over U(0.5, 2): 2·2^126 is finite, and 1/(x·2^126) is subnormal for x > 1.
    Contract rc = vector_contract("reciprocal", DType::f32, DType::f32, ErrorModelKind::elementwise, 8);
    rc.inputs[0].distribution = {"uniform", 0.5, 2};
    const auto rps = exc02().plan(rc, kSettings);
    const Probe& arg = probe_named(rps, "EXC-02/ftz-output/large-argument");
    EXPECT_EQ(arg.overrides[0].family.scale, pow2(126));
    EXPECT_EQ(arg.overrides[0].family.kind, Family::Kind::band);
    // A half-precision output: min normal 2^-14, so K·σ² stays below 2^-15.
    mm.outputs[0].dtype = DType::f16;
    const auto hps = exc02().plan(mm, kSettings);
    const double hs = probe_named(hps, "EXC-02/ftz-output/products").overrides[0].family.scale;
    EXPECT_LE(1000 * hs * hs, pow2(-15));
    EXPECT_GT(4 * 1000 * hs * hs, pow2(-15));
}

TEST(Exc02, NotApplicable) {
    EXPECT_EQ(exc02().not_applicable(relu_f32()), "");
    Contract ls = vector_contract("log_softmax", DType::f32, DType::f32, ErrorModelKind::reduction, 8);
    EXPECT_NE(exc02().not_applicable(ls), "");
    Contract ints = vector_contract("relu", DType::i32, DType::i32, ErrorModelKind::elementwise, 8);
    EXPECT_NE(exc02().not_applicable(ints), "");
    Contract no_sub = relu_f32();
    no_sub.inputs[0].domain.subnormal = false;
    EXPECT_NE(exc02().not_applicable(no_sub), "") << "relu has no ftz-output construction";
    Contract ex = vector_contract("exp", DType::f32, DType::f32, ErrorModelKind::elementwise, 8);
    ex.inputs[0].domain.subnormal = false;
    EXPECT_EQ(exc02().not_applicable(ex), "");
}

// ---------------------------------------------------------------------------------------------
// RES-01

struct Res01Case {
    Contract c = relu_f32(4);
    std::vector<Probe> probes = res01().plan(c, kSettings);
    std::vector<double> x = {1, -2, 3, -4};
    std::vector<double> ref = {1, 0, 3, 0};

    ProbeOutcome run(const Probe& p, const std::vector<std::vector<double>>& ys) const {
        ProbeOutcome o = outcome_of(c, p);
        for (size_t k = 0; k < p.calls.size(); ++k) o.calls.push_back(call_of(c, p.calls[k], x, ref, ys.at(k)));
        return o;
    }
    std::vector<ProbeOutcome> guards(const std::vector<double>& a, const std::vector<double>& b) const {
        return {run(probes[0], {a, a}), run(probes[1], {b, b})};
    }
};

TEST(Res01, PlanTwoGuardPoisonsSameInputs) {
    Res01Case t;
    ASSERT_EQ(t.probes.size(), 2u);
    EXPECT_EQ(t.probes[0].id, "RES-01/guard-A5");
    EXPECT_EQ(t.probes[1].id, "RES-01/guard-5A");
    EXPECT_EQ(t.probes[0].guard_poison.byte, 0xA5);
    EXPECT_EQ(t.probes[1].guard_poison.byte, 0x5A);
    EXPECT_GE(t.probes[0].guard_bytes, 4096u);
    for (const auto& p : t.probes) {
        ASSERT_EQ(p.calls.size(), 2u);
        for (const auto& call : p.calls) {
            EXPECT_EQ(call.input_seed, t.probes[0].calls[0].input_seed);
            EXPECT_TRUE(same_poison(call.output_poison, Poison::bytes(0xFF)));
        }
    }
    Contract g = t.c;
    g.semantics.index_policy = "clamp";
    const auto ps = res01().plan(g, kSettings);
    ASSERT_EQ(ps.size(), 3u);
    EXPECT_EQ(ps[2].id, "RES-01/index-clamp");
    EXPECT_TRUE(ps[2].out_of_range_indices);
    // Every RES-01 probe asks the executor to look at the guards, and it survives the JSON that
    // carries probes to the Python executor; the other gates' probes do not ask.
    for (const auto& p : ps) {
        EXPECT_TRUE(p.check_guards) << p.id;
        EXPECT_TRUE(probe_from_json(to_json(p)).check_guards) << p.id;
    }
    for (const auto& p : ord02().plan(t.c, kSettings)) EXPECT_FALSE(p.check_guards) << p.id;
    for (const auto& p : exc01().plan(t.c, kSettings)) EXPECT_FALSE(p.check_guards) << p.id;
}

TEST(Res01, GuardsIntactAndOutputsEqualPass) {
    Res01Case t;
    const GateResult r = res01().judge(t.c, kSettings, t.guards(t.ref, t.ref));
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
}

TEST(Res01, GuardDamageIsOobWrite) {
    Res01Case t;
    auto os = t.guards(t.ref, t.ref);
    os[1].calls[1].facts.guard_damage = {"output y: band after, first changed byte at +0, 4 bytes changed"};
    const GateResult r = res01().judge(t.c, kSettings, os);
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"oob-write"});
    EXPECT_EQ(r.evidence[0].probe, "RES-01/guard-5A");
    EXPECT_EQ(r.evidence[0].detail.at("call").get<int>(), 1);
    EXPECT_NE(r.evidence[0].signature.find("band after"), std::string::npos);
}

TEST(Res01, OutputFollowingTheGuardIsOobRead) {
    Res01Case t;
    // Element 3 copies the 4 bytes past the end of x: the guard's 0xA5A5A5A5 or 0x5A5A5A5A.
    auto os = t.guards(t.ref, t.ref);
    for (auto& call : os[0].calls) call.outputs[0].set_bits(3, 0xA5A5A5A5);
    for (auto& call : os[1].calls) call.outputs[0].set_bits(3, 0x5A5A5A5A);
    const GateResult r = res01().judge(t.c, kSettings, os);
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"oob-read"});
    EXPECT_EQ(r.evidence[0].first_index, 3);
    EXPECT_EQ(r.evidence[0].probe, "RES-01/guard-5A");
    EXPECT_EQ(r.evidence[0].detail.at("compared_with").get<std::string>(), "RES-01/guard-A5");
    EXPECT_EQ(r.evidence[0].actual_bits, "0x5a5a5a5a");
    EXPECT_EQ(r.evidence[0].detail.at("bits_other").get<std::string>(), "0xa5a5a5a5");
}

TEST(Res01, NondeterministicRunsAreInconclusiveNotOobRead) {
    Res01Case t;
    std::vector<double> a = t.ref, a2 = t.ref;
    a2[0] = 1.0000001;
    auto os = std::vector<ProbeOutcome>{t.run(t.probes[0], {a, a2}), t.run(t.probes[1], {a2, a2})};
    const GateResult r = res01().judge(t.c, kSettings, os);
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    ASSERT_TRUE(r.detail.contains("oob_read"));
    EXPECT_NE(r.detail["oob_read"].get<std::string>().find("inconclusive"), std::string::npos);
}

TEST(Res01, IndexPolicies) {
    Res01Case t;
    t.c.semantics.index_policy = "raise";
    auto ps = res01().plan(t.c, kSettings);
    ProbeOutcome idx = t.run(ps[2], {t.ref});
    idx.calls[0].reference.clear();   // the oracle refused, as it does under raise
    idx.calls[0].facts.status = 7;
    auto os = t.guards(t.ref, t.ref);
    os.push_back(idx);
    GateResult r = res01().judge(t.c, kSettings, os);
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    os.back().calls[0].facts.status = 0;
    r = res01().judge(t.c, kSettings, os);
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"index-policy"});

    t.c.semantics.index_policy = "zero";
    ps = res01().plan(t.c, kSettings);
    os = t.guards(t.ref, t.ref);
    os.push_back(t.run(ps[2], {{1, -0.0, 3, 0}}));   // -0 where the policy gives +0: the same zero
    r = res01().judge(t.c, kSettings, os);
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    os.back().calls[0].outputs[0].set(2, 2.9999998);
    r = res01().judge(t.c, kSettings, os);
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"index-policy"});
    EXPECT_EQ(r.evidence[0].first_index, 2);
    EXPECT_EQ(r.evidence[0].actual_bits, "0x403fffff");
    os.back().calls[0].facts.status = 1;   // raising where the policy defines a result
    r = res01().judge(t.c, kSettings, os);
    EXPECT_EQ(r.verdict, Verdict::fail) << dump(r);
}

// ---------------------------------------------------------------------------------------------
// RES-02

struct Res02Case {
    Contract c = relu_f32(4);
    Probe probe = res02().plan(c, kSettings).front();
    std::vector<double> xa = {1, -2, 3, -4}, a = {1, 0, 3, 0};
    std::vector<double> xb = {-5, 6, -7, 8}, b = {0, 6, 0, 8};

    // Calls: A, A again, B.
    ProbeOutcome run(const std::vector<double>& ya, const std::vector<double>& ya2, const std::vector<double>& yb) const {
        ProbeOutcome o = outcome_of(c, probe);
        o.calls.push_back(call_of(c, probe.calls[0], xa, a, ya));
        o.calls.push_back(call_of(c, probe.calls[1], xa, a, ya2));
        o.calls.push_back(call_of(c, probe.calls[2], xb, b, yb));
        return o;
    }
    GateResult judge(const ProbeOutcome& o) const { return res02().judge(c, kSettings, {o}); }
};

TEST(Res02, Plan) {
    Res02Case t;
    EXPECT_EQ(res02().plan(t.c, kSettings).size(), 1u);
    EXPECT_EQ(t.probe.id, "RES-02/launches");
    ASSERT_EQ(t.probe.calls.size(), 3u);
    EXPECT_EQ(t.probe.calls[0].input_seed, t.probe.calls[1].input_seed);
    EXPECT_NE(t.probe.calls[0].input_seed, t.probe.calls[2].input_seed);
    for (size_t i = 0; i < 3; ++i)
        for (size_t j = 0; j < i; ++j)
            EXPECT_FALSE(same_poison(t.probe.calls[i].output_poison, t.probe.calls[j].output_poison)) << i << j;
}

TEST(Res02, LaunchesSucceedPass) {
    Res02Case t;
    const GateResult r = t.judge(t.run(t.a, t.a, t.b));
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_TRUE(r.detail.at("resources").is_string());
}

TEST(Res02, FailedLaunchFailsAndStaleLookingOutputIsNamed) {
    Res02Case t;
    // The repeat of A fails to launch and leaves the kept result of the first call.
    ProbeOutcome o = t.run(t.a, t.a, t.b);
    o.calls[1].facts.status = 700;
    o.calls[1].facts.error = "too many resources requested for launch";
    GateResult r = t.judge(o);
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"launch-error"});
    ASSERT_EQ(r.evidence.size(), 1u);
    EXPECT_NE(r.evidence[0].signature.find("stale output after failed launch"), std::string::npos);
    EXPECT_NE(r.evidence[0].signature.find("too many resources"), std::string::npos);
    EXPECT_TRUE(r.evidence[0].detail.at("output_passes_ord01").get<bool>());
    EXPECT_EQ(r.evidence[0].detail.at("call").get<int>(), 1);

    // B fails and leaves A's result: a launch error, but nothing that looks right.
    o = t.run(t.a, t.a, t.a);
    o.calls[2].facts.status = 700;
    r = t.judge(o);
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    ASSERT_EQ(r.evidence.size(), 1u);
    EXPECT_EQ(r.evidence[0].signature.find("stale output"), std::string::npos);
    EXPECT_FALSE(r.evidence[0].detail.at("output_passes_ord01").get<bool>());
}

TEST(Res02, SilentFailureLeavesPoisonOrThePreviousResult) {
    Res02Case t;
    ProbeOutcome o = t.run(t.a, t.a, t.b);
    for (int64_t i = 0; i < 4; ++i) unwrite(o.calls[2].outputs[0], i, o.calls[2].spec.output_poison);
    GateResult r = t.judge(o);
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"launch-error"});
    EXPECT_NE(r.evidence[0].signature.find("wrote no element"), std::string::npos);

    // All but one element unwritten is a wrong result, not a failed launch.
    o = t.run(t.a, t.a, t.b);
    for (int64_t i = 1; i < 4; ++i) unwrite(o.calls[2].outputs[0], i, o.calls[2].spec.output_poison);
    EXPECT_EQ(t.judge(o).verdict, Verdict::pass);

    // B hands back A's result.
    r = t.judge(t.run(t.a, t.a, t.a));
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_NE(r.evidence[0].signature.find("result of call 1"), std::string::npos);

    // The same result is fine where the references round to the same values.
    Res02Case same;
    same.b = same.a;
    EXPECT_EQ(same.judge(same.run(same.a, same.a, same.a)).verdict, Verdict::pass);
}

TEST(Res02, ResourceBudgets) {
    Res02Case t;
    auto judge_with = [&](kcv_resources res) {
        ProbeOutcome o = t.run(t.a, t.a, t.b);
        o.resources = res;
        return t.judge(o);
    };
    const kcv_resources ok{128, 512, 49152, 232448 - 49152, 0, 512};
    GateResult r = judge_with(ok);
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_EQ(r.detail.at("resources").at("tmem_columns").get<int>(), 512);

    struct Over {
        kcv_resources res;
        const char* cls;
    };
    const Over over[] = {
        {{128, 512, 49152, 232448 - 49151, 0, 0}, "smem-budget"},
        {{256, 128, 0, 0, 0, 0}, "register-budget"},
        {{129, 512, 0, 0, 0, 0}, "register-budget"},
        {{64, 256, 0, 0, 0, 544}, "tmem-budget"},
        {{64, 256, 0, 0, 0, 48}, "tmem-budget"},
    };
    for (const auto& o : over) {
        r = judge_with(o.res);
        ASSERT_EQ(r.verdict, Verdict::fail) << o.cls << dump(r);
        EXPECT_EQ(r.signature, std::vector<std::string>{o.cls}) << dump(r);
    }
    // Unknown fields (-1) are not judged; spills are reported only.
    r = judge_with({-1, -1, -1, -1, 64, 0});
    EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
    EXPECT_TRUE(r.detail.contains("spill_note"));
}

// The Blackwell plan of the recurrence kernels (gdn/blackwell_plan.hpp) declares what its kernels
// would: RES-02's static rules check it, and a variant that double-buffers in tensor memory fails.
TEST(Res02, BlackwellRecurrencePlanFitsItsBudgets) {
    namespace bw = gdn::blackwell;
    static_assert(bw::tmem_columns_used(bw::kForward) == 448 && bw::tmem_columns_used(bw::kBackward) == 448);
    static_assert(bw::tmem_allocation(448) == 512 && bw::tmem_allocation(20) == 32 && bw::tmem_allocation(513) == 1024);
    static_assert(bw::smem_bytes(bw::kForward) == 196608 && bw::smem_bytes(bw::kBackward) == 196608);
    Res02Case t;
    auto judge_plan = [&](const bw::KernelPlan& plan) {
        ProbeOutcome o = t.run(t.a, t.a, t.b);
        o.resources = bw::resources(plan);
        return t.judge(o);
    };
    for (const bw::KernelPlan* plan : {&bw::kForward, &bw::kBackward}) {
        const GateResult r = judge_plan(*plan);
        EXPECT_EQ(r.verdict, Verdict::pass) << dump(r);
        EXPECT_EQ(r.detail.at("resources").at("tmem_columns").get<int>(), 512);
        EXPECT_EQ(r.detail.at("resources").at("threads_per_block").get<int>(), 384);
    }
    const bw::TmemTile doubled[] = {{"S", bw::kK, bw::kV},          {"delta, stage 0", bw::kChunk, bw::kV},
                                    {"delta, stage 1", bw::kChunk, bw::kV}, {"O, stage 0", bw::kChunk, bw::kV},
                                    {"O, stage 1", bw::kChunk, bw::kV},     {"P / A", bw::kChunk, bw::kChunk}};
    bw::KernelPlan over = bw::kForward;
    over.tiles = doubled;
    const GateResult r = judge_plan(over);
    ASSERT_EQ(r.verdict, Verdict::fail) << dump(r);
    EXPECT_EQ(r.signature, std::vector<std::string>{"tmem-budget"}) << dump(r);
}

}  // namespace
}  // namespace kcv
