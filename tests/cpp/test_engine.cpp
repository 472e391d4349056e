// The engine: sandboxed workers, verify() on misbehaving candidates, records and profiles,
// journals, corpora and shards, the command line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "engine/sandbox.hpp"
#include "kcv/aggregate.hpp"
#include "kcv/audit.hpp"
#include "kcv/execution.hpp"
#include "kcv/gate.hpp"
#include "kcv/oracle.hpp"
#include "kcv/probe.hpp"
#include "kcv/record.hpp"
#include "kcv/verify.hpp"

namespace fs = std::filesystem;
using namespace kcv;

namespace {

std::string bad_kernel(const std::string& stem) {
    return std::string(KCV_TEST_BAD_KERNEL_DIR) + "/kcv_test_" + stem + ".so";
}

VerifyOptions quick_options() {
    VerifyOptions o;
    o.settings.quick = true;
    o.kernel_dir = KCV_TEST_KERNEL_DIR;
    return o;
}

const GateResult& gate(const Record& r, const std::string& id) {
    for (const auto& g : r.gates) {
        if (g.id == id) return g;
    }
    throw std::runtime_error("no gate " + id + " in the record");
}

// Expects every gate of r to pass or be n/a (neither fail nor error), naming the gate, its reason
// and its first signature otherwise; returns how many passed, since an honest kernel must also
// actually be judged.
int expect_pass_or_na(const Record& r) {
    int passed = 0;
    for (const auto& g : r.gates) {
        EXPECT_TRUE(g.verdict == Verdict::pass || g.verdict == Verdict::na)
            << g.id << ": " << g.reason << (g.evidence.empty() ? "" : " / " + g.evidence.front().signature);
        passed += g.verdict == Verdict::pass;
    }
    return passed;
}

fs::path temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("kcv-test-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

}  // namespace

TEST(Sandbox, ReturnsWhatTheWorkerWrote) {
    SandboxResult r = run_sandboxed([] { return std::string(1 << 20, 'x') + "end"; }, 30);
    ASSERT_EQ(r.status, SandboxResult::Status::ok);
    EXPECT_EQ(r.output.size(), (1u << 20) + 3);
    EXPECT_EQ(r.output.substr(r.output.size() - 3), "end");
}

TEST(Sandbox, CrashBecomesAResult) {
    SandboxResult r = run_sandboxed(
        [] {
            raise(SIGSEGV);
            return std::string("unreachable");
        },
        30);
    EXPECT_EQ(r.status, SandboxResult::Status::crashed);
    EXPECT_EQ(r.signal, SIGSEGV);
    EXPECT_EQ(r.describe(), "crash:SIGSEGV");
}

TEST(Sandbox, HangIsKilledAtTheDeadline) {
    SandboxResult r = run_sandboxed(
        [] {
            for (;;) sleep(1);
            return std::string();
        },
        0.5);
    EXPECT_EQ(r.status, SandboxResult::Status::timed_out);
    EXPECT_LT(r.seconds, 5.0);
}

TEST(Sandbox, ExceptionMessageComesBack) {
    SandboxResult r = run_sandboxed([]() -> std::string { throw std::runtime_error("bad probe"); }, 30);
    EXPECT_EQ(r.status, SandboxResult::Status::failed);
    EXPECT_EQ(r.output, "\x01" "bad probe");
}

TEST(Verify, MissingCandidateIsARecordedError) {
    Record r = verify(resolve_contract("relu-f32"), "/nonexistent/candidate.so", quick_options());
    EXPECT_EQ(r.error_code, "load-failed");
    EXPECT_NE(r.error.find("/nonexistent/candidate.so"), std::string::npos);
    ASSERT_EQ(r.gates.size(), 12u);
    for (const auto& g : r.gates) EXPECT_EQ(g.verdict, Verdict::error) << g.id;
}

TEST(Verify, LibraryWithoutTheSymbolIsARecordedError) {
    Record r = verify(resolve_contract("relu-f32"), bad_kernel("no_symbol"), quick_options());
    EXPECT_EQ(r.error_code, "load-failed");
    EXPECT_NE(r.error.find("kcv_kernel"), std::string::npos) << r.error;
}

TEST(Verify, LibraryAbortingAtLoadIsARecordedError) {
    Record r = verify(resolve_contract("relu-f32"), bad_kernel("abort_on_load"), quick_options());
    EXPECT_EQ(r.error_code, "load-failed");
    EXPECT_NE(r.error.find("SIGABRT"), std::string::npos) << r.error;
}

TEST(Verify, CrashingCandidateFailsEveryGateItRuns) {
    VerifyOptions o = quick_options();
    o.only_gates = {"ORD-01", "EXC-01"};
    Record r = verify(resolve_contract("relu-f32"), bad_kernel("crash"), o);
    EXPECT_TRUE(r.error.empty()) << r.error;
    for (const char* id : {"ORD-01", "EXC-01"}) {
        const GateResult& g = gate(r, id);
        EXPECT_EQ(g.verdict, Verdict::fail) << id << ": " << g.reason;
        EXPECT_EQ(g.signature, std::vector<std::string>{"crash"});
        EXPECT_EQ(g.code, "crash:SIGSEGV");
    }
    EXPECT_EQ(gate(r, "PRC-02").verdict, Verdict::na);
    EXPECT_EQ(gate(r, "PRC-02").reason, "not requested");
}

TEST(Verify, ACandidateErrorEndsTheGateAtItsFirstProbe) {
    // Once the candidate's error has failed a gate, its remaining probes are not run: they could
    // only fail it again, at the price of their references (every CMP-01 size).
    VerifyOptions o = quick_options();
    o.only_gates = {"CMP-01", "ORD-01", "EXC-02"};
    const Contract c = resolve_contract("relu-f32");
    Record r = verify(c, bad_kernel("refuse"), o);
    ASSERT_TRUE(r.error.empty()) << r.error;
    for (const char* id : {"CMP-01", "ORD-01", "EXC-02"}) {
        const GateResult& g = gate(r, id);
        EXPECT_EQ(g.verdict, Verdict::fail) << id << ": " << g.reason;
        EXPECT_EQ(g.probes, 1) << id;
        ASSERT_FALSE(g.evidence.empty()) << id;
        EXPECT_NE(g.evidence.front().signature.find("refused: no kernel for this shape"), std::string::npos)
            << g.evidence.front().signature;
        const size_t planned = find_gate(id)->plan(c, o.settings).size();
        if (planned > 1) {
            ASSERT_TRUE(g.detail.contains("not_run")) << id << ": " << g.detail.dump();
            EXPECT_EQ(g.detail["not_run"]["probes"].get<size_t>(), planned - 1) << id;
            EXPECT_EQ(g.detail["not_run"]["after"], g.evidence.front().probe) << id;
        }
    }
    // CMP-01 plans several sizes, so the rule is exercised and not vacuous.
    EXPECT_GT(find_gate("CMP-01")->plan(c, o.settings).size(), 1u);
    // A candidate that answers runs every planned probe.
    Record honest = verify(c, bad_kernel("relu_exact"), o);
    const GateResult& g = gate(honest, "CMP-01");
    EXPECT_EQ(static_cast<size_t>(g.probes), find_gate("CMP-01")->plan(c, o.settings).size());
    EXPECT_FALSE(g.detail.is_object() && g.detail.contains("not_run")) << g.detail.dump();
}

TEST(Verify, HangingCandidateFailsWithHang) {
    VerifyOptions o = quick_options();
    o.only_gates = {"ORD-01"};
    o.timeout_s = 1.0;
    o.check_controls = false;
    Record r = verify(resolve_contract("relu-f32"), bad_kernel("hang"), o);
    const GateResult& g = gate(r, "ORD-01");
    EXPECT_EQ(g.verdict, Verdict::fail);
    EXPECT_EQ(g.signature, std::vector<std::string>{"hang"});
    EXPECT_EQ(g.code, "timeout");
}

TEST(Verify, GarbageOutputFailsWithEvidenceAndReplay) {
    VerifyOptions o = quick_options();
    o.only_gates = {"ORD-01"};
    Record r = verify(resolve_contract("relu-f32"), bad_kernel("garbage"), o);
    const GateResult& g = gate(r, "ORD-01");
    ASSERT_EQ(g.verdict, Verdict::fail) << g.reason;
    ASSERT_FALSE(g.evidence.empty());
    const Evidence& e = g.evidence.front();
    EXPECT_EQ(e.actual_bits, "0x7f7f7f7f");
    EXPECT_NE(e.replay.find("kcv verify --contract relu-f32"), std::string::npos) << e.replay;
    EXPECT_NE(e.replay.find("--probe"), std::string::npos);
    // The failure was replayed in a fresh worker before it was reported.
    EXPECT_EQ(g.detail.value("replayed", ""), e.probe);
}

TEST(Verify, HonestReluPassesEveryApplicableGate) {
    Record r = verify(resolve_contract("relu-f32"), bad_kernel("relu_exact"), quick_options());
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(r.gates.size(), 12u);
    // Not everything may be n/a: an honest kernel must actually be judged.
    EXPECT_GE(expect_pass_or_na(r), 8);
    for (const auto& p : profile_names()) EXPECT_FALSE(under_floor(r, p)) << p;
}

// A kernel that rounds its operands to bf16 is a defect under a contract with fp32 operands and
// correct under one that declares bf16 operands: every gate of the battery takes the declaration
// into its bound (docs/gates.md, "Analytic model"), not PRC-03 alone.
TEST(Verify, DeclaredBf16OperandsAdmitAKernelThatRoundsToThem) {
    const std::string kernel = std::string(KCV_TEST_KERNEL_DIR) + "/kcv_redteam_matmul_bf16_operands.so";
    Contract c = resolve_contract("matmul-f32");
    Record r = verify(c, kernel, quick_options());
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(gate(r, "PRC-03").verdict, Verdict::fail) << gate(r, "PRC-03").reason;

    c.semantics.bf16_operands = true;
    r = verify(c, kernel, quick_options());
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_GE(expect_pass_or_na(r), 8);
    EXPECT_EQ(gate(r, "PRC-03").verdict, Verdict::pass) << gate(r, "PRC-03").reason;
}

// A float32 matmul on TF32 tensor cores rounds every operand to tf32, a subnormal one to tf32's
// grid of 2^-136: an error of up to 2^-137 whatever the operand's size. Under a contract that
// declares tf32 operands that is correct, and the operand-floored scale admits it (docs/gates.md,
// "Analytic model"). EXC-02's subnormal inputs at K = 1, where no other product's rounding can
// cancel it: the executor floors the scale, the gate passes the honest kernel, and the scale
// Σ|a·b| alone would have failed it.
TEST(Verify, DeclaredTf32OperandsAdmitTheirRoundingBelowTheSmallestNormal) {
    const Contract c = resolve_contract("matmul-tf32");
    ASSERT_TRUE(c.semantics.tf32_operands);
    const GateDef& exc02 = *find_gate("EXC-02");
    Probe probe;
    for (const Probe& p : exc02.plan(c, Settings{}))
        if (p.id == "EXC-02/daz-input/a") probe = p;
    ASSERT_EQ(probe.id, "EXC-02/daz-input/a");
    probe.dims["K"] = 1;
    const std::unique_ptr<Backend> kernel = load_native(bad_kernel("matmul_tf32_operands"));
    const ProbeOutcome o = execute(ExecContext{c, *kernel, {}}, probe);
    ASSERT_TRUE(o.error.empty()) << o.error;
    ASSERT_EQ(o.calls.size(), 1u);
    const CallOutcome& co = o.calls[0];
    ASSERT_EQ(co.facts.status, 0);

    std::vector<Tensor> ref, floored;
    run_oracle(c.oracle, co.inputs, c.attributes, o.output_shapes, ref, floored, {}, nullptr, 0x1p-126);
    ASSERT_EQ(co.scale.size(), 1u);
    int64_t differ = 0;
    for (int64_t i = 0; i < floored[0].numel(); ++i) differ += co.scale[0].bits(i) != floored[0].bits(i);
    EXPECT_EQ(differ, 0) << "the executor's scale is not the one floored at tf32's smallest normal";
    const GateResult r = exc02.judge(c, Settings{}, {o});
    EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;

    ProbeOutcome unfloored = o;
    run_oracle(c.oracle, co.inputs, c.attributes, o.output_shapes, unfloored.calls[0].reference,
               unfloored.calls[0].scale);
    const GateResult without = exc02.judge(c, Settings{}, {unfloored});
    EXPECT_EQ(without.verdict, Verdict::fail) << without.reason;
}

// matmul-tf32 is satisfiable by the kernels it is for: a TF32 matmul passes every gate, ORD-03
// included, since its control rounds its operands as the contract allows. The same kernel under
// matmul-f32 is a defect that PRC-03 names.
TEST(Verify, Tf32MatmulPassesMatmulTf32AndFailsMatmulF32) {
    Record r = verify(resolve_contract("matmul-tf32"), bad_kernel("matmul_tf32_operands"), quick_options());
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_GE(expect_pass_or_na(r), 8);
    for (const char* id : {"ORD-01", "ORD-03", "EXC-02", "PRC-03"})
        EXPECT_EQ(gate(r, id).verdict, Verdict::pass) << id << ": " << gate(r, id).reason;

    r = verify(resolve_contract("matmul-f32"), bad_kernel("matmul_tf32_operands"), quick_options());
    ASSERT_TRUE(r.error.empty()) << r.error;
    const GateResult& prc03 = gate(r, "PRC-03");
    EXPECT_EQ(prc03.verdict, Verdict::fail) << prc03.reason;
    EXPECT_EQ(prc03.signature, std::vector<std::string>{"operands-rounded:tf32"}) << prc03.reason;

    // A coarser rounding than the one allowed cannot hide behind random signs: PRC-03's
    // below-half-unit probe names bf16 operands under matmul-tf32 (r = 0.76 without it).
    r = verify(resolve_contract("matmul-tf32"), std::string(KCV_TEST_KERNEL_DIR) + "/kcv_redteam_matmul_bf16_operands.so",
               quick_options());
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(gate(r, "PRC-03").verdict, Verdict::fail) << gate(r, "PRC-03").reason;
    EXPECT_EQ(gate(r, "PRC-03").signature, std::vector<std::string>{"operands-rounded:bf16"});
}

// The recurrence's contracts that allow bf16 operands (contracts/gdn-*-bf16-operands.toml) are
// satisfiable by the kernels they are for: the chunked algorithm with every materialised operand
// rounded to bf16, their positive control, passes every gate of the GLA forward's. The same
// library under the contract with float32 operands is a defect that ORD-01 sees (r = 114 on
// the task's inputs). And the declaration admits operands, not accumulators: a kernel that also carries
// its state from chunk to chunk in bf16 fails ORD-03 against the control's envelope (2.4 times
// it on the task's inputs).
TEST(Verify, RecurrenceWithBf16OperandsPassesItsContractButNotABf16State) {
    const std::string control = std::string(KCV_TEST_KERNEL_DIR) + "/kcv_controls_gdn_forward_bf16_operands.so";
    const Contract c = resolve_contract("gdn-forward-gla-bf16-operands");
    ASSERT_TRUE(c.semantics.bf16_operands);
    Record r = verify(c, control, quick_options());
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_GE(expect_pass_or_na(r), 10);

    VerifyOptions ord01 = quick_options();
    ord01.only_gates = {"ORD-01"};
    r = verify(resolve_contract("gdn-forward-gla-bf16"), control, ord01);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(gate(r, "ORD-01").verdict, Verdict::fail) << gate(r, "ORD-01").reason;

    VerifyOptions ord03 = quick_options();
    ord03.only_gates = {"ORD-03"};
    r = verify(c, bad_kernel("gdn_forward_bf16_state"), ord03);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(gate(r, "ORD-03").verdict, Verdict::fail) << gate(r, "ORD-03").reason;
    EXPECT_EQ(gate(r, "ORD-03").signature, std::vector<std::string>{"thin-margin"});
}

// The delta members' contracts with bf16 operands count the chunked form's chains of rounded
// operands (operand_roundings, docs/gdn.md): their control passes every gate of Gated DeltaNet's
// forward, which it cannot with a count of two for every output, and a bf16 carried state still
// fails ORD-03 (full probes at seed 0, bench/RESULTS.md: with two, CMP-01 fails on ht at r = 1.01;
// the bf16 state is 1.65 times the control's envelope).
TEST(Verify, DeltaRecurrenceWithBf16OperandsCountsItsChains) {
    const std::string control = std::string(KCV_TEST_KERNEL_DIR) + "/kcv_controls_gdn_forward_bf16_operands.so";
    Contract c = resolve_contract("gdn-forward-gdn-bf16-operands");
    ASSERT_EQ(c.outputs.at(0).name, "o");
    EXPECT_EQ(c.outputs.at(0).operand_roundings, 6);
    EXPECT_EQ(c.outputs.at(1).operand_roundings, 12);
    Record r = verify(c, control, quick_options());
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_GE(expect_pass_or_na(r), 10);

    VerifyOptions ord03 = quick_options();
    ord03.only_gates = {"ORD-03"};
    r = verify(c, bad_kernel("gdn_forward_bf16_state"), ord03);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(gate(r, "ORD-03").verdict, Verdict::fail) << gate(r, "ORD-03").reason;
}

// Another chunk length is another correct implementation that rounds differently: the chunked
// backward at chunks of 128 exceeds the two controls' envelope on gdn-backward-gdn by more than the
// setting's margin and one ulp (1.51 times at seed 0, quick probes), and passes at the contract's
// own margin of 3. A dh0 scaled by 1 + 2^-19 (16 to 32 ulps), which the analytic bound admits,
// still fails it.
TEST(Verify, RecurrenceBackwardAtAnotherChunkLengthPassesAtTheContractsMargin) {
    const Contract c = resolve_contract("gdn-backward-gdn");
    ASSERT_EQ(c.measurement.ord03_margin, 3.0);
    VerifyOptions ord03 = quick_options();
    ord03.only_gates = {"ORD-03"};
    Record r = verify(c, std::string(KCV_TEST_KERNEL_DIR) + "/kcv_controls_gdn_backward_chunk128.so", ord03);
    ASSERT_TRUE(r.error.empty()) << r.error;
    const GateResult& chunk128 = gate(r, "ORD-03");
    EXPECT_EQ(chunk128.verdict, Verdict::pass) << chunk128.reason;
    EXPECT_GT(chunk128.metric, Settings{}.ord03_margin) << "beyond the setting's margin: the contract's admits it";
    EXPECT_EQ(chunk128.detail["contract_margin"].get<double>(), 3.0);

    ord03.only_gates = {"ORD-01", "ORD-03"};
    r = verify(c, bad_kernel("gdn_backward_dh0_bias"), ord03);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(gate(r, "ORD-01").verdict, Verdict::pass) << gate(r, "ORD-01").reason;
    const GateResult& biased = gate(r, "ORD-03");
    EXPECT_EQ(biased.verdict, Verdict::fail) << biased.reason;
    ASSERT_FALSE(biased.evidence.empty());
    EXPECT_EQ(biased.evidence[0].output, "dh0");
}

// ORD-03 admits one ulp above the worst control, and still excludes a final state a few ulps high:
// on the bf16 Gated DeltaNet forward the chunked control passes, and the same algorithm with ht
// scaled by 1 + 2^-21 (four to eight ulps) fails on ht, where the analytic bound admits it.
TEST(Verify, RecurrenceFinalStateAFewUlpsHighFailsOrd03) {
    const Contract c = resolve_contract("gdn-forward-gdn-bf16");
    VerifyOptions ord03 = quick_options();
    ord03.only_gates = {"ORD-01", "ORD-03"};
    Record r = verify(c, std::string(KCV_TEST_KERNEL_DIR) + "/kcv_controls_gdn_forward.so", ord03);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(gate(r, "ORD-03").verdict, Verdict::pass) << gate(r, "ORD-03").reason;

    r = verify(c, bad_kernel("gdn_forward_ht_bias"), ord03);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(gate(r, "ORD-01").verdict, Verdict::pass) << gate(r, "ORD-01").reason;
    const GateResult& g = gate(r, "ORD-03");
    EXPECT_EQ(g.verdict, Verdict::fail) << g.reason;
    EXPECT_EQ(g.signature, std::vector<std::string>{"thin-margin"});
    EXPECT_EQ(g.detail["margin"].get<double>(), Settings{}.ord03_margin);
    ASSERT_FALSE(g.evidence.empty());
    EXPECT_EQ(g.evidence[0].output, "ht");
    // o is the control's own, bit for bit: within its envelope on every probe.
    int outputs_o = 0;
    for (const auto& e : g.detail["errors"]) {
        if (e["output"] != "o") continue;
        ++outputs_o;
        EXPECT_LE(e["ratio"].get<double>(), 1.0) << e.dump();
    }
    EXPECT_GT(outputs_o, 0);
}

TEST(Record, FloorPerProfile) {
    Record r;
    GateResult exc02;
    exc02.id = "EXC-02";
    exc02.verdict = Verdict::fail;
    exc02.signature = {"ftz-output"};
    r.gates.push_back(exc02);
    EXPECT_TRUE(under_floor(r, "strict"));
    EXPECT_FALSE(under_floor(r, "ftz"));
    EXPECT_FALSE(under_floor(r, "fast-math"));

    GateResult exc01;
    exc01.id = "EXC-01";
    exc01.verdict = Verdict::fail;
    exc01.signature = {"nan-swallowed"};
    r.gates.push_back(exc01);
    EXPECT_TRUE(under_floor(r, "ftz"));
    EXPECT_FALSE(under_floor(r, "fast-math"));

    GateResult ord02;
    ord02.id = "ORD-02";
    ord02.verdict = Verdict::fail;
    ord02.signature = {"run-to-run"};
    ord02.detail = {{"runs_pass_ord01", false}};
    r.gates.push_back(ord02);
    EXPECT_TRUE(under_floor(r, "relaxed"));
    r.gates.back().detail["runs_pass_ord01"] = true;
    EXPECT_FALSE(under_floor(r, "relaxed"));
    EXPECT_TRUE(under_floor(r, "fast-math"));

    // A tolerance-based gate never puts a candidate under the floor.
    Record t;
    GateResult ord01;
    ord01.id = "ORD-01";
    ord01.verdict = Verdict::fail;
    t.gates.push_back(ord01);
    EXPECT_FALSE(under_floor(t, "strict"));
    EXPECT_TRUE(any_violation(t));
}

TEST(Record, JsonRoundTripKeepsVerdictsAndNonFiniteNumbers) {
    Record r;
    r.contract_id = "sum-f32";
    r.candidate = "x.so";
    GateResult g;
    g.id = "ORD-01";
    g.verdict = Verdict::fail;
    g.metric = std::numeric_limits<double>::infinity();
    Evidence e;
    e.probe = "ORD-01/normal/seed=1";
    e.expected = std::nan("");
    e.actual = -std::numeric_limits<double>::infinity();
    g.evidence.push_back(e);
    r.gates.push_back(g);
    nlohmann::json j = to_json(r);
    EXPECT_EQ(j["gates"][0]["id"], "ORD-01");
    EXPECT_EQ(j["gates"][0]["verdict"], "fail");
    EXPECT_EQ(j["failed_gates"], nlohmann::json::array({"ORD-01"}));
    EXPECT_EQ(j["floor"]["strict"], false);
    Record back = record_from_json(nlohmann::json::parse(j.dump()));
    ASSERT_EQ(back.gates.size(), 1u);
    EXPECT_TRUE(std::isinf(back.gates[0].metric));
    EXPECT_TRUE(std::isnan(back.gates[0].evidence[0].expected));
    EXPECT_EQ(back.gates[0].evidence[0].actual, -std::numeric_limits<double>::infinity());
}

TEST(Probe, JsonRoundTrip) {
    Probe p;
    p.gate = "EXC-01";
    p.id = "EXC-01/scattered";
    p.dims = {{"N", 17}, {"R", 3}};
    p.family = Family::of(Family::Kind::band, 1e3);
    InputOverride ov;
    ov.input = "x";
    ov.family = Family::of(Family::Kind::subnormal);
    ov.specials = Specials{Specials::Pattern::row_neg_inf, 0.01, {"nan", "-inf"}};
    p.overrides.push_back(ov);
    p.layout.kind = Layout::Kind::strided;
    p.layout.storage_offset = 1;
    CallSpec c;
    c.input_seed = 1234567890123ull;
    c.output_poison = Poison::random(99);
    c.env.ftz = true;
    c.env.threads = 3;
    p.calls = {c, c};
    p.with_controls = true;
    p.prime_dims = {{"N", 1024}, {"R", 4}};
    p.prime_seed = 987654321987ull;
    Probe q = probe_from_json(nlohmann::json::parse(to_json(p).dump()));
    EXPECT_EQ(to_json(q), to_json(p));
    EXPECT_EQ(q.prime_dims, p.prime_dims);
    EXPECT_EQ(q.prime_seed, 987654321987ull);
    EXPECT_EQ(q.calls[0].input_seed, 1234567890123ull);
    EXPECT_EQ(q.overrides[0].specials->pattern, Specials::Pattern::row_neg_inf);
    EXPECT_EQ(q.family.kind, Family::Kind::band);
    EXPECT_EQ(q.calls[1].output_poison.kind, Poison::Kind::random);
}

TEST(Journal, PartialLastLineIsIgnoredAndAggregateCounts) {
    const fs::path dir = temp_dir("journal");
    const fs::path j = dir / "journal.jsonl";
    auto rec = [](const std::string& id, bool ord01_fail, bool std_pass) {
        nlohmann::json gates = nlohmann::json::array();
        for (const auto& g : all_gates()) {
            gates.push_back({{"id", g.id}, {"verdict", (ord01_fail && std::string(g.id) == "ORD-01") ? "fail" : "pass"}});
        }
        return nlohmann::json{{"corpus_id", id},
                              {"gates", gates},
                              {"standard_check", {{"tol_1e-2", std_pass}, {"tol_1e-4", false}}},
                              {"label", {{"correctness", std_pass}}}};
    };
    {
        std::ofstream out(j);
        out << rec("a", true, true).dump() << "\n" << rec("b", false, true).dump() << "\n"
            << rec("c", false, false).dump() << "\n" << R"({"corpus_id": "d", "gat)";
    }
    const auto records = read_journal(j.string());
    ASSERT_EQ(records.size(), 3u);
    const nlohmann::json s = aggregate(records);
    EXPECT_EQ(s["judged"], 3);
    EXPECT_EQ(s["gates"]["ORD-01"]["fail"], 1);
    EXPECT_DOUBLE_EQ(s["gates"]["ORD-01"]["fail_rate"].get<double>(), 1.0 / 3.0);
    EXPECT_EQ(s["differential"]["tol_1e-2"]["standard_pass_kcv_violation"], 1);
    EXPECT_EQ(s["differential"]["tol_1e-2"]["standard_pass_kcv_clean"], 1);
    EXPECT_EQ(s["differential"]["tol_1e-2"]["standard_fail_kcv_clean"], 1);
    EXPECT_EQ(s["parity"]["compared"], 3);
    EXPECT_EQ(s["parity"]["agree"], 3);
    EXPECT_NE(render_summary(s).find("2 passed, 1 failed"), std::string::npos);
    fs::remove_all(dir);
}

