// Value families: each element is the documented function of (seed, index), rounded to the
// dtype, inside the domain; structural zeros stay zero; injection changes exactly what it
// reports.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <set>

#include "kcv/families.hpp"
#include "kcv/rng.hpp"

namespace kcv {
namespace {

InputSpec spec_of(const std::string& kind, double a, double b, DType t = DType::f64) {
    InputSpec s;
    s.name = "x";
    s.dtype = t;
    s.distribution.kind = kind;
    s.distribution.a = a;
    s.distribution.b = b;
    return s;
}

Layout layout(Layout::Kind k, int64_t offset = 0) {
    Layout l;
    l.kind = k;
    l.storage_offset = offset;
    return l;
}

TEST(Families, TaskDistributionsExactly) {
    const uint64_t seed = 1234;
    const CounterRng rng(seed, 0);
    Tensor t = Tensor::empty(DType::f64, {4, 250});

    fill(t, spec_of("normal", 3, 2), {}, seed);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), 3 + 2 * rng.normal(uint64_t(i))) << i;

    fill(t, spec_of("uniform", -1, 5), {}, seed);
    for (int64_t i = 0; i < t.numel(); ++i) {
        ASSERT_EQ(t.get(i), -1 + 6 * rng.uniform01(uint64_t(i))) << i;
        ASSERT_GE(t.get(i), -1);
        ASSERT_LT(t.get(i), 5);
    }

    fill(t, spec_of("positive", 0.5, 2), {}, seed);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), 0.5 + 1.5 * rng.uniform01(uint64_t(i))) << i;

    fill(t, spec_of("logits", 0, 8), {}, seed);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), rng.normal(uint64_t(i)) * 8) << i;

    fill(t, spec_of("integer", -3, 4), {}, seed);
    std::set<double> seen;
    for (int64_t i = 0; i < t.numel(); ++i) {
        ASSERT_EQ(t.get(i), double(rng.integer(uint64_t(i), -3, 4))) << i;
        seen.insert(t.get(i));
    }
    EXPECT_EQ(seen.size(), 8u) << "every integer of [-3, 4] appears (seed " << seed << ")";

    EXPECT_THROW(fill(t, spec_of("cauchy", 0, 1), {}, seed), std::invalid_argument);
}

TEST(Families, NormalMomentsFollowTheSpec) {
    const uint64_t seed = 99;
    Tensor t = Tensor::empty(DType::f32, {100000});
    fill(t, spec_of("normal", -2, 0.5), {}, seed);
    double sum = 0, sum2 = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sum += t.get(i);
    const double mean = sum / double(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) sum2 += (t.get(i) - mean) * (t.get(i) - mean);
    EXPECT_NEAR(mean, -2, 5 * 0.5 / std::sqrt(1e5)) << "seed " << seed;
    EXPECT_NEAR(std::sqrt(sum2 / double(t.numel())), 0.5, 0.006) << "seed " << seed;
}

TEST(Families, ValuesAreRoundedToTheDtype) {
    const uint64_t seed = 5;
    const CounterRng rng(seed, 0);
    for (DType dt : {DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2, DType::i32}) {
        Tensor t = Tensor::empty(dt, {333});
        fill(t, spec_of("normal", 0, 3), {}, seed);
        for (int64_t i = 0; i < t.numel(); ++i)
            ASSERT_EQ(t.bits(i), encode(dt, 3 * rng.normal(uint64_t(i)))) << name(dt) << " " << i << " seed " << seed;
    }
}

TEST(Families, PureFunctionOfSeedAndLogicalIndex) {
    const InputSpec s = spec_of("normal", 0, 1, DType::bf16);
    const uint64_t seed = 8;
    Tensor c = Tensor::empty(DType::bf16, {6, 7, 8});
    Tensor tr = Tensor::empty(DType::bf16, {6, 7, 8}, layout(Layout::Kind::transposed, 5), Poison::bytes(0xFF));
    Tensor st = Tensor::empty(DType::bf16, {6, 7, 8}, layout(Layout::Kind::strided, 1), Poison::bytes(0xFF));
    fill(c, s, {}, seed);
    fill(tr, s, {}, seed);
    fill(st, s, {}, seed);
    EXPECT_EQ(c.hash(), tr.hash());
    EXPECT_EQ(c.hash(), st.hash());
    // A prefix of a longer tensor holds the same values.
    Tensor flat = Tensor::empty(DType::bf16, {1000});
    fill(flat, s, {}, seed);
    for (int64_t i = 0; i < c.numel(); ++i) ASSERT_EQ(flat.bits(i), c.bits(i)) << i;
    // Another seed changes nearly everything.
    Tensor other = Tensor::empty(DType::bf16, {6, 7, 8});
    fill(other, s, {}, seed + 1);
    int differ = 0;
    for (int64_t i = 0; i < c.numel(); ++i) differ += other.bits(i) != c.bits(i);
    EXPECT_GT(differ, 300);
    // The gaps of a strided tensor keep their poison.
    for (size_t b = 0; b < 2; ++b) EXPECT_EQ(st.buf->data()[b], 0xFF) << "storage offset slot";
}

