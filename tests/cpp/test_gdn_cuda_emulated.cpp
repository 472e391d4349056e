// The CUDA recurrence kernels' own source, run on the host (gdn/cuda/host_emulation.hpp: a
// block's threads are std::threads meeting at a barrier), against the float64 oracle under the
// contracts' error model. It exercises the kernels' indexing, masking, chunk layout (varlen,
// partial chunks, grouped heads) and barriers on a machine without a GPU; the GPU itself runs
// the same launch sequence (gdn/cuda/gdn_launch.cuh) through gdn/tests/check_gdn_cuda.cu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#define KCV_GDN_HOST_EMULATION 1
#include "../../gdn/cuda/gdn_launch.cuh"
#include "../../gdn/oracle/gdn_oracle.hpp"

namespace {

using kcv::gdn::GateKind;
using kcv::gdn::Member;
namespace cu = kcv::gdn::cuda;

struct HostLauncher {
    template <class Kernel, class... Args>
    int operator()(Kernel kernel, dim3 grid, size_t smem, const char*, Args... args) {
        if (smem > sizeof(cu::emulation::shared_memory)) return 1;
        if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;
        // Fewer threads than on the GPU: the kernels stride over blockDim, and the emulation runs
        // faster with fewer host threads per block.
        cu::emulation::launch(kernel, grid, 32, args...);
        return 0;
    }
};

struct Case {
    std::string name;
    Member member;
    kcv::gdn::Shape shape;
};

double ratio(const std::vector<float>& y, const std::vector<double>& ref, const std::vector<double>& s, double k) {
    const double u = 0x1p-24, tiny = std::numeric_limits<float>::min() * 0x1p-23;
    double r = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        const double e = std::abs(double(y[i]) - ref[i]) / (4.0 * u * std::sqrt(k) * s[i] + u * std::abs(ref[i]) + tiny);
        if (!(e == e)) return std::numeric_limits<double>::quiet_NaN();
        r = std::max(r, e);
    }
    return r;
}

