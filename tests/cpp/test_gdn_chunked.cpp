// The float32 chunked recurrence against the float64 oracle under the analytic error model of
// the recurrence contracts (scan over T): τ = c·u·√K_i·s + u·|y*| + ulp(min normal), c = 4,
// u = 2^-24, K_i = T·K or T·V. Members × odd lengths, partial last chunks, varlen with tiny and long sequences,
// zero and strong decay, initial state and final-state gradient, grouped heads. Plus bitwise
// determinism and exact cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <cstring>

// The chunked implementation is not part of libkcv (the oracle is), so it is compiled here.
#include "../../gdn/cpu/gdn_chunked.cpp"
#include "../../gdn/oracle/gdn_oracle.hpp"
#include "kcv/contract.hpp"
// The CUDA kernels' source on host threads, to compare with the chunked implementation here,
// the one file that compiles both.
#define KCV_GDN_HOST_EMULATION 1
#include "../../gdn/cuda/host_run.hpp"

namespace {

using kcv::gdn::GateKind;
using kcv::gdn::Member;
using kcv::gdn::Problem;
using kcv::gdn::Shape;

struct Case {
    std::string name;
    Member member;
    Shape shape;
    bool h0 = true, dht = true;
    double g_lo = -1.0, g_hi = 0.0;   // log decay drawn from U(g_lo, g_hi)
    double state_scale = 1.0;         // v and h0 multiplied by it (before any rounding to bf16)
};

struct Inputs {
    std::vector<float> q, k, v, g, beta, h0, d_o, dht;
};

Inputs draw(const Problem& p, const Case& c, uint32_t seed) {
    const Shape& s = p.shape;
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n01(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    const double key_std = 1.0 / std::sqrt(double(s.K));
    Inputs in;
    auto fill = [&](std::vector<float>& x, int64_t n, auto gen) {
        x.resize(n);
        for (auto& e : x) e = static_cast<float>(gen());
    };
    fill(in.q, s.qk_size(), [&] { return n01(rng); });
    fill(in.k, s.qk_size(), [&] { return key_std * n01(rng); });
    fill(in.v, s.v_size(), [&] { return n01(rng); });
    fill(in.g, s.g_size(p.member.gate), [&] { return c.g_lo + (c.g_hi - c.g_lo) * u01(rng); });
    fill(in.beta, s.beta_size(), [&] { return u01(rng); });
    fill(in.h0, s.state_size(), [&] { return n01(rng); });
    fill(in.d_o, s.v_size(), [&] { return n01(rng); });
    fill(in.dht, s.state_size(), [&] { return n01(rng); });
    for (std::vector<float>* x : {&in.v, &in.h0})
        for (float& e : *x) e = static_cast<float>(e * c.state_scale);
    return in;
}

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// The largest ratio |y − y*| / τ over an output; u_op: the operand format's unit roundoff, whose
// term n·u_op·s a contract that declares bf16 operands adds, n its output's operand_roundings
// (docs/gates.md); η = 2^-150, what a float32 product that underflows loses.
double ratio(const std::vector<float>& y, const std::vector<double>& ref, const std::vector<double>& s, double K,
             double u_op = 0.0, double n = 2.0) {
    const double u = 0x1p-24, c = 4.0, eta = 0x1p-150, tiny = std::numeric_limits<float>::min() * 0x1p-23;
    double r = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        const double tau = c * std::sqrt(K) * (u * s[i] + eta) + n * u_op * s[i] + u * std::abs(ref[i]) + tiny;
        const double e = std::abs(double(y[i]) - ref[i]) / tau;
        if (std::isnan(e)) return std::numeric_limits<double>::quiet_NaN();
        r = std::max(r, e);
    }
    return r;
}

struct Ratios {
    std::vector<std::pair<std::string, double>> r;
    double max() const {
        double m = 0;
        for (auto& [n, v] : r) m = std::isnan(v) ? v : std::max(m, v);
        return m;
    }
    std::string str() const {
        std::string out;
        for (auto& [n, v] : r) out += n + "=" + std::to_string(v) + " ";
        return out;
    }
};

// How many rounded operands one term of an output passes through in the chunked form with bf16
// operands, read from the member's contract that allows them (operand_roundings; docs/gdn.md,
// "Chains of rounded operands"), so that the contracts as built are what these tests hold the
// algorithm to.
double roundings(Member m, const std::string& output) {
    std::string member = kcv::gdn::member_name(m);
    std::replace(member.begin(), member.end(), '_', '-');
    const std::string direction = output == "o" || output == "ht" ? "forward" : "backward";
    const kcv::Contract c = kcv::resolve_contract("gdn-" + direction + "-" + member + "-bf16-operands");
    for (const kcv::OutputSpec& o : c.outputs)
        if (o.name == output) return o.operand_roundings;
    throw std::logic_error(c.id + " has no output " + output);
}

// bf16: the chunked implementation with bf16 operands, on inputs q, k, v, do that are bf16 values
// (as the bf16 contracts draw them), judged with the operand term of u(bf16) = 2^-8, the oracle's
// scales floored at `floor` (the oracle's operand_floor), and each output's roundings(); with
// `n_two`, every output with two, the count of a sum of products.
Ratios run_case(const Case& c, uint32_t seed, bool bf16 = false, double floor = 0.0, int chunk = kcv::gdn::cpu::kChunk,
               bool n_two = false) {
    Problem p{c.member, c.shape, 1.0 / std::sqrt(double(c.shape.K))};
    const Shape& s = p.shape;
    Inputs in = draw(p, c, seed);
    if (bf16)
        for (std::vector<float>* x : {&in.q, &in.k, &in.v, &in.d_o})
            for (float& e : *x) e = kcvk::bf16_rounded(e);
    const auto q = widen(in.q), k = widen(in.k), v = widen(in.v), g = widen(in.g), beta = widen(in.beta),
               h0 = widen(in.h0), d_o = widen(in.d_o), dht = widen(in.dht);
    // Reference.
    std::vector<double> o(s.v_size()), os(s.v_size()), ht(s.state_size()), hts(s.state_size());
    kcv::gdn::ForwardArgs fa{q.data(), k.data(), v.data(), g.data(), beta.data(), c.h0 ? h0.data() : nullptr,
                             o.data(), ht.data(), os.data(), hts.data(), floor};
    kcv::gdn::forward(p, fa);
    std::vector<double> dq(s.qk_size()), dk(s.qk_size()), dv(s.v_size()), dg(s.g_size(p.member.gate)),
        dbeta(s.beta_size()), dh0(s.state_size());
    std::vector<double> dqs = dq, dks = dk, dvs = dv, dgs = dg, dbetas = dbeta, dh0s = dh0;
    kcv::gdn::BackwardArgs ba;
    ba.q = q.data(); ba.k = k.data(); ba.v = v.data(); ba.g = g.data(); ba.beta = beta.data();
    ba.h0 = c.h0 ? h0.data() : nullptr; ba.d_o = d_o.data(); ba.dht = c.dht ? dht.data() : nullptr;
    ba.dq = dq.data(); ba.dk = dk.data(); ba.dv = dv.data(); ba.dg = dg.data(); ba.dbeta = dbeta.data();
    ba.dh0 = dh0.data(); ba.dq_scale = dqs.data(); ba.dk_scale = dks.data(); ba.dv_scale = dvs.data();
    ba.dg_scale = dgs.data(); ba.dbeta_scale = dbetas.data(); ba.dh0_scale = dh0s.data();
    ba.operand_floor = floor;
    kcv::gdn::backward(p, ba);
    // Chunked float32, outputs poisoned with NaN so an unwritten element fails.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> fo(s.v_size(), nan), fht(s.state_size(), nan);
    kcv::gdn::cpu::chunked_forward(p, {in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                       c.h0 ? in.h0.data() : nullptr, fo.data(), fht.data(), bf16, chunk});
    std::vector<float> fdq(s.qk_size(), nan), fdk(s.qk_size(), nan), fdv(s.v_size(), nan),
        fdg(s.g_size(p.member.gate), nan), fdbeta(s.beta_size(), nan), fdh0(s.state_size(), nan);
    kcv::gdn::cpu::BackwardArgs cb;
    cb.q = in.q.data(); cb.k = in.k.data(); cb.v = in.v.data(); cb.g = in.g.data(); cb.beta = in.beta.data();
    cb.h0 = c.h0 ? in.h0.data() : nullptr; cb.d_o = in.d_o.data(); cb.dht = c.dht ? in.dht.data() : nullptr;
    cb.dq = fdq.data(); cb.dk = fdk.data(); cb.dv = fdv.data(); cb.dg = fdg.data(); cb.dbeta = fdbeta.data();
    cb.dh0 = fdh0.data();
    cb.bf16_operands = bf16;
    cb.chunk = chunk;
    kcv::gdn::cpu::chunked_backward(p, cb);

    // Accumulation lengths as the contracts declare them: an output sums T·K products (o, ht,
    // dv, dg, dbeta, dh0) or T·V products (dq, dk).
    const double TK = double(s.T * s.K), TV = double(s.T * s.V), u_op = bf16 ? 0x1p-8 : 0.0;
    Ratios r;
    auto add = [&](const char* name, const std::vector<float>& y, const std::vector<double>& ref,
                   const std::vector<double>& scale, double K) {
        r.r.push_back({name, ratio(y, ref, scale, K, u_op, n_two ? 2.0 : roundings(p.member, name))});
    };
    add("o", fo, o, os, TK);
    add("ht", fht, ht, hts, TK);
    add("dq", fdq, dq, dqs, TV);
    add("dk", fdk, dk, dks, TV);
    add("dv", fdv, dv, dvs, TK);
    if (p.member.gate != GateKind::none) add("dg", fdg, dg, dgs, TK);
    if (p.member.delta) add("dbeta", fdbeta, dbeta, dbetas, TK);
    add("dh0", fdh0, dh0, dh0s, TK);
    return r;
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (Member m : kcv::gdn::all_members()) {
        const std::string n = kcv::gdn::member_name(m);
        out.push_back({n + "/contract-shape", m, Shape{1, 130, 2, 4, 32, 32, {}}});
        out.push_back({n + "/batched-no-state", m, Shape{2, 65, 1, 2, 16, 8, {}}, false, false});
        out.push_back({n + "/varlen", m, Shape{1, 200, 1, 2, 16, 16, {0, 1, 2, 66, 130, 200}}});
        out.push_back({n + "/one-token", m, Shape{1, 1, 1, 1, 8, 8, {}}});
        out.push_back({n + "/exact-chunk", m, Shape{1, 128, 1, 1, 16, 16, {}}});
        if (m.gate != GateKind::none) {
            out.push_back({n + "/zero-gate", m, Shape{1, 100, 1, 1, 16, 16, {}}, true, true, 0.0, 0.0});
            out.push_back({n + "/strong-decay", m, Shape{1, 150, 1, 1, 16, 16, {}}, true, true, -8.0, -2.0});
        }
    }
    return out;
}

TEST(GdnChunked, AgreesWithOracleUnderTheScanErrorModel) {
    uint32_t seed = 1000;
    for (const Case& c : cases()) {
        ++seed;
        const Ratios r = run_case(c, seed);
        EXPECT_LE(r.max(), 1.0) << c.name << " seed " << seed << ": " << r.str();
        RecordProperty(c.name, r.str());
        std::printf("  %-34s %s\n", c.name.c_str(), r.str().c_str());
    }
}

// Every chunk length is the same algorithm, correct under the same model: one token a chunk (the
// recurrence by its chunked steps), 32 and 128 (the lengths bench/ord03_sweep.py judges beside the
// controls), and 7, which leaves a partial last chunk in every case.
TEST(GdnChunked, AgreesWithOracleAtOtherChunkLengths) {
    for (int chunk : {1, 7, 32, 128}) {
        uint32_t seed = 1000;
        for (const Case& c : cases()) {
            ++seed;
            const Ratios r = run_case(c, seed, false, 0.0, chunk);
            EXPECT_LE(r.max(), 1.0) << c.name << " chunk " << chunk << " seed " << seed << ": " << r.str();
        }
    }
}

TEST(GdnChunked, RefusesAnEmptyChunk) {
    const Problem p{kcv::gdn::all_members()[0], Shape{1, 4, 1, 1, 2, 2, {}}, 1.0};
    std::vector<float> x(16, 0.5f), o(16), ht(4);
    kcv::gdn::cpu::ForwardArgs a{x.data(), x.data(), x.data(), x.data(), x.data(), nullptr, o.data(), ht.data()};
    a.chunk = 0;
    EXPECT_THROW(kcv::gdn::cpu::chunked_forward(p, a), std::invalid_argument);
}

// With every stored intermediate rounded to bf16 (gdn_chunked.hpp), the chunked algorithm against
// the bound of a contract that declares bf16 operands, c·u·√K·s + n·u(bf16)·s + u·|y*|, on the
// cases above and at K = V = 128, the bf16 contracts' head size, n each output's roundings().
// Every output stays within it. With n = 2 for every output, the delta members' final state does
// not (r up to 0.99 for KDA at K = 32, 1.10 at K = 128 on these seeds; asserted above 0.9, so
// that a count above two is seen to be needed): rounding T, W and Δ, intermediates larger than the
// oracle's terms, is not covered by 2·u(bf16)·s.
TEST(GdnChunked, WithBf16OperandsAgreesWithOracleUnderTheBf16OperandModel) {
    std::vector<Case> all = cases();
    for (Member m : kcv::gdn::all_members())
        all.push_back({std::string(kcv::gdn::member_name(m)) + "/head-size-128", m, Shape{1, 130, 2, 4, 128, 128, {}}});
    uint32_t seed = 2000;
    double delta_ht_two = 0, delta_ht = 0;
    for (const Case& c : all) {
        ++seed;
        const Ratios r = run_case(c, seed, true);
        for (const auto& [name, value] : r.r) {
            EXPECT_LE(value, 1.0) << c.name << " seed " << seed << ", " << name << ": " << r.str();
            if (c.member.delta && name == "ht") delta_ht = std::max(delta_ht, value);
        }
        if (c.member.delta)
            for (const auto& [name, value] : run_case(c, seed, true, 0.0, kcv::gdn::cpu::kChunk, true).r)
                if (name == "ht") delta_ht_two = std::max(delta_ht_two, value);
        std::printf("  %-34s %s\n", c.name.c_str(), r.str().c_str());
    }
    std::printf("  largest r of the delta members' ht: %.3f with the contracts' count, %.3f with two\n", delta_ht,
                delta_ht_two);
    EXPECT_GT(delta_ht_two, 0.9);
}

// The oracle's operand floor (what a contract that declares bf16 operands passes it, bf16's
// smallest normal 2^-126) against the chunked implementation with bf16 operands, on v and h0
// scaled down so that the states, outputs and most gradients lie at or below bf16's subnormal
// range, where rounding an intermediate to bf16 loses up to 2^-134 whatever its size. Unfloored,
// the bound n·u(bf16)·s is relative and fails every member at 2^-130 (largest r 4–49); floored,
// every output is within it.
// At normal scale the floor changes no ratio. Not asserted: at 2^-135, where bf16 rounds most of
// v to zero, dk of the members without the delta term reaches r = 1.32, because the chunked form
// rounds the contraction dO·Vᵀ as one operand while the token form floors only its few nonzero
// terms (docs/gdn.md, "The magnitude scale s_i").
TEST(GdnChunked, OperandFloorBoundsBf16OperandsAtSubnormalScale) {
    constexpr double kBf16MinNormal = 0x1p-126;
    uint32_t seed = 3000;
    for (Member m : kcv::gdn::all_members()) {
        const std::string name = kcv::gdn::member_name(m);
        ++seed;
        Case normal{name + "/unscaled", m, Shape{1, 130, 2, 4, 32, 32, {}}};
        const Ratios plain = run_case(normal, seed, true), floored = run_case(normal, seed, true, kBf16MinNormal);
        for (size_t i = 0; i < plain.r.size(); ++i)
            EXPECT_EQ(plain.r[i].second, floored.r[i].second) << normal.name << ", " << plain.r[i].first;
        for (int e : {-126, -130, -140}) {
            Case c{name + "/states-2^" + std::to_string(e), m, Shape{1, 130, 2, 4, 32, 32, {}}};
            c.state_scale = std::ldexp(1.0, e);
            const Ratios unfloored = run_case(c, seed, true), r = run_case(c, seed, true, kBf16MinNormal);
            for (const auto& [out, value] : r.r)
                EXPECT_LE(value, 1.0) << c.name << ", " << out << ": " << r.str();
            if (e == -130) EXPECT_GT(unfloored.max(), 1.0) << c.name << ": " << unfloored.str();
            std::printf("  %-34s unfloored %s\n  %-34s floored   %s\n", c.name.c_str(), unfloored.str().c_str(), "",
                        r.str().c_str());
        }
    }
}

TEST(GdnChunked, IsBitwiseDeterministic) {
    for (Member m : kcv::gdn::all_members()) {
        Case c{"det", m, Shape{1, 70, 1, 2, 8, 8, {}}};
        Problem p{m, c.shape, 0.5};
        const Inputs in = draw(p, c, 7);
        auto run = [&] {
            std::vector<float> o(c.shape.v_size()), dq(c.shape.qk_size()), dk(c.shape.qk_size()),
                dv(c.shape.v_size()), dg(c.shape.g_size(m.gate)), db(c.shape.beta_size());
            kcv::gdn::cpu::chunked_forward(p, {in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                               in.h0.data(), o.data(), nullptr});
            kcv::gdn::cpu::BackwardArgs b;
            b.q = in.q.data(); b.k = in.k.data(); b.v = in.v.data(); b.g = in.g.data(); b.beta = in.beta.data();
            b.d_o = in.d_o.data(); b.dq = dq.data(); b.dk = dk.data(); b.dv = dv.data(); b.dg = dg.data();
            b.dbeta = db.data();
            kcv::gdn::cpu::chunked_backward(p, b);
            o.insert(o.end(), dq.begin(), dq.end());
            o.insert(o.end(), dg.begin(), dg.end());
            return o;
        };
        const auto a = run(), b = run();
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << kcv::gdn::member_name(m);
    }
}

TEST(GdnChunked, LinearAttentionIsExactOnSmallIntegers) {
    // Integers in [-2, 2], K = V = 4, 100 tokens (two chunks): every product and partial sum is an
    // integer below 2^24, so the chunked float32 result equals the float64 oracle exactly.
    Shape s{1, 100, 1, 1, 4, 4, {}};
    Problem p{kcv::gdn::kLinearAttention, s, 1.0};
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> small(-2, 2);
    std::vector<float> q(s.qk_size()), k(s.qk_size()), v(s.v_size());
    for (auto* x : {&q, &k, &v})
        for (auto& e : *x) e = float(small(rng));
    std::vector<float> o(s.v_size()), ht(s.state_size());
    kcv::gdn::cpu::chunked_forward(p, {q.data(), k.data(), v.data(), nullptr, nullptr, nullptr, o.data(), ht.data()});
    const auto qd = widen(q), kd = widen(k), vd = widen(v);
    std::vector<double> od(s.v_size()), htd(s.state_size());
    kcv::gdn::forward(p, {qd.data(), kd.data(), vd.data(), nullptr, nullptr, nullptr, od.data(), htd.data()});
    bool nonzero = false;
    for (size_t i = 0; i < o.size(); ++i) {
        ASSERT_EQ(double(o[i]), od[i]) << "seed 3, i=" << i;
        nonzero |= o[i] != 0.0f;
    }
    for (size_t i = 0; i < ht.size(); ++i) ASSERT_EQ(double(ht[i]), htd[i]);
    EXPECT_TRUE(nonzero);
}

TEST(GdnChunked, NanInALaterTokenNeverReachesAnEarlierOne) {
    for (Member m : kcv::gdn::all_members()) {
        Case c{"nan", m, Shape{1, 64, 1, 1, 8, 8, {}}};
        Problem p{m, c.shape, 0.5};
        Inputs in = draw(p, c, 9);
        in.v[40 * 8 + 3] = std::numeric_limits<float>::quiet_NaN();
        std::vector<float> o(c.shape.v_size());
        kcv::gdn::cpu::chunked_forward(p, {in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                           in.h0.data(), o.data(), nullptr});
        for (int t = 0; t < 40; ++t)
            for (int j = 0; j < 8; ++j) ASSERT_TRUE(std::isfinite(o[t * 8 + j])) << kcv::gdn::member_name(m) << " t=" << t;
        EXPECT_TRUE(std::isnan(o[40 * 8 + 3]));
    }
}

using Outputs = kcv::gdn::cuda::emulation::RunOutputs;

// This file's implementation, forward then backward, with h0 and dht.
Outputs run_chunked(const Problem& p, const Inputs& in) {
    Outputs out(p);
    kcv::gdn::cpu::chunked_forward(p, {in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                       in.h0.data(), out.o.data(), out.ht.data()});
    kcv::gdn::cpu::chunked_backward(p, {in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                        in.h0.data(), in.d_o.data(), in.dht.data(), out.dq.data(), out.dk.data(),
                                        out.dv.data(), out.dg.data(), out.dbeta.data(), out.dh0.data()});
    return out;
}

// The CUDA kernels of VERSION on host threads (their float32 specialisation, or with dtype 1 the
// bf16 one), forward then backward, with h0 and dht.
template <int VERSION>
Outputs run_emulated_kernels(const Problem& p, const Inputs& in, int dtype = 0) {
    Outputs out(p);
    const kcv::gdn::cuda::emulation::RunInputs ri{in.q.data(),    in.k.data(),   in.v.data(),   in.g.data(),
                                                  in.beta.data(), in.h0.data(), in.d_o.data(), in.dht.data()};
    EXPECT_EQ(kcv::gdn::cuda::emulation::run_member(p, ri, {.version = VERSION, .dtype = dtype}, out), 0)
        << "launch sequences";
    return out;
}

// The CUDA kernels compute this file's algorithm, not merely results within the error model:
// their float32 specialisations, run on the host (the same operations in the same order, no
// contraction), give the chunked implementation's bits for every output of every member,
// forward and backward, varlen included.
TEST(GdnChunked, EqualsTheEmulatedCudaKernelsBitForBit) {
    uint32_t seed = 1100;
    for (Member m : kcv::gdn::all_members()) {
        for (const Shape& shape : {Shape{1, 230, 1, 2, 16, 16, {0, 1, 65, 129, 229, 229, 230}},
                                   Shape{2, 70, 2, 2, 8, 20, {}}}) {
            const Case c{kcv::gdn::member_name(m), m, shape, true, true, -2.0, 0.0};
            const Problem p{m, shape, 0.25};
            const Inputs in = draw(p, c, ++seed);
            const Shape& s = shape;
            const Outputs cpu = run_chunked(p, in), kernels = run_emulated_kernels<1>(p, in);
            std::vector<std::tuple<const char*, const std::vector<float>*, const std::vector<float>*>> outputs = {
                {"o", &kernels.o, &cpu.o},       {"ht", &kernels.ht, &cpu.ht}, {"dq", &kernels.dq, &cpu.dq},
                {"dk", &kernels.dk, &cpu.dk},    {"dv", &kernels.dv, &cpu.dv}, {"dh0", &kernels.dh0, &cpu.dh0}};
            if (m.gate != GateKind::none) outputs.push_back({"dg", &kernels.dg, &cpu.dg});
            if (m.delta) outputs.push_back({"dbeta", &kernels.dbeta, &cpu.dbeta});
            for (const auto& [name, kernel, control] : outputs) {
                bool nonzero = false;
                for (size_t i = 0; i < control->size(); ++i) {
                    uint32_t a, b;
                    std::memcpy(&a, &(*kernel)[i], 4);
                    std::memcpy(&b, &(*control)[i], 4);
                    ASSERT_TRUE(std::isfinite((*control)[i])) << c.name << " seed " << seed << " " << name << "[" << i << "]";
                    ASSERT_EQ(a, b) << c.name << " B=" << s.B << " seed " << seed << ": " << name << "[" << i
                                    << "] kernels " << (*kernel)[i] << ", CPU " << (*control)[i];
                    nonzero |= (*control)[i] != 0.0f;
                }
                EXPECT_TRUE(nonzero) << c.name << " " << name;
            }
        }
    }
}

}  // namespace

