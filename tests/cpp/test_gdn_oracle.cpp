// The float64 recurrence oracle: exact cases with small integers, closed forms of the delta
// rule, structural identities (varlen = batch, grouped heads = repeated heads), causality of NaN,
// the magnitude scale, and the backward against central finite differences for every member.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../../gdn/oracle/gdn_oracle.hpp"
#include "kcv/oracle.hpp"
#include "kcv/tensor.hpp"

namespace {

using kcv::gdn::GateKind;
using kcv::gdn::Member;
using kcv::gdn::Problem;
using kcv::gdn::Shape;

// Every input and output of one problem, row-major.
struct Data {
    Problem p;
    std::vector<double> q, k, v, g, beta, h0, d_o, dht;
    bool with_h0 = false, with_dht = false;

    explicit Data(const Problem& problem) : p(problem) {
        const Shape& s = p.shape;
        q.assign(s.qk_size(), 0.0);
        k.assign(s.qk_size(), 0.0);
        v.assign(s.v_size(), 0.0);
        g.assign(s.g_size(p.member.gate), 0.0);
        beta.assign(s.beta_size(), 0.0);
        h0.assign(s.state_size(), 0.0);
        d_o.assign(s.v_size(), 0.0);
        dht.assign(s.state_size(), 0.0);
    }

    // q, k ~ N(0, 0.5²); v, do, dht, h0 ~ N(0, 1); g ~ U(-0.6, 0); beta ~ U(0.1, 0.9).
    void randomise(uint32_t seed) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<double> n01(0.0, 1.0);
        std::uniform_real_distribution<double> u01(0.0, 1.0);
        for (auto& x : q) x = 0.5 * n01(rng);
        for (auto& x : k) x = 0.5 * n01(rng);
        for (auto& x : v) x = n01(rng);
        for (auto& x : g) x = -0.6 * u01(rng);
        for (auto& x : beta) x = 0.1 + 0.8 * u01(rng);
        for (auto& x : h0) x = n01(rng);
        for (auto& x : d_o) x = n01(rng);
        for (auto& x : dht) x = n01(rng);
    }

    struct Fwd {
        std::vector<double> o, ht, o_scale, ht_scale;
    };
    Fwd forward() const {
        const Shape& s = p.shape;
        Fwd f{std::vector<double>(s.v_size()), std::vector<double>(s.state_size()),
              std::vector<double>(s.v_size()), std::vector<double>(s.state_size())};
        kcv::gdn::ForwardArgs a;
        a.q = q.data();
        a.k = k.data();
        a.v = v.data();
        a.g = g.data();
        a.beta = beta.data();
        a.h0 = with_h0 ? h0.data() : nullptr;
        a.o = f.o.data();
        a.ht = f.ht.data();
        a.o_scale = f.o_scale.data();
        a.ht_scale = f.ht_scale.data();
        kcv::gdn::forward(p, a);
        return f;
    }

    struct Bwd {
        std::vector<double> dq, dk, dv, dg, dbeta, dh0;
        std::vector<double> dq_s, dk_s, dv_s, dg_s, dbeta_s, dh0_s;
    };
    Bwd backward() const {
        const Shape& s = p.shape;
        Bwd b;
        b.dq.assign(s.qk_size(), 0.0);
        b.dk.assign(s.qk_size(), 0.0);
        b.dv.assign(s.v_size(), 0.0);
        b.dg.assign(s.g_size(p.member.gate), 0.0);
        b.dbeta.assign(s.beta_size(), 0.0);
        b.dh0.assign(s.state_size(), 0.0);
        b.dq_s = b.dq;
        b.dk_s = b.dk;
        b.dv_s = b.dv;
        b.dg_s = b.dg;
        b.dbeta_s = b.dbeta;
        b.dh0_s = b.dh0;
        kcv::gdn::BackwardArgs a;
        a.q = q.data();
        a.k = k.data();
        a.v = v.data();
        a.g = g.data();
        a.beta = beta.data();
        a.h0 = with_h0 ? h0.data() : nullptr;
        a.d_o = d_o.data();
        a.dht = with_dht ? dht.data() : nullptr;
        a.dq = b.dq.data();
        a.dk = b.dk.data();
        a.dv = b.dv.data();
        a.dg = b.dg.data();
        a.dbeta = b.dbeta.data();
        a.dh0 = b.dh0.data();
        a.dq_scale = b.dq_s.data();
        a.dk_scale = b.dk_s.data();
        a.dv_scale = b.dv_s.data();
        a.dg_scale = b.dg_s.data();
        a.dbeta_scale = b.dbeta_s.data();
        a.dh0_scale = b.dh0_s.data();
        kcv::gdn::backward(p, a);
        return b;
    }

