// The tolerance-based gates (PRC-01, PRC-02, PRC-03, ORD-01, ORD-03, CMP-01, CMP-02) and the
// "ORD-01 holds" criterion, judged on hand-built probe outcomes: values are chosen so that every
// bound is computed exactly, so r = 1 passes and one ulp more fails, bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gates/gate_common.hpp"
#include "kcv/dtype.hpp"
#include "kcv/execution.hpp"
#include "kcv/oracle.hpp"
#include "kcv/rng.hpp"

namespace kcv {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor tensor_of(DType t, const std::vector<int64_t>& shape, const std::vector<double>& v) {
    Tensor x = Tensor::empty(t, shape);
    EXPECT_EQ(x.numel(), static_cast<int64_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i) x.set(static_cast<int64_t>(i), v[i]);
    return x;
}
Tensor vec(DType t, const std::vector<double>& v) { return tensor_of(t, {static_cast<int64_t>(v.size())}, v); }

// A row sum: x[M, K] -> y[M], fp32 throughout, K free.
Contract sum_contract() {
    Contract c;
    c.id = "test-sum";
    c.dims = {Dim{"M", 4, true, 1, 100}, Dim{"K", 64, true, 1, int64_t(1) << 20}};
    InputSpec x;
    x.name = "x";
    x.shape = {"M", "K"};
    c.inputs = {x};
    OutputSpec y;
    y.name = "y";
    y.shape = {"M"};
    y.model = ErrorModelKind::reduction;
    y.k = "K";
    c.outputs = {y};
    c.oracle = "sum";
    return c;
}

struct Out {
    std::vector<double> ystar, scale, y;
    DType dtype = DType::f32;
    std::vector<int64_t> shape = {};   // 1-D of the values' length when empty
};

ProbeOutcome outcome(const std::string& id, const std::vector<Out>& outs, const std::vector<int64_t>& k,
                     nlohmann::json note = nullptr) {
    ProbeOutcome o;
    o.probe.id = id;
    o.probe.gate = id.substr(0, id.find('/'));
    o.probe.note = std::move(note);
    o.probe.calls.resize(1);
    o.k = k;
    CallOutcome co;
    for (const Out& v : outs) {
        const std::vector<int64_t> shape = v.shape.empty() ? std::vector<int64_t>{int64_t(v.ystar.size())} : v.shape;
        o.output_shapes.push_back(shape);
        co.reference.push_back(tensor_of(DType::f64, shape, v.ystar));
        co.scale.push_back(tensor_of(DType::f64, shape, v.scale));
        co.outputs.push_back(tensor_of(v.dtype, shape, v.y));
    }
    o.calls.push_back(std::move(co));
    return o;
}

// One f32 element with y* = 1, s = 1.125 and K = 4: τ = 4·2^-24·2·1.125 + 2^-24 = 5·2^-23 exactly
// (ulp_f32(min normal) = 2^-149 is below half an ulp of the sum), so `ulps` ulps of 1 above y*
// give r = ulps / 5.
ProbeOutcome ulps_outcome(const std::string& id, int ulps, nlohmann::json note = nullptr) {
    return outcome(id, {{{1.0}, {1.125}, {1.0 + ulps * 0x1p-23}}}, {4}, std::move(note));
}

std::set<std::string> ids_of(const std::vector<Probe>& ps) {
    std::set<std::string> ids;
    for (const Probe& p : ps) ids.insert(p.id);
    return ids;
}

// ------------------------------------------------------------------------------------------
// check_outputs

TEST(CheckOutputs, RatioExactlyOnePassesOneUlpMoreFails) {
    const Contract c = sum_contract();
    const Settings s;
    gates::NumericCheck nc = gates::check_outputs(c, s, ulps_outcome("ORD-01/t", 5));
    EXPECT_TRUE(nc.pass);
    EXPECT_EQ(nc.r, 1.0);
    EXPECT_EQ(nc.model, "analytic");
    // Evidence is filled on a pass too, with the model's numbers.
    EXPECT_EQ(nc.evidence.detail["tau"].get<double>(), 5 * 0x1p-23);
    EXPECT_EQ(nc.evidence.detail["k"].get<int64_t>(), 4);

    nc = gates::check_outputs(c, s, ulps_outcome("ORD-01/t", 6));
    EXPECT_FALSE(nc.pass);
    EXPECT_EQ(nc.r, 1.2);
    const Evidence& e = nc.evidence;
    EXPECT_EQ(e.probe, "ORD-01/t");
    EXPECT_EQ(e.output, "y");
    EXPECT_EQ(e.worst_index, 0);
    EXPECT_EQ(e.first_index, 0);
    EXPECT_EQ(e.worst_coords, std::vector<int64_t>{0});
    EXPECT_EQ(e.expected, 1.0);
    EXPECT_EQ(e.expected_bits, "0x3f800000");
    EXPECT_EQ(e.actual, 1.0 + 6 * 0x1p-23);
    EXPECT_EQ(e.actual_bits, "0x3f800006");
    EXPECT_EQ(e.ratio, 1.2);
    EXPECT_NE(e.signature.find("r = 1.2 > 1 at y[0]"), std::string::npos) << e.signature;
    EXPECT_EQ(e.detail["err"].get<double>(), 6 * 0x1p-23);
    EXPECT_EQ(e.detail["model"], "analytic");
}

TEST(CheckOutputs, UsesTheOutcomesKAndTheSettingsConstant) {
    const Contract c = sum_contract();
    // K = 16 instead of 4: τ = 4·2^-24·4·1.125 + 2^-24 = 19·2^-24; 6 ulps = 12·2^-24 pass.
    ProbeOutcome o = ulps_outcome("ORD-01/t", 6);
    o.k = {16};
    EXPECT_TRUE(gates::check_outputs(c, Settings{}, o).pass);
    // c = 2 at K = 4: τ = 2^-24·(2·2·1.125) + 2^-24 = 5.5·2^-24: 3 ulps (6·2^-24) fail.
    Settings s;
    s.c = 2;
    EXPECT_FALSE(gates::check_outputs(c, s, ulps_outcome("ORD-01/t", 3)).pass);
    EXPECT_TRUE(gates::check_outputs(c, s, ulps_outcome("ORD-01/t", 2)).pass);
}

TEST(CheckOutputs, NanWhereReferenceFiniteFails) {
    const Contract c = sum_contract();
    const ProbeOutcome o = outcome("ORD-01/nan", {{{1, 2, 3}, {1, 2, 3}, {1, 2, kNaN}}}, {4});
    const gates::NumericCheck nc = gates::check_outputs(c, Settings{}, o);
    EXPECT_FALSE(nc.pass);
    EXPECT_TRUE(std::isnan(nc.r));
    EXPECT_EQ(nc.evidence.worst_index, 2);
    EXPECT_EQ(nc.evidence.actual_bits, "0x7fc00000");
    EXPECT_EQ(nc.evidence.expected, 3.0);
    EXPECT_EQ(nc.evidence.signature.rfind("nan where y* is finite", 0), 0u) << nc.evidence.signature;
}

TEST(CheckOutputs, InfReferenceIsNotPartOfR) {
    const Contract c = sum_contract();
    ProbeOutcome o = outcome("ORD-01/inf", {{{kInf, -kInf, 1}, {kInf, kInf, 1}, {0, kNaN, 1}}}, {4});
    gates::NumericCheck nc = gates::check_outputs(c, Settings{}, o);
    EXPECT_TRUE(nc.pass);
    EXPECT_EQ(nc.r, 0.0);
    EXPECT_EQ(nc.evidence.detail["compared"].get<int64_t>(), 1);
    // A finite y* with an infinite y is a failure with r = Inf.
    o = outcome("ORD-01/inf", {{{kInf, 1}, {kInf, 1}, {kInf, -kInf}}}, {4});
    nc = gates::check_outputs(c, Settings{}, o);
    EXPECT_FALSE(nc.pass);
    EXPECT_EQ(nc.r, kInf);
    EXPECT_EQ(nc.evidence.worst_index, 1);
    EXPECT_EQ(nc.evidence.signature.rfind("inf where y* is finite", 0), 0u) << nc.evidence.signature;
}

TEST(CheckOutputs, ReportsTheWorstOutputWithCoordinates) {
    Contract c = sum_contract();
    OutputSpec z = c.outputs[0];
    z.name = "z";
    z.shape = {"M", "K"};
    c.outputs.push_back(z);
    // y: 4 ulps (r = 0.8, passes); z[1,1] (logical 4): 10 ulps, r = 2.
    Out y{{1.0}, {1.125}, {1.0 + 4 * 0x1p-23}};
    Out zz{{1, 1, 1, 1, 1, 1}, {1.125, 1.125, 1.125, 1.125, 1.125, 1.125},
           {1, 1, 1, 1, 1.0 + 10 * 0x1p-23, 1.0 + 7 * 0x1p-23}, DType::f32, {2, 3}};
    gates::NumericCheck nc = gates::check_outputs(c, Settings{}, outcome("ORD-01/two", {y, zz}, {4, 4}));
    EXPECT_FALSE(nc.pass);
    EXPECT_EQ(nc.output, 1u);
    EXPECT_EQ(nc.r, 2.0);
    EXPECT_EQ(nc.evidence.output, "z");
    EXPECT_EQ(nc.evidence.worst_coords, (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(nc.evidence.first_coords, (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(nc.evidence.detail["violations"].get<int64_t>(), 2);
    EXPECT_NE(nc.evidence.signature.find("z[1,1]"), std::string::npos) << nc.evidence.signature;
    // Both within bounds: the larger r is reported, and the check passes.
    zz.y = {1, 1, 1, 1, 1, 1.0 + 1 * 0x1p-23};
    nc = gates::check_outputs(c, Settings{}, outcome("ORD-01/two", {y, zz}, {4, 4}));
    EXPECT_TRUE(nc.pass);
    EXPECT_EQ(nc.output, 0u);
    EXPECT_EQ(nc.r, 0.8);
}

TEST(CheckOutputs, IntegerOutputsMustBeExact) {
    Contract c = sum_contract();
    c.outputs[0].dtype = DType::i64;
    c.oracle = "argmax";
    ProbeOutcome o = outcome("ORD-01/argmax", {{{3, 0, 7}, {0, 0, 0}, {3, 0, 7}, DType::i64}}, {64});
    EXPECT_TRUE(gates::check_outputs(c, Settings{}, o).pass);
    o = outcome("ORD-01/argmax", {{{3, 0, 7}, {0, 0, 0}, {3, 1, 7}, DType::i64}}, {64});
    const gates::NumericCheck nc = gates::check_outputs(c, Settings{}, o);
    EXPECT_FALSE(nc.pass);
    EXPECT_EQ(nc.r, kInf);
    EXPECT_EQ(nc.evidence.worst_index, 1);
}

Contract envelope_contract() {
    Contract c = sum_contract();
    c.outputs[0].model = ErrorModelKind::envelope;
    c.controls = {"ctrl_a", "ctrl_b"};
    return c;
}

// y* = {1, 0.5}: max|y*| + 2^-126 rounds to 1, so err is the largest absolute difference.
ProbeOutcome envelope_outcome(double cand_err, double ctrl_a_err, double ctrl_b_err) {
    ProbeOutcome o = outcome("ORD-01/env", {{{1, 0.5}, {1, 0.5}, {1, 0.5 + cand_err}}}, {64});
    o.probe.with_controls = true;
    CallOutcome& co = o.calls[0];
    co.controls = {{vec(DType::f32, {1, 0.5 - ctrl_a_err})}, {vec(DType::f32, {1 + ctrl_b_err, 0.5})}};
    co.control_status = {0, 0};
    return o;
}

TEST(CheckOutputs, EnvelopeModelAgainstTheWorstControl) {
    const Contract c = envelope_contract();
    // err = 2^-6 against 2 · max(2^-7, 2^-9): r = 1 exactly.
    gates::NumericCheck nc = gates::check_outputs(c, Settings{}, envelope_outcome(0x1p-6, 0x1p-7, 0x1p-9));
    EXPECT_TRUE(nc.pass);
    EXPECT_EQ(nc.r, 1.0);
    EXPECT_EQ(nc.model, "envelope");
    nc = gates::check_outputs(c, Settings{}, envelope_outcome(0x1p-6 + 0x1p-12, 0x1p-9, 0x1p-7));
    EXPECT_FALSE(nc.pass);
    EXPECT_EQ(nc.r, (0x1p-6 + 0x1p-12) / 0x1p-6);
    EXPECT_EQ(nc.evidence.worst_index, 1);
    EXPECT_EQ(nc.evidence.detail["err_controls"][1].get<double>(), 0x1p-7);
    // Controls more accurate than the output dtype: the floor u(out) = 2^-24 stands in.
    nc = gates::check_outputs(c, Settings{}, envelope_outcome(0x1p-23, 0, 0));
    EXPECT_EQ(nc.r, 1.0);
    nc = gates::check_outputs(c, Settings{}, envelope_outcome(kNaN, 0x1p-7, 0x1p-7));
    EXPECT_FALSE(nc.pass);
    EXPECT_TRUE(std::isnan(nc.r));
}

TEST(CheckOutputs, EnvelopeWithoutUsableControlsIsAVerifierError) {
    const Contract c = envelope_contract();
    ProbeOutcome o = envelope_outcome(0, 0, 0);
    o.calls[0].controls.clear();
    o.calls[0].control_status.clear();
    EXPECT_THROW(gates::check_outputs(c, Settings{}, o), std::runtime_error);
    o = envelope_outcome(0, 0, 0);
    o.calls[0].control_status[1] = 3;
    EXPECT_THROW(gates::check_outputs(c, Settings{}, o), std::runtime_error);
    o = envelope_outcome(0, kNaN, 0);
    EXPECT_THROW(gates::check_outputs(c, Settings{}, o), std::runtime_error);
    Contract none = c;
    none.controls.clear();
    EXPECT_THROW(gates::check_outputs(none, Settings{}, envelope_outcome(0, 0, 0)), std::runtime_error);
}

TEST(CheckOutputs, MissingReferenceOrCallThrows) {
    const Contract c = sum_contract();
    ProbeOutcome o = ulps_outcome("ORD-01/t", 0);
    EXPECT_THROW(gates::check_outputs(c, Settings{}, o, 1), std::out_of_range);
    o.calls[0].reference.clear();
    o.calls[0].reference_error = "index out of range";
    EXPECT_THROW(gates::check_outputs(c, Settings{}, o), std::runtime_error);
}

// ------------------------------------------------------------------------------------------
// ORD-01

TEST(Ord01, PlansAtLeastFiveSeededProbesOnTwoFamilies) {
    const Contract c = sum_contract();
    Settings s;
    s.seed = 7;
    for (int seeds : {1, 3, 5, 8}) {
        Contract cc = c;
        cc.measurement.seeds = seeds;
        const std::vector<Probe> ps = gates::ord01().plan(cc, s);
        EXPECT_GE(ps.size(), 5u);
        EXPECT_EQ(ids_of(ps).size(), ps.size());
        int task = 0, normal = 0;
        std::set<uint64_t> input_seeds;
        for (const Probe& p : ps) {
            EXPECT_EQ(p.gate, "ORD-01");
            EXPECT_EQ(p.id.rfind("ORD-01/", 0), 0u);
            EXPECT_EQ(p.dims, nominal_dims(cc));
            ASSERT_EQ(p.calls.size(), 1u);
            input_seeds.insert(p.calls[0].input_seed);
            task += p.family.kind == Family::Kind::task;
            normal += p.family.kind == Family::Kind::signed_normal;
        }
        EXPECT_EQ(task, seeds);
        EXPECT_GE(normal, 2);
        EXPECT_EQ(input_seeds.size(), ps.size());
    }
    // Seeds derive from the master seed.
    Settings other = s;
    other.seed = 8;
    EXPECT_NE(gates::ord01().plan(c, s)[0].calls[0].input_seed, gates::ord01().plan(c, other)[0].calls[0].input_seed);
    EXPECT_EQ(gates::ord01().not_applicable(c), "");
}

TEST(Ord01, JudgePassFailAndClasses) {
    const Contract c = sum_contract();
    const Settings s;
    GateResult r = gates::ord01().judge(c, s, {ulps_outcome("ORD-01/a", 2), ulps_outcome("ORD-01/b", 5)});
    EXPECT_EQ(r.verdict, Verdict::pass);
    EXPECT_EQ(r.metric, 1.0);
    EXPECT_EQ(r.probes, 2);
    EXPECT_TRUE(r.evidence.empty());

    r = gates::ord01().judge(c, s, {ulps_outcome("ORD-01/a", 2), ulps_outcome("ORD-01/b", 10), ulps_outcome("ORD-01/c", 6)});
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.id, "ORD-01");
    EXPECT_EQ(r.metric, 2.0);
    ASSERT_EQ(r.evidence.size(), 2u);
    EXPECT_EQ(r.evidence[0].probe, "ORD-01/b");
    EXPECT_EQ(r.evidence[1].probe, "ORD-01/c");
    EXPECT_EQ(r.signature, std::vector<std::string>{"error-bound"});
    EXPECT_EQ(r.detail["worst_probe"], "ORD-01/b");

    ProbeOutcome nan = outcome("ORD-01/nan", {{{1}, {1}, {kNaN}}}, {4});
    r = gates::ord01().judge(c, s, {ulps_outcome("ORD-01/a", 10), nan});
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_TRUE(std::isnan(r.metric));
    EXPECT_EQ(r.signature, (std::vector<std::string>{"error-bound", "nonfinite-output"}));
}

TEST(Ord01, LaunchErrorsAndUnrunnableProbes) {
    const Contract c = sum_contract();
    ProbeOutcome bad = ulps_outcome("ORD-01/a", 0);
    bad.calls[0].facts.status = 4;
    bad.calls[0].facts.error = "too many blocks";
    GateResult r = gates::ord01().judge(c, Settings{}, {bad});
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.signature, std::vector<std::string>{"launch-error"});
    ASSERT_EQ(r.evidence.size(), 1u);
    EXPECT_NE(r.evidence[0].signature.find("status 4: too many blocks"), std::string::npos);

    ProbeOutcome broken;
    broken.probe.id = "ORD-01/x";
    broken.error = "oracle exploded";
    r = gates::ord01().judge(c, Settings{}, {ulps_outcome("ORD-01/a", 0), broken});
    EXPECT_EQ(r.verdict, Verdict::error);
}

// ------------------------------------------------------------------------------------------
// CMP-01

std::vector<int64_t> values_of(const std::vector<Probe>& ps, const std::string& dim) {
    std::vector<int64_t> v;
    for (const Probe& p : ps)
        if (p.id.rfind("CMP-01/" + dim + "=", 0) == 0 && p.prime_dims.empty()) v.push_back(p.dims.at(dim));
    return v;
}

TEST(Cmp01, SweepsEachFreeDimWithinDomainAndMemoryCap) {
    Contract c = sum_contract();
    // x is M·K fp32, y is M fp32: at M = 4, K = 4097 that is 65568 bytes, K = 1000 16016.
    c.measurement.memory_cap_bytes = 20000;
    const std::vector<Probe> ps = gates::cmp01().plan(c, Settings{});
    EXPECT_EQ(values_of(ps, "M"), (std::vector<int64_t>{1, 2, 3, 15, 16, 17, 63, 64, 65}));
    EXPECT_EQ(values_of(ps, "K"), (std::vector<int64_t>{1, 2, 3, 15, 16, 17, 63, 65, 127, 128, 129, 1000}));
    EXPECT_EQ(ids_of(ps).size(), ps.size());
    for (const Probe& p : ps) {
        // One dimension at a time, the other nominal.
        EXPECT_TRUE(p.dims.at("M") == 4 || p.dims.at("K") == 64) << p.id;
        if (!p.prime_dims.empty()) continue;
        EXPECT_EQ(p.id, "CMP-01/" + std::string(p.dims.at("M") != 4 ? "M=" + std::to_string(p.dims.at("M"))
                                                                      : "K=" + std::to_string(p.dims.at("K"))));
    }
    Settings quick;
    quick.quick = true;
    const std::vector<Probe> q = gates::cmp01().plan(c, quick);
    EXPECT_EQ(values_of(q, "M"), (std::vector<int64_t>{1, 17, 65}));
    EXPECT_EQ(values_of(q, "K"), (std::vector<int64_t>{1, 17, 65, 129}));
}

// Per free dimension, the sizes next to the nominal one once more, each served by an instance
// first called at the nominal shape; the priming call has a seed of its own.
TEST(Cmp01, SizesNextToTheNominalAreProbedAgainAfterANominalCall) {
    Contract c = sum_contract();
    c.measurement.memory_cap_bytes = 20000;
    std::vector<Probe> primed;
    for (Probe& p : gates::cmp01().plan(c, Settings{}))
        if (!p.prime_dims.empty()) primed.push_back(p);
    ASSERT_EQ(primed.size(), 4u);
    EXPECT_EQ(primed[0].id, "CMP-01/M=3/after-M=4");
    EXPECT_EQ(primed[1].id, "CMP-01/M=15/after-M=4");
    EXPECT_EQ(primed[2].id, "CMP-01/K=63/after-K=64");
    EXPECT_EQ(primed[3].id, "CMP-01/K=65/after-K=64");
    EXPECT_EQ(primed[1].dims, (DimValues{{"K", 64}, {"M", 15}}));
    EXPECT_EQ(primed[3].note.value("signature_class", ""), "fails at K=65 after a call at K=64");
    for (const Probe& p : primed) {
        EXPECT_EQ(p.prime_dims, nominal_dims(c)) << p.id;
        EXPECT_NE(p.prime_seed, p.calls.front().input_seed) << p.id;
    }
    // A nominal size past the sweep has a lower neighbour only.
    for (Dim& d : c.dims)
        if (d.name == "M") d.nominal = 5000, d.max = 10000;
    c.measurement.memory_cap_bytes = 1 << 30;
    std::vector<std::string> ids;
    for (Probe& p : gates::cmp01().plan(c, Settings{}))
        if (!p.prime_dims.empty() && p.dims.at("K") == 64) ids.push_back(p.id);
    EXPECT_EQ(ids, (std::vector<std::string>{"CMP-01/M=4097/after-M=5000"}));
}

namespace {

// relu that takes its element count from the first call it serves, as a kernel that sizes a
// buffer or a grid once would: right at every shape as long as it is the first.
class FirstShapeRelu final : public Backend {
public:
    std::string name() const override { return "first-shape-relu"; }
    int call(const Contract&, std::vector<Tensor>& in, std::vector<Tensor>& out, std::string*) override {
        if (!n_) n_ = in[0].numel();
        for (int64_t i = 0; i < std::min(*n_, in[0].numel()); ++i) {
            const double x = in[0].get(i);
            out[0].set(i, x > 0.0 || x != x ? x : 0.0);
        }
        return 0;
    }

private:
    std::optional<int64_t> n_;
};

}  // namespace

// CMP-01's second call of one instance: the size probe alone passes on a fresh instance, the
// primed probe of the same size fails on a fresh instance, and replays on its own.
TEST(Cmp01, ACandidateSizedByItsFirstCallFailsThePrimedProbe) {
    const Contract c = resolve_contract("relu-f32");
    const std::vector<Probe> plan = gates::cmp01().plan(c, Settings{});
    auto find = [&](const std::string& id) {
        for (const Probe& p : plan)
            if (p.id == id) return p;
        throw std::runtime_error("no probe " + id);
    };
    const Probe primed = find("CMP-01/N=1000/after-N=1024");
    const Probe plain = find("CMP-01/N=1000");
    const Probe above = find("CMP-01/N=4097/after-N=1024");
    auto judged = [&](const Probe& p) {
        FirstShapeRelu fresh;
        const ProbeOutcome o = execute(ExecContext{c, fresh, {}}, p);
        return gates::cmp01().judge(c, Settings{}, {o});
    };
    EXPECT_EQ(judged(plain).verdict, Verdict::pass);
    EXPECT_EQ(judged(primed).verdict, Verdict::pass);   // 1000 < 1024 elements per row: still covered
    const GateResult r = judged(above);
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.signature, (std::vector<std::string>{"fails at N=4097 after a call at N=1024"}));
    EXPECT_EQ(judged(probe_from_json(to_json(above))).verdict, Verdict::fail);
    EXPECT_EQ(judged(find("CMP-01/N=4097")).verdict, Verdict::pass);
}

TEST(Cmp01, LayoutProbesOnlyForStridedInterfaces) {
    Contract c = sum_contract();
    EXPECT_EQ(gates::cmp01().plan(c, Settings{}).size(), 9u + 2u + 13u + 2u);
    c.semantics.strided_inputs = true;
    const std::vector<Probe> ps = gates::cmp01().plan(c, Settings{});
    ASSERT_EQ(ps.size(), 9u + 2u + 13u + 2u + 3u);
    EXPECT_EQ(ps[26].id, "CMP-01/layout=transposed");
    EXPECT_EQ(ps[26].layout.kind, Layout::Kind::transposed);
    EXPECT_EQ(ps[27].id, "CMP-01/layout=strided");
    EXPECT_EQ(ps[27].layout.kind, Layout::Kind::strided);
    EXPECT_EQ(ps[28].id, "CMP-01/layout=offset1");
    EXPECT_EQ(ps[28].layout.storage_offset, 1);
    EXPECT_EQ(ps[28].dims, nominal_dims(c));

    Contract fixed = sum_contract();
    for (Dim& d : fixed.dims) d.free = false;
    EXPECT_NE(gates::cmp01().not_applicable(fixed), "");
    fixed.semantics.strided_inputs = true;
    EXPECT_EQ(gates::cmp01().not_applicable(fixed), "");
}

TEST(Cmp01, FailuresNameTheShape) {
    const Contract c = sum_contract();
    ProbeOutcome launch = ulps_outcome("CMP-01/M=1", 0, {{"signature_class", "fails at M=1"}});
    launch.calls[0].facts.status = 1;
    const GateResult r = gates::cmp01().judge(
        c, Settings{},
        {launch, ulps_outcome("CMP-01/K=16", 1, {{"signature_class", "fails at K=16"}}),
         ulps_outcome("CMP-01/K=17", 9, {{"signature_class", "fails at K=17"}}),
         ulps_outcome("CMP-01/layout=strided", 7, {{"signature_class", "layout strided"}})});
    EXPECT_EQ(r.id, "CMP-01");
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.signature, (std::vector<std::string>{"fails at M=1", "fails at K=17", "layout strided"}));
    EXPECT_EQ(r.evidence.size(), 3u);
    EXPECT_EQ(gates::cmp01().judge(c, Settings{}, {}).verdict, Verdict::na);
    EXPECT_EQ(gates::cmp01().judge(c, Settings{}, {ulps_outcome("CMP-01/K=16", 5)}).verdict, Verdict::pass);
}

// ------------------------------------------------------------------------------------------
// CMP-02

TEST(Cmp02, OneProbePerToggle) {
    const Contract c = sum_contract();
    const std::vector<Probe> ps = gates::cmp02().plan(c, Settings{});
    ASSERT_EQ(ps.size(), 4u);
    EXPECT_EQ(ps[0].id, "CMP-02/ftz");
    EXPECT_EQ(ps[0].calls.at(0).env, (Env{true, false, 0}));
    EXPECT_EQ(ps[1].id, "CMP-02/daz");
    EXPECT_EQ(ps[1].calls.at(0).env, (Env{false, true, 0}));
    EXPECT_EQ(ps[2].id, "CMP-02/threads=1");
    EXPECT_EQ(ps[2].calls.at(0).env.threads, 1);
    EXPECT_EQ(ps[3].id, "CMP-02/threads=3");
    EXPECT_EQ(ps[3].calls.at(0).env.threads, 3);
    for (const Probe& p : ps) EXPECT_EQ(p.family.kind, Family::Kind::signed_normal);
    // Inputs with a non-negative domain keep the task's distribution.
    Contract positive = c;
    positive.inputs[0].domain.lo = 0;
    EXPECT_EQ(gates::cmp02().plan(positive, Settings{})[0].family.kind, Family::Kind::task);
}

TEST(Cmp02, FailureNamesTheToggle) {
    const Contract c = sum_contract();
    std::vector<ProbeOutcome> os;
    for (const Probe& p : gates::cmp02().plan(c, Settings{})) {
        os.push_back(ulps_outcome(p.id, p.id == "CMP-02/daz" ? 6 : 5, p.note));
    }
    GateResult r = gates::cmp02().judge(c, Settings{}, os);
    EXPECT_EQ(r.id, "CMP-02");
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.signature, std::vector<std::string>{"ambient-state: daz"});
    EXPECT_EQ(r.evidence.at(0).probe, "CMP-02/daz");
    os[1] = ulps_outcome("CMP-02/daz", 5, os[1].probe.note);
    EXPECT_EQ(gates::cmp02().judge(c, Settings{}, os).verdict, Verdict::pass);
}