TEST(Families, OtherFamilies) {
    const uint64_t seed = 77;
    const CounterRng rng(seed, 0);
    const InputSpec s = spec_of("uniform", 1, 2);
    Tensor t = Tensor::empty(DType::f64, {500});

    fill(t, s, Family::of(Family::Kind::signed_normal), seed);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), rng.normal(uint64_t(i)));

    fill(t, s, Family::of(Family::Kind::positive), seed);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), rng.uniform01(uint64_t(i)));

    fill(t, s, Family::of(Family::Kind::band, 1000), seed);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), (1 + rng.uniform01(uint64_t(i))) * 1000);

    fill(t, s, Family::of(Family::Kind::offset, 1e4), seed);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), 1e4 + rng.normal(uint64_t(i)));

    fill(t, s, Family::of(Family::Kind::repeated), seed);
    const double first = 1 + rng.uniform01(0);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), first);
}

TEST(Families, NearMax) {
    const uint64_t seed = 3;
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
        const double max = info(dt).max_finite;
        Tensor t = Tensor::empty(dt, {2000});
        fill(t, spec_of("normal", 0, 1, dt), Family::of(Family::Kind::near_max), seed);
        int neg = 0;
        for (int64_t i = 0; i < t.numel(); ++i) {
            const double v = t.get(i);
            ASSERT_GE(std::fabs(v), max / 2) << name(dt) << " " << i << " seed " << seed;
            ASSERT_LE(std::fabs(v), max) << name(dt) << " " << i << " seed " << seed;
            neg += v < 0;
        }
        EXPECT_GT(neg, 800) << name(dt);
        EXPECT_LT(neg, 1200) << name(dt);
        InputSpec pos = spec_of("normal", 0, 1, dt);
        pos.domain.lo = 0;
        fill(t, pos, Family::of(Family::Kind::near_max), seed);
        for (int64_t i = 0; i < t.numel(); ++i) ASSERT_GE(t.get(i), max / 2) << name(dt);
    }
}

TEST(Families, RandomMantissa) {
    const uint64_t seed = 21;
    Tensor t = Tensor::empty(DType::f32, {20000});
    fill(t, spec_of("normal", 0, 1, DType::f32), Family::of(Family::Kind::random_mantissa), seed);
    std::set<int> exponents;
    int neg = 0, odd = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
        const double v = t.get(i);
        int e;
        std::frexp(std::fabs(v), &e);
        --e;   // v = 1.f * 2^e
        ASSERT_GE(e, -4) << i;
        ASSERT_LE(e, 4) << i;
        exponents.insert(e);
        neg += v < 0;
        odd += t.bits(i) & 1;   // the last of the 24 significand bits
    }
    EXPECT_EQ(exponents.size(), 9u) << "seed " << seed;
    EXPECT_NEAR(neg, 10000, 500) << "seed " << seed;
    EXPECT_NEAR(odd, 10000, 500) << "seed " << seed;
    InputSpec pos = spec_of("normal", 0, 1, DType::f32);
    pos.domain.lo = 0;
    fill(t, pos, Family::of(Family::Kind::random_mantissa), seed);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_GT(t.get(i), 0) << i;
}

