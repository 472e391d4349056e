// The two error models: exact bit-level boundaries (r exactly 1 passes, the next double fails),
// non-finite handling (NaN fails, Inf y* is not compared, overflow to Inf of a correctly rounded
// output is exact), integer outputs, and a random check that a correctly rounded output always
// passes.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kcv/dtype.hpp"
#include "kcv/error_model.hpp"
#include "kcv/rng.hpp"
#include "kcv/tensor.hpp"

namespace kcv {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor tensor_of(DType t, const std::vector<double>& v) {
    Tensor x = Tensor::empty(t, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) x.set(static_cast<int64_t>(i), v[i]);
    return x;
}

ErrorModelParams exact_params() {
    // Powers of two, so that τ is computed without rounding.
    ErrorModelParams p;
    p.c = 4;
    p.u_acc = 0x1p-24;
    p.u_out = 0x1p-24;
    p.ulp_min_normal = 0x1p-30;
    return p;
}

TEST(ParamsFor, TakesUnitRoundoffsOfTheDeclaredDtypes) {
    OutputSpec o;
    o.dtype = DType::f32;
    o.accumulator = DType::f32;
    ErrorModelParams p = params_for(o, 4.0);
    EXPECT_EQ(p.c, 4.0);
    EXPECT_EQ(p.u_acc, 0x1p-24);
    EXPECT_EQ(p.u_out, 0x1p-24);
    EXPECT_EQ(p.ulp_min_normal, 0x1p-149);

    o.dtype = DType::bf16;
    p = params_for(o, 8.0);
    EXPECT_EQ(p.c, 8.0);
    EXPECT_EQ(p.u_acc, 0x1p-24);
    EXPECT_EQ(p.u_out, 0x1p-8);
    EXPECT_EQ(p.ulp_min_normal, 0x1p-133);

    o.dtype = DType::f16;
    o.accumulator = DType::f16;
    p = params_for(o, 4.0);
    EXPECT_EQ(p.u_acc, 0x1p-11);
    EXPECT_EQ(p.u_out, 0x1p-11);
    EXPECT_EQ(p.ulp_min_normal, 0x1p-24);

    o.dtype = DType::i64;
    o.accumulator = DType::f32;
    p = params_for(o, 4.0);
    EXPECT_EQ(p.u_out, 0.0);
    EXPECT_EQ(p.ulp_min_normal, 0.0);
}

// η(acc), the absolute error of a product that underflows, is half the accumulator's smallest
// subnormal, and only sums of products have it: an elementwise output's one rounding is
// ulp_out(min normal) already.
TEST(ParamsFor, UnderflowTermOnlyForAccumulatingOutputs) {
    OutputSpec o;
    o.dtype = DType::bf16;
    o.accumulator = DType::f32;
    EXPECT_EQ(params_for(o, 4.0).eta_acc, 0.0);
    o.model = ErrorModelKind::reduction;
    EXPECT_EQ(params_for(o, 4.0).eta_acc, 0x1p-150);
    o.model = ErrorModelKind::scan;
    o.accumulator = DType::f16;
    EXPECT_EQ(params_for(o, 4.0).eta_acc, 0x1p-25);
    o.dtype = DType::i64;
    EXPECT_EQ(params_for(o, 4.0).eta_acc, 0.0);
}

// A sum of K = 16384 float32 products whose terms are subnormal: each product is rounded to the
// subnormal grid (2^-149), so an exact-order implementation is only good to a few of its steps.
// τ = 4·128·(2^-24·s + 2^-150) + 2^-24·|y*| + 2^-149 ≈ 257.2 steps at y* = s = 5726·2^-149: two
// steps off passes (it failed at τ ≈ 1.2 steps before η), three hundred fail.
TEST(AnalyticRatio, SubnormalTermsOfASumHaveTheUnderflowBound) {
    OutputSpec o;
    o.model = ErrorModelKind::scan;
    const ErrorModelParams p = params_for(o, 4.0);
    const double ys = 5726 * 0x1p-149;
    const Tensor ystar = tensor_of(DType::f64, {ys});
    const AnalyticResult near = analytic_ratio(tensor_of(DType::f32, {ys - 2 * 0x1p-149}), ystar, Tensor{}, 16384, p);
    EXPECT_TRUE(near.pass()) << near.r;
    EXPECT_LT(near.r, 0.01);
    const AnalyticResult far = analytic_ratio(tensor_of(DType::f32, {ys - 300 * 0x1p-149}), ystar, Tensor{}, 16384, p);
    EXPECT_FALSE(far.pass()) << far.r;
    EXPECT_NEAR(far.r, 300 / 257.2, 0.01);
    EXPECT_DOUBLE_EQ(analytic_tau(p, 16384, ys, ys), 512 * (0x1p-24 * ys + 0x1p-150) + 0x1p-24 * ys + 0x1p-149);
}

// A contract's declared operand format reaches the model of its accumulating outputs only, bf16
// over tf32 where both are declared, and adds 2·u(op)·s to τ whatever K.
TEST(AnalyticRatio, DeclaredOperandFormatAddsTwoUnitsOfTheScale) {
    Contract c;
    OutputSpec sum, map;
    sum.model = ErrorModelKind::reduction;
    map.model = ErrorModelKind::elementwise;
    c.outputs = {sum, map};
    EXPECT_EQ(params_for(c, 0, 4.0).u_op, 0.0);
    c.semantics.tf32_operands = true;
    EXPECT_EQ(params_for(c, 0, 4.0).u_op, 0x1p-11);
    EXPECT_EQ(params_for(c, 1, 4.0).u_op, 0.0) << "an elementwise map multiplies no operands";
    c.semantics.bf16_operands = true;
    const ErrorModelParams p = params_for(c, 0, 4.0);
    EXPECT_EQ(p.u_op, 0x1p-8);
    EXPECT_EQ(allowed_operands(c.semantics), DType::bf16);
    const ErrorModelParams base = params_for(sum, 4.0);
    for (int64_t k : {1, 1024})
        EXPECT_DOUBLE_EQ(analytic_tau(p, k, 3.0, 0.5), analytic_tau(base, k, 3.0, 0.5) + 2 * 0x1p-8 * 3.0) << k;
}

// An output that declares a longer chain of rounded operands gets n·u(op)·s in place of 2·u(op)·s,
// and only where the contract allows an operand format.
TEST(AnalyticRatio, OperandRoundingsScaleTheOperandTerm) {
    Contract c;
    OutputSpec chain;
    chain.model = ErrorModelKind::scan;
    chain.operand_roundings = 6;
    c.outputs = {chain};
    const ErrorModelParams none = params_for(c, 0, 4.0);
    EXPECT_EQ(none.operand_roundings, 6.0);
    EXPECT_DOUBLE_EQ(analytic_tau(none, 64, 3.0, 0.5), analytic_tau(params_for(chain, 4.0), 64, 3.0, 0.5))
        << "no operand format allowed: the count adds nothing";
    c.semantics.bf16_operands = true;
    const ErrorModelParams p = params_for(c, 0, 4.0);
    c.outputs[0].operand_roundings = 2;
    const ErrorModelParams two = params_for(c, 0, 4.0);
    EXPECT_DOUBLE_EQ(analytic_tau(p, 64, 3.0, 0.5) - analytic_tau(two, 64, 3.0, 0.5), 4 * 0x1p-8 * 3.0);
}

// The oracle floors operands at the declared format's smallest normal, and at nothing without one.
TEST(AnalyticRatio, OperandFloorIsTheDeclaredFormatsSmallestNormal) {
    Contract c;
    EXPECT_EQ(operand_floor(c), 0.0);
    c.semantics.tf32_operands = true;
    EXPECT_EQ(operand_floor(c), 0x1p-126);
    c.semantics.bf16_operands = true;
    EXPECT_EQ(operand_floor(c), 0x1p-126);
}

// τ = 4·2^-24·√16·s + 2^-24·|y*| + 2^-30 with y* = 1, s = 1: 2^-20 + 2^-24 + 2^-30, exact.
TEST(AnalyticRatio, RatioExactlyOnePassesAndTheNextDoubleFails) {
    const double tau = 0x1p-20 + 0x1p-24 + 0x1p-30;
    const Tensor ystar = tensor_of(DType::f64, {1.0});
    const Tensor scale = tensor_of(DType::f64, {1.0});

    AnalyticResult a = analytic_ratio(tensor_of(DType::f64, {1.0 + tau}), ystar, scale, 16, exact_params());
    EXPECT_EQ(a.r, 1.0);
    EXPECT_TRUE(a.pass());
    EXPECT_EQ(a.violations, 0);
    EXPECT_EQ(a.first_violation, -1);
    EXPECT_EQ(a.worst, 0);
    EXPECT_EQ(a.tau_at_worst, tau);
    EXPECT_EQ(a.err_at_worst, tau);

    a = analytic_ratio(tensor_of(DType::f64, {std::nextafter(1.0 + tau, 2.0)}), ystar, scale, 16, exact_params());
    EXPECT_GT(a.r, 1.0);
    EXPECT_FALSE(a.pass());
    EXPECT_EQ(a.violations, 1);
    EXPECT_EQ(a.first_violation, 0);

    // Below y*: the error is symmetric.
    a = analytic_ratio(tensor_of(DType::f64, {1.0 - tau}), ystar, scale, 16, exact_params());
    EXPECT_EQ(a.r, 1.0);
}

// With the f32 model of a contract: c = 4, K = 4, s = 1.125, y* = 1 gives
// τ = 2^-21·1.125 + 2^-24 (+ 2^-149, below half an ulp of the sum) = 5·2^-23: five f32 ulps of 1.
TEST(AnalyticRatio, Fp32OutputBoundaryInUlps) {
    OutputSpec o;
    const ErrorModelParams p = params_for(o, 4.0);
    const Tensor ystar = tensor_of(DType::f64, {1.0});
    const Tensor scale = tensor_of(DType::f64, {1.125});
    AnalyticResult a = analytic_ratio(tensor_of(DType::f32, {1.0 + 5 * 0x1p-23}), ystar, scale, 4, p);
    EXPECT_EQ(a.r, 1.0);
    a = analytic_ratio(tensor_of(DType::f32, {1.0 + 6 * 0x1p-23}), ystar, scale, 4, p);
    EXPECT_EQ(a.r, 1.2);
    EXPECT_FALSE(a.pass());
}

TEST(AnalyticRatio, NanWhereReferenceFiniteFails) {
    const Tensor ystar = tensor_of(DType::f64, {1.0, 2.0, 3.0, 4.0});
    const Tensor scale = tensor_of(DType::f64, {1.0, 2.0, 3.0, 4.0});
    // Index 1 far out of bounds, index 2 NaN: NaN dominates the worst, the first violation is 1.
    const Tensor y = tensor_of(DType::f32, {1.0, 3.0, kNaN, 4.0});
    const AnalyticResult a = analytic_ratio(y, ystar, scale, 1, exact_params());
    EXPECT_TRUE(std::isnan(a.r));
    EXPECT_FALSE(a.pass());
    EXPECT_EQ(a.worst, 2);
    EXPECT_EQ(a.first_violation, 1);
    EXPECT_EQ(a.violations, 2);
    EXPECT_EQ(a.compared, 4);
    EXPECT_TRUE(std::isnan(a.err_at_worst));
}

TEST(AnalyticRatio, InfWhereReferenceFiniteFails) {
    const Tensor ystar = tensor_of(DType::f64, {1.0, -2.0});
    const AnalyticResult a = analytic_ratio(tensor_of(DType::f32, {1.0, -kInf}), ystar, Tensor{}, 1, exact_params());
    EXPECT_EQ(a.r, kInf);
    EXPECT_EQ(a.worst, 1);
    EXPECT_FALSE(a.pass());
}

TEST(AnalyticRatio, NonFiniteReferencePositionsAreNotCompared) {
    const Tensor ystar = tensor_of(DType::f64, {kInf, -kInf, kNaN, 0.5});
    // Whatever stands where y* is non-finite, even NaN or a wrong-signed Inf, is EXC-01's business.
    const Tensor y = tensor_of(DType::f32, {0.0, kInf, 7.0, 0.5});
    const AnalyticResult a = analytic_ratio(y, ystar, Tensor{}, 1, exact_params());
    EXPECT_EQ(a.r, 0.0);
    EXPECT_TRUE(a.pass());
    EXPECT_EQ(a.compared, 1);
    EXPECT_EQ(a.worst, 3);

    const AnalyticResult none = analytic_ratio(tensor_of(DType::f32, {kNaN}), tensor_of(DType::f64, {kNaN}),
                                               Tensor{}, 1, exact_params());
    EXPECT_EQ(none.compared, 0);
    EXPECT_EQ(none.r, 0.0);
    EXPECT_EQ(none.worst, -1);
}

// fp16's largest finite value is 65504; y* ≥ 65520 rounds to +Inf, which a correct kernel returns.
TEST(AnalyticRatio, CorrectlyRoundedOverflowIsExact) {
    OutputSpec o;
    o.dtype = DType::f16;
    const ErrorModelParams p = params_for(o, 4.0);
    const Tensor ystar = tensor_of(DType::f64, {70000.0, 65520.0, -70000.0});
    const Tensor scale = tensor_of(DType::f64, {70000.0, 65520.0, 70000.0});
    AnalyticResult a = analytic_ratio(tensor_of(DType::f16, {kInf, kInf, -kInf}), ystar, scale, 1, p);
    EXPECT_EQ(a.r, 0.0);
    // Saturating to the largest finite value is not IEEE rounding: 4496 away from 70000.
    a = analytic_ratio(tensor_of(DType::f16, {65504.0, kInf, -kInf}), ystar, scale, 1, p);
    EXPECT_GT(a.r, 1.0);
    EXPECT_EQ(a.worst, 0);
    // 65519 rounds to 65504: Inf there is an invented overflow.
    a = analytic_ratio(tensor_of(DType::f16, {kInf}), tensor_of(DType::f64, {65519.0}), Tensor{}, 1, p);
    EXPECT_EQ(a.r, kInf);
}

TEST(AnalyticRatio, SignedZerosAreEqual) {
    const AnalyticResult a = analytic_ratio(tensor_of(DType::f32, {-0.0, 0.0}), tensor_of(DType::f64, {0.0, -0.0}),
                                            Tensor{}, 1, exact_params());
    EXPECT_EQ(a.r, 0.0);
    EXPECT_EQ(a.compared, 2);
}

// A flushed subnormal result: y* = 3·2^-149, y = 0. τ = 2^-24·|y*| + 2^-149 (s = |y*|, K = 1,
// c·u_acc·s tiny), so r ≈ 3 − the relative terms: a fail.
TEST(AnalyticRatio, FlushedSubnormalFails) {
    OutputSpec o;
    const ErrorModelParams p = params_for(o, 4.0);
    const AnalyticResult a =
        analytic_ratio(tensor_of(DType::f32, {0.0}), tensor_of(DType::f64, {3 * 0x1p-149}), Tensor{}, 1, p);
    EXPECT_GT(a.r, 2.99);
    EXPECT_LT(a.r, 3.0);
    // The correctly rounded subnormal is exact.
    const AnalyticResult b = analytic_ratio(tensor_of(DType::f32, {3 * 0x1p-149}),
                                            tensor_of(DType::f64, {3 * 0x1p-149}), Tensor{}, 1, p);
    EXPECT_EQ(b.r, 0.0);
}

TEST(AnalyticRatio, IntegerOutputsDemandEquality) {
    OutputSpec o;
    o.dtype = DType::i64;
    const ErrorModelParams p = params_for(o, 4.0);
    const Tensor ystar = tensor_of(DType::f64, {0, 5, 2});
    AnalyticResult a = analytic_ratio(tensor_of(DType::i64, {0, 5, 2}), ystar, Tensor{}, 8, p);
    EXPECT_EQ(a.r, 0.0);
    a = analytic_ratio(tensor_of(DType::i64, {0, 4, 2}), ystar, Tensor{}, 8, p);
    EXPECT_EQ(a.r, kInf);
    EXPECT_EQ(a.worst, 1);
    EXPECT_EQ(a.first_violation, 1);
}

TEST(AnalyticRatio, WorstAndFirstViolationAreDistinct) {
    // Scale 1 each, K = 1: τ = 4·2^-24 + 2^-24·|y*| + 2^-30.
    const Tensor ystar = tensor_of(DType::f64, {0, 0, 0, 0});
    const Tensor scale = tensor_of(DType::f64, {1, 1, 1, 1});
    const Tensor y = tensor_of(DType::f64, {0, 0x1p-18, 0x1p-14, 0x1p-16});
    const AnalyticResult a = analytic_ratio(y, ystar, scale, 1, exact_params());
    EXPECT_EQ(a.first_violation, 1);
    EXPECT_EQ(a.worst, 2);
    EXPECT_EQ(a.violations, 3);
    EXPECT_EQ(a.err_at_worst, 0x1p-14);
    EXPECT_EQ(a.r, 0x1p-14 / (0x1p-22 + 0x1p-30));
}

TEST(AnalyticRatio, RejectsMismatchedSizesAndNegativeK) {
    const Tensor two = tensor_of(DType::f64, {1, 2});
    const Tensor three = tensor_of(DType::f64, {1, 2, 3});
    EXPECT_THROW(analytic_ratio(two, three, Tensor{}, 1, exact_params()), std::invalid_argument);
    EXPECT_THROW(analytic_ratio(two, two, three, 1, exact_params()), std::invalid_argument);
    EXPECT_THROW(analytic_ratio(two, two, two, -1, exact_params()), std::invalid_argument);
}

// Random values in each dtype, at K = 1 with s = |y*| and the accumulator of the output dtype:
// τ = 5u·|y*| (+ ulp of the min normal). Correctly rounded passes; rounded then moved one ulp
// (at most 1.5 ulp ≤ 3u·|y*| away) passes; moved eight ulps (≥ 7.5u·|y*|) fails everywhere.
TEST(AnalyticRatio, UlpDistancesAgainstTheModelRandom) {
    const uint64_t seed = 20240611;
    const CounterRng rng(seed, 1);
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
        const int64_t n = 1 + rng.integer(static_cast<uint64_t>(t) + 100000, 0, 999);
        Tensor ystar = Tensor::empty(DType::f64, {n});
        Tensor exact = Tensor::empty(t, {n}), near = Tensor::empty(t, {n}), far = Tensor::empty(t, {n});
        for (int64_t i = 0; i < n; ++i) {
            const double v = (rng.uniform01(2 * i) - 0.5) * std::ldexp(1.0, int(rng.integer(2 * i + 1, -6, 6)));
            const double r = round_to(t, v), step = ulp(t, r) * (r < 0 ? -1 : 1);
            ystar.set(i, v);
            exact.set(i, v);
            near.set(i, r + step);
            far.set(i, r + 8 * step);
        }
        OutputSpec o;
        o.dtype = t;
        o.accumulator = t;
        const ErrorModelParams p = params_for(o, 4.0);
        const AnalyticResult a = analytic_ratio(exact, ystar, Tensor{}, 1, p);
        EXPECT_EQ(a.r, 0.0) << name(t) << " seed " << seed << " n " << n;
        EXPECT_EQ(a.compared, n);
        const AnalyticResult b = analytic_ratio(near, ystar, Tensor{}, 1, p);
        EXPECT_TRUE(b.pass()) << name(t) << " seed " << seed << " n " << n << " r " << b.r << " at " << b.worst;
        EXPECT_GT(b.r, 0.0);
        const AnalyticResult c = analytic_ratio(far, ystar, Tensor{}, 1, p);
        EXPECT_FALSE(c.pass()) << name(t) << " seed " << seed << " n " << n << " r " << c.r;
        EXPECT_EQ(c.violations, n) << name(t) << " seed " << seed;
    }
}