// ------------------------------------------------------------------------------------------
// PRC-01

TEST(Prc01, SweepsKWithinDomainAndCap) {
    Contract c = sum_contract();
    std::vector<Probe> ps = gates::prc01().plan(c, Settings{});
    std::vector<std::string> ids;
    for (const Probe& p : ps) ids.push_back(p.id);
    EXPECT_EQ(ids, (std::vector<std::string>{"PRC-01/K=256/positive", "PRC-01/K=1024/positive",
                                             "PRC-01/K=4096/positive", "PRC-01/K=16384/positive",
                                             "PRC-01/K=16384/repeated"}));
    EXPECT_EQ(ps[1].dims.at("K"), 1024);
    EXPECT_EQ(ps[1].dims.at("M"), 4);
    EXPECT_EQ(ps[1].family.kind, Family::Kind::positive);
    EXPECT_EQ(ps[4].family.kind, Family::Kind::repeated);

    Settings quick;
    quick.quick = true;
    EXPECT_EQ(gates::prc01().plan(c, quick).size(), 3u);
    // x at M = 4, K = 4096 is 64 KiB + 16 bytes.
    c.measurement.memory_cap_bytes = 65536;
    ps = gates::prc01().plan(c, Settings{});
    ASSERT_EQ(ps.size(), 3u);
    EXPECT_EQ(ps[2].id, "PRC-01/K=1024/repeated");
    c.dims[1].max = 300;
    EXPECT_EQ(gates::prc01().plan(c, Settings{}).size(), 2u);
    // Fixed K: the nominal one.
    c.dims[1].free = false;
    ps = gates::prc01().plan(c, Settings{});
    ASSERT_EQ(ps.size(), 2u);
    EXPECT_EQ(ps[0].id, "PRC-01/nominal/positive");
    EXPECT_EQ(ps[0].dims.at("K"), 64);
}

