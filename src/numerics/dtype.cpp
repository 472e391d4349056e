// Bit-exact conversions between fp64 and the narrower formats, done with integer arithmetic on
// the fields so that the result never depends on what the compiler or the FPU does with
// half-precision types or rounding modes.
#include "kcv/dtype.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "kcv/kcv_kernel.h"

namespace kcv {
namespace {

// The layout of a binary floating-point format narrower than fp64: sign, exp_bits, mant_bits.
// `finite_only` is the OCP "fn" convention: no infinities, the all-ones exponent holds normal
// numbers except for the single NaN S.1111.111, and overflow gives NaN.
struct FloatFormat {
    int exp_bits;
    int mant_bits;
    bool finite_only;

    int bias() const { return (1 << (exp_bits - 1)) - 1; }
    int emin() const { return 1 - bias(); }
    uint64_t exp_all_ones() const { return ((uint64_t{1} << exp_bits) - 1) << mant_bits; }
    uint64_t mant_mask() const { return (uint64_t{1} << mant_bits) - 1; }
    uint64_t sign_bit() const { return uint64_t{1} << (exp_bits + mant_bits); }
    uint64_t nan_fn() const { return exp_all_ones() | mant_mask(); }   // finite_only formats
    // Magnitude bits of the largest finite number.
    uint64_t max_finite_bits() const {
        return finite_only ? nan_fn() - 1 : (exp_all_ones() - (uint64_t{1} << mant_bits)) | mant_mask();
    }
};

constexpr FloatFormat kF32{8, 23, false};
constexpr FloatFormat kTF32{8, 10, false};   // encoded into the top 19 bits of an fp32 word
constexpr FloatFormat kF16{5, 10, false};
constexpr FloatFormat kBF16{8, 7, false};
constexpr FloatFormat kE4M3{4, 3, true};
constexpr FloatFormat kE5M2{5, 2, false};

constexpr int kTF32Shift = 13;                // fp32 mantissa bits that tf32 leaves at zero
constexpr uint64_t kF64Mant = (uint64_t{1} << 52) - 1;
constexpr uint64_t kF64Quiet = uint64_t{1} << 51;
constexpr uint64_t kF64ExpMask = uint64_t{0x7FF} << 52;
constexpr uint8_t kDLBoolCode = 6;            // kDLBool of DLPack >= 0.8; the installed header may predate it

const FloatFormat* format_of(DType t) {
    switch (t) {
        case DType::f32: return &kF32;
        case DType::tf32: return &kTF32;
        case DType::f16: return &kF16;
        case DType::bf16: return &kBF16;
        case DType::e4m3: return &kE4M3;
        case DType::e5m2: return &kE5M2;
        default: return nullptr;
    }
}

// 2^k as an exact double, for k in [-1074, 1023].
double pow2(int k) {
    if (k >= -1022) return std::bit_cast<double>(uint64_t(k + 1023) << 52);
    return std::bit_cast<double>(uint64_t{1} << (k + 1074));
}

// sig / 2^shift rounded to nearest, ties to even; shift in [1, 63].
uint64_t shift_right_rne(uint64_t sig, int shift) {
    uint64_t q = sig >> shift;
    uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
    uint64_t half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return q;
}

uint64_t encode_float(const FloatFormat& f, double v) {
    const uint64_t d = std::bit_cast<uint64_t>(v);
    const uint64_t sign = (d >> 63) ? f.sign_bit() : 0;
    const int dexp = int((d >> 52) & 0x7FF);
    const uint64_t dman = d & kF64Mant;
    const int M = f.mant_bits;

    if (dexp == 0x7FF) {
        if (f.finite_only) return sign | f.nan_fn();
        if (dman == 0) return sign | f.exp_all_ones();
        // Keep the payload's top bits and set the quiet bit so that the result stays a NaN.
        return sign | f.exp_all_ones() | (uint64_t{1} << (M - 1)) | (dman >> (52 - M));
    }
    if (dexp == 0 && dman == 0) return sign;

    // |v| = sig * 2^q exactly.
    uint64_t sig = dexp == 0 ? dman : (dman | (uint64_t{1} << 52));
    int q = dexp == 0 ? -1074 : dexp - 1075;
    int lead = (63 - std::countl_zero(sig)) + q;      // floor(log2 |v|)
    int te = std::max(lead, f.emin());                 // exponent of the target's binade
    int shift = te - M - q;                            // target spacing is 2^(te - M)
    uint64_t m;
    if (shift <= 0) m = sig << -shift;
    else if (shift >= 64) m = 0;                       // below a quarter of the smallest subnormal
    else m = shift_right_rne(sig, shift);
    // A carry out of the significand moves into the exponent field by plain addition; at the
    // subnormal binade the same sum yields the subnormal (or the smallest normal) encoding.
    uint64_t mag = (uint64_t(te + f.bias() - 1) << M) + m;
    if (mag > f.max_finite_bits()) return sign | (f.finite_only ? f.nan_fn() : f.exp_all_ones());
    return sign | mag;
}

double decode_float(const FloatFormat& f, uint64_t bits) {
    const int M = f.mant_bits;
    const uint64_t sign = ((bits >> (f.exp_bits + M)) & 1) << 63;
    const uint64_t exp = (bits >> M) & ((uint64_t{1} << f.exp_bits) - 1);
    const uint64_t man = bits & f.mant_mask();
    const uint64_t exp_max = (uint64_t{1} << f.exp_bits) - 1;

    if (f.finite_only) {
        if (exp == exp_max && man == f.mant_mask()) return std::bit_cast<double>(sign | kF64ExpMask | kF64Quiet);
    } else if (exp == exp_max) {
        if (man == 0) return std::bit_cast<double>(sign | kF64ExpMask);
        return std::bit_cast<double>(sign | kF64ExpMask | kF64Quiet | (man << (52 - M)));
    }
    if (exp == 0 && man == 0) return std::bit_cast<double>(sign);

    uint64_t m = exp == 0 ? man : (man | (uint64_t{1} << M));
    int qt = (exp == 0 ? f.emin() : int(exp) - f.bias()) - M;
    int msb = 63 - std::countl_zero(m);
    int e = msb + qt;   // every value of these formats is a normal fp64 number
    uint64_t d = sign | (uint64_t(e + 1023) << 52) | ((m << (52 - msb)) & kF64Mant);
    return std::bit_cast<double>(d);
}

FpClass classify_float(const FloatFormat& f, uint64_t bits) {
    const bool neg = (bits >> (f.exp_bits + f.mant_bits)) & 1;
    const uint64_t mag = bits & (f.sign_bit() - 1);
    const uint64_t exp = mag >> f.mant_bits;
    const uint64_t exp_max = (uint64_t{1} << f.exp_bits) - 1;
    if (f.finite_only) {
        if (mag == f.nan_fn()) return FpClass::nan;
    } else if (exp == exp_max) {
        if ((mag & f.mant_mask()) != 0) return FpClass::nan;
        return neg ? FpClass::neg_inf : FpClass::pos_inf;
    }
    if (mag == 0) return neg ? FpClass::neg_zero : FpClass::pos_zero;
    if (exp == 0) return neg ? FpClass::neg_subnormal : FpClass::pos_subnormal;
    return neg ? FpClass::neg_normal : FpClass::pos_normal;
}

struct IntRange {
    int bits;
    bool is_signed;
};

IntRange int_range(DType t) {
    switch (t) {
        case DType::i64: return {64, true};
        case DType::i32: return {32, true};
        case DType::i16: return {16, true};
        case DType::i8: return {8, true};
        case DType::u8: return {8, false};
        case DType::boolean: return {8, false};
        default: throw std::logic_error("int_range of a floating-point dtype");
    }
}

uint64_t encode_int(DType t, double v) {
    if (t == DType::boolean) return v != 0 ? 1 : 0;   // NaN != 0, as a C++ cast to bool
    if (std::isnan(v)) return 0;
    const IntRange r = int_range(t);
    const uint64_t mask = r.bits == 64 ? ~uint64_t{0} : (uint64_t{1} << r.bits) - 1;
    if (r.is_signed) {
        // Bounds of the type as exact powers of two, so the comparisons are exact.
        const double lim = pow2(r.bits - 1);
        int64_t x;
        if (v >= lim) x = r.bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (r.bits - 1)) - 1;
        else if (v <= -lim) x = r.bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (r.bits - 1));
        else x = static_cast<int64_t>(v);   // truncates toward zero
        return uint64_t(x) & mask;
    }
    if (v <= 0) return 0;
    if (v >= pow2(r.bits)) return mask;
    return static_cast<uint64_t>(v);
}