    // The scalar loss whose gradient backward() computes.
    double loss() const {
        const Fwd f = forward();
        double l = 0.0;
        for (size_t i = 0; i < f.o.size(); ++i) l += d_o[i] * f.o[i];
        if (with_dht)
            for (size_t i = 0; i < f.ht.size(); ++i) l += dht[i] * f.ht[i];
        return l;
    }
};

Problem make_problem(Member m, Shape s, double scale = 0.75) {
    Problem p;
    p.member = m;
    p.shape = std::move(s);
    p.scale = scale;
    return p;
}

std::string label(Member m) { return kcv::gdn::member_name(m); }

TEST(GdnOracle, LinearAttentionIsExactOnSmallIntegers) {
    // o_t = Σ_{τ≤t} (q_t·k_τ) v_τ with integers in [-3, 3]: every partial sum is an integer far
    // below 2^53, so the float64 recurrence must equal the direct sum bit for bit.
    Shape s{2, 9, 1, 2, 4, 3, {}};
    Data d(make_problem(kcv::gdn::kLinearAttention, s, 1.0));
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> small(-3, 3);
    for (auto& x : d.q) x = small(rng);
    for (auto& x : d.k) x = small(rng);
    for (auto& x : d.v) x = small(rng);
    const auto f = d.forward();
    bool any_nonzero = false;
    for (int64_t b = 0; b < s.B; ++b)
        for (int64_t hv = 0; hv < s.HV; ++hv)
            for (int64_t t = 0; t < s.T; ++t)
                for (int64_t j = 0; j < s.V; ++j) {
                    int64_t want = 0;
                    for (int64_t tau = 0; tau <= t; ++tau) {
                        int64_t qk = 0;
                        for (int64_t i = 0; i < s.K; ++i)
                            qk += int64_t(d.q[((b * s.T + t) * s.H) * s.K + i]) *
                                  int64_t(d.k[((b * s.T + tau) * s.H) * s.K + i]);
                        want += qk * int64_t(d.v[((b * s.T + tau) * s.HV + hv) * s.V + j]);
                    }
                    const double got = f.o[((b * s.T + t) * s.HV + hv) * s.V + j];
                    ASSERT_EQ(got, double(want)) << "seed 7, b=" << b << " hv=" << hv << " t=" << t << " j=" << j;
                    any_nonzero |= want != 0;
                }
    EXPECT_TRUE(any_nonzero);
    // The final state is Σ k vᵀ.
    for (int64_t b = 0; b < s.B; ++b)
        for (int64_t hv = 0; hv < s.HV; ++hv)
            for (int64_t i = 0; i < s.K; ++i)
                for (int64_t j = 0; j < s.V; ++j) {
                    int64_t want = 0;
                    for (int64_t tau = 0; tau < s.T; ++tau)
                        want += int64_t(d.k[((b * s.T + tau) * s.H) * s.K + i]) *
                                int64_t(d.v[((b * s.T + tau) * s.HV + hv) * s.V + j]);
                    ASSERT_EQ(f.ht[((b * s.HV + hv) * s.K + i) * s.V + j], double(want));
                }
}