TEST(Prc01, NotApplicableWithoutReduction) {
    Contract c = sum_contract();
    EXPECT_EQ(gates::prc01().not_applicable(c), "");
    c.outputs[0].k = "1";
    c.outputs[0].model = ErrorModelKind::elementwise;
    EXPECT_EQ(gates::prc01().not_applicable(c), "no reduction: K = 1");
    c.outputs[0].k = "4";
    EXPECT_EQ(gates::prc01().not_applicable(c), "");
}

// err/s = u·√K/4 at every K (s = 1, y* = 1), the drift of a recursive sum in a format of unit
// roundoff about u: slope 0.5, and the estimate 2√3·(err/s)/√K = u·2^-0.21 names that format.
std::vector<ProbeOutcome> growth_outcomes(int u_log2) {
    std::vector<ProbeOutcome> os;
    for (int64_t k : {256, 1024, 4096, 16384}) {
        const double err = std::ldexp(std::sqrt(double(k)), u_log2 - 2);
        os.push_back(outcome("PRC-01/K=" + std::to_string(k) + "/positive", {{{1}, {1}, {1 + err}}}, {k},
                             {{"fit", true}}));
    }
    os.push_back(outcome("PRC-01/K=16384/repeated", {{{1}, {1}, {1}}}, {16384}));
    return os;
}

