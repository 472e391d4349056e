// The value families of GATES.md: how a probe fills an input. Every value is a pure function of
// (seed, input position), so the reference and the candidate always see the same inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kcv/contract.hpp"
#include "kcv/tensor.hpp"

namespace kcv {

struct Family {
    enum class Kind : uint8_t {
        task,             // the contract's own distribution for the input
        signed_normal,    // N(0, 1)
        positive,         // U(0, 1) times `scale`: maximal swamping for sums
        band,             // the task distribution times `scale` (PRC-02: 10 .. 1e4)
        offset,           // `scale` + N(0, 1) (PRC-02: 1e4 for norms and variances)
        near_max,         // values within a factor 2 of the dtype's max finite value
        random_mantissa,  // fp32 with all 24 significand bits random, exponent in [-4, 4]
        repeated,         // one value repeated (task distribution, drawn once)
        subnormal,        // subnormals of the input dtype, random sign and significand
        below_half_unit,  // positive fp32 exact in `scale` + 3 significand bits, the 3 bits below a
                          // `scale`-bit format's unit 011: rounding to that format errs downward by
                          // 3/8 of its unit every time (to nearest and toward zero alike)
    } kind = Kind::task;
    double scale = 1.0;
    static Family of(Kind k, double scale = 1.0) { return {k, scale}; }
};
const char* name(Family::Kind k);
std::string describe(const Family& f);

// Fills t with the family's values, rounded to t's dtype. Respects the input's domain
// (clamps to [lo, hi]; random signs become one sign where lo >= 0 or hi <= 0; values that round
// to subnormals become +0 where the domain excludes subnormals) and its structural zeros
// (+0). Index inputs draw integers in [a, b] whatever the family. Element i is a pure function
// of (seed, i) through CounterRng(seed, 0). Throws std::invalid_argument on an unknown
// distribution or structure, and for the subnormal family on a dtype or domain without them.
void fill(Tensor& t, const InputSpec& spec, const Family& f, uint64_t seed);

// Special values injected into a filled tensor (EXC-01).
struct Specials {
    enum class Pattern : uint8_t {
        scattered,     // `rate` of the positions, random kinds among `kinds`
        row_neg_inf,   // one whole last-dimension row of -Inf (masked softmax)
        single_nan,    // one NaN in the middle of the tensor (inside a long reduction)
    } pattern = Pattern::scattered;
    double rate = 0.005;
    // Kinds to draw from: "nan", "+inf", "-inf", "+0", "-0", "+max", "-max".
    std::vector<std::string> kinds = {"nan", "+inf", "-inf"};
};
// Returns the logical indices it changed, sorted. Never touches structural zeros, never touches
// index inputs, integer inputs or inputs whose domain excludes non-finite values (returns
// empty). Scattered positions are chosen one by one with probability `rate` (at least one in
// all) from CounterRng(seed, 1), kinds from CounterRng(seed, 2); the row of row_neg_inf comes
// from CounterRng(seed, 1). e4m3 has no infinity: "+inf" and "-inf" become its NaN.
std::vector<int64_t> inject(Tensor& t, const InputSpec& spec, const Specials& s, uint64_t seed);

}  // namespace kcv
