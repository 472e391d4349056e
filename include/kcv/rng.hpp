// Counter-based random numbers (Philox4x32-10). A value is a pure function of
// (seed, stream, index): the same seed gives the same values on any machine, in any order,
// on any number of threads. Only correctly rounded IEEE operations (+ − × ÷ sqrt) are used on
// the way to a floating-point value, so no libm difference can change a value; the library is
// built with -ffp-contract=off for the same reason.
#pragma once

#include <array>
#include <cstdint>

namespace kcv {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// Element `index` of (seed, stream) is the Philox block with counter (index, stream) as four
// little-endian 32-bit words and key seed. u32 is word 0, u64 words 0-1; uniform01 the top
// 53 bits of u64; normal is Box-Muller over words 0-1 and 2-3 with a logarithm and a cosine
// evaluated by fixed polynomials; integer draws from words 0-1, then 2-3, then further blocks
// only on a (rare) rejection.
class CounterRng {
public:
    CounterRng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
    uint32_t u32(uint64_t index) const;
    uint64_t u64(uint64_t index) const;
    double uniform01(uint64_t index) const;   // [0, 1), 53 random bits
    double normal(uint64_t index) const;      // N(0, 1)
    // Integer in [lo, hi], unbiased.
    int64_t integer(uint64_t index, int64_t lo, int64_t hi) const;

private:
    uint64_t seed_, stream_;
};

// Mixes a parent seed with a label so that distinct uses get independent streams
// (e.g. derive_seed(seed, "ORD-01", 3)).
uint64_t derive_seed(uint64_t seed, const char* label, uint64_t n = 0);

}  // namespace kcv
