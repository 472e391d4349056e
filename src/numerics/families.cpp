// Value families and special-value injection. Element i of a filled tensor depends only on
// (seed, i): CounterRng(seed, 0) at index i, so a value never depends on the tensor's layout,
// on the order of filling or on the other elements. Injection draws its positions from
// stream 1 and its kinds from stream 2 of the same seed.
#include "kcv/families.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kcv/rng.hpp"

namespace kcv {
namespace {

constexpr uint64_t kFillStream = 0;
constexpr uint64_t kPositionStream = 1;
constexpr uint64_t kKindStream = 2;

constexpr double kTwoPow53Inv = 1.0 / 9007199254740992.0;

// Which elements the domain's structure pins to zero: the part above (lower_triangular) or
// below (upper_triangular) the diagonal of the last two dimensions.
class StructuralZeros {
public:
    StructuralZeros(const Tensor& t, const InputSpec& spec) {
        const std::string& s = spec.domain.structure;
        if (s == "lower_triangular") kind_ = Kind::lower;
        else if (s == "upper_triangular") kind_ = Kind::upper;
        else if (s == "none" || s.empty()) kind_ = Kind::none;
        else throw std::invalid_argument("input '" + spec.name + "': unknown structure '" + s + "'");
        const size_t nd = t.shape.size();
        if (nd < 2) kind_ = Kind::none;
        else {
            cols_ = t.shape[nd - 1];
            rows_ = t.shape[nd - 2];
        }
    }
    bool at(int64_t i) const {
        if (kind_ == Kind::none) return false;
        const int64_t col = i % cols_, row = (i / cols_) % rows_;
        return kind_ == Kind::lower ? col > row : row > col;
    }

private:
    enum class Kind { none, lower, upper } kind_ = Kind::none;
    int64_t rows_ = 1, cols_ = 1;
};

uint64_t mulhi64(uint64_t a, uint64_t b) { return uint64_t(((unsigned __int128)a * b) >> 64); }

double pow2(int k) { return std::ldexp(1.0, k); }   // exact for the exponents used here

// The sign a family with random sign may use: both, unless the domain excludes one.
double apply_sign(const Domain& d, double magnitude, bool negative) {
    if (d.lo >= 0) return magnitude;
    if (d.hi <= 0) return -magnitude;
    return negative ? -magnitude : magnitude;
}

double task_value(const CounterRng& rng, const InputSpec& spec, uint64_t i) {
    const Distribution& d = spec.distribution;
    if (d.kind == "normal") return d.a + d.b * rng.normal(i);
    if (d.kind == "uniform" || d.kind == "positive") return d.a + (d.b - d.a) * rng.uniform01(i);
    if (d.kind == "integer") return double(rng.integer(i, int64_t(std::ceil(d.a)), int64_t(std::floor(d.b))));
    if (d.kind == "logits") return rng.normal(i) * d.b;
    throw std::invalid_argument("input '" + spec.name + "': unknown distribution '" + d.kind + "'");
}

double family_value(const CounterRng& rng, const InputSpec& spec, const Family& f, const DTypeInfo& in,
                    uint64_t i) {
    switch (f.kind) {
        case Family::Kind::task: return task_value(rng, spec, i);
        case Family::Kind::signed_normal: return rng.normal(i);
        case Family::Kind::positive: return rng.uniform01(i) * f.scale;
        case Family::Kind::band: return task_value(rng, spec, i) * f.scale;
        case Family::Kind::offset: return f.scale + rng.normal(i);
        case Family::Kind::repeated: return task_value(rng, spec, 0);
        case Family::Kind::near_max: {
            // Top 53 bits for the magnitude, the lowest bit for the sign.
            const uint64_t x = rng.u64(i);
            const double u = double(x >> 11) * kTwoPow53Inv;
            return apply_sign(spec.domain, in.max_finite * (0.5 + 0.5 * u), x & 1);
        }
        case Family::Kind::random_mantissa: {
            // Bits 0..22: the fraction; bit 23: the sign; bits 32..63: the exponent in [-4, 4].
            const uint64_t x = rng.u64(i);
            const double significand = double((uint64_t{1} << 23) | (x & ((uint64_t{1} << 23) - 1)));
            const int e = -4 + int(mulhi64(x >> 32 << 32, 9));
            return apply_sign(spec.domain, significand * pow2(e - 23), (x >> 23) & 1);
        }
        case Family::Kind::below_half_unit: {
            // A significand of p = scale bits (the implicit one, p - 1 random), then 011, then
            // zeros; the exponent in [-4, 4] from the high bits.
            const int p = int(f.scale);
            if (p < 2 || p > 21) throw std::invalid_argument("below_half_unit: a format of 2 to 21 significand bits");
            const uint64_t x = rng.u64(i);
            const uint64_t top = (uint64_t{1} << (p - 1)) | (x & ((uint64_t{1} << (p - 1)) - 1));
            const double significand = double((top << 3) | 0b011);
            const int e = -4 + int(mulhi64(x >> 32 << 32, 9));
            return apply_sign(spec.domain, significand * pow2(e - (p + 2)), false);
        }
        case Family::Kind::subnormal: {
            // k in [1, 2^(p-1) - 1] from the high bits, the sign from the lowest bit.
            const uint64_t x = rng.u64(i);
            const uint64_t largest = (uint64_t{1} << (in.precision - 1)) - 1;
            const double k = double(1 + mulhi64(x, largest));
            return apply_sign(spec.domain, k * in.min_subnormal, x & 1);
        }
    }
    throw std::invalid_argument("unknown value family");
}

uint64_t special_bits(DType t, const std::string& kind) {
    const double inf = std::numeric_limits<double>::infinity();
    const double max = info(t).max_finite;
    if (kind == "nan") return encode(t, std::numeric_limits<double>::quiet_NaN());
    if (kind == "+inf") return encode(t, inf);
    if (kind == "-inf") return encode(t, -inf);
    if (kind == "+0") return encode(t, 0.0);
    if (kind == "-0") return encode(t, -0.0);
    if (kind == "+max") return encode(t, max);
    if (kind == "-max") return encode(t, -max);
    throw std::invalid_argument("unknown special value '" + kind + "'");
}

}  // namespace

const char* name(Family::Kind k) {
    switch (k) {
        case Family::Kind::task: return "task";
        case Family::Kind::signed_normal: return "signed_normal";
        case Family::Kind::positive: return "positive";
        case Family::Kind::band: return "band";
        case Family::Kind::offset: return "offset";
        case Family::Kind::near_max: return "near_max";
        case Family::Kind::random_mantissa: return "random_mantissa";
        case Family::Kind::repeated: return "repeated";
        case Family::Kind::subnormal: return "subnormal";
        case Family::Kind::below_half_unit: return "below_half_unit";
    }
    return "?";
}

std::string describe(const Family& f) {
    if (f.kind == Family::Kind::below_half_unit)
        return std::string(name(f.kind)) + "(bits=" + std::to_string(int(f.scale)) + ")";
    if (f.kind != Family::Kind::band && f.kind != Family::Kind::offset) return name(f.kind);
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, f.scale);   // shortest exact form
    return std::string(name(f.kind)) + "(scale=" + std::string(buf, r.ptr) + ")";
}

