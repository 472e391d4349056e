// The recurrence positive controls behind the native ABI (kernels/controls/gdn_*.cpp): called
// through kcv_kernel with hand-built DLPack tensors, they must reproduce their implementation bit
// for bit (the chunked one of gdn/cpu; the oracle's steps in float32 for the recurrent form),
// honour strides and 16-bit dtypes, refuse operand lists that do not match their attributes, and
// describe themselves in the manifest.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

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
    for (const char* name : {"gdn_forward", "gdn_backward", "gdn_recurrent_forward", "gdn_recurrent_backward"}) {
        Library lib(name);
        ASSERT_NE(lib.handle, nullptr) << dlerror();
        auto manifest = lib.get<const char* (*)()>("kcv_kernel_manifest");
        ASSERT_NE(manifest, nullptr);
        const auto j = nlohmann::json::parse(manifest());
        EXPECT_EQ(j.at("role"), "control");
        EXPECT_EQ(j.at("name"), name);
        const std::string kind = std::string(name).ends_with("forward") ? "forward" : "backward";
        std::vector<std::string> want;
        for (const char* m : {"linear-attention", "ssd", "gla", "gdn", "kda"}) want.push_back("gdn-" + kind + "-" + m);
        EXPECT_EQ(j.at("contracts").get<std::vector<std::string>>(), want);
    }
}