TEST(Families, Subnormal) {
    const uint64_t seed = 4;
    for (DType dt : {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
        Tensor t = Tensor::empty(dt, {3000});
        fill(t, spec_of("normal", 0, 1, dt), Family::of(Family::Kind::subnormal), seed);
        int pos = 0, negs = 0;
        std::set<uint64_t> distinct;
        for (int64_t i = 0; i < t.numel(); ++i) {
            const FpClass c = classify(dt, t.bits(i));
            ASSERT_TRUE(c == FpClass::pos_subnormal || c == FpClass::neg_subnormal)
                << name(dt) << " " << bits_hex(dt, t.bits(i)) << " seed " << seed;
            (c == FpClass::pos_subnormal ? pos : negs)++;
            distinct.insert(t.bits(i));
        }
        EXPECT_GT(pos, 1300) << name(dt);
        EXPECT_GT(negs, 1300) << name(dt);
        const size_t expect_distinct = dt == DType::e4m3 ? 14 : dt == DType::e5m2 ? 6 : 100;
        EXPECT_GE(distinct.size(), expect_distinct) << name(dt);

        InputSpec nonneg = spec_of("normal", 0, 1, dt);
        nonneg.domain.lo = 0;
        fill(t, nonneg, Family::of(Family::Kind::subnormal), seed);
        for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(classify(dt, t.bits(i)), FpClass::pos_subnormal);
    }
    Tensor i32 = Tensor::empty(DType::i32, {4});
    EXPECT_THROW(fill(i32, spec_of("normal", 0, 1, DType::i32), Family::of(Family::Kind::subnormal), seed),
                 std::invalid_argument);
    InputSpec no_sub = spec_of("normal", 0, 1, DType::f32);
    no_sub.domain.subnormal = false;
    Tensor f = Tensor::empty(DType::f32, {4});
    EXPECT_THROW(fill(f, no_sub, Family::of(Family::Kind::subnormal), seed), std::invalid_argument);
}

TEST(Families, DomainClampAndNoSubnormals) {
    const uint64_t seed = 6;
    InputSpec s = spec_of("normal", 0, 1, DType::f32);
    s.domain.lo = -0.5;
    s.domain.hi = 0.25;
    Tensor t = Tensor::empty(DType::f32, {5000});
    fill(t, s, {}, seed);
    int at_lo = 0, at_hi = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
        ASSERT_GE(t.get(i), -0.5);
        ASSERT_LE(t.get(i), 0.25);
        at_lo += t.get(i) == -0.5;
        at_hi += t.get(i) == 0.25;
    }
    EXPECT_GT(at_lo, 1000);
    EXPECT_GT(at_hi, 1500);

    // Tiny normal values are mostly subnormal in fp16; a domain without subnormals gets +0.
    InputSpec tiny = spec_of("normal", 0, 1e-6, DType::f16);
    Tensor h = Tensor::empty(DType::f16, {5000});
    fill(h, tiny, {}, seed);
    int subnormals = 0;
    for (int64_t i = 0; i < h.numel(); ++i) subnormals += classify(DType::f16, h.bits(i)) == FpClass::pos_subnormal;
    EXPECT_GT(subnormals, 1000);
    tiny.domain.subnormal = false;
    fill(h, tiny, {}, seed);
    for (int64_t i = 0; i < h.numel(); ++i) {
        const FpClass c = classify(DType::f16, h.bits(i));
        ASSERT_TRUE(c != FpClass::pos_subnormal && c != FpClass::neg_subnormal) << i;
    }
}

TEST(Families, StructuralZerosStayZero) {
    const uint64_t seed = 10;
    for (const char* structure : {"lower_triangular", "upper_triangular"}) {
        const bool lower = std::string(structure) == "lower_triangular";
        InputSpec s = spec_of("normal", 0, 1, DType::f32);
        s.domain.structure = structure;
        Tensor t = Tensor::empty(DType::f32, {2, 4, 5}, layout(Layout::Kind::transposed), Poison::bytes(0xFF));
        for (Family f : {Family::of(Family::Kind::task), Family::of(Family::Kind::offset, 1e4),
                         Family::of(Family::Kind::near_max), Family::of(Family::Kind::repeated)}) {
            fill(t, s, f, seed);
            for (int64_t i = 0; i < t.numel(); ++i) {
                const auto c = t.coords(i);
                const bool zero = lower ? c[2] > c[1] : c[1] > c[2];
                if (zero) ASSERT_EQ(t.bits(i), 0u) << structure << " " << describe(f) << " " << i;
                else ASSERT_NE(t.get(i), 0.0) << structure << " " << describe(f) << " " << i;
            }
        }
        // Injection at every position still skips them.
        fill(t, s, {}, seed);
        Specials all;
        all.rate = 1.0;
        const auto changed = inject(t, s, all, seed);
        EXPECT_EQ(changed.size(), 2u * (lower ? 1 + 2 + 3 + 4 : 5 + 4 + 3 + 2));
        for (int64_t i = 0; i < t.numel(); ++i) {
            const auto c = t.coords(i);
            const bool zero = lower ? c[2] > c[1] : c[1] > c[2];
            if (zero) ASSERT_EQ(t.bits(i), 0u) << structure << " " << i;
            else ASSERT_FALSE(std::isfinite(t.get(i))) << structure << " " << i;
        }
    }
    InputSpec bad = spec_of("normal", 0, 1, DType::f32);
    bad.domain.structure = "banded";
    Tensor t = Tensor::empty(DType::f32, {2, 2});
    EXPECT_THROW(fill(t, bad, {}, seed), std::invalid_argument);
}