double decode_int(DType t, uint64_t bits) {
    const IntRange r = int_range(t);
    if (t == DType::boolean) return (bits & 0xFF) != 0 ? 1.0 : 0.0;
    if (r.bits < 64) bits &= (uint64_t{1} << r.bits) - 1;
    if (!r.is_signed) return double(bits);
    if (r.bits < 64 && (bits >> (r.bits - 1)) & 1) bits |= ~uint64_t{0} << r.bits;   // sign-extend
    return double(int64_t(bits));
}

DTypeInfo float_info(const char* nm, int bytes, const FloatFormat& f) {
    DTypeInfo i{};
    i.name = nm;
    i.storage_bytes = bytes;
    i.is_float = true;
    i.precision = f.mant_bits + 1;
    i.exponent_bits = f.exp_bits;
    i.has_inf = !f.finite_only;
    i.has_subnormals = true;
    i.unit_roundoff = pow2(-(f.mant_bits + 1));
    i.max_finite = decode_float(f, f.max_finite_bits());
    i.min_normal = pow2(f.emin());
    i.min_subnormal = pow2(f.emin() - f.mant_bits);
    return i;
}

// Integers: precision is the number of value bits, max_finite the largest value, min_normal 1.
DTypeInfo int_info(const char* nm, int bytes, int value_bits, double max) {
    DTypeInfo i{};
    i.name = nm;
    i.storage_bytes = bytes;
    i.is_float = false;
    i.precision = value_bits;
    i.max_finite = max;
    i.min_normal = 1;
    return i;
}