TEST(Journal, ParityCountsCandidatesThatDoNotLoadAndSaysWhyItDisagrees) {
    auto gates = [] {
        nlohmann::json g = nlohmann::json::array();
        for (const auto& def : all_gates()) g.push_back({{"id", def.id}, {"verdict", "pass"}});
        return g;
    };
    const std::vector<nlohmann::json> records = {
        // Did not load here, labelled as not compiling: agreement.
        {{"corpus_id", "a"}, {"error", {{"code", "load-failed"}, {"message", "SyntaxError"}}},
         {"standard_check", {{"tol_1e-2", false}, {"tol_1e-4", false}}}, {"label", {{"correctness", false}}}},
        // Did not load here, labelled correct: a disagreement naming the load failure.
        {{"corpus_id", "b"}, {"error", {{"code", "load-failed"}, {"message", "no nvcc\nsecond line"}}},
         {"standard_check", {{"tol_1e-2", false}, {"tol_1e-4", false}}}, {"label", {{"correctness", true}}}},
        // Loaded, labelled correct, 3 of 5 trials passed here.
        {{"corpus_id", "c"}, {"gates", gates()},
         {"standard_check", {{"tol_1e-2", false}, {"tol_1e-4", false}, {"passed_1e-2", 3}, {"trials", 5},
                             {"max_abs_diff", 0.5}}},
         {"label", {{"correctness", true}}}},
        // Labelled incorrect by a harness at 1e-4: passes here at 1e-2 only, which the reason says.
        {{"corpus_id", "g"}, {"gates", gates()},
         {"standard_check", {{"tol_1e-2", true}, {"tol_1e-4", false}, {"passed_1e-2", 5}, {"passed_1e-4", 0},
                             {"trials", 5}, {"max_abs_diff", 0.0005}}},
         {"label", {{"correctness", false}}}},
        // Loaded, labelled correct, the check raised a long error: its first line, shortened.
        {{"corpus_id", "d"}, {"gates", gates()},
         {"standard_check", {{"tol_1e-2", false}, {"tol_1e-4", false}, {"error", std::string(300, 'x') + "\nmore"}}},
         {"label", {{"correctness", true}}}},
        // The reference raised (integer targets cast to float32), and a candidate raised.
        {{"corpus_id", "e"}, {"gates", gates()},
         {"standard_check", {{"tol_1e-2", false}, {"tol_1e-4", false}, {"error", "NotImplementedError: nll_loss"},
                             {"raised_by", "reference"}}},
         {"label", {{"correctness", true}}}},
        {{"corpus_id", "f"}, {"gates", gates()},
         {"standard_check", {{"tol_1e-2", false}, {"tol_1e-4", false}, {"error", "AssertionError: fp16 only"},
                             {"raised_by", "candidate"}}},
         {"label", {{"correctness", true}}}},
    };
    const nlohmann::json s = aggregate(records);
    EXPECT_EQ(s["errors"], 2);
    EXPECT_EQ(s["judged"], 5);
    EXPECT_EQ(s["parity"]["compared"], 7);
    EXPECT_EQ(s["parity"]["agree"], 1);
    ASSERT_EQ(s["parity"]["disagreements"].size(), 6u);
    EXPECT_EQ(s["parity"]["disagreements"][2]["reason"],
              "labelled incorrect, but 5 of 5 trials passed at 1e-2 here (0 at 1e-4, as labelled; "
              "largest |difference| 0.0005)");
    EXPECT_EQ(s["parity"]["disagreements"][4]["reason"],
              "the standard check's reference raised here: NotImplementedError: nll_loss");
    EXPECT_EQ(s["parity"]["disagreements"][5]["reason"],
              "the candidate raised in the standard check here: AssertionError: fp16 only");
    EXPECT_EQ(s["parity"]["disagreements"][3]["reason"],
              "the standard check raised here: " + std::string(200, 'x') + "…");
    EXPECT_EQ(s["parity"]["disagreements"][0]["id"], "b");
    EXPECT_EQ(s["parity"]["disagreements"][0]["reason"], "did not load here (load-failed): no nvcc");
    EXPECT_EQ(s["parity"]["disagreements"][1]["reason"],
              "labelled correct, but 3 of 5 trials passed at 1e-2 here (largest |difference| 0.5)");
}