TEST(EnvelopeErr, MaxAbsoluteErrorOverMaxReference) {
    const Tensor ystar = tensor_of(DType::f64, {1, -4, 2});
    // 4 + 2^-126 rounds to 4: err = 0.5 / 4 exactly.
    const EnvelopeErr e = envelope_err(tensor_of(DType::f32, {1, -4, 2.5}), ystar);
    EXPECT_EQ(e.err, 0.125);
    EXPECT_EQ(e.worst, 2);
}

TEST(EnvelopeErr, NonFiniteHandling) {
    const Tensor ystar = tensor_of(DType::f64, {kInf, 1, kNaN, 2});
    // y* = Inf at 0 neither enters max|y*| nor the error; a NaN where y* is NaN is not an error.
    EnvelopeErr e = envelope_err(tensor_of(DType::f32, {0, 1, kNaN, 1.5}), ystar);
    EXPECT_EQ(e.err, 0.25);
    EXPECT_EQ(e.worst, 3);
    e = envelope_err(tensor_of(DType::f32, {kInf, kNaN, 0, 2}), ystar);
    EXPECT_TRUE(std::isnan(e.err));
    EXPECT_EQ(e.worst, 1);
    e = envelope_err(tensor_of(DType::f32, {kInf, 1, 0, kInf}), ystar);
    EXPECT_EQ(e.err, kInf);
}