const std::array<DTypeInfo, 13>& info_table() {
    static const std::array<DTypeInfo, 13> table = [] {
        std::array<DTypeInfo, 13> t{};
        DTypeInfo f64{};
        f64.name = "f64";
        f64.storage_bytes = 8;
        f64.is_float = true;
        f64.precision = 53;
        f64.exponent_bits = 11;
        f64.has_inf = true;
        f64.has_subnormals = true;
        f64.unit_roundoff = pow2(-53);
        f64.max_finite = std::numeric_limits<double>::max();
        f64.min_normal = pow2(-1022);
        f64.min_subnormal = pow2(-1074);
        t[size_t(DType::f64)] = f64;
        t[size_t(DType::f32)] = float_info("f32", 4, kF32);
        t[size_t(DType::tf32)] = float_info("tf32", 4, kTF32);
        t[size_t(DType::f16)] = float_info("f16", 2, kF16);
        t[size_t(DType::bf16)] = float_info("bf16", 2, kBF16);
        t[size_t(DType::e4m3)] = float_info("e4m3", 1, kE4M3);
        t[size_t(DType::e5m2)] = float_info("e5m2", 1, kE5M2);
        t[size_t(DType::i64)] = int_info("i64", 8, 63, 9223372036854775807.0);
        t[size_t(DType::i32)] = int_info("i32", 4, 31, 2147483647.0);
        t[size_t(DType::i16)] = int_info("i16", 2, 15, 32767.0);
        t[size_t(DType::i8)] = int_info("i8", 1, 7, 127.0);
        t[size_t(DType::u8)] = int_info("u8", 1, 8, 255.0);
        t[size_t(DType::boolean)] = int_info("bool", 1, 1, 1.0);
        return t;
    }();
    return table;
}

}  // namespace

const DTypeInfo& info(DType t) {
    size_t i = size_t(t);
    if (i >= info_table().size()) throw std::invalid_argument("unknown dtype " + std::to_string(i));
    return info_table()[i];
}

const char* name(DType t) { return info(t).name; }

