// Bit-exact float formats: fp64, fp32, tf32, fp16, bf16, e4m3 (OCP e4m3fn), e5m2, plus the
// integer types index tensors use. Conversions round to nearest, ties to even, keep the sign
// of zero, map overflow to ±Inf (to NaN for e4m3fn, which has no Inf), keep subnormals and
// carry NaN payloads where the narrower format can hold them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <dlpack/dlpack.h>

namespace kcv {

enum class DType : uint8_t { f64, f32, tf32, f16, bf16, e4m3, e5m2, i64, i32, i16, i8, u8, boolean };

struct DTypeInfo {
    const char* name;       // "f64", "bf16", ...
    int storage_bytes;      // tf32 is stored in 4 bytes
    bool is_float;
    int precision;          // p: significand bits including the implicit one (fp32: 24)
    int exponent_bits;
    bool has_inf;
    bool has_subnormals;
    double unit_roundoff;   // u = 2^-p
    double max_finite;
    double min_normal;
    double min_subnormal;   // 0 where there are none
    // Integer types: precision is the number of value bits, max_finite the largest value,
    // min_normal 1, the rest 0.
};

const DTypeInfo& info(DType t);
const char* name(DType t);
// Accepts the names of DTypeInfo::name and the usual aliases ("float32", "bfloat16",
// "float8_e4m3fn", "int64", ...). Throws std::invalid_argument naming the bad string.
DType parse_dtype(std::string_view s);

DLDataType to_dlpack(DType t);       // tf32 maps to float32
DType from_dlpack(DLDataType d);     // throws std::invalid_argument on an unsupported type

// Storage bits (low storage_bytes*8 bits) <-> value.
// encode: round to nearest even; integers: round toward zero, saturate, NaN -> 0 (bool: v != 0).
// tf32 gives an fp32 word whose low 13 bits are zero. decode widens exactly and returns NaNs
// quiet, with the payload in the top fraction bits.
uint64_t encode(DType t, double v);
double decode(DType t, uint64_t bits);
// The value of the nearest representable number of t (what encode-then-decode gives).
double round_to(DType t, double v);

enum class FpClass : uint8_t { nan, pos_inf, neg_inf, pos_zero, neg_zero, pos_subnormal, neg_subnormal,
                               pos_normal, neg_normal };
FpClass classify(DType t, uint64_t bits);
FpClass classify(double v);          // as an fp64 value
const char* name(FpClass c);

// Distance between v and the next representable number of t away from zero (ulp(0) is the
// smallest subnormal, or min_normal where t has none). For any finite v this is the spacing of
// t in the binade of |v| (floored at t's smallest exponent, continued past max_finite); 1 for
// integer types; NaN for non-finite v.
double ulp(DType t, double v);
// Exact bit pattern as hex, "0x3f800000", for evidence.
std::string bits_hex(DType t, uint64_t bits);

}  // namespace kcv