void fill(Tensor& t, const InputSpec& spec, const Family& f, uint64_t seed) {
    const CounterRng rng(seed, kFillStream);
    const int64_t n = t.numel();
    if (spec.index) {
        const int64_t lo = int64_t(std::ceil(spec.distribution.a)), hi = int64_t(std::floor(spec.distribution.b));
        for (int64_t i = 0; i < n; ++i) t.set(i, double(rng.integer(uint64_t(i), lo, hi)));
        return;
    }
    const DTypeInfo& in = info(t.dtype);
    if (f.kind == Family::Kind::subnormal) {
        if (!in.has_subnormals)
            throw std::invalid_argument("input '" + spec.name + "': " + in.name + " has no subnormals");
        if (!spec.domain.subnormal)
            throw std::invalid_argument("input '" + spec.name + "': its domain excludes subnormals");
    }
    const StructuralZeros zeros(t, spec);
    const double lo = spec.domain.lo, hi = spec.domain.hi;
    for (int64_t i = 0; i < n; ++i) {
        if (zeros.at(i)) {
            t.set_bits(i, 0);
            continue;
        }
        double v = family_value(rng, spec, f, in, uint64_t(i));
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        uint64_t b = encode(t.dtype, v);
        if (!spec.domain.subnormal) {
            const FpClass c = classify(t.dtype, b);
            if (c == FpClass::pos_subnormal || c == FpClass::neg_subnormal) b = encode(t.dtype, 0.0);
        }
        t.set_bits(i, b);
    }
}

std::vector<int64_t> inject(Tensor& t, const InputSpec& spec, const Specials& s, uint64_t seed) {
    std::vector<int64_t> changed;
    const int64_t n = t.numel();
    if (spec.index || !spec.domain.nonfinite || !info(t.dtype).is_float || n == 0) return changed;
    const StructuralZeros zeros(t, spec);

    switch (s.pattern) {
        case Specials::Pattern::scattered: {
            if (s.kinds.empty()) throw std::invalid_argument("scattered specials need at least one kind");
            std::vector<uint64_t> bits;
            for (const std::string& k : s.kinds) bits.push_back(special_bits(t.dtype, k));
            const CounterRng where(seed, kPositionStream), which(seed, kKindStream);
            // Each position is chosen on its own (Bernoulli with p = rate), so whether i is
            // chosen does not depend on the size of the tensor.
            for (int64_t i = 0; i < n; ++i)
                if (!zeros.at(i) && where.uniform01(uint64_t(i)) < s.rate) changed.push_back(i);
            if (changed.empty()) {
                const int64_t start = where.integer(uint64_t(n), 0, n - 1);
                for (int64_t k = 0; k < n; ++k) {
                    const int64_t i = (start + k) % n;
                    if (!zeros.at(i)) {
                        changed.push_back(i);
                        break;
                    }
                }
            }
            const int64_t last_kind = int64_t(bits.size()) - 1;
            for (int64_t i : changed) t.set_bits(i, bits[size_t(which.integer(uint64_t(i), 0, last_kind))]);
            break;
        }
        case Specials::Pattern::row_neg_inf: {
            const int64_t row_len = t.shape.empty() ? 1 : t.shape.back();
            const int64_t row = CounterRng(seed, kPositionStream).integer(0, 0, n / row_len - 1);
            const uint64_t b = special_bits(t.dtype, "-inf");
            for (int64_t i = row * row_len; i < (row + 1) * row_len; ++i) {
                if (zeros.at(i)) continue;
                t.set_bits(i, b);
                changed.push_back(i);
            }
            break;
        }
        case Specials::Pattern::single_nan: {
            // The middle element, or the nearest one after (then before) it that is not a
            // structural zero.
            int64_t at = -1;
            for (int64_t i = n / 2; i < n && at < 0; ++i)
                if (!zeros.at(i)) at = i;
            for (int64_t i = n / 2 - 1; i >= 0 && at < 0; --i)
                if (!zeros.at(i)) at = i;
            if (at < 0) break;
            t.set_bits(at, special_bits(t.dtype, "nan"));
            changed.push_back(at);
            break;
        }
    }
    return changed;
}

}  // namespace kcv