TEST(Corpus, ShardsPartitionTheIds) {
    std::set<std::string> seen;
    for (int i = 0; i < 500; ++i) {
        const std::string id = "level1/" + std::to_string(i);
        int owners = 0;
        for (int s = 0; s < 4; ++s) owners += in_shard(id, s, 4);
        EXPECT_EQ(owners, 1) << id;
    }
    EXPECT_TRUE(in_shard("anything", 0, 1));
}

TEST(Corpus, MalformedEntryNamesFileAndLine) {
    const fs::path dir = temp_dir("corpus");
    {
        std::ofstream out(dir / "corpus.jsonl");
        out << R"({"id": "a", "problem": "p.py", "candidate": "c.py"})" << "\n\n"
            << R"({"id": "b", "problem": "p.py"})" << "\n";
    }
    try {
        load_corpus(dir.string(), "");
        FAIL() << "accepted an entry without a candidate";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("corpus.jsonl:3"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("'candidate'"), std::string::npos) << e.what();
    }
    {
        std::ofstream out(dir / "corpus.jsonl");
        out << R"({"id": "a", "problem": "p.py", "candidate": "c.py"})" << "\n"
            << R"({"id": "a", "problem": "p.py", "candidate": "d.py"})" << "\n";
    }
    EXPECT_THROW(load_corpus(dir.string(), ""), std::runtime_error);
    fs::remove_all(dir);
}