TEST(Families, IndexInputsDrawIntegers) {
    const uint64_t seed = 12;
    InputSpec s = spec_of("normal", 0, 9, DType::i64);
    s.index = true;
    Tensor t = Tensor::empty(DType::i64, {3, 400});
    std::set<double> seen;
    for (Family f : {Family::of(Family::Kind::task), Family::of(Family::Kind::near_max),
                     Family::of(Family::Kind::subnormal)}) {
        fill(t, s, f, seed);
        for (int64_t i = 0; i < t.numel(); ++i) {
            ASSERT_EQ(t.get(i), double(CounterRng(seed, 0).integer(uint64_t(i), 0, 9))) << describe(f) << " " << i;
            seen.insert(t.get(i));
        }
    }
    EXPECT_EQ(seen.size(), 10u);
    Specials sp;
    sp.rate = 1.0;
    EXPECT_TRUE(inject(t, s, sp, seed).empty());
}

TEST(Families, ScatteredInjection) {
    const uint64_t seed = 42;
    const InputSpec s = spec_of("normal", 0, 1, DType::bf16);
    Tensor t = Tensor::empty(DType::bf16, {100, 1000});
    fill(t, s, {}, seed);
    const Tensor before = t.clone();
    Specials sp;
    sp.rate = 0.01;
    sp.kinds = {"nan", "+inf", "-inf", "+0", "-0", "+max", "-max"};
    const auto changed = inject(t, s, sp, seed);
    EXPECT_NEAR(double(changed.size()), 1000, 160) << "seed " << seed;
    ASSERT_TRUE(std::is_sorted(changed.begin(), changed.end()));
    EXPECT_EQ(std::set<int64_t>(changed.begin(), changed.end()).size(), changed.size());
    const std::set<uint64_t> allowed = {0x7FC0, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x7F7F, 0xFF7F};
    std::set<uint64_t> kinds_used;
    size_t k = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
        if (k < changed.size() && changed[k] == i) {
            ASSERT_TRUE(allowed.count(t.bits(i))) << bits_hex(DType::bf16, t.bits(i));
            kinds_used.insert(t.bits(i));
            ++k;
        } else {
            ASSERT_EQ(t.bits(i), before.bits(i)) << "unreported change at " << i;
        }
    }
    EXPECT_EQ(kinds_used.size(), allowed.size());
    // Same seed, same positions.
    Tensor again = before.clone();
    EXPECT_EQ(inject(again, s, sp, seed), changed);
    EXPECT_EQ(again.hash(), t.hash());

    // A rate too small for the tensor still injects one value.
    Tensor small = Tensor::empty(DType::f32, {10});
    Specials rare;
    rare.rate = 0;
    const auto one = inject(small, spec_of("normal", 0, 1, DType::f32), rare, seed);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_FALSE(std::isfinite(small.get(one[0])));

    Specials bad;
    bad.kinds = {"quiet"};
    EXPECT_THROW(inject(small, spec_of("normal", 0, 1, DType::f32), bad, seed), std::invalid_argument);
}