TEST(GdnControls, ForwardAndBackwardEqualTheChunkedImplementationBitForBit) {
    Library fwd("gdn_forward"), bwd("gdn_backward");
    ASSERT_NE(fwd.handle, nullptr) << dlerror();
    ASSERT_NE(bwd.handle, nullptr) << dlerror();
    auto run_fwd = fwd.get<kcv_kernel_fn>("kcv_kernel");
    auto run_bwd = bwd.get<kcv_kernel_fn>("kcv_kernel");
    auto fwd_error = fwd.get<const char* (*)()>("kcv_kernel_last_error");
    ASSERT_TRUE(run_fwd && run_bwd && fwd_error);
    const int64_t B = 1, T = 70, H = 1, HV = 2, K = 8, V = 4;
    std::mt19937 rng(5);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    for (kcv::gdn::Member m : kcv::gdn::all_members()) {
        const bool strided = m.gate == GateKind::scalar;   // some members read through strides
        HostTensor q({B, T, H, K}, strided), k({B, T, H, K}, strided), v({B, T, HV, V}, strided),
            g(m.gate == GateKind::channel ? std::vector<int64_t>{B, T, HV, K} : std::vector<int64_t>{B, T, HV}),
            beta({B, T, HV}), h0({B, HV, K, V}), d_o({B, T, HV, V}), dht({B, HV, K, V});
        for (HostTensor* t : {&q, &k, &v, &h0, &d_o, &dht})
            for (int64_t i = 0; i < t->numel(); ++i) t->at(i) = n01(rng) * (t == &k ? 0.35f : 1.0f);
        for (int64_t i = 0; i < g.numel(); ++i) g.at(i) = -std::abs(n01(rng)) * 0.3f;
        for (int64_t i = 0; i < beta.numel(); ++i) beta.at(i) = 0.5f + 0.4f * std::tanh(n01(rng));
        std::vector<DLTensor> inputs = {q.dl, k.dl, v.dl};
        if (m.gate != GateKind::none) inputs.push_back(g.dl);
        if (m.delta) inputs.push_back(beta.dl);
        inputs.push_back(h0.dl);
        const double scale = 0.5;
        std::vector<kcv_attribute> attrs = {{"gate", double(int(m.gate))}, {"delta", m.delta ? 1.0 : 0.0},
                                            {"scale", scale}, {"initial_state", 1.0}, {"final_state", 1.0}};
        HostTensor o({B, T, HV, V}), ht({B, HV, K, V});
        std::vector<DLTensor> outs = {o.dl, ht.dl};
        kcv_call call{KCV_ABI_VERSION, "gdn-forward", int32_t(inputs.size()), inputs.data(), 2, outs.data(),
                      int32_t(attrs.size()), attrs.data(), nullptr};
        ASSERT_EQ(run_fwd(&call), 0) << kcv::gdn::member_name(m) << ": " << fwd_error();

        // The same problem through the library directly.
        const kcv::gdn::Problem p{m, kcv::gdn::Shape{B, T, H, HV, K, V, {}}, scale};
        const auto ql = q.logical(), kl = k.logical(), vl = v.logical(), gl = g.logical(), bl = beta.logical(),
                   hl = h0.logical(), dol = d_o.logical(), dhl = dht.logical();
        std::vector<float> want_o(size_t(o.numel())), want_ht(size_t(ht.numel()));
        kcv::gdn::cpu::chunked_forward(p, {ql.data(), kl.data(), vl.data(), gl.data(), bl.data(), hl.data(),
                                           want_o.data(), want_ht.data()});
        EXPECT_EQ(0, std::memcmp(o.logical().data(), want_o.data(), want_o.size() * 4)) << kcv::gdn::member_name(m);
        EXPECT_EQ(0, std::memcmp(ht.logical().data(), want_ht.data(), want_ht.size() * 4)) << kcv::gdn::member_name(m);

        std::vector<DLTensor> bin = inputs;
        bin.push_back(d_o.dl);
        bin.push_back(dht.dl);
        HostTensor dq({B, T, H, K}), dk({B, T, H, K}), dv({B, T, HV, V}), dg(g.shape), db({B, T, HV}), dh0({B, HV, K, V});
        std::vector<DLTensor> bouts = {dq.dl, dk.dl, dv.dl};
        if (m.gate != GateKind::none) bouts.push_back(dg.dl);
        if (m.delta) bouts.push_back(db.dl);
        bouts.push_back(dh0.dl);
        kcv_call bcall{KCV_ABI_VERSION, "gdn-backward", int32_t(bin.size()), bin.data(), int32_t(bouts.size()),
                       bouts.data(), int32_t(attrs.size()), attrs.data(), nullptr};
        ASSERT_EQ(run_bwd(&bcall), 0) << kcv::gdn::member_name(m);
        std::vector<float> wdq(size_t(dq.numel())), wdk(wdq.size()), wdv(size_t(dv.numel())), wdg(size_t(dg.numel())),
            wdb(size_t(db.numel())), wdh0(size_t(dh0.numel()));
        kcv::gdn::cpu::BackwardArgs a;
        a.q = ql.data(); a.k = kl.data(); a.v = vl.data(); a.g = gl.data(); a.beta = bl.data(); a.h0 = hl.data();
        a.d_o = dol.data(); a.dht = dhl.data();
        a.dq = wdq.data(); a.dk = wdk.data(); a.dv = wdv.data(); a.dg = wdg.data(); a.dbeta = wdb.data();
        a.dh0 = wdh0.data();
        kcv::gdn::cpu::chunked_backward(p, a);
        EXPECT_EQ(dq.logical(), wdq) << kcv::gdn::member_name(m);
        EXPECT_EQ(dk.logical(), wdk) << kcv::gdn::member_name(m);
        EXPECT_EQ(dv.logical(), wdv) << kcv::gdn::member_name(m);
        EXPECT_EQ(dh0.logical(), wdh0) << kcv::gdn::member_name(m);
        if (m.gate != GateKind::none) EXPECT_EQ(dg.logical(), wdg) << kcv::gdn::member_name(m);
        if (m.delta) EXPECT_EQ(db.logical(), wdb) << kcv::gdn::member_name(m);
    }
}