TEST(GdnOracle, ScaleIsExactSumOfMagnitudesWithoutDelta) {
    // With non-negative operands nothing cancels, so Σ|terms| equals the value itself.
    for (Member m : {kcv::gdn::kLinearAttention, kcv::gdn::kSsd, kcv::gdn::kGla}) {
        Data d(make_problem(m, Shape{1, 13, 2, 4, 5, 3, {}}, 0.5));
        d.randomise(11);
        for (auto* vec : {&d.q, &d.k, &d.v, &d.h0})
            for (auto& x : *vec) x = std::abs(x);
        d.with_h0 = true;
        const auto f = d.forward();
        for (size_t i = 0; i < f.o.size(); ++i) {
            ASSERT_GT(f.o[i], 0.0) << label(m) << " i=" << i;
            ASSERT_NEAR(f.o_scale[i], f.o[i], 1e-13 * f.o[i]) << label(m) << " seed 11, i=" << i;
        }
        for (size_t i = 0; i < f.ht.size(); ++i) ASSERT_NEAR(f.ht_scale[i], f.ht[i], 1e-13 * f.ht[i]);
    }
    // With signs mixed the scale bounds the value and exceeds it somewhere.
    Data d(make_problem(kcv::gdn::kGla, Shape{1, 13, 2, 4, 5, 3, {}}, -0.5));
    d.randomise(12);
    const auto f = d.forward();
    bool strict = false;
    for (size_t i = 0; i < f.o.size(); ++i) {
        ASSERT_LE(std::abs(f.o[i]), f.o_scale[i] * (1 + 1e-13)) << "seed 12, i=" << i;
        strict |= std::abs(f.o[i]) < 0.9 * f.o_scale[i];
    }
    EXPECT_TRUE(strict);
}

TEST(GdnOracle, DeltaRuleWithUnitKeyStoresTheValue) {
    // β = 1, g = 0 and k = e_0: the delta rule overwrites row 0 of the state with v_t, so
    // after any history o_t = scale·v_t when q = e_0 too. Exact: every product is by 0 or 1 and
    // the values are small integers, so S + (v − S) = v.
    Shape s{1, 6, 1, 1, 3, 4, {}};
    for (Member m : {kcv::gdn::kGatedDeltaNet, kcv::gdn::kKda}) {
        Data d(make_problem(m, s, 2.0));
        d.randomise(21);
        for (auto* vec : {&d.v, &d.h0})
            for (auto& x : *vec) x = std::round(8 * x);
        for (int64_t t = 0; t < s.T; ++t) {
            for (int64_t i = 0; i < s.K; ++i) d.q[t * s.K + i] = d.k[t * s.K + i] = i == 0 ? 1.0 : 0.0;
            d.beta[t] = 1.0;
        }
        for (auto& x : d.g) x = 0.0;
        d.with_h0 = true;
        const auto f = d.forward();
        for (int64_t t = 0; t < s.T; ++t)
            for (int64_t j = 0; j < s.V; ++j)
                ASSERT_EQ(f.o[t * s.V + j], 2.0 * d.v[t * s.V + j]) << label(m) << " t=" << t << " j=" << j;
        // Rows other than 0 keep h0.
        for (int64_t i = 1; i < s.K; ++i)
            for (int64_t j = 0; j < s.V; ++j) ASSERT_EQ(f.ht[i * s.V + j], d.h0[i * s.V + j]);
    }
}

