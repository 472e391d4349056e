// The recurrence positive controls behind the native ABI (kernels/controls/gdn_*.cpp): called
// through kcv_kernel with hand-built DLPack tensors, they must reproduce their implementation bit
// for bit (the chunked one of gdn/cpu; the oracle's steps in float32 for the recurrent form),
// honour strides and 16-bit dtypes, refuse operand lists that do not match their attributes, and
// describe themselves in the manifest.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/contract.hpp"
#include "kcv/kcv_kernel.h"
#include "loaded_library.hpp"
// chunked_forward/backward are compiled into the test binary by test_gdn_chunked.cpp.
#include "../../gdn/cpu/gdn_chunked.hpp"
#include "../../gdn/oracle/gdn_oracle.hpp"

#ifndef KCV_TEST_KERNEL_DIR
#define KCV_TEST_KERNEL_DIR "build/out/kernels"
#endif

namespace {

using kcv::gdn::GateKind;

// A control library of the build, kcv_controls_<name>.so.
struct Library : kcv::testing::LoadedLibrary {
    explicit Library(const std::string& name)
        : LoadedLibrary(std::string(KCV_TEST_KERNEL_DIR) + "/kcv_controls_" + name + ".so") {}
};

// A float32 tensor over caller-owned storage; `stride2` doubles every stride (interleaved gaps).
struct HostTensor {
    std::vector<int64_t> shape, strides;
    std::vector<float> storage;
    DLTensor dl{};
    HostTensor(std::vector<int64_t> s, bool stride2 = false) : shape(std::move(s)) {
        strides.assign(shape.size(), 1);
        for (int i = int(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        if (stride2)
            for (auto& st : strides) st *= 2;
        storage.assign(size_t(stride2 ? 2 * n : n), std::numeric_limits<float>::quiet_NaN());
        dl.data = storage.data();
        dl.device = {kDLCPU, 0};
        dl.ndim = int32_t(shape.size());
        dl.dtype = {kDLFloat, 32, 1};
        dl.shape = shape.data();
        dl.strides = strides.data();
        dl.byte_offset = 0;
    }
    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
    // Logical element i (row-major).
    float& at(int64_t i) {
        int64_t off = 0;
        for (int d = int(shape.size()) - 1; d >= 0; --d) {
            off += (i % shape[d]) * strides[d];
            i /= shape[d];
        }
        return storage[size_t(off)];
    }
    std::vector<float> logical() {
        std::vector<float> v(static_cast<size_t>(numel()));
        for (int64_t i = 0; i < numel(); ++i) v[size_t(i)] = at(i);
        return v;
    }
};

TEST(GdnControls, ManifestsNameEveryMemberContract) {
    for (const char* name : {"gdn_forward", "gdn_backward", "gdn_recurrent_forward", "gdn_recurrent_backward",
                             "gdn_forward_chunk32", "gdn_backward_chunk32", "gdn_forward_chunk128", "gdn_backward_chunk128"}) {
        Library lib(name);
        ASSERT_NE(lib.handle, nullptr) << dlerror();
        auto manifest = lib.get<const char* (*)()>("kcv_kernel_manifest");
        ASSERT_NE(manifest, nullptr);
        const auto j = nlohmann::json::parse(manifest());
        EXPECT_EQ(j.at("role"), std::string(name).find("chunk") == std::string::npos ? "control" : "variant");
        EXPECT_EQ(j.at("name"), name);
        const std::string kind = std::string(name).find("forward") != std::string::npos ? "forward" : "backward";
        std::vector<std::string> want;
        for (const char* m : {"linear-attention", "ssd", "gla", "gdn", "kda"}) want.push_back("gdn-" + kind + "-" + m);
        EXPECT_EQ(j.at("contracts").get<std::vector<std::string>>(), want);
    }
    // The controls with bf16 operands serve every member's contracts that allow them.
    for (const char* kind : {"forward", "backward"}) {
        const std::string name = std::string("gdn_") + kind + "_bf16_operands";
        Library lib(name);
        ASSERT_NE(lib.handle, nullptr) << dlerror();
        const auto j = nlohmann::json::parse(lib.get<const char* (*)()>("kcv_kernel_manifest")());
        EXPECT_EQ(j.at("role"), "control");
        EXPECT_EQ(j.at("name"), name);
        std::vector<std::string> want;
        for (const char* m : {"linear-attention", "ssd", "gla", "gdn", "kda"})
            want.push_back(std::string("gdn-") + kind + "-" + m + "-bf16-operands");
        EXPECT_EQ(j.at("contracts").get<std::vector<std::string>>(), want);
        const std::vector<std::string> ids = kcv::builtin_contract_ids();
        for (const std::string& id : want) EXPECT_TRUE(std::binary_search(ids.begin(), ids.end(), id)) << id;
    }
}

// One member's forward and backward through a pair of control libraries: random inputs of a
// small problem (some members read through strides), every output of both calls, and the inputs'
// logical values for calling an implementation directly.
struct AbiRun {
    static constexpr int64_t B = 1, T = 70, H = 1, HV = 2, K = 8, V = 4;
    static constexpr double scale = 0.5;
    kcv::gdn::Problem p;
    HostTensor o{{B, T, HV, V}}, ht{{B, HV, K, V}}, dq{{B, T, H, K}}, dk{{B, T, H, K}}, dv{{B, T, HV, V}}, dg,
        db{{B, T, HV}}, dh0{{B, HV, K, V}};
    std::vector<float> q, k, v, g, beta, h0, d_o, dht;   // logical input values

    static std::vector<int64_t> g_shape(kcv::gdn::Member m) {
        return m.gate == GateKind::channel ? std::vector<int64_t>{B, T, HV, K} : std::vector<int64_t>{B, T, HV};
    }

    AbiRun(kcv::gdn::Member m, bool strided, std::mt19937& rng, kcv_kernel_fn run_fwd, kcv_kernel_fn run_bwd)
        : p{m, kcv::gdn::Shape{B, T, H, HV, K, V, {}}, scale}, dg(g_shape(m)) {
        std::normal_distribution<float> n01(0.0f, 1.0f);
        HostTensor tq({B, T, H, K}, strided), tk({B, T, H, K}, strided), tv({B, T, HV, V}, strided),
            tg(g_shape(m)), tbeta({B, T, HV}), th0({B, HV, K, V}), tdo({B, T, HV, V}), tdht({B, HV, K, V});
        for (HostTensor* t : {&tq, &tk, &tv, &th0, &tdo, &tdht})
            for (int64_t i = 0; i < t->numel(); ++i) t->at(i) = n01(rng) * (t == &tk ? 0.35f : 1.0f);
        for (int64_t i = 0; i < tg.numel(); ++i) tg.at(i) = -std::abs(n01(rng)) * 0.3f;
        for (int64_t i = 0; i < tbeta.numel(); ++i) tbeta.at(i) = 0.5f + 0.4f * std::tanh(n01(rng));
        std::vector<DLTensor> inputs = {tq.dl, tk.dl, tv.dl};
        if (m.gate != GateKind::none) inputs.push_back(tg.dl);
        if (m.delta) inputs.push_back(tbeta.dl);
        inputs.push_back(th0.dl);
        std::vector<kcv_attribute> attrs = {{"gate", double(int(m.gate))}, {"delta", m.delta ? 1.0 : 0.0},
                                            {"scale", scale}, {"initial_state", 1.0}, {"final_state", 1.0}};
        std::vector<DLTensor> outs = {o.dl, ht.dl};
        kcv_call call{KCV_ABI_VERSION, "gdn-forward", int32_t(inputs.size()), inputs.data(), 2, outs.data(),
                      int32_t(attrs.size()), attrs.data(), nullptr};
        EXPECT_EQ(run_fwd(&call), 0);
        std::vector<DLTensor> bin = inputs;
        bin.push_back(tdo.dl);
        bin.push_back(tdht.dl);
        std::vector<DLTensor> bouts = {dq.dl, dk.dl, dv.dl};
        if (m.gate != GateKind::none) bouts.push_back(dg.dl);
        if (m.delta) bouts.push_back(db.dl);
        bouts.push_back(dh0.dl);
        kcv_call bcall{KCV_ABI_VERSION, "gdn-backward", int32_t(bin.size()), bin.data(), int32_t(bouts.size()),
                       bouts.data(), int32_t(attrs.size()), attrs.data(), nullptr};
        EXPECT_EQ(run_bwd(&bcall), 0);
        q = tq.logical(), k = tk.logical(), v = tv.logical(), g = tg.logical(), beta = tbeta.logical();
        h0 = th0.logical(), d_o = tdo.logical(), dht = tdht.logical();
    }

    // Output arrays sized as this run's, and the argument structs of an implementation (the
    // chunked one's or the oracle's float32 ones) over them and the inputs.
    struct Outputs {
        std::vector<float> o, ht, dq, dk, dv, dg, dbeta, dh0;
    };
    Outputs outputs() {
        return {std::vector<float>(size_t(o.numel())),  std::vector<float>(size_t(ht.numel())),
                std::vector<float>(size_t(dq.numel())), std::vector<float>(size_t(dk.numel())),
                std::vector<float>(size_t(dv.numel())), std::vector<float>(size_t(dg.numel())),
                std::vector<float>(size_t(db.numel())), std::vector<float>(size_t(dh0.numel()))};
    }
    template <class FA>
    FA forward_args(Outputs& w) const {
        FA a;
        a.q = q.data(); a.k = k.data(); a.v = v.data(); a.g = g.data(); a.beta = beta.data(); a.h0 = h0.data();
        a.o = w.o.data(); a.ht = w.ht.data();
        return a;
    }
    template <class BA>
    BA backward_args(Outputs& w) const {
        BA a;
        a.q = q.data(); a.k = k.data(); a.v = v.data(); a.g = g.data(); a.beta = beta.data(); a.h0 = h0.data();
        a.d_o = d_o.data(); a.dht = dht.data(); a.dq = w.dq.data(); a.dk = w.dk.data(); a.dv = w.dv.data();
        a.dg = w.dg.data(); a.dbeta = w.dbeta.data(); a.dh0 = w.dh0.data();
        return a;
    }
    // Every output of the ABI calls equals w bit for bit.
    void expect_equal(Outputs& w) {
        EXPECT_EQ(o.logical(), w.o);
        EXPECT_EQ(ht.logical(), w.ht);
        EXPECT_EQ(dq.logical(), w.dq);
        EXPECT_EQ(dk.logical(), w.dk);
        EXPECT_EQ(dv.logical(), w.dv);
        EXPECT_EQ(dh0.logical(), w.dh0);
        if (p.member.gate != GateKind::none) EXPECT_EQ(dg.logical(), w.dg);
        if (p.member.delta) EXPECT_EQ(db.logical(), w.dbeta);
    }
};

// A forward and a backward control library, loaded, and their entry points.
struct ControlPair {
    Library fwd, bwd;
    kcv_kernel_fn run_fwd = nullptr, run_bwd = nullptr;
    ControlPair(const std::string& forward, const std::string& backward) : fwd(forward), bwd(backward) {
        if (fwd.handle && bwd.handle) {
            run_fwd = fwd.get<kcv_kernel_fn>("kcv_kernel");
            run_bwd = bwd.get<kcv_kernel_fn>("kcv_kernel");
        }
    }
    bool loaded() const { return run_fwd && run_bwd; }
};

TEST(GdnControls, ForwardAndBackwardEqualTheChunkedImplementationBitForBit) {
    ControlPair libs("gdn_forward", "gdn_backward");
    ASSERT_TRUE(libs.loaded()) << dlerror();
    std::mt19937 rng(5);
    for (kcv::gdn::Member m : kcv::gdn::all_members()) {
        SCOPED_TRACE(kcv::gdn::member_name(m));
        AbiRun run(m, m.gate == GateKind::scalar, rng, libs.run_fwd, libs.run_bwd);   // some members read through strides
        AbiRun::Outputs want = run.outputs();
        kcv::gdn::cpu::chunked_forward(run.p, run.forward_args<kcv::gdn::cpu::ForwardArgs>(want));
        kcv::gdn::cpu::chunked_backward(run.p, run.backward_args<kcv::gdn::cpu::BackwardArgs>(want));
        run.expect_equal(want);
    }
}

// A variant of the chunked control through the ABI: the chunked implementation with `vary` applied
// to its arguments, bit for bit, and not the plain implementation's numbers, so the variant is on.
template <class Vary>
void expect_variant_bits(ControlPair& libs, kcv::gdn::Member m, bool strided, std::mt19937& rng, Vary vary) {
    AbiRun run(m, strided, rng, libs.run_fwd, libs.run_bwd);
    AbiRun::Outputs want = run.outputs(), plain = run.outputs();
    auto fa = run.forward_args<kcv::gdn::cpu::ForwardArgs>(want);
    auto ba = run.backward_args<kcv::gdn::cpu::BackwardArgs>(want);
    vary(fa);
    vary(ba);
    kcv::gdn::cpu::chunked_forward(run.p, fa);
    kcv::gdn::cpu::chunked_backward(run.p, ba);
    run.expect_equal(want);
    kcv::gdn::cpu::chunked_forward(run.p, run.forward_args<kcv::gdn::cpu::ForwardArgs>(plain));
    kcv::gdn::cpu::chunked_backward(run.p, run.backward_args<kcv::gdn::cpu::BackwardArgs>(plain));
    EXPECT_NE(want.o, plain.o);
    EXPECT_NE(want.dq, plain.dq);
}

// The controls of the bf16-operand contracts: the chunked implementation with its bf16_operands
// switch on, for the members whose contracts name them.
TEST(GdnControls, Bf16OperandControlsEqualTheChunkedImplementationWithBf16OperandsBitForBit) {
    ControlPair libs("gdn_forward_bf16_operands", "gdn_backward_bf16_operands");
    ASSERT_TRUE(libs.loaded()) << dlerror();
    std::mt19937 rng(6);
    for (kcv::gdn::Member m : kcv::gdn::all_members()) {
        if (m.delta) continue;   // their contracts keep float32 operands (docs/gdn.md)
        SCOPED_TRACE(kcv::gdn::member_name(m));
        expect_variant_bits(libs, m, m.gate == GateKind::channel, rng, [](auto& a) { a.bf16_operands = true; });
    }
}

// The chunked algorithm at other chunk lengths, which bench/ord03_sweep.py judges against the
// controls: the chunked implementation at that length, not its numbers at 64.
TEST(GdnControls, ChunkLengthVariantsEqualTheChunkedImplementationAtTheirLengthBitForBit) {
    for (int chunk : {32, 128}) {
        const std::string n = std::to_string(chunk);
        ControlPair libs("gdn_forward_chunk" + n, "gdn_backward_chunk" + n);
        ASSERT_TRUE(libs.loaded()) << dlerror();
        std::mt19937 rng(7);
        for (kcv::gdn::Member m : kcv::gdn::all_members()) {
            SCOPED_TRACE(std::string(kcv::gdn::member_name(m)) + ", chunks of " + n);
            expect_variant_bits(libs, m, false, rng, [chunk](auto& a) { a.chunk = chunk; });
        }
    }
}

// The recurrent form: the oracle's steps in float32, bit for bit through the ABI, and within
// float32's reach of the float64 oracle (relative to the output's largest magnitude), not a copy
// of the chunked control (a second formulation is what makes it a second control).
TEST(GdnControls, RecurrentFormIsTheOraclesStepsInFloat32) {
    ControlPair libs("gdn_recurrent_forward", "gdn_recurrent_backward");
    ASSERT_TRUE(libs.loaded()) << dlerror();
    std::mt19937 rng(9);
    auto rel = [](const std::vector<float>& y, const std::vector<double>& ref) {
        double err = 0.0, top = 0.0;
        for (size_t i = 0; i < y.size(); ++i) {
            err = std::max(err, std::abs(double(y[i]) - ref[i]));
            top = std::max(top, std::abs(ref[i]));
        }
        return err / top;
    };
    auto widen = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    for (kcv::gdn::Member m : kcv::gdn::all_members()) {
        SCOPED_TRACE(kcv::gdn::member_name(m));
        AbiRun run(m, true, rng, libs.run_fwd, libs.run_bwd);
        AbiRun::Outputs f = run.outputs();
        kcv::gdn::forward(run.p, run.forward_args<kcv::gdn::ForwardArgsF32>(f));
        kcv::gdn::backward(run.p, run.backward_args<kcv::gdn::BackwardArgsF32>(f));
        run.expect_equal(f);

        // The float64 oracle on the same (float32) inputs.
        const auto q = widen(run.q), k = widen(run.k), v = widen(run.v), g = widen(run.g), beta = widen(run.beta),
                   h0 = widen(run.h0), d_o = widen(run.d_o), dht = widen(run.dht);
        std::vector<double> o(f.o.size()), ht(f.ht.size()), dq(f.dq.size()), dk(f.dk.size()), dv(f.dv.size()),
            dg(f.dg.size()), dbeta(f.dbeta.size()), dh0(f.dh0.size());
        kcv::gdn::forward(run.p, {q.data(), k.data(), v.data(), g.data(), beta.data(), h0.data(), o.data(), ht.data()});
        kcv::gdn::BackwardArgs r;
        r.q = q.data(); r.k = k.data(); r.v = v.data(); r.g = g.data(); r.beta = beta.data(); r.h0 = h0.data();
        r.d_o = d_o.data(); r.dht = dht.data(); r.dq = dq.data(); r.dk = dk.data(); r.dv = dv.data(); r.dg = dg.data();
        r.dbeta = dbeta.data(); r.dh0 = dh0.data();
        kcv::gdn::backward(run.p, r);
        for (auto [y, ref] :
             {std::pair{&f.o, &o}, {&f.ht, &ht}, {&f.dq, &dq}, {&f.dk, &dk}, {&f.dv, &dv}, {&f.dh0, &dh0}}) {
            const double e = rel(*y, *ref);
            EXPECT_LT(e, 1e-5);
            EXPECT_GT(e, 0.0) << "float32 arithmetic cannot be exact on these inputs";
        }
        if (m.gate != GateKind::none) EXPECT_LT(rel(f.dg, dg), 1e-5);
        if (m.delta) EXPECT_LT(rel(f.dbeta, dbeta), 1e-5);

        // Not the chunked control's numbers.
        AbiRun::Outputs c = run.outputs();
        kcv::gdn::cpu::chunked_forward(run.p, run.forward_args<kcv::gdn::cpu::ForwardArgs>(c));
        EXPECT_NE(c.ht, f.ht);
    }
}

// A decay e^g below float32's smallest normal keeps only a subnormal's bits; the recurrent form
// applies it by halves, so a state gradient of 1000 decayed by e^-100 is off by at most the
// rounding of the result itself (a subnormal step), not by the stored factor's few bits
// (e^-100 = 26.4 subnormal steps: hundreds of steps of error on dh0 before).
TEST(GdnControls, RecurrentFormKeepsStrongDecaysAccurateInFloat32) {
    const int64_t K = 4, V = 4;
    const kcv::gdn::Problem p{kcv::gdn::Member{GateKind::channel, false}, kcv::gdn::Shape{1, 1, 1, 1, K, V, {}}, 0.5};
    std::vector<float> q(K, 0.25f), k(K, 0.5f), v(V, 1.0f), g(K, -100.0f), h0(K * V, 1.0f), d_o(V, 1.0f),
        dht(K * V), dq(K), dk(K), dv(V), dg(K), dh0(K * V);
    for (int64_t e = 0; e < K * V; ++e) dht[e] = 1000.0f + float(e);
    kcv::gdn::BackwardArgsF32 a;
    a.q = q.data(); a.k = k.data(); a.v = v.data(); a.g = g.data(); a.h0 = h0.data(); a.d_o = d_o.data();
    a.dht = dht.data(); a.dq = dq.data(); a.dk = dk.data(); a.dv = dv.data(); a.dg = dg.data(); a.dh0 = dh0.data();
    kcv::gdn::backward(p, a);
    auto widen = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    const auto q6 = widen(q), k6 = widen(k), v6 = widen(v), g6 = widen(g), h6 = widen(h0), do6 = widen(d_o),
               dht6 = widen(dht);
    std::vector<double> rq(K), rk(K), rv(V), rg(K), rh0(K * V);
    kcv::gdn::BackwardArgs r;
    r.q = q6.data(); r.k = k6.data(); r.v = v6.data(); r.g = g6.data(); r.h0 = h6.data(); r.d_o = do6.data();
    r.dht = dht6.data(); r.dq = rq.data(); r.dk = rk.data(); r.dv = rv.data(); r.dg = rg.data(); r.dh0 = rh0.data();
    kcv::gdn::backward(p, r);
    const double step = std::ldexp(1.0, -149);
    for (int64_t e = 0; e < K * V; ++e) {
        EXPECT_GT(std::abs(rh0[e]), 100 * step) << e;   // deep in the subnormal range, not zero
        EXPECT_LE(std::abs(double(dh0[e]) - rh0[e]), step) << e;
    }
}

void refuse_operand_lists_that_do_not_match_the_attributes() {
    Library fwd("gdn_forward");
    ASSERT_NE(fwd.handle, nullptr) << dlerror();
    auto run = fwd.get<kcv_kernel_fn>("kcv_kernel");
    auto error = fwd.get<const char* (*)()>("kcv_kernel_last_error");
    HostTensor q({1, 4, 1, 2}), k({1, 4, 1, 2}), v({1, 4, 1, 2}), o({1, 4, 1, 2});
    std::vector<DLTensor> inputs = {q.dl, k.dl, v.dl};   // no g although gate = 1
    std::vector<DLTensor> outs = {o.dl};
    kcv_attribute attrs[] = {{"gate", 1.0}};
    kcv_call call{KCV_ABI_VERSION, "x", 3, inputs.data(), 1, outs.data(), 1, attrs, nullptr};
    EXPECT_NE(run(&call), 0);
    EXPECT_NE(std::string(error()).find("expected 4 inputs"), std::string::npos) << error();
    kcv_attribute bad_gate[] = {{"gate", 7.0}};
    call.attributes = bad_gate;
    EXPECT_NE(run(&call), 0);
    call.abi_version = KCV_ABI_VERSION + 1;
    call.n_attributes = 0;
    EXPECT_NE(run(&call), 0);
}

// The calls run on a thread of their own that ends before the test does. kcv_kernel_last_error
// is thread-local in the library; LeakSanitizer's scan at exit (GCC 12, glibc 2.36) crashed
// reading the main thread's dynamic TLS entry for it once the library was unloaded, in ctest's
// runs only. A thread that has ended leaves no such entry.
TEST(GdnControls, RefuseOperandListsThatDoNotMatchTheAttributes) {
    std::thread([] { refuse_operand_lists_that_do_not_match_the_attributes(); }).join();
}

}  // namespace
