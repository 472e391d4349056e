// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) and the
// transforms from its words to numbers. The normal transform is Box-Muller with a logarithm,
// sine and cosine written here as fixed polynomials in + − × ÷, so its values are the same
// under every libm.
#include "kcv/rng.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>

namespace kcv {
namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;   // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;   // sqrt(3) - 1

constexpr double kTwoPow53Inv = 1.0 / 9007199254740992.0;   // 2^-53

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t fnv1a64(const char* s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; s && *s; ++s) {
        h ^= uint8_t(*s);
        h *= 0x100000001B3ull;
    }
    return h;
}

// Coefficients of the series below, computed at compile time with correctly rounded
// divisions: 1/(2k+1) for atanh, ±1/(2k+1)! for sin, ±1/(2k)! for cos.
struct SeriesTables {
    double atanh[13], sin[10], cos[10];
};
constexpr SeriesTables make_tables() {
    SeriesTables t{};
    for (int k = 0; k < 13; ++k) t.atanh[k] = 1.0 / double(2 * k + 1);
    double fs = 1.0, fc = 1.0;
    for (int k = 0; k < 10; ++k) {
        if (k > 0) {
            fs *= double(2 * k) * double(2 * k + 1);
            fc *= double(2 * k - 1) * double(2 * k);
        }
        t.sin[k] = (k % 2 ? -1.0 : 1.0) / fs;
        t.cos[k] = (k % 2 ? -1.0 : 1.0) / fc;
    }
    return t;
}
constexpr SeriesTables kSeries = make_tables();

// sin and cos on [0, pi/4] by their Taylor series to x^19 and x^18; the first omitted terms
// are below 1e-19.
double det_sin(double x) {
    const double z = x * x;
    double p = 0.0;
    for (int k = 9; k >= 0; --k) p = kSeries.sin[k] + z * p;
    return x * p;
}

double det_cos(double x) {
    const double z = x * x;
    double p = 0.0;
    for (int k = 9; k >= 0; --k) p = kSeries.cos[k] + z * p;
    return p;
}

// Natural logarithm of a positive normal double. x = 2^e * m with m in [sqrt(1/2), sqrt(2)),
// log m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, and the odd series of atanh to s^25
// leaves a truncation error below 1e-19. ln 2 is split so that e * ln2_hi is exact.
double det_log(double x) {
    const uint64_t b = std::bit_cast<uint64_t>(x);
    int e = int((b >> 52) & 0x7FF) - 1023;
    double m = std::bit_cast<double>((b & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52));
    if (m > 1.4142135623730951) {
        m = m * 0.5;
        e += 1;
    }
    const double s = (m - 1.0) / (m + 1.0);
    const double z = s * s;
    double p = 0.0;
    for (int k = 12; k >= 0; --k) p = kSeries.atanh[k] + z * p;
    const double log_m = 2.0 * s * p;
    constexpr double ln2_hi = 6.93147180369123816490e-01;   // 0x3FE62E42FEE00000: 32 bits
    constexpr double ln2_lo = 1.90821492927058770002e-10;
    return double(e) * ln2_hi + (double(e) * ln2_lo + log_m);
}

// cos(2 pi u) for u in [0, 1). The quadrant and the fraction within it come from 4u exactly,
// and the fraction is folded to [0, 1/2] so the series only sees arguments up to pi/4.
double det_cos_turns(double u) {
    constexpr double half_pi = 1.57079632679489661923;
    const double t = 4.0 * u;
    const int q = int(t);
    const double f = t - double(q);
    double c, s;   // cos and sin of (pi/2) f
    if (f <= 0.5) {
        c = det_cos(f * half_pi);
        s = det_sin(f * half_pi);
    } else {
        const double g = 1.0 - f;
        c = det_sin(g * half_pi);
        s = det_cos(g * half_pi);
    }
    switch (q & 3) {
        case 0: return c;
        case 1: return -s;
        case 2: return -c;
        default: return s;
    }
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            key[0] += kPhiloxW0;
            key[1] += kPhiloxW1;
        }
        const uint64_t p0 = uint64_t(kPhiloxM0) * ctr[0];
        const uint64_t p1 = uint64_t(kPhiloxM1) * ctr[2];
        ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1],
               uint32_t(p0)};
    }
    return ctr;
}

namespace {

// The Philox block of (seed, stream, index); block j > 0 serves the rare rejections of
// CounterRng::integer and is keyed by a mix of the seed and j.
std::array<uint32_t, 4> block(uint64_t seed, uint64_t stream, uint64_t index, uint64_t j = 0) {
    const uint64_t key = j == 0 ? seed : seed ^ splitmix64(j);
    return philox4x32_10({uint32_t(index), uint32_t(index >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                         {uint32_t(key), uint32_t(key >> 32)});
}

uint64_t join(uint32_t lo, uint32_t hi) { return uint64_t(lo) | (uint64_t(hi) << 32); }

}  // namespace

uint32_t CounterRng::u32(uint64_t index) const { return block(seed_, stream_, index)[0]; }

uint64_t CounterRng::u64(uint64_t index) const {
    const auto w = block(seed_, stream_, index);
    return join(w[0], w[1]);
}

double CounterRng::uniform01(uint64_t index) const { return double(u64(index) >> 11) * kTwoPow53Inv; }

double CounterRng::normal(uint64_t index) const {
    const auto w = block(seed_, stream_, index);
    // u1 in (0, 1] so the logarithm is finite; u2 in [0, 1).
    const double u1 = double((join(w[0], w[1]) >> 11) + 1) * kTwoPow53Inv;
    const double u2 = double(join(w[2], w[3]) >> 11) * kTwoPow53Inv;
    return std::sqrt(-2.0 * det_log(u1)) * det_cos_turns(u2);
}

// Lemire's multiply-and-reject: x * range / 2^64, redrawing x in the biased low region.
int64_t CounterRng::integer(uint64_t index, int64_t lo, int64_t hi) const {
    if (lo > hi) throw std::invalid_argument("CounterRng::integer: empty range");
    const uint64_t range = uint64_t(hi) - uint64_t(lo) + 1;   // 0 stands for 2^64
    for (uint64_t attempt = 0;; ++attempt) {
        const auto w = block(seed_, stream_, index, attempt / 2);
        const uint64_t x = attempt % 2 == 0 ? join(w[0], w[1]) : join(w[2], w[3]);
        if (range == 0) return int64_t(x);
        const unsigned __int128 m = (unsigned __int128)x * range;
        const uint64_t low = uint64_t(m);
        if (low < range) {
            const uint64_t threshold = (0 - range) % range;
            if (low < threshold) continue;
        }
        return int64_t(uint64_t(lo) + uint64_t(m >> 64));
    }
}

uint64_t derive_seed(uint64_t seed, const char* label, uint64_t n) {
    uint64_t x = splitmix64(seed);
    x = splitmix64(x ^ fnv1a64(label));
    return splitmix64(x ^ n);
}

}  // namespace kcv