namespace {

float to_bf16(float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;   // nearest, ties to even (finite x)
    std::memcpy(&x, &b, 4);
    return x;
}

// ORD-03's error: max |y − y*| / max |y*|.
double envelope_error(const std::vector<float>& y, const std::vector<double>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        num = std::max(num, std::abs(double(y[i]) - ref[i]));
        den = std::max(den, std::abs(ref[i]));
    }
    return num / den;
}

// A case's inputs as a bf16 contract's kernels take them: q, k, v and d_o rounded to bf16.
Inputs draw_bf16(const Problem& p, const Case& c, uint32_t seed) {
    Inputs in = draw(p, c, seed);
    for (auto* x : {&in.q, &in.k, &in.v, &in.d_o})
        for (float& e : *x) e = to_bf16(e);
    return in;
}

// The float64 oracle's forward and backward of the inputs, with h0 and dht (g and beta where the
// member has them).
struct OracleOutputs {
    std::vector<double> ht, dq, dk, dv, dg, dh0;
};

OracleOutputs oracle_outputs(const Problem& p, const Inputs& in) {
    const Shape& s = p.shape;
    const auto q = widen(in.q), k = widen(in.k), v = widen(in.v), g = widen(in.g), beta = widen(in.beta),
               h0 = widen(in.h0), d_o = widen(in.d_o), dht = widen(in.dht);
    const double* gp = p.member.gate != GateKind::none ? g.data() : nullptr;
    const double* bp = p.member.delta ? beta.data() : nullptr;
    OracleOutputs r{std::vector<double>(s.state_size()), std::vector<double>(s.qk_size()),
                    std::vector<double>(s.qk_size()),    std::vector<double>(s.v_size()),
                    std::vector<double>(s.g_size(p.member.gate)), std::vector<double>(s.state_size())};
    std::vector<double> o(s.v_size());
    kcv::gdn::forward(p, {q.data(), k.data(), v.data(), gp, bp, h0.data(), o.data(), r.ht.data()});
    std::vector<double> dbeta(p.member.delta ? s.beta_size() : 0);
    kcv::gdn::BackwardArgs ba;
    ba.q = q.data(); ba.k = k.data(); ba.v = v.data(); ba.g = gp; ba.beta = bp; ba.h0 = h0.data();
    ba.d_o = d_o.data(); ba.dht = dht.data(); ba.dq = r.dq.data(); ba.dk = r.dk.data(); ba.dv = r.dv.data();
    ba.dg = gp ? r.dg.data() : nullptr; ba.dbeta = bp ? dbeta.data() : nullptr; ba.dh0 = r.dh0.data();
    kcv::gdn::backward(p, ba);
    return r;
}

}  // namespace