TEST(GdnOracle, OneDeltaStepMatchesHandComputation) {
    // K = 2, V = 1, one token: S1 = (I − β k kᵀ) e^g S0 + β k v.
    Shape s{1, 1, 1, 1, 2, 1, {}};
    Data d(make_problem(kcv::gdn::kGatedDeltaNet, s, 1.0));
    d.q = {1.0, -2.0};
    d.k = {0.5, 0.25};
    d.v = {3.0};
    d.g = {std::log(0.5)};
    d.beta = {0.5};
    d.h0 = {4.0, -8.0};
    d.with_h0 = true;
    const auto f = d.forward();
    const double e = std::exp(std::log(0.5));
    const double sd0 = e * 4.0, sd1 = e * -8.0;
    const double u = 0.5 * 3.0 - 0.5 * (0.5 * sd0 + 0.25 * sd1);
    const double s0 = sd0 + 0.5 * u, s1 = sd1 + 0.25 * u;
    EXPECT_DOUBLE_EQ(f.ht[0], s0);
    EXPECT_DOUBLE_EQ(f.ht[1], s1);
    EXPECT_DOUBLE_EQ(f.o[0], s0 - 2.0 * s1);
}

TEST(GdnOracle, VarlenEqualsBatchBitForBit) {
    for (Member m : kcv::gdn::all_members()) {
        Data batch(make_problem(m, Shape{2, 6, 1, 2, 3, 2, {}}));
        batch.randomise(31);
        batch.with_h0 = batch.with_dht = true;
        Data packed(make_problem(m, Shape{1, 12, 1, 2, 3, 2, {0, 6, 12}}));
        packed.q = batch.q;
        packed.k = batch.k;
        packed.v = batch.v;
        packed.g = batch.g;
        packed.beta = batch.beta;
        packed.h0 = batch.h0;
        packed.d_o = batch.d_o;
        packed.dht = batch.dht;
        packed.with_h0 = packed.with_dht = true;
        const auto fb = batch.forward(), fp = packed.forward();
        EXPECT_EQ(fb.o, fp.o) << label(m);
        EXPECT_EQ(fb.ht, fp.ht) << label(m);
        EXPECT_EQ(fb.o_scale, fp.o_scale) << label(m);
        const auto bb = batch.backward(), bp = packed.backward();
        EXPECT_EQ(bb.dq, bp.dq) << label(m);
        EXPECT_EQ(bb.dk, bp.dk) << label(m);
        EXPECT_EQ(bb.dv, bp.dv) << label(m);
        EXPECT_EQ(bb.dg, bp.dg) << label(m);
        EXPECT_EQ(bb.dbeta, bp.dbeta) << label(m);
        EXPECT_EQ(bb.dh0, bp.dh0) << label(m);
    }
}

TEST(GdnOracle, GroupedHeadsEqualRepeatedHeads) {
    // HV = 2, H = 1 reads the same q, k for both value heads; H = 2 with q, k repeated must give
    // the same outputs, and the grouped dq, dk the sum of the repeated heads' in head order.
    for (Member m : kcv::gdn::all_members()) {
        Data grouped(make_problem(m, Shape{1, 5, 1, 2, 3, 2, {}}));
        grouped.randomise(41);
        grouped.with_h0 = grouped.with_dht = true;
        Data repeated(make_problem(m, Shape{1, 5, 2, 2, 3, 2, {}}));
        repeated.v = grouped.v;
        repeated.g = grouped.g;
        repeated.beta = grouped.beta;
        repeated.h0 = grouped.h0;
        repeated.d_o = grouped.d_o;
        repeated.dht = grouped.dht;
        repeated.with_h0 = repeated.with_dht = true;
        for (int64_t t = 0; t < 5; ++t)
            for (int64_t h = 0; h < 2; ++h)
                for (int64_t i = 0; i < 3; ++i) {
                    repeated.q[(t * 2 + h) * 3 + i] = grouped.q[t * 3 + i];
                    repeated.k[(t * 2 + h) * 3 + i] = grouped.k[t * 3 + i];
                }
        EXPECT_EQ(grouped.forward().o, repeated.forward().o) << label(m);
        const auto bg = grouped.backward(), br = repeated.backward();
        for (int64_t t = 0; t < 5; ++t)
            for (int64_t i = 0; i < 3; ++i) {
                // Equal up to the association of the per-head partial sums.
                const double dq = br.dq[(t * 2) * 3 + i] + br.dq[(t * 2 + 1) * 3 + i];
                const double dk = br.dk[(t * 2) * 3 + i] + br.dk[(t * 2 + 1) * 3 + i];
                EXPECT_NEAR(bg.dq[t * 3 + i], dq, 1e-14 * (1 + std::abs(dq))) << label(m);
                EXPECT_NEAR(bg.dk[t * 3 + i], dk, 1e-14 * (1 + std::abs(dk))) << label(m);
            }
        EXPECT_EQ(bg.dv, br.dv) << label(m);
    }
}

