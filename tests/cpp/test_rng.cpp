// Philox against the Random123 known answers; the derived streams pinned to golden values so
// that any change of a generated input is caught; distribution sanity.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <set>

#include "kcv/rng.hpp"

namespace kcv {
namespace {

TEST(Rng, PhiloxKnownAnswers) {
    // Random123 1.14, tests/kat_vectors, "philox4x32 10": counter, key -> output.
    struct Kat {
        std::array<uint32_t, 4> ctr;
        std::array<uint32_t, 2> key;
        std::array<uint32_t, 4> out;
    };
    const Kat kats[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (const Kat& k : kats) EXPECT_EQ(philox4x32_10(k.ctr, k.key), k.out);
}

// Counter = (index, stream) as four little-endian words, key = seed.
std::array<uint32_t, 4> block_of(uint64_t seed, uint64_t stream, uint64_t index) {
    return philox4x32_10({uint32_t(index), uint32_t(index >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                         {uint32_t(seed), uint32_t(seed >> 32)});
}

TEST(Rng, CounterLayout) {
    const CounterRng r(0xDEADBEEFCAFEF00Dull, 0x1234567890ull);
    for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{0xFFFFFFFF}, uint64_t{1} << 32, ~uint64_t{0}}) {
        const auto w = block_of(0xDEADBEEFCAFEF00Dull, 0x1234567890ull, i);
        EXPECT_EQ(r.u32(i), w[0]);
        EXPECT_EQ(r.u64(i), uint64_t(w[0]) | (uint64_t(w[1]) << 32));
        EXPECT_EQ(r.uniform01(i), std::ldexp(double(r.u64(i) >> 11), -53));
    }
}

// Golden values: seed 42, stream 0 (and integer() under another seed and stream). Changing
// any of them changes every generated input of every probe; do it only on purpose.
TEST(Rng, GoldenStream) {
    struct Gold {
        uint64_t index;
        uint32_t u32;
        uint64_t u64, uniform_bits, normal_bits;
        int64_t small_int, big_int;
    };
    const Gold golds[] = {
        {0ull, 0x9ceaf053u, 0x77f5493b9ceaf053ull, 0x3fddfd524ee73abcull, 0xbfe54ac03c1a032aull, 0, 557681867435},
        {1ull, 0xfcdb2127u, 0x53ba6cfdfcdb2127ull, 0x3fd4ee9b3f7f36c8ull, 0xbff6f135c80fefcbull, -2, 120627556921},
        {2ull, 0xd36c0225u, 0xa8875dcbd36c0225ull, 0x3fe510ebb97a6d80ull, 0x3fc147f0a3f6edb8ull, 2, 435035432319},
        {1000000007ull, 0xa26d1b00u, 0x446ddf7ea26d1b00ull, 0x3fd11b77dfa89b46ull, 0x3fd19ac504724d4bull, -3,
         34778707160},
        {1099511627779ull, 0x4cafada8u, 0x485cb8844cafada8ull, 0x3fd2172e21132beaull, 0x3ff8c318bb90f12eull, -2,
         880187912102},
    };
    const CounterRng r(42, 0), r2(0x0123456789ABCDEFull, 7);
    for (const Gold& g : golds) {
        EXPECT_EQ(r.u32(g.index), g.u32) << "index " << g.index;
        EXPECT_EQ(r.u64(g.index), g.u64) << "index " << g.index;
        EXPECT_EQ(std::bit_cast<uint64_t>(r.uniform01(g.index)), g.uniform_bits) << "index " << g.index;
        EXPECT_EQ(std::bit_cast<uint64_t>(r.normal(g.index)), g.normal_bits) << "index " << g.index;
        EXPECT_EQ(r.integer(g.index, -5, 5), g.small_int) << "index " << g.index;
        EXPECT_EQ(r2.integer(g.index, 0, 999999999999), g.big_int) << "index " << g.index;
    }
    EXPECT_EQ(r2.normal(0), -0x1.415ecd42429bp-1);
    EXPECT_EQ(r2.uniform01(0), 0x1.1d887a4c69647p-1);
    EXPECT_EQ(r2.normal(5), -0x1.3c6b0494a9ee2p-4);
    EXPECT_EQ(derive_seed(42, "ORD-01", 0), 0x98a90025d322bd1bull);
    EXPECT_EQ(derive_seed(42, "ORD-01", 3), 0xbe25301b60184b55ull);
    EXPECT_EQ(derive_seed(42, "ORD-02", 0), 0x42345686008a4f01ull);
    EXPECT_EQ(derive_seed(43, "ORD-01", 0), 0x634b54031eed15ffull);
}

// The normal transform is Box-Muller on the block's two 53-bit halves; the polynomials must
// agree with libm's log and cos to near fp64 precision. The bound is the reference's own
// error: 2*pi*u2 is off by up to an ulp of 2*pi (7e-16 absolute in the cosine), times a
// radius of up to 8.6.
TEST(Rng, NormalMatchesBoxMullerWithinRounding) {
    const uint64_t seed = 9;
    const CounterRng r(seed, 3);
    double worst = 0;
    for (uint64_t i = 0; i < 200000; ++i) {
        const auto w = block_of(seed, 3, i);
        const double u1 = std::ldexp(double(((uint64_t(w[0]) | (uint64_t(w[1]) << 32)) >> 11) + 1), -53);
        const double u2 = std::ldexp(double((uint64_t(w[2]) | (uint64_t(w[3]) << 32)) >> 11), -53);
        const double ref = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
        const double err = std::fabs(r.normal(i) - ref) / std::max(1.0, std::fabs(ref));
        worst = std::max(worst, err);
    }
    EXPECT_LT(worst, 1e-14) << "seed " << seed;
}

TEST(Rng, NormalMoments) {
    const uint64_t seed = 20250101;
    const CounterRng r(seed, 0);
    const int n = 1000000;
    double sum = 0, sum2 = 0, sum4 = 0;
    int within1 = 0;
    double lo = 0, hi = 0;
    for (int i = 0; i < n; ++i) {
        const double z = r.normal(uint64_t(i));
        ASSERT_TRUE(std::isfinite(z));
        sum += z;
        sum2 += z * z;
        sum4 += z * z * z * z;
        within1 += std::fabs(z) < 1;
        lo = std::min(lo, z);
        hi = std::max(hi, z);
    }
    const double mean = sum / n, var = sum2 / n - mean * mean;
    // Five standard errors: sd(mean) = 1e-3, sd(var) ~ 1.4e-3, sd(kurtosis) ~ 5e-3 * sqrt(24).
    EXPECT_NEAR(mean, 0.0, 0.005) << "seed " << seed;
    EXPECT_NEAR(var, 1.0, 0.0071) << "seed " << seed;
    EXPECT_NEAR(sum4 / n, 3.0, 0.025) << "seed " << seed;
    EXPECT_NEAR(double(within1) / n, 0.682689, 0.0024) << "seed " << seed;
    EXPECT_LT(lo, -4.0);
    EXPECT_GT(hi, 4.0);
}

TEST(Rng, UniformRangeAndMoments) {
    const uint64_t seed = 77;
    const CounterRng r(seed, 1);
    const int n = 1000000;
    double sum = 0;
    for (int i = 0; i < n; ++i) {
        const double u = r.uniform01(uint64_t(i));
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        ASSERT_EQ(std::ldexp(u, 53), std::floor(std::ldexp(u, 53))) << "a multiple of 2^-53";
        sum += u;
    }
    EXPECT_NEAR(sum / n, 0.5, 5 * 0.2887 / 1000) << "seed " << seed;
}

TEST(Rng, IntegerIsInRangeAndUnbiased) {
    const uint64_t seed = 5;
    const CounterRng r(seed, 0);
    // Chi-square over 7 bins with 700000 draws: 6 degrees of freedom, p = 1e-4 at 27.9.
    int counts[7] = {};
    for (uint64_t i = 0; i < 700000; ++i) {
        const int64_t v = r.integer(i, -3, 3);
        ASSERT_GE(v, -3);
        ASSERT_LE(v, 3);
        ++counts[v + 3];
    }
    double chi2 = 0;
    for (int c : counts) chi2 += (c - 100000.0) * (c - 100000.0) / 100000.0;
    EXPECT_LT(chi2, 27.9) << "seed " << seed;

    EXPECT_EQ(r.integer(123, 17, 17), 17);
    EXPECT_THROW(r.integer(0, 2, 1), std::invalid_argument);
    // The full int64 range is the raw 64-bit word.
    EXPECT_EQ(r.integer(9, INT64_MIN, INT64_MAX), int64_t(r.u64(9)));
    // A range of three quarters of 2^64 rejects a quarter of the draws (some indices need a
    // second Philox block): values stay in range and every index still gives one.
    const int64_t lo = INT64_MIN, hi = int64_t(1) << 62;
    std::set<int64_t> distinct;
    for (uint64_t i = 0; i < 2000; ++i) {
        const int64_t v = r.integer(i, lo, hi);
        ASSERT_GE(v, lo);
        ASSERT_LE(v, hi);
        ASSERT_EQ(v, r.integer(i, lo, hi)) << "a pure function of the index";
        distinct.insert(v);
    }
    EXPECT_GT(distinct.size(), 1990u);
}

TEST(Rng, PureFunctionOfSeedStreamIndex) {
    const CounterRng a(1, 0), b(1, 0), c(2, 0), d(1, 1);
    int same_seed_diff = 0, same_stream_diff = 0;
    for (uint64_t i = 1000; i-- > 0;) {   // backwards: order must not matter
        ASSERT_EQ(a.u64(i), b.u64(i));
        ASSERT_EQ(std::bit_cast<uint64_t>(a.normal(i)), std::bit_cast<uint64_t>(b.normal(i)));
        same_seed_diff += a.u64(i) != d.u64(i);
        same_stream_diff += a.u64(i) != c.u64(i);
    }
    EXPECT_EQ(same_seed_diff, 1000);
    EXPECT_EQ(same_stream_diff, 1000);
}

TEST(Rng, DeriveSeedSeparatesLabelsAndIndices) {
    std::set<uint64_t> seen;
    for (const char* label : {"ORD-01", "ORD-02", "ORD-0", "", "PRC-01"})
        for (uint64_t n = 0; n < 50; ++n)
            for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}}) seen.insert(derive_seed(seed, label, n));
    EXPECT_EQ(seen.size(), 5u * 50 * 3);
    EXPECT_EQ(derive_seed(7, "x"), derive_seed(7, "x", 0));
    EXPECT_EQ(derive_seed(7, nullptr), derive_seed(7, ""));
}

}  // namespace
}  // namespace kcv