// ORD-03 of the bf16 contracts in miniature, for linear attention: version 2 under host emulation
// (whose mma truncates its sums, as the tensor cores are reported to), on inputs rounded to bf16
// as the bf16 kernels take them (exact TF32 operands), keeps the error of its float32 outputs
// within ORD-03's margin, 1.2 times this file's. Before the high products were added outside the
// tensor core's accumulator, dh0 reached 1.9–2.1 times here and ht 1.4, the size of the H200's
// failures.
TEST(GdnChunked, TensorCoreKernelsStayWithinTheOrd03MarginOfThisImplementation) {
    const Member m = kcv::gdn::kLinearAttention;
    const Shape s{1, 130, 2, 4, 32, 32, {}};
    const Problem p{m, s, 1.0 / std::sqrt(32.0)};
    for (uint32_t seed : {1300u, 1301u, 1302u}) {
        const Inputs in = draw_bf16(p, Case{"la", m, s}, seed);
        const OracleOutputs ref = oracle_outputs(p, in);
        const Outputs cpu = run_chunked(p, in), kernels = run_emulated_kernels<2>(p, in);
        for (const auto& [name, ref_y, control_y, kernels_y] : {std::tuple{"ht", &ref.ht, &cpu.ht, &kernels.ht},
                                                                std::tuple{"dh0", &ref.dh0, &cpu.dh0, &kernels.dh0}}) {
            const double control = std::max(envelope_error(*control_y, *ref_y), 0x1p-23);
            const double error = envelope_error(*kernels_y, *ref_y);
            std::printf("  seed %u %-3s control %.3g kernels %.3g ratio %.2f\n", seed, name, control, error,
                        error / control);
            EXPECT_LE(error, 1.2 * control) << "seed " << seed << " " << name;
        }
    }
}