DType parse_dtype(std::string_view s) {
    std::string k(s);
    std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (k.rfind("torch.", 0) == 0) k = k.substr(6);
    struct Alias {
        const char* text;
        DType t;
    };
    static const Alias aliases[] = {
        {"f64", DType::f64},      {"float64", DType::f64},         {"fp64", DType::f64},
        {"double", DType::f64},   {"f32", DType::f32},             {"float32", DType::f32},
        {"fp32", DType::f32},     {"float", DType::f32},           {"tf32", DType::tf32},
        {"tfloat32", DType::tf32}, {"tensorfloat32", DType::tf32}, {"f16", DType::f16},
        {"float16", DType::f16},  {"fp16", DType::f16},            {"half", DType::f16},
        {"bf16", DType::bf16},    {"bfloat16", DType::bf16},       {"e4m3", DType::e4m3},
        {"e4m3fn", DType::e4m3},  {"float8_e4m3fn", DType::e4m3},  {"fp8_e4m3", DType::e4m3},
        {"f8e4m3", DType::e4m3},  {"f8e4m3fn", DType::e4m3},       {"e5m2", DType::e5m2},
        {"float8_e5m2", DType::e5m2}, {"fp8_e5m2", DType::e5m2},   {"f8e5m2", DType::e5m2},
        {"i64", DType::i64},      {"int64", DType::i64},           {"long", DType::i64},
        {"i32", DType::i32},      {"int32", DType::i32},           {"int", DType::i32},
        {"i16", DType::i16},      {"int16", DType::i16},           {"short", DType::i16},
        {"i8", DType::i8},        {"int8", DType::i8},             {"u8", DType::u8},
        {"uint8", DType::u8},     {"bool", DType::boolean},        {"boolean", DType::boolean},
    };
    for (const Alias& a : aliases)
        if (k == a.text) return a.t;
    throw std::invalid_argument("unknown dtype '" + std::string(s) + "'");
}

DLDataType to_dlpack(DType t) {
    switch (t) {
        case DType::f64: return {kDLFloat, 64, 1};
        case DType::f32:
        case DType::tf32: return {kDLFloat, 32, 1};
        case DType::f16: return {kDLFloat, 16, 1};
        case DType::bf16: return {kDLBfloat, 16, 1};
        case DType::e4m3: return {KCV_DL_FLOAT8_E4M3FN, 8, 1};
        case DType::e5m2: return {KCV_DL_FLOAT8_E5M2, 8, 1};
        case DType::i64: return {kDLInt, 64, 1};
        case DType::i32: return {kDLInt, 32, 1};
        case DType::i16: return {kDLInt, 16, 1};
        case DType::i8: return {kDLInt, 8, 1};
        case DType::u8: return {kDLUInt, 8, 1};
        case DType::boolean: return {kDLBoolCode, 8, 1};
    }
    throw std::invalid_argument("unknown dtype");
}

DType from_dlpack(DLDataType d) {
    if (d.lanes == 1) {
        switch (d.code) {
            case kDLFloat:
                if (d.bits == 64) return DType::f64;
                if (d.bits == 32) return DType::f32;
                if (d.bits == 16) return DType::f16;
                break;
            case kDLBfloat:
                if (d.bits == 16) return DType::bf16;
                break;
            case KCV_DL_FLOAT8_E4M3FN:
                if (d.bits == 8) return DType::e4m3;
                break;
            case KCV_DL_FLOAT8_E5M2:
                if (d.bits == 8) return DType::e5m2;
                break;
            case kDLInt:
                if (d.bits == 64) return DType::i64;
                if (d.bits == 32) return DType::i32;
                if (d.bits == 16) return DType::i16;
                if (d.bits == 8) return DType::i8;
                break;
            case kDLUInt:
                if (d.bits == 8) return DType::u8;
                break;
            case kDLBoolCode:
                if (d.bits == 8) return DType::boolean;
                break;
            default: break;
        }
    }
    throw std::invalid_argument("unsupported DLPack type (code " + std::to_string(d.code) + ", bits " +
                                std::to_string(d.bits) + ", lanes " + std::to_string(d.lanes) + ")");
}

namespace {

// fp32 values whose result is a normal number, the gates' common case, without the general
// path's search for the binade. Bit arithmetic, not a conversion: the host's FTZ/DAZ state and
// rounding mode never enter (a gate may judge while a candidate's ambient state is in force).
constexpr int kF32NormalLo = 1023 - 126, kF32NormalHi = 1023 + 127;

inline bool encode_f32_normal(double v, uint64_t& out) {
    const uint64_t d = std::bit_cast<uint64_t>(v);
    const int dexp = int((d >> 52) & 0x7FF);
    if (dexp < kF32NormalLo || dexp > kF32NormalHi) return false;
    uint64_t mag = (uint64_t(dexp - 1023 + 127) << 23) | ((d & kF64Mant) >> 29);
    const uint64_t rest = d & ((uint64_t{1} << 29) - 1), half = uint64_t{1} << 28;
    if (rest > half || (rest == half && (mag & 1))) ++mag;   // ties to even; a carry reaches Inf
    out = ((d >> 63) << 31) | mag;
    return true;
}

inline bool decode_f32_normal(uint64_t bits, double& out) {
    const uint64_t e = (bits >> 23) & 0xFF;
    if (e == 0 || e == 0xFF) return false;
    out = std::bit_cast<double>(((bits >> 31 & 1) << 63) | ((e - 127 + 1023) << 52) | ((bits & 0x7FFFFF) << 29));
    return true;
}

}  // namespace