TEST(GdnOracle, NanIsCausal) {
    // A NaN in v at token 3, column 1, reaches column 1 of o from token 3 on and nothing else:
    // every member acts on the value columns independently.
    for (Member m : kcv::gdn::all_members()) {
        Data d(make_problem(m, Shape{1, 8, 1, 1, 3, 2, {}}));
        d.randomise(51);
        d.v[3 * 2 + 1] = std::nan("");
        const auto f = d.forward();
        for (int64_t t = 0; t < 8; ++t)
            for (int64_t j = 0; j < 2; ++j) {
                const double o = f.o[t * 2 + j];
                if (t >= 3 && j == 1)
                    ASSERT_TRUE(std::isnan(o)) << label(m) << " t=" << t << " j=" << j;
                else
                    ASSERT_TRUE(std::isfinite(o)) << label(m) << " t=" << t << " j=" << j;
            }
    }
}

TEST(GdnOracle, EmptySequencePassesStateThrough) {
    for (Member m : kcv::gdn::all_members()) {
        Data d(make_problem(m, Shape{1, 4, 1, 1, 2, 2, {0, 0, 4}}));
        d.randomise(61);
        d.with_h0 = d.with_dht = true;
        const auto f = d.forward();
        const auto b = d.backward();
        for (int64_t e = 0; e < 4; ++e) {
            EXPECT_EQ(f.ht[e], d.h0[e]) << label(m);
            EXPECT_EQ(b.dh0[e], d.dht[e]) << label(m);
        }
    }
}

