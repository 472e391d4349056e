// fp16 (IEEE binary16) and bf16 (bfloat16) conversions for the kernels, written out so that a
// kernel needs no compiler half-precision type and no library. Narrowing rounds to nearest,
// ties to even, directly from float64 (so float32 -> fp16 is exact-then-rounded once, never
// double-rounded), keeps the sign of zero, produces subnormals, maps overflow to ±Inf and keeps
// NaN payload bits (forcing the quiet bit). Everything is integer arithmetic, so the result is
// independent of the MXCSR flush-to-zero and rounding state of the calling thread.
#pragma once

#include <cstdint>
#include <cstring>

namespace kcvk __attribute__((visibility("hidden"))) {

inline uint32_t f32_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
}

inline float f32_from_bits(uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
}

inline uint64_t f64_bits(double d) {
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
}

// Rounds a float64 to a binary format with kExp exponent bits and kMant stored significand
// bits (fp16: 5, 10; bf16: 8, 7), returning its 16-bit encoding.
template <int kExp, int kMant>
uint16_t narrow_from_f64(double v) {
    const uint64_t b = f64_bits(v);
    const uint32_t sign = static_cast<uint32_t>(b >> 63) << (kExp + kMant);
    const uint32_t exp_field = static_cast<uint32_t>((b >> 52) & 0x7FF);
    const uint64_t frac = b & ((uint64_t(1) << 52) - 1);
    const uint32_t inf = ((uint32_t(1) << kExp) - 1) << kMant;

    if (exp_field == 0x7FF) {
        if (frac == 0) return static_cast<uint16_t>(sign | inf);
        const uint32_t payload = static_cast<uint32_t>(frac >> (52 - kMant));
        return static_cast<uint16_t>(sign | inf | payload | (uint32_t(1) << (kMant - 1)));
    }
    // Zero, and float64 subnormals (below 2^-1022), are far below half the smallest subnormal.
    if (exp_field == 0) return static_cast<uint16_t>(sign);

    const int bias = (1 << (kExp - 1)) - 1;
    const int emin = 1 - bias;
    const int e = static_cast<int>(exp_field) - 1023;   // v = 1.frac · 2^e
    const uint64_t significand = (uint64_t(1) << 52) | frac;
    int shift = 52 - kMant;
    if (e < emin) shift += emin - e;                     // a subnormal of the narrow format
    if (shift > 63) return static_cast<uint16_t>(sign);  // below half the smallest subnormal

    uint64_t q = significand >> shift;
    const uint64_t rest = significand & ((uint64_t(1) << shift) - 1);
    const uint64_t half = uint64_t(1) << (shift - 1);
    if (rest > half || (rest == half && (q & 1))) ++q;

    // For a normal result q carries the implicit bit, so adding it to (exponent - 1) sets the
    // exponent field; a rounding carry moves into the exponent by itself. A subnormal q that
    // rounds up to 2^kMant is the encoding of the smallest normal.
    uint64_t out = e < emin ? q : (static_cast<uint64_t>(e + bias - 1) << kMant) + q;
    if (out >= inf) out = inf;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(out));
}

inline uint16_t f16_from_f64(double v) { return narrow_from_f64<5, 10>(v); }
inline uint16_t bf16_from_f64(double v) { return narrow_from_f64<8, 7>(v); }
inline uint16_t f16_from_f32(float v) { return f16_from_f64(static_cast<double>(v)); }
inline uint16_t bf16_from_f32(float v) { return bf16_from_f64(static_cast<double>(v)); }

// bf16 is the upper half of a float32.
inline float f32_from_bf16(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// v rounded to bf16 and widened back: what a kernel that keeps v in bf16 reads.
inline float bf16_rounded(float v) { return f32_from_bf16(bf16_from_f32(v)); }

// v rounded to tf32 (ten stored mantissa bits) in a float32, as cvt.rna.tf32.f32 hands it to a
// TF32 tensor-core product: to nearest, ties away from zero, subnormals on tf32's own grid of
// 2^-136, Inf and NaN as they are (a finite value at the top of the range may round to Inf).
inline float tf32_rounded(float v) {
    const uint32_t b = f32_bits(v);
    if ((b & 0x7F800000u) == 0x7F800000u) return v;
    return f32_from_bits((b + 0x1000u) & ~0x1FFFu);
}

// Every fp16 value, subnormals included, is a normal float32; built from the bits directly.
inline float f32_from_f16(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    const uint32_t exp_field = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp_field == 0x1F) return f32_from_bits(sign | 0x7F800000u | (mant << 13));
    if (exp_field == 0) {
        if (mant == 0) return f32_from_bits(sign);
        int e = -14;
        while ((mant & 0x400) == 0) {
            mant <<= 1;
            --e;
        }
        mant &= 0x3FF;
        return f32_from_bits(sign | (static_cast<uint32_t>(e + 127) << 23) | (mant << 13));
    }
    return f32_from_bits(sign | ((exp_field - 15 + 127) << 23) | (mant << 13));
}

}  // namespace kcvk