namespace {
// Runs the kcv command; returns (exit status, stdout).
std::pair<int, std::string> run_cli(const std::string& args) {
    const std::string cmd = std::string(KCV_TEST_CLI) + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    const int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}
}  // namespace

TEST(Cli, MalformedContractIsExitTwoWithAClearMessage) {
    const fs::path dir = temp_dir("cli");
    {
        std::ofstream out(dir / "bad.toml");
        out << "[contract]\nid = \"x\"\nbogus_key = 1\n";
    }
    auto [rc, out] = run_cli("verify --contract " + (dir / "bad.toml").string() + " --candidate " +
                             bad_kernel("relu_exact") + " --json " + (dir / "r.json").string());
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("bad contract"), std::string::npos) << out;
    std::ifstream in(dir / "r.json");
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["error"]["code"], "bad-contract");
    fs::remove_all(dir);
}

TEST(Cli, UnloadableCandidateIsExitTwoAndRecorded) {
    const fs::path dir = temp_dir("cli2");
    auto [rc, out] = run_cli("verify --quick --contract relu-f32 --candidate " + bad_kernel("no_symbol") + " --json " +
                             (dir / "r.json").string());
    EXPECT_EQ(rc, 2) << out;
    std::ifstream in(dir / "r.json");
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["error"]["code"], "load-failed");
    EXPECT_EQ(j["gates"].size(), 12u);
    fs::remove_all(dir);
}
