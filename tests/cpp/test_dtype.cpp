// Bit-exact checks of the float formats: every pattern of the 8- and 16-bit formats, every
// tie between neighbours, the subnormal and overflow boundaries, and a cross-check of fp32
// (and fp16 where the compiler has _Float16) against the hardware conversion.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>

#include "kcv/dtype.hpp"
#include "kcv/kcv_kernel.h"

namespace kcv {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Narrow {
    DType t;
    int width;         // bits in the encoding
    int mant_bits;
    bool finite_only;  // e4m3fn
};
constexpr Narrow kNarrow[] = {
    {DType::f16, 16, 10, false},
    {DType::bf16, 16, 7, false},
    {DType::e4m3, 8, 3, true},
    {DType::e5m2, 8, 2, false},
};

uint64_t sign_bit(const Narrow& n) { return uint64_t{1} << (n.width - 1); }
uint64_t quiet_bit(const Narrow& n) { return uint64_t{1} << (n.mant_bits - 1); }

double pow2(int k) { return std::ldexp(1.0, k); }

// The largest finite magnitude pattern: one below +Inf, or one below the NaN of e4m3fn.
uint64_t max_bits(const Narrow& n) { return n.finite_only ? sign_bit(n) - 2 : ((sign_bit(n) - 1) >> n.mant_bits << n.mant_bits) - 1; }

TEST(DType, ExhaustiveRoundTrip) {
    for (const Narrow& n : kNarrow) {
        const uint64_t count = uint64_t{1} << n.width;
        for (uint64_t b = 0; b < count; ++b) {
            const double v = decode(n.t, b);
            const uint64_t back = encode(n.t, v);
            if (classify(n.t, b) == FpClass::nan) {
                ASSERT_TRUE(std::isnan(v)) << name(n.t) << " " << bits_hex(n.t, b);
                ASSERT_EQ(classify(n.t, back), FpClass::nan) << name(n.t) << " " << bits_hex(n.t, b);
                // Payload and sign survive; a signalling NaN comes back quiet.
                const uint64_t expect = n.finite_only ? b : (b | quiet_bit(n));
                ASSERT_EQ(back, expect) << name(n.t) << " " << bits_hex(n.t, b) << " -> " << bits_hex(n.t, back);
            } else {
                ASSERT_EQ(back, b) << name(n.t) << " " << bits_hex(n.t, b) << " decoded " << v << " -> "
                                   << bits_hex(n.t, back);
                ASSERT_EQ(std::signbit(v), (b & sign_bit(n)) != 0) << name(n.t) << " " << bits_hex(n.t, b);
            }
        }
    }
}

TEST(DType, DecodeIsStrictlyIncreasingOverPositivePatterns) {
    for (const Narrow& n : kNarrow) {
        for (uint64_t b = 0; b < max_bits(n); ++b) {
            ASSERT_LT(decode(n.t, b), decode(n.t, b + 1)) << name(n.t) << " " << bits_hex(n.t, b);
            ASSERT_EQ(decode(n.t, b | sign_bit(n)), -decode(n.t, b)) << name(n.t) << " " << bits_hex(n.t, b);
        }
        EXPECT_EQ(decode(n.t, max_bits(n)), info(n.t).max_finite) << name(n.t);
        EXPECT_EQ(decode(n.t, 1), info(n.t).min_subnormal) << name(n.t);
        EXPECT_EQ(decode(n.t, uint64_t{1} << n.mant_bits), info(n.t).min_normal) << name(n.t);
    }
}

// Between each pair of neighbours a < b: the midpoint goes to the one with the even
// significand, anything just off the midpoint goes to the nearer one.
TEST(DType, TiesToEvenBetweenEveryPairOfNeighbours) {
    for (const Narrow& n : kNarrow) {
        for (uint64_t b = 0; b < max_bits(n); ++b) {
            for (uint64_t s : {uint64_t{0}, sign_bit(n)}) {
                const uint64_t lo = b | s, hi = (b + 1) | s;
                const double a = decode(n.t, lo), c = decode(n.t, hi);
                const double mid = (a + c) / 2;   // exact: the formats are far narrower than fp64
                ASSERT_EQ(mid - a, c - mid);
                const uint64_t even = (b & 1) == 0 ? lo : hi;
                ASSERT_EQ(encode(n.t, mid), even) << name(n.t) << " tie between " << bits_hex(n.t, lo) << " and "
                                                  << bits_hex(n.t, hi);
                const double toward_c = std::nextafter(mid, c), toward_a = std::nextafter(mid, a);
                ASSERT_EQ(encode(n.t, toward_c), hi) << name(n.t) << " just past the tie " << bits_hex(n.t, lo);
                ASSERT_EQ(encode(n.t, toward_a), lo) << name(n.t) << " just before the tie " << bits_hex(n.t, lo);
            }
        }
    }
}

TEST(DType, SubnormalBoundaries) {
    for (DType t : {DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
        const DTypeInfo& in = info(t);
        const double s = in.min_subnormal;
        const uint64_t one = encode(t, s);
        EXPECT_EQ(classify(t, one), FpClass::pos_subnormal) << in.name;
        EXPECT_EQ(decode(t, one), s) << in.name;
        // Half the smallest subnormal ties between +0 (even) and it.
        EXPECT_EQ(classify(t, encode(t, s / 2)), FpClass::pos_zero) << in.name;
        EXPECT_EQ(classify(t, encode(t, -s / 2)), FpClass::neg_zero) << in.name;
        EXPECT_EQ(encode(t, std::nextafter(s / 2, 1.0)), one) << in.name;
        EXPECT_EQ(classify(t, encode(t, s * 0.75)), FpClass::pos_subnormal) << in.name;
        EXPECT_EQ(decode(t, encode(t, s * 1.5)), 2 * s) << in.name << ": 1.5 ulps ties to 2";
        EXPECT_EQ(decode(t, encode(t, s * 2.5)), 2 * s) << in.name << ": 2.5 ulps ties to 2";
        // The largest subnormal is odd, so the tie just below min_normal rounds up to it.
        const double largest_sub = in.min_normal - s;
        EXPECT_EQ(classify(t, encode(t, largest_sub)), FpClass::pos_subnormal) << in.name;
        EXPECT_EQ(decode(t, encode(t, largest_sub)), largest_sub) << in.name;
        EXPECT_EQ(decode(t, encode(t, in.min_normal - s / 2)), in.min_normal) << in.name;
        EXPECT_EQ(classify(t, encode(t, in.min_normal)), FpClass::pos_normal) << in.name;
        EXPECT_EQ(decode(t, encode(t, -largest_sub)), -largest_sub) << in.name;
        // fp64 subnormals are far below every narrow format and round to a signed zero.
        EXPECT_EQ(classify(t, encode(t, pow2(-1074))), FpClass::pos_zero) << in.name;
        EXPECT_EQ(classify(t, encode(t, -pow2(-1060))), FpClass::neg_zero) << in.name;
    }
    EXPECT_EQ(info(DType::f32).min_subnormal, pow2(-149));
    EXPECT_EQ(info(DType::tf32).min_subnormal, pow2(-136));
    EXPECT_EQ(info(DType::f16).min_subnormal, pow2(-24));
    EXPECT_EQ(info(DType::bf16).min_subnormal, pow2(-133));
    EXPECT_EQ(info(DType::e4m3).min_subnormal, pow2(-9));
    EXPECT_EQ(info(DType::e5m2).min_subnormal, pow2(-16));
    EXPECT_EQ(info(DType::f64).min_subnormal, pow2(-1074));
    EXPECT_EQ(encode(DType::f16, pow2(-24)), 0x0001u);
    EXPECT_EQ(encode(DType::f16, pow2(-14) - pow2(-24)), 0x03FFu);
    EXPECT_EQ(encode(DType::e4m3, pow2(-9)), 0x01u);
    EXPECT_EQ(encode(DType::e4m3, 7 * pow2(-9)), 0x07u);
    EXPECT_EQ(encode(DType::e5m2, 3 * pow2(-16)), 0x03u);
}

TEST(DType, MaxFiniteAndOverflowThreshold) {
    struct Case {
        DType t;
        double max, top_ulp;
        uint64_t max_bits, overflow_bits;
    };
    const Case cases[] = {
        {DType::f32, 3.4028234663852886e38, pow2(104), 0x7F7FFFFF, 0x7F800000},
        {DType::tf32, (2 - pow2(-10)) * pow2(127), pow2(117), 0x7F7FE000, 0x7F800000},
        {DType::f16, 65504, 32, 0x7BFF, 0x7C00},
        {DType::bf16, (2 - pow2(-7)) * pow2(127), pow2(120), 0x7F7F, 0x7F80},
        {DType::e4m3, 448, 32, 0x7E, 0x7F},   // overflow is NaN in e4m3fn
        {DType::e5m2, 57344, 8192, 0x7B, 0x7C},
    };
    for (const Case& c : cases) {
        const char* nm = name(c.t);
        EXPECT_EQ(info(c.t).max_finite, c.max) << nm;
        EXPECT_EQ(encode(c.t, c.max), c.max_bits) << nm;
        // Halfway between max and the next binade's step: ties to even. The IEEE formats' max
        // has an all-ones (odd) significand so the tie overflows; e4m3fn's max is S.1111.110
        // (even; S.1111.111 is NaN) so the tie stays at 448 and only values above 464 overflow.
        const double threshold = c.max + c.top_ulp / 2;
        const uint64_t at_tie = info(c.t).has_inf ? c.overflow_bits : c.max_bits;
        EXPECT_EQ(encode(c.t, threshold), at_tie) << nm << " at the threshold";
        EXPECT_EQ(encode(c.t, std::nextafter(threshold, kInf)), c.overflow_bits) << nm << " just above the threshold";
        EXPECT_EQ(encode(c.t, std::nextafter(threshold, 0.0)), c.max_bits) << nm << " just below the threshold";
        EXPECT_EQ(encode(c.t, 1e300), c.overflow_bits) << nm;
        EXPECT_EQ(encode(c.t, kInf), c.overflow_bits) << nm;
        const uint64_t sign = uint64_t{1} << (info(c.t).storage_bytes * 8 - 1);
        EXPECT_EQ(encode(c.t, -std::nextafter(threshold, kInf)), c.overflow_bits | sign) << nm;
        EXPECT_EQ(encode(c.t, -threshold), at_tie | sign) << nm;
        EXPECT_EQ(encode(c.t, -kInf), c.overflow_bits | sign) << nm;
        EXPECT_EQ(encode(c.t, -c.max), c.max_bits | sign) << nm;
        EXPECT_EQ(ulp(c.t, c.max), c.top_ulp) << nm;
    }
    EXPECT_EQ(classify(DType::e4m3, encode(DType::e4m3, 500.0)), FpClass::nan);
    EXPECT_EQ(encode(DType::e4m3, 464.0), 0x7Eu);
    EXPECT_EQ(encode(DType::e4m3, 465.0), 0x7Fu);
    EXPECT_EQ(encode(DType::e4m3, 480.0), 0x7Fu);
    EXPECT_EQ(encode(DType::e4m3, 463.0), 0x7Eu);
    EXPECT_FALSE(info(DType::e4m3).has_inf);
    EXPECT_TRUE(info(DType::e5m2).has_inf);
}

TEST(DType, SignedZeros) {
    for (DType t : {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
        const int bits = info(t).storage_bytes * 8;
        const uint64_t sign = uint64_t{1} << (bits - 1);
        EXPECT_EQ(encode(t, 0.0), 0u) << name(t);
        EXPECT_EQ(encode(t, -0.0), sign) << name(t);
        EXPECT_EQ(classify(t, 0), FpClass::pos_zero) << name(t);
        EXPECT_EQ(classify(t, sign), FpClass::neg_zero) << name(t);
        EXPECT_TRUE(std::signbit(decode(t, sign))) << name(t);
        EXPECT_EQ(decode(t, sign), 0.0) << name(t);
        EXPECT_FALSE(std::signbit(decode(t, 0))) << name(t);
        EXPECT_TRUE(std::signbit(round_to(t, -1e-300))) << name(t) << ": an underflow keeps its sign";
    }
}

TEST(DType, ClassifyEveryClass) {
    struct Patterns {
        DType t;
        uint64_t nan, pinf, ninf, sub, normal, sign;
    };
    const Patterns ps[] = {
        {DType::f64, 0x7FF8000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x0000000000000001,
         0x3FF0000000000000, 0x8000000000000000},
        {DType::f32, 0x7FC00000, 0x7F800000, 0xFF800000, 0x00000001, 0x3F800000, 0x80000000},
        {DType::tf32, 0x7FC00000, 0x7F800000, 0xFF800000, 0x00002000, 0x3F800000, 0x80000000},
        {DType::f16, 0x7E00, 0x7C00, 0xFC00, 0x0001, 0x3C00, 0x8000},
        {DType::bf16, 0x7FC0, 0x7F80, 0xFF80, 0x0001, 0x3F80, 0x8000},
        {DType::e4m3, 0x7F, 0, 0, 0x01, 0x38, 0x80},
        {DType::e5m2, 0x7E, 0x7C, 0xFC, 0x01, 0x3C, 0x80},
    };
    for (const Patterns& p : ps) {
        const char* nm = name(p.t);
        EXPECT_EQ(classify(p.t, p.nan), FpClass::nan) << nm;
        EXPECT_EQ(classify(p.t, p.nan | p.sign), FpClass::nan) << nm;
        if (info(p.t).has_inf) {
            EXPECT_EQ(classify(p.t, p.pinf), FpClass::pos_inf) << nm;
            EXPECT_EQ(classify(p.t, p.ninf), FpClass::neg_inf) << nm;
            EXPECT_EQ(decode(p.t, p.pinf), kInf) << nm;
            EXPECT_EQ(decode(p.t, p.ninf), -kInf) << nm;
        }
        EXPECT_EQ(classify(p.t, 0), FpClass::pos_zero) << nm;
        EXPECT_EQ(classify(p.t, p.sign), FpClass::neg_zero) << nm;
        EXPECT_EQ(classify(p.t, p.sub), FpClass::pos_subnormal) << nm;
        EXPECT_EQ(classify(p.t, p.sub | p.sign), FpClass::neg_subnormal) << nm;
        EXPECT_EQ(classify(p.t, p.normal), FpClass::pos_normal) << nm;
        EXPECT_EQ(classify(p.t, p.normal | p.sign), FpClass::neg_normal) << nm;
        EXPECT_EQ(decode(p.t, p.normal), 1.0) << nm;
        EXPECT_EQ(decode(p.t, p.normal | p.sign), -1.0) << nm;
        EXPECT_TRUE(std::isnan(decode(p.t, p.nan))) << nm;
    }
    // The all-ones exponent of e4m3fn holds normal numbers except S.1111.111.
    EXPECT_EQ(classify(DType::e4m3, 0x7E), FpClass::pos_normal);
    EXPECT_EQ(classify(DType::e4m3, 0x78), FpClass::pos_normal);
    EXPECT_EQ(decode(DType::e4m3, 0x78), 256.0);
    EXPECT_EQ(classify(DType::e4m3, 0xFF), FpClass::nan);
    EXPECT_EQ(classify(DType::e5m2, 0x7D), FpClass::nan);
    EXPECT_EQ(classify(-pow2(-1074)), FpClass::neg_subnormal);
    EXPECT_EQ(classify(-kInf), FpClass::neg_inf);
    EXPECT_EQ(classify(std::numeric_limits<double>::quiet_NaN()), FpClass::nan);
    EXPECT_STREQ(name(FpClass::neg_subnormal), "-subnormal");
    EXPECT_EQ(classify(DType::i8, 0xFF), FpClass::neg_normal);
    EXPECT_EQ(classify(DType::i32, 0), FpClass::pos_zero);
}

TEST(DType, NanPayloadsCarried) {
    // fp64 NaN with payload bits right under the quiet bit.
    const double payload_nan = std::bit_cast<double>(uint64_t{0x7FF8000000000000} | (uint64_t{0x155} << 42));
    EXPECT_EQ(encode(DType::f16, payload_nan), 0x7F55u);   // quiet bit plus the top 9 payload bits
    EXPECT_EQ(encode(DType::f32, payload_nan), 0x7FC00000u | (0x155u << 13));
    const double neg_nan = -std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(encode(DType::bf16, neg_nan), 0xFFC0u);
    EXPECT_EQ(encode(DType::e4m3, neg_nan), 0xFFu);
    EXPECT_EQ(encode(DType::e4m3, std::numeric_limits<double>::quiet_NaN()), 0x7Fu);
    // A signalling NaN whose payload would be cut to zero still stays a NaN.
    const double snan = std::bit_cast<double>(uint64_t{0x7FF0000000000001});
    EXPECT_EQ(encode(DType::f16, snan), 0x7E00u);
    EXPECT_EQ(encode(DType::e5m2, snan), 0x7Eu);
    // Widening keeps the payload and quiets.
    EXPECT_EQ(std::bit_cast<uint64_t>(decode(DType::f16, 0x7D01)), 0x7FF8000000000000u | (uint64_t{0x101} << 42));
}

TEST(DType, Tf32RoundsFp32ValuesToTenMantissaBits) {
    const double one = 1.0;
    EXPECT_EQ(round_to(DType::tf32, one + pow2(-11)), one) << "tie to even (down)";
    EXPECT_EQ(round_to(DType::tf32, one + 3 * pow2(-11)), one + pow2(-9)) << "tie to even (up)";
    EXPECT_EQ(round_to(DType::tf32, one + pow2(-11) + pow2(-23)), one + pow2(-10));
    // Directly from fp64: going through fp32 first would lose the 2^-40 and tie down to 1.
    EXPECT_EQ(round_to(DType::tf32, one + pow2(-11) + pow2(-40)), one + pow2(-10));
    EXPECT_EQ(encode(DType::tf32, one + pow2(-11) + pow2(-40)), 0x3F802000u);

    // Against the integer rounding of an fp32 word: add 0xFFF plus the lowest kept bit.
    std::mt19937_64 gen(20240611);
    for (int i = 0; i < 2000000; ++i) {
        const uint32_t b = uint32_t(gen());
        const float f = std::bit_cast<float>(b);
        if (std::isnan(f)) continue;
        uint32_t expect;
        if (std::isinf(f)) expect = b;
        else expect = (b + 0xFFFu + ((b >> 13) & 1u)) & ~0x1FFFu;
        ASSERT_EQ(encode(DType::tf32, double(f)), expect) << "fp32 bits 0x" << std::hex << b << " seed 20240611";
    }
    // Every tf32 pattern survives decode-then-encode.
    for (uint32_t p = 0; p < (1u << 19); ++p) {
        const uint32_t b = p << 13;
        const uint64_t back = encode(DType::tf32, decode(DType::tf32, b));
        if (classify(DType::tf32, b) == FpClass::nan) ASSERT_EQ(back, b | 0x00400000u) << std::hex << b;
        else ASSERT_EQ(back, b) << std::hex << b;
    }
}

// Doubles of every class and of every exponent near the fp32 range.
double random_double(std::mt19937_64& gen) {
    switch (gen() % 4) {
        case 0: return std::bit_cast<double>(gen());   // any pattern, NaNs included
        case 1: {
            const int e = int(gen() % 320) - 170;       // fp32 subnormals to overflow
            const double m = 1.0 + double(gen() >> 11) * pow2(-53);
            return (gen() & 1 ? -1 : 1) * std::ldexp(m, e);
        }
        case 2: {
            // On or next to a tie of fp32: a 25-bit significand, then nudged by an fp64 ulp.
            const int e = int(gen() % 300) - 160;
            const double m = double((gen() >> 39) | (uint64_t{1} << 24));
            const double v = std::ldexp(m, e - 24);
            const int nudge = int(gen() % 3) - 1;
            return nudge == 0 ? v : std::nextafter(v, nudge * kInf);
        }
        default: return std::ldexp(double(gen() >> 11), int(gen() % 40) - 60);
    }
}

TEST(DType, F32MatchesHardwareConversion) {
    const uint64_t seed = 7;
    std::mt19937_64 gen(seed);
    for (int i = 0; i < 4000000; ++i) {
        const double d = random_double(gen);
        const volatile float f = static_cast<float>(d);
        const uint32_t hw = std::bit_cast<uint32_t>(static_cast<float>(f));
        ASSERT_EQ(encode(DType::f32, d), hw) << "d bits 0x" << std::hex << std::bit_cast<uint64_t>(d) << " seed "
                                              << std::dec << seed << " draw " << i;
        if (!std::isnan(f)) {
            ASSERT_EQ(decode(DType::f32, hw), double(f));
            ASSERT_EQ(round_to(DType::f32, d), double(f));
        }
    }
}

// The fast path for results in fp32's normal range ends at both edges of that range: the
// overflow to Inf by a carry out of the mantissa, and the smallest normal against subnormals.
TEST(DType, F32FastPathEdgesMatchHardwareConversion) {
    const double fmax = std::numeric_limits<float>::max(), fmin = std::numeric_limits<float>::min();
    const double half_ulp_max = std::ldexp(1.0, 127 - 24), half_ulp_min = std::ldexp(1.0, -126 - 24);
    for (double base : {fmax, fmin, 1.0, 1.5}) {
        for (double d : {base, base + half_ulp_max, base - half_ulp_max, base + half_ulp_min, base - half_ulp_min,
                         std::nextafter(base, 0.0), std::nextafter(base, 1e300), base * (1 + 0x1p-24),
                         base * (1 - 0x1p-25), base * (1 + 0x1p-23 + 0x1p-24)}) {
            for (double v : {d, -d}) {
                const volatile float f = static_cast<float>(v);
                const uint32_t hw = std::bit_cast<uint32_t>(static_cast<float>(f));
                ASSERT_EQ(encode(DType::f32, v), hw) << std::hexfloat << v;
                if (!std::isinf(f)) ASSERT_EQ(decode(DType::f32, hw), double(f)) << std::hexfloat << v;
            }
        }
    }
}

#if defined(__FLT16_MAX__)
TEST(DType, F16MatchesCompilerFloat16) {
    const uint64_t seed = 11;
    std::mt19937_64 gen(seed);
    for (int i = 0; i < 1000000; ++i) {
        double d = random_double(gen);
        if (gen() & 1) d = std::ldexp(d, -int(gen() % 120));   // into the fp16 range
        const volatile _Float16 h = static_cast<_Float16>(d);
        const uint16_t hw = std::bit_cast<uint16_t>(static_cast<_Float16>(h));
        if (std::isnan(d)) {
            ASSERT_EQ(classify(DType::f16, encode(DType::f16, d)), FpClass::nan);
            continue;
        }
        ASSERT_EQ(encode(DType::f16, d), hw) << "d bits 0x" << std::hex << std::bit_cast<uint64_t>(d) << " seed "
                                              << std::dec << seed << " draw " << i;
    }
    for (uint32_t b = 0; b < 0x10000; ++b) {
        const _Float16 h = std::bit_cast<_Float16>(uint16_t(b));
        if (std::isnan(double(h))) continue;
        ASSERT_EQ(decode(DType::f16, b), double(h)) << std::hex << b;
    }
}
#endif

TEST(DType, IntegersTruncateAndSaturate) {
    EXPECT_EQ(encode(DType::i8, 127.9), 0x7Fu);
    EXPECT_EQ(encode(DType::i8, 200.0), 0x7Fu);
    EXPECT_EQ(encode(DType::i8, -200.0), 0x80u);
    EXPECT_EQ(encode(DType::i8, -1.5), 0xFFu);
    EXPECT_EQ(encode(DType::i8, -0.5), 0x00u);
    EXPECT_EQ(encode(DType::i16, -32768.0), 0x8000u);
    EXPECT_EQ(encode(DType::i32, 2147483648.0), 0x7FFFFFFFu);
    EXPECT_EQ(encode(DType::i32, -3.0), 0xFFFFFFFDu);
    EXPECT_EQ(encode(DType::i64, pow2(63)), 0x7FFFFFFFFFFFFFFFu);
    EXPECT_EQ(encode(DType::i64, -pow2(63)), 0x8000000000000000u);
    EXPECT_EQ(encode(DType::i64, -kInf), 0x8000000000000000u);
    EXPECT_EQ(encode(DType::i64, 9007199254740993.0), 9007199254740992u);
    EXPECT_EQ(encode(DType::u8, -3.0), 0u);
    EXPECT_EQ(encode(DType::u8, 255.5), 255u);
    EXPECT_EQ(encode(DType::u8, 300.0), 255u);
    EXPECT_EQ(encode(DType::i32, std::nan("")), 0u);
    EXPECT_EQ(encode(DType::boolean, 0.5), 1u);
    EXPECT_EQ(encode(DType::boolean, -0.0), 0u);
    EXPECT_EQ(encode(DType::boolean, std::nan("")), 1u);
    EXPECT_EQ(decode(DType::i8, 0xFF), -1.0);
    EXPECT_EQ(decode(DType::i16, 0x8000), -32768.0);
    EXPECT_EQ(decode(DType::i32, 0x80000000), -2147483648.0);
    EXPECT_EQ(decode(DType::i64, 0xFFFFFFFFFFFFFFFE), -2.0);
    EXPECT_EQ(decode(DType::u8, 0xFF), 255.0);
    EXPECT_EQ(decode(DType::boolean, 2), 1.0);
    EXPECT_EQ(round_to(DType::i16, -7.99), -7.0);
}

TEST(DType, Ulp) {
    EXPECT_EQ(ulp(DType::f64, 1.0), pow2(-52));
    EXPECT_EQ(ulp(DType::f64, 0.0), pow2(-1074));
    EXPECT_EQ(ulp(DType::f64, pow2(-1070)), pow2(-1074));
    EXPECT_EQ(ulp(DType::f32, 1.0), pow2(-23));
    EXPECT_EQ(ulp(DType::f32, -2.0), pow2(-22));
    EXPECT_EQ(ulp(DType::f32, 1.9999), pow2(-23));
    EXPECT_EQ(ulp(DType::f32, 0.0), pow2(-149));
    EXPECT_EQ(ulp(DType::f32, pow2(-140)), pow2(-149));
    EXPECT_EQ(ulp(DType::tf32, 1.0), pow2(-10));
    EXPECT_EQ(ulp(DType::f16, 1.5), pow2(-10));
    EXPECT_EQ(ulp(DType::f16, pow2(-20)), pow2(-24));
    EXPECT_EQ(ulp(DType::bf16, 1.0), pow2(-7));
    EXPECT_EQ(ulp(DType::e4m3, 1.0), 0.125);
    EXPECT_EQ(ulp(DType::e5m2, 1.0), 0.25);
    EXPECT_EQ(ulp(DType::e5m2, 0.0), pow2(-16));
    EXPECT_EQ(ulp(DType::i32, 5.0), 1.0);
    EXPECT_TRUE(std::isnan(ulp(DType::f32, kInf)));
    EXPECT_TRUE(std::isnan(ulp(DType::f32, std::nan(""))));
    // Consistent with the neighbours of every positive fp16 number.
    for (uint64_t b = 0; b < 0x7BFF; ++b)
        ASSERT_EQ(ulp(DType::f16, decode(DType::f16, b)), decode(DType::f16, b + 1) - decode(DType::f16, b)) << b;
}

TEST(DType, NamesAliasesAndDlpack) {
    EXPECT_EQ(parse_dtype("float32"), DType::f32);
    EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
    EXPECT_EQ(parse_dtype("torch.float16"), DType::f16);
    EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::e4m3);
    EXPECT_EQ(parse_dtype("float8_e5m2"), DType::e5m2);
    EXPECT_EQ(parse_dtype("int64"), DType::i64);
    EXPECT_EQ(parse_dtype("BOOL"), DType::boolean);
    EXPECT_EQ(parse_dtype("tf32"), DType::tf32);
    EXPECT_THROW(parse_dtype("float128"), std::invalid_argument);
    EXPECT_THROW(parse_dtype(""), std::invalid_argument);
    for (int i = 0; i <= int(DType::boolean); ++i) {
        const DType t = DType(i);
        EXPECT_EQ(parse_dtype(name(t)), t) << name(t);
        const DLDataType d = to_dlpack(t);
        EXPECT_EQ(d.lanes, 1);
        EXPECT_EQ(d.bits, info(t).storage_bytes * 8) << name(t);
        EXPECT_EQ(from_dlpack(d), t == DType::tf32 ? DType::f32 : t) << name(t);
    }
    EXPECT_EQ(to_dlpack(DType::e4m3).code, KCV_DL_FLOAT8_E4M3FN);
    EXPECT_EQ(to_dlpack(DType::e5m2).code, KCV_DL_FLOAT8_E5M2);
    EXPECT_EQ(to_dlpack(DType::bf16).code, kDLBfloat);
    EXPECT_THROW(from_dlpack(DLDataType{kDLFloat, 32, 4}), std::invalid_argument);
    EXPECT_THROW(from_dlpack(DLDataType{kDLComplex, 64, 1}), std::invalid_argument);
    EXPECT_THROW(from_dlpack(DLDataType{kDLUInt, 32, 1}), std::invalid_argument);
    EXPECT_EQ(bits_hex(DType::f32, 0x3F800000), "0x3f800000");
    EXPECT_EQ(bits_hex(DType::f16, 0x3C00), "0x3c00");
    EXPECT_EQ(bits_hex(DType::e4m3, 0x7F), "0x7f");
    EXPECT_EQ(bits_hex(DType::f64, 0x8000000000000000), "0x8000000000000000");
    EXPECT_EQ(info(DType::f32).precision, 24);
    EXPECT_EQ(info(DType::tf32).precision, 11);
    EXPECT_EQ(info(DType::tf32).storage_bytes, 4);
    EXPECT_EQ(info(DType::bf16).unit_roundoff, pow2(-8));
    EXPECT_EQ(info(DType::f16).min_normal, pow2(-14));
    EXPECT_EQ(info(DType::e4m3).min_normal, pow2(-6));
}

TEST(DType, KnownRoundings) {
    EXPECT_EQ(round_to(DType::f16, 0.1), 0.0999755859375);
    EXPECT_EQ(round_to(DType::bf16, 0.1), 0.10009765625);
    EXPECT_EQ(round_to(DType::e4m3, 0.1), 0.1015625);
    EXPECT_EQ(round_to(DType::e5m2, 0.1), 0.09375);
    EXPECT_EQ(encode(DType::bf16, 1.0), 0x3F80u);
    EXPECT_EQ(encode(DType::e4m3, 1.0), 0x38u);
    EXPECT_EQ(encode(DType::e5m2, -2.0), 0xC0u);
    EXPECT_EQ(encode(DType::f16, 65520.0), 0x7C00u) << "65504 + half an ulp overflows";
    EXPECT_EQ(encode(DType::f16, 65519.99), 0x7BFFu);
}

}  // namespace
}  // namespace kcv