// The recurrent form: the oracle's steps in float32, bit for bit through the ABI, and within
// float32's reach of the float64 oracle (relative to the output's largest magnitude), not a copy
// of the chunked control (a second formulation is what makes it a second control).
TEST(GdnControls, RecurrentFormIsTheOraclesStepsInFloat32) {
    Library fwd("gdn_recurrent_forward"), bwd("gdn_recurrent_backward");
    ASSERT_NE(fwd.handle, nullptr) << dlerror();
    ASSERT_NE(bwd.handle, nullptr) << dlerror();
    auto run_fwd = fwd.get<kcv_kernel_fn>("kcv_kernel");
    auto run_bwd = bwd.get<kcv_kernel_fn>("kcv_kernel");
    ASSERT_TRUE(run_fwd && run_bwd);
    const int64_t B = 1, T = 70, H = 1, HV = 2, K = 8, V = 4;
    std::mt19937 rng(9);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    auto rel = [](const std::vector<float>& y, const std::vector<double>& ref) {
        double err = 0.0, top = 0.0;
        for (size_t i = 0; i < y.size(); ++i) {
            err = std::max(err, std::abs(double(y[i]) - ref[i]));
            top = std::max(top, std::abs(ref[i]));
        }
        return err / top;
    };
    for (kcv::gdn::Member m : kcv::gdn::all_members()) {
        SCOPED_TRACE(kcv::gdn::member_name(m));
        HostTensor q({B, T, H, K}, true), k({B, T, H, K}), v({B, T, HV, V}),
            g(m.gate == GateKind::channel ? std::vector<int64_t>{B, T, HV, K} : std::vector<int64_t>{B, T, HV}),
            beta({B, T, HV}), h0({B, HV, K, V}), d_o({B, T, HV, V}), dht({B, HV, K, V});
        for (HostTensor* t : {&q, &k, &v, &h0, &d_o, &dht})
            for (int64_t i = 0; i < t->numel(); ++i) t->at(i) = n01(rng) * (t == &k ? 0.35f : 1.0f);
        for (int64_t i = 0; i < g.numel(); ++i) g.at(i) = -std::abs(n01(rng)) * 0.3f;
        for (int64_t i = 0; i < beta.numel(); ++i) beta.at(i) = 0.5f + 0.4f * std::tanh(n01(rng));
        std::vector<DLTensor> inputs = {q.dl, k.dl, v.dl};
        if (m.gate != GateKind::none) inputs.push_back(g.dl);
        if (m.delta) inputs.push_back(beta.dl);
        inputs.push_back(h0.dl);
        const double scale = 0.5;
        std::vector<kcv_attribute> attrs = {{"gate", double(int(m.gate))}, {"delta", m.delta ? 1.0 : 0.0},
                                            {"scale", scale}, {"initial_state", 1.0}, {"final_state", 1.0}};
        HostTensor o({B, T, HV, V}), ht({B, HV, K, V});
        std::vector<DLTensor> outs = {o.dl, ht.dl};
        kcv_call call{KCV_ABI_VERSION, "gdn-forward", int32_t(inputs.size()), inputs.data(), 2, outs.data(),
                      int32_t(attrs.size()), attrs.data(), nullptr};
        ASSERT_EQ(run_fwd(&call), 0);
        std::vector<DLTensor> bin = inputs;
        bin.push_back(d_o.dl);
        bin.push_back(dht.dl);
        HostTensor dq({B, T, H, K}), dk({B, T, H, K}), dv({B, T, HV, V}), dg(g.shape), db({B, T, HV}), dh0({B, HV, K, V});
        std::vector<DLTensor> bouts = {dq.dl, dk.dl, dv.dl};
        if (m.gate != GateKind::none) bouts.push_back(dg.dl);
        if (m.delta) bouts.push_back(db.dl);
        bouts.push_back(dh0.dl);
        kcv_call bcall{KCV_ABI_VERSION, "gdn-backward", int32_t(bin.size()), bin.data(), int32_t(bouts.size()),
                       bouts.data(), int32_t(attrs.size()), attrs.data(), nullptr};
        ASSERT_EQ(run_bwd(&bcall), 0);

        const kcv::gdn::Problem p{m, kcv::gdn::Shape{B, T, H, HV, K, V, {}}, scale};
        const auto ql = q.logical(), kl = k.logical(), vl = v.logical(), gl = g.logical(), bl = beta.logical(),
                   hl = h0.logical(), dol = d_o.logical(), dhl = dht.logical();
        // The oracle's steps in float32, called directly.
        std::vector<float> fo(size_t(o.numel())), fht(size_t(ht.numel())), fdq(size_t(dq.numel())), fdk(fdq.size()),
            fdv(size_t(dv.numel())), fdg(size_t(dg.numel())), fdb(size_t(db.numel())), fdh0(size_t(dh0.numel()));
        kcv::gdn::ForwardArgsF32 fa;
        fa.q = ql.data(); fa.k = kl.data(); fa.v = vl.data(); fa.g = gl.data(); fa.beta = bl.data(); fa.h0 = hl.data();
        fa.o = fo.data(); fa.ht = fht.data();
        kcv::gdn::forward(p, fa);
        kcv::gdn::BackwardArgsF32 ba;
        ba.q = ql.data(); ba.k = kl.data(); ba.v = vl.data(); ba.g = gl.data(); ba.beta = bl.data(); ba.h0 = hl.data();
        ba.d_o = dol.data(); ba.dht = dhl.data(); ba.dq = fdq.data(); ba.dk = fdk.data(); ba.dv = fdv.data();
        ba.dg = fdg.data(); ba.dbeta = fdb.data(); ba.dh0 = fdh0.data();
        kcv::gdn::backward(p, ba);
        EXPECT_EQ(o.logical(), fo);
        EXPECT_EQ(ht.logical(), fht);
        EXPECT_EQ(dq.logical(), fdq);
        EXPECT_EQ(dk.logical(), fdk);
        EXPECT_EQ(dv.logical(), fdv);
        EXPECT_EQ(dh0.logical(), fdh0);
        if (m.gate != GateKind::none) EXPECT_EQ(dg.logical(), fdg);
        if (m.delta) EXPECT_EQ(db.logical(), fdb);

        // The float64 oracle on the same (float32) inputs.
        auto widen = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
        const auto q64 = widen(ql), k64 = widen(kl), v64 = widen(vl), g64 = widen(gl), b64 = widen(bl),
                   h64 = widen(hl), ddo = widen(dol), ddht = widen(dhl);
        std::vector<double> ro(fo.size()), rht(fht.size()), rdq(fdq.size()), rdk(fdk.size()), rdv(fdv.size()),
            rdg(fdg.size()), rdb(fdb.size()), rdh0(fdh0.size());
        kcv::gdn::ForwardArgs da;
        da.q = q64.data(); da.k = k64.data(); da.v = v64.data(); da.g = g64.data(); da.beta = b64.data();
        da.h0 = h64.data(); da.o = ro.data(); da.ht = rht.data();
        kcv::gdn::forward(p, da);
        kcv::gdn::BackwardArgs dba;
        dba.q = q64.data(); dba.k = k64.data(); dba.v = v64.data(); dba.g = g64.data(); dba.beta = b64.data();
        dba.h0 = h64.data(); dba.d_o = ddo.data(); dba.dht = ddht.data(); dba.dq = rdq.data(); dba.dk = rdk.data();
        dba.dv = rdv.data(); dba.dg = rdg.data(); dba.dbeta = rdb.data(); dba.dh0 = rdh0.data();
        kcv::gdn::backward(p, dba);
        for (auto [y, ref] : {std::pair{&fo, &ro}, {&fht, &rht}, {&fdq, &rdq}, {&fdk, &rdk}, {&fdv, &rdv}, {&fdh0, &rdh0}}) {
            const double r = rel(*y, *ref);
            EXPECT_LT(r, 1e-5);
            EXPECT_GT(r, 0.0) << "float32 arithmetic cannot be exact on these inputs";
        }
        if (m.gate != GateKind::none) EXPECT_LT(rel(fdg, rdg), 1e-5);
        if (m.delta) EXPECT_LT(rel(fdb, rdb), 1e-5);

        // Not the chunked control's numbers.
        std::vector<float> co(fo.size()), cht(fht.size());
        kcv::gdn::cpu::chunked_forward(p, {ql.data(), kl.data(), vl.data(), gl.data(), bl.data(), hl.data(), co.data(),
                                           cht.data()});
        EXPECT_NE(cht, fht);
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