TEST(Prc01, FailureFitsTheSlopeAndNamesTheAccumulator) {
    const Contract c = sum_contract();
    GateResult r = gates::prc01().judge(c, Settings{}, growth_outcomes(-11));
    EXPECT_EQ(r.id, "PRC-01");
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.detail["slope"].get<double>(), 0.5);
    EXPECT_NEAR(r.detail["implied_u_log2"].get<double>(), -13 + std::log2(2 * std::sqrt(3.0)), 1e-12);
    EXPECT_EQ(r.detail["implied_accumulator"], "f16");
    EXPECT_EQ(r.detail["declared_accumulator"], "f32");
    EXPECT_EQ(r.detail["points"].size(), 4u);
    EXPECT_EQ(r.signature, std::vector<std::string>{"implied-accumulator:f16"});
    ASSERT_EQ(r.evidence.size(), 4u);
    EXPECT_EQ(r.evidence[0].signature.rfind("implied accumulator f16", 0), 0u) << r.evidence[0].signature;
    EXPECT_NE(r.reason.find("K^0.50"), std::string::npos) << r.reason;

    r = gates::prc01().judge(c, Settings{}, growth_outcomes(-8));
    EXPECT_EQ(r.detail["implied_accumulator"], "bf16");
    EXPECT_EQ(r.signature, std::vector<std::string>{"implied-accumulator:bf16"});
}