void run_case(const Case& c, uint32_t seed) {
    const kcv::gdn::Shape& s = c.shape;
    const kcv::gdn::Problem p{c.member, s, 1.0 / std::sqrt(double(s.K))};
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n01(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    auto draw = [&](int64_t n, auto gen) {
        std::vector<float> x(n);
        for (auto& e : x) e = float(gen());
        return x;
    };
    const double ks = 1.0 / std::sqrt(double(s.K));
    const auto q = draw(s.qk_size(), [&] { return n01(rng); });
    const auto k = draw(s.qk_size(), [&] { return ks * n01(rng); });
    const auto v = draw(s.v_size(), [&] { return n01(rng); });
    const auto g = draw(s.g_size(c.member.gate), [&] { return -u01(rng); });
    const auto beta = draw(s.beta_size(), [&] { return u01(rng); });
    const auto h0 = draw(s.state_size(), [&] { return n01(rng); });
    const auto d_o = draw(s.v_size(), [&] { return n01(rng); });
    const auto dht = draw(s.state_size(), [&] { return n01(rng); });

    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> o(s.v_size(), nan), ht(s.state_size(), nan), dq(s.qk_size(), nan), dk(s.qk_size(), nan),
        dv(s.v_size(), nan), dg(s.g_size(c.member.gate), nan), dbeta(s.beta_size(), nan), dh0(s.state_size(), nan);
    kcv_gdn_params kp{};
    kp.gate = static_cast<int32_t>(c.member.gate);
    kp.delta = c.member.delta;
    kp.dtype = 0;
    kp.B = s.B; kp.T = s.T; kp.H = s.H; kp.HV = s.HV; kp.K = s.K; kp.V = s.V;
    kp.N = s.sequences();
    kp.cu_seqlens = s.cu_seqlens.empty() ? nullptr : s.cu_seqlens.data();
    kp.scale = float(p.scale);
    kp.q = q.data(); kp.k = k.data(); kp.v = v.data(); kp.g = g.data(); kp.beta = beta.data(); kp.h0 = h0.data();
    kp.o = o.data(); kp.ht = ht.data();
    kp.d_o = d_o.data(); kp.dht = dht.data();
    kp.dq = dq.data(); kp.dk = dk.data(); kp.dv = dv.data(); kp.dg = dg.data(); kp.dbeta = dbeta.data();
    kp.dh0 = dh0.data();
    cu::Workspace layout{};
    const size_t bytes = cu::layout_workspace(cu::make_dims(kp), true, kp.gate, nullptr, layout);
    std::vector<float> ws(bytes / sizeof(float) + 64, nan);
    kp.workspace = ws.data();
    kp.workspace_bytes = ws.size() * sizeof(float);
    HostLauncher launch;
    const int member = int(c.member.gate) * 2 + c.member.delta;
    auto run = [&](bool backward) {
        switch (member) {
            case 0: return backward ? cu::backward_sequence<0, false, float>(launch, kp) : cu::forward_sequence<0, false, float>(launch, kp);
            case 2: return backward ? cu::backward_sequence<1, false, float>(launch, kp) : cu::forward_sequence<1, false, float>(launch, kp);
            case 3: return backward ? cu::backward_sequence<1, true, float>(launch, kp) : cu::forward_sequence<1, true, float>(launch, kp);
            case 4: return backward ? cu::backward_sequence<2, false, float>(launch, kp) : cu::forward_sequence<2, false, float>(launch, kp);
            default: return backward ? cu::backward_sequence<2, true, float>(launch, kp) : cu::forward_sequence<2, true, float>(launch, kp);
        }
    };
    ASSERT_EQ(run(false), 0) << c.name;
    ASSERT_EQ(run(true), 0) << c.name;

    auto widen = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    const auto qd = widen(q), kd = widen(k), vd = widen(v), gd = widen(g), bd = widen(beta), h0d = widen(h0),
               dod = widen(d_o), dhtd = widen(dht);
    std::vector<double> ro(s.v_size()), ros(s.v_size()), rht(s.state_size()), rhts(s.state_size());
    kcv::gdn::forward(p, {qd.data(), kd.data(), vd.data(), gd.data(), bd.data(), h0d.data(), ro.data(), rht.data(),
                          ros.data(), rhts.data()});
    std::vector<double> rdq(s.qk_size()), rdk(s.qk_size()), rdv(s.v_size()), rdg(s.g_size(c.member.gate)),
        rdb(s.beta_size()), rdh0(s.state_size());
    auto sdq = rdq, sdk = rdk, sdv = rdv, sdg = rdg, sdb = rdb, sdh0 = rdh0;
    kcv::gdn::BackwardArgs ba;
    ba.q = qd.data(); ba.k = kd.data(); ba.v = vd.data(); ba.g = gd.data(); ba.beta = bd.data(); ba.h0 = h0d.data();
    ba.d_o = dod.data(); ba.dht = dhtd.data();
    ba.dq = rdq.data(); ba.dk = rdk.data(); ba.dv = rdv.data(); ba.dg = rdg.data(); ba.dbeta = rdb.data();
    ba.dh0 = rdh0.data(); ba.dq_scale = sdq.data(); ba.dk_scale = sdk.data(); ba.dv_scale = sdv.data();
    ba.dg_scale = sdg.data(); ba.dbeta_scale = sdb.data(); ba.dh0_scale = sdh0.data();
    kcv::gdn::backward(p, ba);

    const double TK = double(s.T * s.K), TV = double(s.T * s.V);
    std::vector<std::pair<std::string, double>> r = {
        {"o", ratio(o, ro, ros, TK)},     {"ht", ratio(ht, rht, rhts, TK)}, {"dq", ratio(dq, rdq, sdq, TV)},
        {"dk", ratio(dk, rdk, sdk, TV)},  {"dv", ratio(dv, rdv, sdv, TK)},  {"dh0", ratio(dh0, rdh0, sdh0, TK)}};
    if (c.member.gate != GateKind::none) r.push_back({"dg", ratio(dg, rdg, sdg, TK)});
    if (c.member.delta) r.push_back({"dbeta", ratio(dbeta, rdb, sdb, TK)});
    std::string line;
    for (auto& [n, x] : r) line += n + "=" + std::to_string(x) + " ";
    std::printf("  %-26s %s\n", c.name.c_str(), line.c_str());
    for (auto& [n, x] : r) EXPECT_LE(x, 1.0) << c.name << " seed " << seed << " " << n << ": " << line;
}

TEST(GdnCudaEmulated, KernelsAgreeWithOracle) {
    uint32_t seed = 500;
    for (Member m : kcv::gdn::all_members()) {
        const std::string n = kcv::gdn::member_name(m);
        // Varlen with a one-token sequence, a partial chunk, grouped heads (H = 1, HV = 2).
        run_case({n + "/varlen", m, kcv::gdn::Shape{1, 70, 1, 2, 16, 16, {0, 1, 70}}}, ++seed);
        // Batched, K != V, V not a multiple of the 16-column scan slice.
        run_case({n + "/batched", m, kcv::gdn::Shape{2, 20, 2, 2, 8, 20, {}}}, ++seed);
    }
}

}  // namespace