TEST(Families, InjectionRespectsTheDomain) {
    Tensor t = Tensor::empty(DType::f32, {64});
    InputSpec finite = spec_of("normal", 0, 1, DType::f32);
    finite.domain.nonfinite = false;
    Specials sp;
    sp.rate = 1.0;
    EXPECT_TRUE(inject(t, finite, sp, 1).empty());
    for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.bits(i), 0u);
    Tensor ints = Tensor::empty(DType::i32, {64});
    EXPECT_TRUE(inject(ints, spec_of("normal", 0, 1, DType::i32), sp, 1).empty());
    Tensor none = Tensor::empty(DType::f32, {0, 3});
    EXPECT_TRUE(inject(none, spec_of("normal", 0, 1, DType::f32), sp, 1).empty());
    // e4m3fn has no infinity: an injected "+inf" is its NaN.
    Tensor e = Tensor::empty(DType::e4m3, {4});
    Specials inf;
    inf.rate = 1.0;
    inf.kinds = {"+inf"};
    EXPECT_EQ(inject(e, spec_of("normal", 0, 1, DType::e4m3), inf, 1).size(), 4u);
    EXPECT_EQ(e.bits(0), 0x7Fu);
}

TEST(Families, RowNegInf) {
    const InputSpec s = spec_of("normal", 0, 1, DType::f32);
    std::set<int64_t> rows;
    for (uint64_t seed = 0; seed < 40; ++seed) {
        Tensor t = Tensor::empty(DType::f32, {4, 6, 8});
        fill(t, s, {}, seed);
        Specials sp;
        sp.pattern = Specials::Pattern::row_neg_inf;
        const auto changed = inject(t, s, sp, seed);
        ASSERT_EQ(changed.size(), 8u) << "seed " << seed;
        ASSERT_EQ(changed[0] % 8, 0) << "seed " << seed;
        for (size_t j = 0; j < 8; ++j) ASSERT_EQ(changed[j], changed[0] + int64_t(j));
        int neg_inf = 0;
        for (int64_t i = 0; i < t.numel(); ++i) neg_inf += t.get(i) == -std::numeric_limits<double>::infinity();
        EXPECT_EQ(neg_inf, 8) << "seed " << seed;
        rows.insert(changed[0] / 8);
    }
    EXPECT_GT(rows.size(), 10u) << "the row depends on the seed";

    InputSpec upper = s;
    upper.domain.structure = "upper_triangular";
    Tensor m = Tensor::empty(DType::f32, {8, 8});
    Specials sp;
    sp.pattern = Specials::Pattern::row_neg_inf;
    fill(m, upper, {}, 5);
    const auto changed = inject(m, upper, sp, 5);
    ASSERT_FALSE(changed.empty());
    const int64_t row = changed[0] / 8;
    EXPECT_EQ(changed.size(), size_t(8 - row));
    for (int64_t c = 0; c < row; ++c) EXPECT_EQ(m.bits(row * 8 + c), 0u);

    Tensor scalar = Tensor::empty(DType::f32, {});
    EXPECT_EQ(inject(scalar, s, sp, 1), std::vector<int64_t>{0});
    EXPECT_EQ(scalar.get(0), -std::numeric_limits<double>::infinity());
}

TEST(Families, SingleNan) {
    const InputSpec s = spec_of("normal", 0, 1, DType::f16);
    Specials sp;
    sp.pattern = Specials::Pattern::single_nan;
    Tensor t = Tensor::empty(DType::f16, {7, 9});
    fill(t, s, {}, 1);
    EXPECT_EQ(inject(t, s, sp, 1), std::vector<int64_t>{31});
    for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(std::isnan(t.get(i)), i == 31) << i;

    InputSpec upper = s;
    upper.domain.structure = "upper_triangular";
    Tensor m = Tensor::empty(DType::f16, {4, 4});
    fill(m, upper, {}, 1);
    // The middle (2, 0) and (2, 1) lie below the diagonal; (2, 2) is the first allowed.
    EXPECT_EQ(inject(m, upper, sp, 1), std::vector<int64_t>{10});
    EXPECT_TRUE(std::isnan(m.get(10)));
}

TEST(Families, Names) {
    EXPECT_STREQ(name(Family::Kind::random_mantissa), "random_mantissa");
    EXPECT_STREQ(name(Family::Kind::near_max), "near_max");
    EXPECT_EQ(describe(Family::of(Family::Kind::band, 1000)), "band(scale=1000)");
    EXPECT_EQ(describe(Family::of(Family::Kind::offset, 0.1)), "offset(scale=0.1)");
    EXPECT_EQ(describe(Family::of(Family::Kind::signed_normal)), "signed_normal");
}

}  // namespace
}  // namespace kcv