// A split accumulation that is exact up to K = 256 and stagnates beyond (err/s = 1/2): the
// estimate comes from the smallest failing K, 1024, and names the coarsest format.
TEST(Prc01, EstimatesAtTheSmallestFailingK) {
    const Contract c = sum_contract();
    std::vector<ProbeOutcome> os;
    for (int64_t k : {256, 1024, 4096, 16384}) {
        os.push_back(outcome("PRC-01/K=" + std::to_string(k) + "/positive", {{{1}, {1}, {k == 256 ? 1.0 : 0.5}}}, {k},
                             {{"fit", true}}));
    }
    const GateResult r = gates::prc01().judge(c, Settings{}, os);
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.evidence.size(), 3u);
    EXPECT_EQ(r.detail["points"].size(), 3u);
    EXPECT_EQ(r.detail["slope"].get<double>(), 0.0);
    EXPECT_NEAR(r.detail["implied_u_log2"].get<double>(), std::log2(std::sqrt(3.0)) - 5, 1e-12);
    EXPECT_EQ(r.detail["implied_accumulator"], "bf16");
}

TEST(Prc01, PassesWithinTheDeclaredAccumulator) {
    const Contract c = sum_contract();
    // τ = 4·2^-24·√K + 2^-24; an error of 2^-26·√K is a sixteenth of the first term.
    const GateResult r = gates::prc01().judge(c, Settings{}, growth_outcomes(-24));
    EXPECT_EQ(r.verdict, Verdict::pass);
    EXPECT_GT(r.metric, 0.06);
    EXPECT_LE(r.metric, 0.0625);
    EXPECT_FALSE(r.detail.contains("implied_accumulator"));
}

// ------------------------------------------------------------------------------------------
// PRC-02

TEST(Prc02, PlansBandsOffsetLogitsAndNearMax) {
    Contract c = sum_contract();
    std::vector<Probe> ps = gates::prc02().plan(c, Settings{});
    std::vector<std::string> ids;
    for (const Probe& p : ps) ids.push_back(p.id);
    EXPECT_EQ(ids, (std::vector<std::string>{"PRC-02/band=1e1", "PRC-02/band=1e2", "PRC-02/band=1e3",
                                             "PRC-02/band=1e4", "PRC-02/offset=1e4"}));
    EXPECT_EQ(ps[2].family.kind, Family::Kind::band);
    EXPECT_EQ(ps[2].family.scale, 1e3);
    EXPECT_EQ(ps[4].family.kind, Family::Kind::offset);
    EXPECT_EQ(ps[4].family.scale, 1e4);

    c.oracle = "softmax";
    c.inputs[0].dtype = DType::f16;
    c.inputs[0].distribution = {"normal", 0.0, 2.0};
    ps = gates::prc02().plan(c, Settings{});
    ASSERT_EQ(ps.size(), 7u);
    EXPECT_EQ(ps[5].id, "PRC-02/logits=100");
    // N(0, 2²) reaches about 8: scaled by 12.5 it reaches about 100.
    EXPECT_EQ(ps[5].family.scale, 12.5);
    EXPECT_EQ(ps[6].id, "PRC-02/near_max");
    EXPECT_EQ(ps[6].family.kind, Family::Kind::near_max);

    c.inputs[0].index = true;
    EXPECT_NE(gates::prc02().not_applicable(c), "");
}