// dg of SSD's bf16 backward: the bf16 specialisation of version 2 under host emulation is more
// accurate than this file's float32 implementation, and so within ORD-03's margin of it. dg_t sums
// dγ from t to the chunk's end, where terms cancel (the k̃ ⊙ dk̃ of each token against those of
// dγ_C) and e^{γ_C} Σ dS ⊙ S₀ is a few units left of terms whose magnitudes add up to hundreds,
// so a float32 sum's rounding is most of dg's error, and which of two float32 implementations errs
// more is a coin toss (the H200 measured 2.71 times on one input). The kernels make those sums in
// float64: here their error is 0.16–0.50 of this file's, where float32 sums gave 0.71–0.96.
TEST(GdnChunked, TensorCoreKernelsKeepDgWithinTheOrd03MarginOfThisImplementation) {
    const Member m = kcv::gdn::kSsd;
    const Shape s{1, 130, 2, 4, 64, 64, {}};
    const Problem p{m, s, 1.0 / std::sqrt(64.0)};
    double sum_of_ratios = 0.0;
    const std::vector<uint32_t> seeds = {1300u, 1301u, 1302u};
    for (uint32_t seed : seeds) {
        const Inputs in = draw_bf16(p, Case{"ssd", m, s}, seed);
        const std::vector<double> dg = oracle_outputs(p, in).dg;
        const Outputs cpu = run_chunked(p, in), kernels = run_emulated_kernels<2>(p, in, 1);
        const double control = std::max(envelope_error(cpu.dg, dg), 0x1p-23);
        const double error = envelope_error(kernels.dg, dg);
        std::printf("  seed %u dg control %.3g kernels %.3g ratio %.2f\n", seed, control, error, error / control);
        EXPECT_LE(error, 1.2 * control) << "seed " << seed;
        sum_of_ratios += error / control;
    }
    EXPECT_LE(sum_of_ratios / double(seeds.size()), 0.6) << "dg no more accurate than a float32 implementation's";
}