TEST(EnvelopeErr, ZeroReference) {
    EnvelopeErr e = envelope_err(tensor_of(DType::f32, {0, -0.0}), tensor_of(DType::f64, {0, 0}));
    EXPECT_EQ(e.err, 0.0);
    // 2^-127 against y* = 0: relative to the fp32 min normal 2^-126, one half.
    e = envelope_err(tensor_of(DType::f32, {0x1p-127, 0}), tensor_of(DType::f64, {0, 0}));
    EXPECT_EQ(e.err, 0.5);
    EXPECT_EQ(e.worst, 0);
}

TEST(EnvelopeRatio, Arithmetic) {
    EXPECT_EQ(envelope_ratio(0.25, 0.0625, 0x1p-24, 2.0), 2.0);
    EXPECT_EQ(envelope_ratio(0.125, 0.0625, 0x1p-24, 2.0), 1.0);
    // The floor stands in for controls more accurate than the output dtype.
    EXPECT_EQ(envelope_ratio(0x1p-23, 0.0, 0x1p-24, 2.0), 1.0);
    EXPECT_EQ(envelope_ratio(0x1p-23, 0x1p-30, 0x1p-24, 1.0), 2.0);
    EXPECT_EQ(envelope_ratio(0.0, 0.0, 0.0, 2.0), 0.0);
    EXPECT_EQ(envelope_ratio(1e-9, 0.0, 0.0, 2.0), kInf);
    EXPECT_EQ(envelope_ratio(kInf, 0.5, 0x1p-24, 2.0), kInf);
    EXPECT_TRUE(std::isnan(envelope_ratio(kNaN, 0.5, 0x1p-24, 2.0)));
    EXPECT_TRUE(std::isnan(envelope_ratio(0.5, kNaN, 0x1p-24, 2.0)));
}

}  // namespace
}  // namespace kcv