TEST(Prc02, ClassesAndSkips) {
    const Contract c = sum_contract();
    auto band = [](const std::string& label, const Out& v) {
        return outcome("PRC-02/" + label, {v}, {4}, {{"range", label}});
    };
    const Out fine{{1}, {1.125}, {1.0 + 5 * 0x1p-23}};
    // Reference non-finite, or beyond fp32's range: skipped whatever y is.
    const Out ref_inf{{kInf, 1}, {1, 1}, {kNaN, kNaN}};
    const Out ref_overflow{{1e39}, {1e39}, {0}};
    GateResult r = gates::prc02().judge(c, Settings{}, {band("band=1e1", fine), band("band=1e4", ref_inf),
                                                         band("offset=1e4", ref_overflow)});
    EXPECT_EQ(r.verdict, Verdict::pass);
    EXPECT_EQ(r.metric, 1.0);
    EXPECT_EQ(r.detail["judged"].get<int>(), 1);
    EXPECT_EQ(r.detail["skipped"].size(), 2u);
    EXPECT_TRUE(r.detail["skipped"].contains("PRC-02/band=1e4"));

    r = gates::prc02().judge(c, Settings{}, {band("band=1e4", ref_inf)});
    EXPECT_EQ(r.verdict, Verdict::na);

    const Out overflowed{{3e4, 1}, {3e4, 1}, {kInf, 1}};
    const Out blowup{{1}, {1.125}, {1.0 + 6 * 0x1p-23}};
    r = gates::prc02().judge(c, Settings{}, {band("band=1e2", blowup), band("band=1e3", overflowed)});
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.signature, (std::vector<std::string>{"error-blowup", "nonfinite-in-range"}));
    ASSERT_EQ(r.evidence.size(), 2u);
    EXPECT_EQ(r.evidence[0].signature.rfind("error-blowup at band=1e2: r = 1.2", 0), 0u) << r.evidence[0].signature;
    EXPECT_EQ(r.evidence[1].signature.rfind("nonfinite-in-range at band=1e3: inf", 0), 0u) << r.evidence[1].signature;
    EXPECT_EQ(r.evidence[1].worst_index, 0);
    EXPECT_EQ(r.metric, kInf);
}

// ------------------------------------------------------------------------------------------
// PRC-03

Contract matmul_contract(int64_t k) {
    Contract c;
    c.id = "test-matmul";
    c.dims = {Dim{"M", 8}, Dim{"N", 8}, Dim{"K", k, true, 1, int64_t(1) << 20}};
    InputSpec a;
    a.name = "a";
    a.shape = {"M", "K"};
    InputSpec b;
    b.name = "b";
    b.shape = {"K", "N"};
    c.inputs = {a, b};
    OutputSpec y;
    y.name = "y";
    y.shape = {"M", "N"};
    y.model = ErrorModelKind::reduction;
    y.k = "K";
    c.outputs = {y};
    c.oracle = "matmul";
    return c;
}

TEST(Prc03, ApplicabilityAndTheChosenK) {
    Contract c = matmul_contract(64);
    EXPECT_EQ(gates::prc03().not_applicable(c), "");
    std::vector<Probe> ps = gates::prc03().plan(c, Settings{});
    ASSERT_EQ(ps.size(), 3u);
    EXPECT_EQ(ps[0].id, "PRC-03/K=1024/random_mantissa/seed=0");
    EXPECT_EQ(ps[1].id, "PRC-03/K=1024/random_mantissa/seed=1");
    // The directed probe aims at the next format coarser than the one allowed.
    EXPECT_EQ(ps[2].id, "PRC-03/K=1024/below_half_unit:tf32");
    EXPECT_EQ(ps[2].family.kind, Family::Kind::below_half_unit);
    EXPECT_EQ(ps[2].family.scale, 11);
    Contract t = c;
    t.semantics.tf32_operands = true;
    EXPECT_EQ(gates::prc03().plan(t, Settings{})[2].id, "PRC-03/K=1024/below_half_unit:bf16");
    t.semantics.bf16_operands = true;
    EXPECT_EQ(gates::prc03().plan(t, Settings{})[2].family.scale, 4) << "e4m3 below bf16";
    // Its values: positive, exact in tf32, and rounded to bf16 always downward by 3/8 of a unit.
    Tensor x = Tensor::empty(DType::f32, {4096});
    fill(x, c.inputs[0], Family::of(Family::Kind::below_half_unit, 8), 5);
    for (int64_t i = 0; i < x.numel(); ++i) {
        const double v = x.get(i);
        ASSERT_GT(v, 0) << i;
        ASSERT_EQ(round_to(DType::tf32, v), v) << i;
        const double unit = std::ldexp(1.0, std::ilogb(v) - 7);
        ASSERT_EQ(v - round_to(DType::bf16, v), 0.375 * unit) << i;
    }
    EXPECT_EQ(ps[0].dims.at("K"), 1024);
    EXPECT_EQ(ps[0].family.kind, Family::Kind::random_mantissa);
    EXPECT_NE(ps[0].calls[0].input_seed, ps[1].calls[0].input_seed);
    // Nothing of at least 1024 fits the domain: the largest that does.
    c.dims[2].max = 1000;
    EXPECT_EQ(gates::prc03().plan(c, Settings{})[0].id, "PRC-03/K=256/random_mantissa/seed=0");
    c.dims[2].free = false;
    EXPECT_EQ(gates::prc03().plan(c, Settings{})[0].id, "PRC-03/K=64/random_mantissa/seed=0");

    Contract bf = matmul_contract(64);
    bf.inputs[0].dtype = bf.inputs[1].dtype = DType::bf16;
    EXPECT_EQ(gates::prc03().not_applicable(bf), "no fp32 operand");
    Contract relu = matmul_contract(64);
    relu.outputs[0].model = ErrorModelKind::elementwise;
    EXPECT_NE(gates::prc03().not_applicable(relu), "");
}

// Random fp32 operands: random sign, all 24 significand bits, exponent in [-4, 4].
Tensor random_operand(const std::vector<int64_t>& shape, uint64_t seed) {
    Tensor t = Tensor::empty(DType::f32, shape);
    const CounterRng rng(seed, 0);
    for (int64_t i = 0; i < t.numel(); ++i) {
        const double m = 1 + double(rng.integer(3 * i, 0, (1 << 23) - 1)) * 0x1p-23;
        const double v = std::ldexp(m, int(rng.integer(3 * i + 1, -4, 4)));
        t.set(i, rng.integer(3 * i + 2, 0, 1) ? v : -v);
    }
    return t;
}

Tensor rounded(const Tensor& x, DType t) {
    Tensor r = Tensor::empty(DType::f32, x.shape);
    for (int64_t i = 0; i < x.numel(); ++i) r.set(i, round_to(t, x.get(i)));
    return r;
}

// The candidate: the exact product of operands rounded to `operands`, rounded to f32 (what an
// fp32-accumulating kernel on TF32 or bf16 operands returns, up to its own accumulation error).
ProbeOutcome matmul_outcome(const Contract& c, DType operands, uint64_t seed) {
    const std::map<std::string, double> attrs;
    const std::vector<std::vector<int64_t>> shapes = {{8, 8}};
    ProbeOutcome o;
    o.probe.id = "PRC-03/K=1024/random_mantissa/seed=0";
    o.output_shapes = shapes;
    o.k = {1024};
    CallOutcome co;
    co.inputs = {random_operand({8, 1024}, seed), random_operand({1024, 8}, seed + 1)};
    run_oracle(c.oracle, co.inputs, attrs, shapes, co.reference, co.scale);
    std::vector<Tensor> ref, scale;
    run_oracle(c.oracle, {rounded(co.inputs[0], operands), rounded(co.inputs[1], operands)}, attrs, shapes, ref, scale);
    Tensor y = Tensor::empty(DType::f32, {8, 8});
    for (int64_t i = 0; i < y.numel(); ++i) y.set(i, ref[0].get(i));
    co.outputs = {y};
    o.calls.push_back(std::move(co));
    return o;
}