uint64_t encode(DType t, double v) {
    if (t == DType::f64) return std::bit_cast<uint64_t>(v);
    if (uint64_t b; t == DType::f32 && encode_f32_normal(v, b)) return b;
    if (t == DType::tf32) return encode_float(kTF32, v) << kTF32Shift;
    if (const FloatFormat* f = format_of(t)) return encode_float(*f, v);
    return encode_int(t, v);
}

double decode(DType t, uint64_t bits) {
    if (t == DType::f64) return std::bit_cast<double>(bits);
    if (double v; t == DType::f32 && decode_f32_normal(bits, v)) return v;
    // A tf32 word is an fp32 word; any bits below the tf32 mantissa are decoded as they are.
    if (t == DType::tf32) return decode_float(kF32, bits & 0xFFFFFFFFu);
    if (const FloatFormat* f = format_of(t)) {
        const int width = f->exp_bits + f->mant_bits + 1;
        return decode_float(*f, bits & ((uint64_t{1} << width) - 1));
    }
    return decode_int(t, bits);
}

double round_to(DType t, double v) { return decode(t, encode(t, v)); }

FpClass classify(double v) {
    const uint64_t d = std::bit_cast<uint64_t>(v);
    const bool neg = d >> 63;
    const uint64_t exp = (d >> 52) & 0x7FF;
    const uint64_t man = d & kF64Mant;
    if (exp == 0x7FF) {
        if (man != 0) return FpClass::nan;
        return neg ? FpClass::neg_inf : FpClass::pos_inf;
    }
    if (exp == 0) {
        if (man == 0) return neg ? FpClass::neg_zero : FpClass::pos_zero;
        return neg ? FpClass::neg_subnormal : FpClass::pos_subnormal;
    }
    return neg ? FpClass::neg_normal : FpClass::pos_normal;
}

FpClass classify(DType t, uint64_t bits) {
    if (t == DType::f64) return classify(std::bit_cast<double>(bits));
    if (t == DType::tf32) return classify_float(kF32, bits & 0xFFFFFFFFu);
    if (const FloatFormat* f = format_of(t)) {
        const int width = f->exp_bits + f->mant_bits + 1;
        return classify_float(*f, bits & ((uint64_t{1} << width) - 1));
    }
    // Integers have no subnormals or specials: zero, or a normal number of its sign.
    const double v = decode_int(t, bits);
    if (v == 0) return FpClass::pos_zero;
    return v < 0 ? FpClass::neg_normal : FpClass::pos_normal;
}

const char* name(FpClass c) {
    switch (c) {
        case FpClass::nan: return "nan";
        case FpClass::pos_inf: return "+inf";
        case FpClass::neg_inf: return "-inf";
        case FpClass::pos_zero: return "+0";
        case FpClass::neg_zero: return "-0";
        case FpClass::pos_subnormal: return "+subnormal";
        case FpClass::neg_subnormal: return "-subnormal";
        case FpClass::pos_normal: return "+normal";
        case FpClass::neg_normal: return "-normal";
    }
    return "?";
}

double ulp(DType t, double v) {
    const DTypeInfo& in = info(t);
    if (!in.is_float) return 1.0;
    if (!std::isfinite(v)) return std::numeric_limits<double>::quiet_NaN();
    const int M = in.precision - 1;
    const int emin = t == DType::f64 ? -1022 : format_of(t)->emin();
    const uint64_t d = std::bit_cast<uint64_t>(v) & ~(uint64_t{1} << 63);
    // floor(log2 |v|), taken as emin for zero and fp64 subnormals; beyond the largest binade
    // the spacing keeps growing, as if the exponent range were unbounded.
    const int dexp = int(d >> 52);
    const int e = dexp == 0 ? emin : std::max(dexp - 1023, emin);
    return pow2(e - M);
}

std::string bits_hex(DType t, uint64_t bits) {
    const int digits = info(t).storage_bytes * 2;
    if (digits < 16) bits &= (uint64_t{1} << (digits * 4)) - 1;
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(bits));
    return buf;
}

}  // namespace kcv