// Central differences of the loss against the adjoint, for each input element selected.
void check_gradient(Data& d, uint32_t seed, size_t max_per_tensor) {
    const auto b = d.backward();
    const double h = 1e-6;
    std::mt19937 pick(seed);
    auto check = [&](const char* name, std::vector<double>& x, const std::vector<double>& grad) {
        ASSERT_EQ(x.size(), grad.size()) << name;
        std::vector<size_t> idx(x.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        if (idx.size() > max_per_tensor) {
            std::shuffle(idx.begin(), idx.end(), pick);
            idx.resize(max_per_tensor);
        }
        double largest = 0.0;
        for (size_t i : idx) {
            const double saved = x[i];
            x[i] = saved + h;
            const double up = d.loss();
            x[i] = saved - h;
            const double down = d.loss();
            x[i] = saved;
            const double fd = (up - down) / (2 * h);
            ASSERT_NEAR(grad[i], fd, 2e-7 * (1.0 + std::abs(fd)))
                << label(d.p.member) << " seed " << seed << ": d" << name << "[" << i << "]";
            largest = std::max(largest, std::abs(grad[i]));
        }
        if (!idx.empty()) EXPECT_GT(largest, 1e-3) << name << ": the gradient checked is all but zero";
    };
    check("q", d.q, b.dq);
    check("k", d.k, b.dk);
    check("v", d.v, b.dv);
    if (d.p.member.gate != GateKind::none) check("g", d.g, b.dg);
    if (d.p.member.delta) check("beta", d.beta, b.dbeta);
    if (d.with_h0) check("h0", d.h0, b.dh0);
}

TEST(GdnOracle, BackwardMatchesFiniteDifferences) {
    uint32_t seed = 100;
    for (Member m : kcv::gdn::all_members()) {
        // Grouped heads, an initial state, a final-state gradient and two sequences of unequal
        // length (one token alone).
        Data d(make_problem(m, Shape{1, 8, 2, 4, 3, 2, {0, 1, 8}}));
        d.randomise(++seed);
        d.with_h0 = d.with_dht = true;
        check_gradient(d, seed, SIZE_MAX);
        // Batched, no initial state, no final-state gradient.
        Data e(make_problem(m, Shape{2, 5, 1, 1, 2, 3, {}}, -1.25));
        e.randomise(++seed);
        check_gradient(e, seed, SIZE_MAX);
    }
}

TEST(GdnOracle, BackwardAcrossRecomputationSegments) {
    // 150 tokens cross two segment boundaries of the backward's recomputation.
    uint32_t seed = 200;
    for (Member m : kcv::gdn::all_members()) {
        Data d(make_problem(m, Shape{1, 150, 1, 1, 3, 2, {}}, 0.5));
        d.randomise(++seed);
        for (auto& x : d.g) x *= 0.1;   // keep the early tokens visible at the end
        d.with_h0 = d.with_dht = true;
        check_gradient(d, seed, 24);
    }
}

TEST(GdnOracle, GradientScalesBoundTheGradients) {
    // Without the delta term every magnitude is Σ|terms|, so it bounds the value; all scales are
    // finite and non-negative.
    for (Member m : kcv::gdn::all_members()) {
        Data d(make_problem(m, Shape{1, 20, 1, 2, 4, 3, {}}));
        d.randomise(71);
        d.with_h0 = d.with_dht = true;
        const auto b = d.backward();
        auto check = [&](const char* name, const std::vector<double>& x, const std::vector<double>& s) {
            bool positive = false;
            for (size_t i = 0; i < x.size(); ++i) {
                ASSERT_TRUE(std::isfinite(s[i]) && s[i] >= 0.0) << label(m) << " " << name << "[" << i << "]";
                if (!m.delta) ASSERT_LE(std::abs(x[i]), s[i] * (1 + 1e-12)) << label(m) << " " << name << "[" << i << "]";
                positive |= s[i] > 0.0;
            }
            EXPECT_TRUE(x.empty() || positive) << label(m) << " " << name;
        };
        check("dq", b.dq, b.dq_s);
        check("dk", b.dk, b.dk_s);
        check("dv", b.dv, b.dv_s);
        check("dh0", b.dh0, b.dh0_s);
        if (m.gate != GateKind::none) check("dg", b.dg, b.dg_s);
        if (m.delta) check("dbeta", b.dbeta, b.dbeta_s);
    }
}

TEST(GdnOracle, ValidateRejectsBadProblems) {
    auto rejects = [](Shape s, Member m) {
        Problem p = make_problem(m, std::move(s));
        EXPECT_THROW(kcv::gdn::validate(p), std::invalid_argument);
    };
    rejects(Shape{1, 4, 2, 3, 2, 2, {}}, kcv::gdn::kSsd);             // HV not a multiple of H
    rejects(Shape{2, 4, 1, 1, 2, 2, {0, 4}}, kcv::gdn::kSsd);        // varlen with B = 2
    rejects(Shape{1, 4, 1, 1, 2, 2, {0, 3}}, kcv::gdn::kSsd);        // does not end at T
    rejects(Shape{1, 4, 1, 1, 2, 2, {0, 3, 2, 4}}, kcv::gdn::kSsd);  // decreasing
    rejects(Shape{1, 4, 1, 1, 2, 2, {}}, Member{GateKind::none, true});
    EXPECT_THROW(kcv::gdn::member_from_name("mamba"), std::invalid_argument);
    for (Member m : kcv::gdn::all_members()) EXPECT_EQ(kcv::gdn::member_from_name(kcv::gdn::member_name(m)), m);
}

// The registered oracles, through the OracleFn interface.
kcv::Tensor f64_tensor(const std::vector<int64_t>& shape, const std::vector<double>& values) {
    kcv::Tensor t = kcv::Tensor::empty(kcv::DType::f64, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values[static_cast<size_t>(i)]);
    return t;
}

TEST(GdnOracleRegistry, ForwardAndBackwardAreRegisteredAndAgreeWithTheLibrary) {
    ASSERT_NE(kcv::find_oracle("gdn_forward"), nullptr);
    ASSERT_NE(kcv::find_oracle("gdn_backward"), nullptr);
    Data d(make_problem(kcv::gdn::kKda, Shape{1, 7, 1, 2, 3, 2, {0, 3, 7}}, 0.5));
    d.randomise(81);
    d.with_h0 = d.with_dht = true;
    const int64_t N = 2;
    std::vector<kcv::Tensor> in = {f64_tensor({1, 7, 1, 3}, d.q), f64_tensor({1, 7, 1, 3}, d.k),
                                   f64_tensor({1, 7, 2, 2}, d.v), f64_tensor({1, 7, 2, 3}, d.g),
                                   f64_tensor({1, 7, 2}, d.beta), f64_tensor({N, 2, 3, 2}, d.h0)};
    kcv::Tensor cu = kcv::Tensor::empty(kcv::DType::i64, {3});
    cu.set(0, 0);
    cu.set(1, 3);
    cu.set(2, 7);
    const std::map<std::string, double> attrs = {{"gate", 2}, {"delta", 1}, {"scale", 0.5},
                                                 {"initial_state", 1}, {"varlen", 1}, {"final_state", 1}};
    std::vector<kcv::Tensor> fwd_in = in;
    fwd_in.push_back(cu);
    std::vector<kcv::Tensor> out, scales;
    kcv::run_oracle("gdn_forward", fwd_in, attrs, {{1, 7, 2, 2}, {N, 2, 3, 2}}, out, scales);
    const auto f = d.forward();
    for (int64_t i = 0; i < out[0].numel(); ++i) {
        EXPECT_EQ(out[0].get(i), f.o[i]);
        EXPECT_EQ(scales[0].get(i), f.o_scale[i]);
    }
    for (int64_t i = 0; i < out[1].numel(); ++i) EXPECT_EQ(out[1].get(i), f.ht[i]);

    std::vector<kcv::Tensor> bwd_in = in;
    bwd_in.push_back(f64_tensor({1, 7, 2, 2}, d.d_o));
    bwd_in.push_back(f64_tensor({N, 2, 3, 2}, d.dht));
    bwd_in.push_back(cu);
    kcv::run_oracle("gdn_backward", bwd_in, attrs,
                    {{1, 7, 1, 3}, {1, 7, 1, 3}, {1, 7, 2, 2}, {1, 7, 2, 3}, {1, 7, 2}, {N, 2, 3, 2}}, out, scales);
    const auto b = d.backward();
    const std::vector<const std::vector<double>*> want = {&b.dq, &b.dk, &b.dv, &b.dg, &b.dbeta, &b.dh0};
    ASSERT_EQ(out.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j)
        for (int64_t i = 0; i < out[j].numel(); ++i) ASSERT_EQ(out[j].get(i), (*want[j])[i]) << "output " << j;
}

// A contract that allows bf16 or tf32 operands passes the oracle that format's smallest normal
// N = 2^-126, and every product's operands enter the scales floored at it. Linear attention, one
// token, K = V = 1, q = k = do = 1, v = 2^-130: the state's written term k·v has magnitude
// ½(2^-130 + N) = 2^-127 + 2^-131, the state's M = ½(that + N) = 2^-127 + 2^-128 + 2^-132, and o's
// scale ½(M + N) = 2^-127 + 2^-128 + 2^-129 + 2^-133, as is dq's (the product S·do); dk's is dS·u,
// ½(u + N) = M. Unfloored, all four are 2^-130; dv = do·k stays 1.
TEST(GdnOracleRegistry, OperandFloorReachesTheScales) {
    constexpr double N = 0x1p-126;
    const std::vector<kcv::Tensor> fwd_in = {f64_tensor({1, 1, 1, 1}, {1}), f64_tensor({1, 1, 1, 1}, {1}),
                                             f64_tensor({1, 1, 1, 1}, {0x1p-130})};
    std::vector<kcv::Tensor> bwd_in = fwd_in;
    bwd_in.push_back(f64_tensor({1, 1, 1, 1}, {1}));
    const double M = 0x1p-127 + 0x1p-128 + 0x1p-132, o_scale = 0x1p-127 + 0x1p-128 + 0x1p-129 + 0x1p-133;
    for (const double floor : {0.0, N}) {
        SCOPED_TRACE("operand floor " + std::to_string(floor));
        std::vector<kcv::Tensor> out, scales;
        kcv::run_oracle("gdn_forward", fwd_in, {}, {{1, 1, 1, 1}, {1, 1, 1, 1}}, out, scales, {}, nullptr, floor);
        EXPECT_EQ(out[0].get(0), 0x1p-130);
        EXPECT_EQ(out[1].get(0), 0x1p-130);
        EXPECT_EQ(scales[0].get(0), floor == 0 ? 0x1p-130 : o_scale);
        EXPECT_EQ(scales[1].get(0), floor == 0 ? 0x1p-130 : M);
        kcv::run_oracle("gdn_backward", bwd_in, {}, {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, out, scales, {},
                        nullptr, floor);
        EXPECT_EQ(out[0].get(0), 0x1p-130);   // dq
        EXPECT_EQ(out[1].get(0), 0x1p-130);   // dk
        EXPECT_EQ(out[2].get(0), 1.0);        // dv
        EXPECT_EQ(scales[0].get(0), floor == 0 ? 0x1p-130 : o_scale);
        EXPECT_EQ(scales[1].get(0), floor == 0 ? 0x1p-130 : M);
        EXPECT_EQ(scales[2].get(0), 1.0);
    }
}

TEST(GdnOracleRegistry, RefusesNonFloat64AndBadShapes) {
    const kcv::OracleFn fwd = kcv::find_oracle("gdn_forward");
    ASSERT_NE(fwd, nullptr);
    const std::map<std::string, double> attrs = {{"gate", 1}};
    auto run = [&](std::vector<kcv::Tensor> in, std::vector<int64_t> out_shape) {
        std::vector<kcv::Tensor> out = {kcv::Tensor::empty(kcv::DType::f64, out_shape)};
        std::vector<kcv::Tensor> sc = {kcv::Tensor::empty(kcv::DType::f64, out_shape)};
        fwd(kcv::OracleArgs{in, attrs, out, sc});
    };
    const std::vector<double> z(64, 0.5);
    auto good = [&] {
        return std::vector<kcv::Tensor>{f64_tensor({1, 4, 1, 2}, z), f64_tensor({1, 4, 1, 2}, z),
                                        f64_tensor({1, 4, 1, 2}, z), f64_tensor({1, 4, 1}, z)};
    };
    EXPECT_NO_THROW(run(good(), {1, 4, 1, 2}));
    auto f32 = good();
    f32[1] = kcv::Tensor::empty(kcv::DType::f32, {1, 4, 1, 2});
    EXPECT_THROW(run(f32, {1, 4, 1, 2}), kcv::OracleError);
    auto wrong_g = good();
    wrong_g[3] = f64_tensor({1, 4, 1, 2}, z);   // per-channel shape under gate = 1
    EXPECT_THROW(run(wrong_g, {1, 4, 1, 2}), kcv::OracleError);
    auto missing = good();
    missing.pop_back();
    EXPECT_THROW(run(missing, {1, 4, 1, 2}), kcv::OracleError);
    EXPECT_THROW(run(good(), {1, 4, 1, 3}), kcv::OracleError);
}

}  // namespace