TEST(Prc03, NamesTheRoundedOperandFormat) {
    const uint64_t seed = 31337;
    Contract c = matmul_contract(1024);
    GateResult r = gates::prc03().judge(c, Settings{}, {matmul_outcome(c, DType::f32, seed)});
    EXPECT_EQ(r.verdict, Verdict::pass) << "seed " << seed << ": " << r.reason;

    r = gates::prc03().judge(c, Settings{}, {matmul_outcome(c, DType::tf32, seed)});
    EXPECT_EQ(r.id, "PRC-03");
    ASSERT_EQ(r.verdict, Verdict::fail) << "seed " << seed << ": " << r.reason;
    EXPECT_EQ(r.signature, std::vector<std::string>{"operands-rounded:tf32"}) << r.reason;
    EXPECT_LE(r.detail["rounded_operand_r"]["tf32"].get<double>(), 1.0);
    EXPECT_GT(r.detail["rounded_operand_r"]["bf16"].get<double>(), 1.0);

    r = gates::prc03().judge(c, Settings{}, {matmul_outcome(c, DType::bf16, seed)});
    ASSERT_EQ(r.verdict, Verdict::fail) << "seed " << seed;
    EXPECT_EQ(r.signature, std::vector<std::string>{"operands-rounded:bf16"}) << r.reason;

    // Declared tf32 operands: the bound gains 2·u(tf32)·s, so tf32 passes; fp8 operands still fail,
    // and only the coarser hypothesis (bf16) is tried.
    c.semantics.tf32_operands = true;
    r = gates::prc03().judge(c, Settings{}, {matmul_outcome(c, DType::tf32, seed)});
    EXPECT_EQ(r.verdict, Verdict::pass) << "seed " << seed << ": " << r.reason;
    EXPECT_EQ(r.detail["operands_allowed"], "tf32");
    r = gates::prc03().judge(c, Settings{}, {matmul_outcome(c, DType::e4m3, seed)});
    ASSERT_EQ(r.verdict, Verdict::fail) << "seed " << seed;
    EXPECT_EQ(r.signature, std::vector<std::string>{"operand-precision"}) << r.reason;
    EXPECT_FALSE(r.detail["rounded_operand_r"].contains("tf32"));
    EXPECT_TRUE(r.detail["rounded_operand_r"].contains("bf16"));
}

// ------------------------------------------------------------------------------------------
// Every gate judging "ORD-01 holds" runs the controls where an output uses the envelope model.

TEST(Plans, EnvelopeContractsRunTheControls) {
    Contract c = sum_contract();
    c.semantics.strided_inputs = true;
    const std::vector<const GateDef*> defs = {&gates::ord01(), &gates::cmp01(), &gates::cmp02(), &gates::prc01(),
                                              &gates::prc02()};
    for (const GateDef* g : defs) {
        for (const Probe& p : g->plan(c, Settings{})) EXPECT_FALSE(p.with_controls) << p.id;
    }
    c.outputs[0].model = ErrorModelKind::envelope;
    c.controls = {"ctrl"};
    for (const GateDef* g : defs) {
        const std::vector<Probe> ps = g->plan(c, Settings{});
        EXPECT_FALSE(ps.empty()) << g->id;
        for (const Probe& p : ps) EXPECT_TRUE(p.with_controls) << p.id;
    }
}

// ------------------------------------------------------------------------------------------
// ORD-03

TEST(Ord03, PlansTheOrd01ProbesWithControls) {
    Contract c = sum_contract();
    c.controls = {"ctrl"};
    Settings s;
    s.seed = 99;
    const std::vector<Probe> base = gates::ord01().plan(c, s);
    const std::vector<Probe> ps = gates::ord03().plan(c, s);
    ASSERT_EQ(ps.size(), base.size());
    for (size_t i = 0; i < ps.size(); ++i) {
        EXPECT_EQ(ps[i].gate, "ORD-03");
        EXPECT_EQ(ps[i].id, "ORD-03" + base[i].id.substr(6));
        EXPECT_TRUE(ps[i].with_controls);
        // The same inputs as ORD-01's.
        EXPECT_EQ(ps[i].calls.at(0).input_seed, base[i].calls.at(0).input_seed);
        EXPECT_EQ(ps[i].family.kind, base[i].family.kind);
    }
}

ProbeOutcome margin_outcome(double cand_err, double ctrl_err) {
    ProbeOutcome o = envelope_outcome(cand_err, ctrl_err, 0);
    o.probe.id = "ORD-03/task/seed=0";
    return o;
}

TEST(Ord03, MarginAgainstTheControlsEnvelope) {
    Contract c = sum_contract();
    c.controls = {"ctrl_a", "ctrl_b"};
    Settings s;
    // 1.125 · 2^-7 against 2^-7: within 1.2.
    GateResult r = gates::ord03().judge(c, s, {margin_outcome(0x1.2p-7, 0x1p-7)});
    EXPECT_EQ(r.verdict, Verdict::pass);
    EXPECT_EQ(r.metric, 1.125);
    // 1.25 fails at 1.2 and passes at exactly 1.25.
    r = gates::ord03().judge(c, s, {margin_outcome(0x1.4p-7, 0x1p-7)});
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.metric, 1.25);
    EXPECT_EQ(r.signature, std::vector<std::string>{"thin-margin"});
    ASSERT_EQ(r.evidence.size(), 1u);
    EXPECT_EQ(r.evidence[0].ratio, 1.25);
    EXPECT_EQ(r.evidence[0].worst_index, 1);
    EXPECT_EQ(r.evidence[0].detail["err_controls"][0].get<double>(), 0x1p-7);
    s.ord03_margin = 1.25;
    EXPECT_EQ(gates::ord03().judge(c, s, {margin_outcome(0x1.4p-7, 0x1p-7)}).verdict, Verdict::pass);
    // Controls better than the output dtype: one ulp, 2u(out) = 2^-23, is the envelope; a
    // candidate one ulp off passes, two ulps off fails.
    r = gates::ord03().judge(c, Settings{}, {margin_outcome(0x1p-23, 0)});
    EXPECT_EQ(r.metric, 1.0);
    EXPECT_EQ(r.verdict, Verdict::pass);
    r = gates::ord03().judge(c, Settings{}, {margin_outcome(0x1p-22, 0)});
    EXPECT_EQ(r.metric, 2.0);
    EXPECT_EQ(r.verdict, Verdict::fail);
    r = gates::ord03().judge(c, Settings{}, {margin_outcome(kNaN, 0x1p-7)});
    EXPECT_EQ(r.verdict, Verdict::fail);
}

// Within one ulp of the worst control passes at any margin: the order of a summation laid on an
// error both share. With ctrl_a two ulps (2^-22) off, a candidate three ulps off (1.5 times the
// envelope) passes even at margin 1, and one three and a half ulps off fails at 1.2 (1.75).
TEST(Ord03, OneUlpAboveTheWorstControlPassesAtAnyMargin) {
    Contract c = sum_contract();
    c.controls = {"ctrl_a", "ctrl_b"};
    GateResult r = gates::ord03().judge(c, Settings{}, {margin_outcome(0x1.8p-22, 0x1p-22)});
    EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
    EXPECT_EQ(r.metric, 1.0);
    EXPECT_EQ(r.detail["errors"][0]["ratio"].get<double>(), 1.0);
    Settings exact;
    exact.ord03_margin = 1.0;
    EXPECT_EQ(gates::ord03().judge(c, exact, {margin_outcome(0x1.8p-22, 0x1p-22)}).verdict, Verdict::pass);
    r = gates::ord03().judge(c, Settings{}, {margin_outcome(0x1.cp-22, 0x1p-22)});
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.metric, 1.75);
    ASSERT_EQ(r.evidence.size(), 1u);
    EXPECT_NE(r.evidence[0].signature.find("more than one ulp"), std::string::npos) << r.evidence[0].signature;
    // The leave-one-out ratios are judged alike: ctrl_a is two ulps above ctrl_b's zero.
    EXPECT_EQ(r.detail["errors"][0]["control_ratios"], nlohmann::json::array({2.0, 0.0}));
}

// A contract may declare a wider margin, calibrated against its own controls: the wider of the
// two judges, and the record says which the contract asked for.
TEST(Ord03, AContractsOwnMarginWidensTheSettingsOnly) {
    Contract c = sum_contract();
    c.controls = {"ctrl_a", "ctrl_b"};
    const ProbeOutcome o = margin_outcome(0x1.4p-7, 0x1p-7);   // ratio 1.25
    EXPECT_EQ(gates::ord03().judge(c, Settings{}, {o}).verdict, Verdict::fail);
    c.measurement.ord03_margin = 1.5;
    GateResult r = gates::ord03().judge(c, Settings{}, {o});
    EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
    EXPECT_EQ(r.detail["margin"].get<double>(), 1.5);
    EXPECT_EQ(r.detail["contract_margin"].get<double>(), 1.5);
    // Every call's and output's errors, the controls' too: how far the controls stray from each
    // other can be read from any candidate's record.
    ASSERT_EQ(r.detail["errors"].size(), 1u);
    const auto& e = r.detail["errors"][0];
    EXPECT_EQ(e["probe"], "ORD-03/task/seed=0");
    EXPECT_EQ(e["candidate"].get<double>(), 0x1.4p-7);
    EXPECT_EQ(e["controls"][0].get<double>(), 0x1p-7);
    EXPECT_EQ(e["controls"].size(), 2u);
    EXPECT_EQ(gates::ord03().judge(c, Settings{}, {margin_outcome(0x1.ap-7, 0x1p-7)}).verdict, Verdict::fail);
    // A setting wider still is taken; one narrower leaves the contract's.
    Settings wide;
    wide.ord03_margin = 2.0;
    EXPECT_EQ(gates::ord03().judge(c, wide, {margin_outcome(0x1.ep-7, 0x1p-7)}).verdict, Verdict::pass);
    Settings narrow;
    narrow.ord03_margin = 1.0;
    EXPECT_EQ(gates::ord03().judge(c, narrow, {o}).verdict, Verdict::pass);
}

// The record gives every output's ratio and each control's against the others alone, and a
// probe fails once yet is measured to its end: the call after its failing one is recorded too.
TEST(Ord03, RecordsEveryCallsRatiosAndTheControlsAgainstEachOther) {
    Contract c = sum_contract();
    c.controls = {"ctrl_a", "ctrl_b"};
    ProbeOutcome o = envelope_outcome(0x1.4p-7, 0x1p-7, 0x1p-8);   // 1.25 x the envelope 2^-7
    o.probe.id = "ORD-03/task/seed=0";
    o.calls.push_back(envelope_outcome(0x1p-8, 0x1p-7, 0x1p-8).calls[0]);   // 0.5 x
    GateResult r = gates::ord03().judge(c, Settings{}, {o});
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.reason.rfind("1 of 1 probes", 0), 0u) << r.reason;
    ASSERT_EQ(r.evidence.size(), 1u);
    EXPECT_EQ(r.metric, 1.25);
    ASSERT_EQ(r.detail["errors"].size(), 2u);
    const auto& failing = r.detail["errors"][0];
    EXPECT_EQ(failing["ratio"].get<double>(), 1.25);
    // ctrl_a's 2^-7 is twice ctrl_b's 2^-8, and ctrl_b half ctrl_a's.
    EXPECT_EQ(failing["control_ratios"], nlohmann::json::array({2.0, 0.5}));
    const auto& next = r.detail["errors"][1];
    EXPECT_EQ(next["call"].get<int>(), 1);
    EXPECT_EQ(next["ratio"].get<double>(), 0.5);
    EXPECT_EQ(next["control_ratios"], nlohmann::json::array({2.0, 0.5}));
    // A control below the floor is judged against the floor: 2^-23 for a float32 output.
    r = gates::ord03().judge(c, Settings{}, {margin_outcome(0x1p-8, 0x1p-22)});
    EXPECT_EQ(r.detail["errors"][0]["control_ratios"], nlohmann::json::array({2.0, 0.0}));
    // One control has no others to be judged against.
    c.controls = {"ctrl_a"};
    o = margin_outcome(0x1p-8, 0x1p-7);
    o.calls[0].controls.resize(1);
    o.calls[0].control_status.resize(1);
    r = gates::ord03().judge(c, Settings{}, {o});
    EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
    EXPECT_TRUE(r.detail["errors"][0]["control_ratios"].empty());
}

TEST(Ord03, NotApplicableWithoutUsableControls) {
    Contract c = sum_contract();
    EXPECT_EQ(gates::ord03().not_applicable(c), "the contract names no positive controls");
    c.controls = {"ctrl_a", "ctrl_b"};
    EXPECT_EQ(gates::ord03().not_applicable(c), "");
    ProbeOutcome o = margin_outcome(0, 0x1p-7);
    o.calls[0].control_status[0] = 2;
    EXPECT_EQ(gates::ord03().judge(c, Settings{}, {o}).verdict, Verdict::na);
    o = margin_outcome(0, kNaN);
    EXPECT_EQ(gates::ord03().judge(c, Settings{}, {o}).verdict, Verdict::na);
    o = margin_outcome(0, 0);
    o.calls[0].controls.clear();
    EXPECT_EQ(gates::ord03().judge(c, Settings{}, {o}).verdict, Verdict::na);
    Contract ints = c;
    ints.outputs[0].dtype = DType::i64;
    EXPECT_NE(gates::ord03().not_applicable(ints), "");
}

// A declared operand format is part of the error model, so every gate that judges "ORD-01 holds"
// admits it, not PRC-03 alone: a contract that allows tf32 operands and then failed a TF32 kernel
// in ORD-01 and PRC-01 (r = 7-8 at K = 1024 before) would be unsatisfiable.
TEST(OperandFormats, EveryAnalyticGateAdmitsTheDeclaredFormat) {
    Contract c = matmul_contract(1024);
    const std::vector<const GateDef*> gates = {&gates::ord01(), &gates::prc01(), &gates::prc03()};
    for (uint64_t seed : {31337u, 7u, 11u}) {
        c.semantics.tf32_operands = false;
        for (const GateDef* g : gates) {
            GateResult r = g->judge(c, Settings{}, {matmul_outcome(c, DType::tf32, seed)});
            EXPECT_EQ(r.verdict, Verdict::fail) << g->id << ", seed " << seed << ": " << r.reason;
        }
        c.semantics.tf32_operands = true;
        for (const GateDef* g : gates) {
            GateResult r = g->judge(c, Settings{}, {matmul_outcome(c, DType::tf32, seed)});
            EXPECT_EQ(r.verdict, Verdict::pass) << g->id << ", seed " << seed << ": " << r.reason;
            // A coarser rounding than the one declared still fails.
            r = g->judge(c, Settings{}, {matmul_outcome(c, DType::e4m3, seed)});
            EXPECT_EQ(r.verdict, Verdict::fail) << g->id << ", seed " << seed << ": " << r.reason;
        }
    }
}

}  // namespace
}  // namespace kcv
