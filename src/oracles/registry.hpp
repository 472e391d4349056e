// The internal interface every oracle file codes against: how an oracle joins the registry, the
// operand checks that make an oracle refuse anything but float64, exact reads and writes of
// tensor elements, attribute parsing, the compensated sum every reduction uses, and the view of
// a tensor as rows along one axis.
//
// Registering an oracle from another file (the built-in ones are listed in registry.cpp):
//
//     namespace {
//     void gdn_forward(const kcv::OracleArgs& a) { ... }
//     const kcv::oracles::OracleRegistrar gdn_forward_registrar("gdn_forward", gdn_forward);
//     }
//
// The registrar runs during static initialisation and stores the function in a table that is
// itself built on first use, so the order of initialisation between files does not matter.
// A duplicate name throws std::logic_error at start-up: two oracles may never share a name.
// Lookups (find_oracle) are read-only and safe from any thread once main() has started.
//
// Linking: a file whose only link to the rest of the program is a static registrar is dropped
// by the linker when it sits in a static archive that nothing else references. Such files must
// be linked whole (an object library, or the archive wrapped in --whole-archive /
// $<LINK_LIBRARY:WHOLE_ARCHIVE,...>), or define a symbol that the program references.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kcv/oracle.hpp"

namespace kcv::oracles {

struct OracleRegistrar {
    OracleRegistrar(const char* name, OracleFn fn);
};

// What an operand may hold. `real`: float64 only. `integer`: an integer dtype only (index
// tensors). `real_or_integer`: either (argmax writes indices into float64 or integer outputs).
enum class Operand : uint8_t { real, integer, real_or_integer };

struct OperandSpec {
    const char* name;
    Operand kind = Operand::real;
};

// The operands of one oracle. Inputs past `min_inputs` are optional (layernorm's weight, bias).
struct Signature {
    const char* oracle;
    std::vector<OperandSpec> inputs;
    std::vector<OperandSpec> outputs;
    size_t min_inputs = SIZE_MAX;   // SIZE_MAX: every input is required
};

// |x| floored at `floor`, except that a zero stays zero: rounding it to any format is exact.
inline double floored_magnitude(double x, double floor) { return x == 0 ? 0.0 : std::max(std::fabs(x), floor); }

// A scale's term for the product a·b, each operand's magnitude floored at `floor`
// (OracleArgs::operand_floor): ½·(⌊a⌋·|b| + |a|·⌊b⌋) with ⌊x⌋ = floored_magnitude(x), which is
// |a·b| when neither operand is below the floor, and exactly |a·b| when floor is 0.
inline double product_magnitude(double a, double b, double floor) {
    if (floor == 0) return std::fabs(a * b);
    const double ma = std::fabs(a), mb = std::fabs(b);
    return 0.5 * (floored_magnitude(a, floor) * mb + ma * floored_magnitude(b, floor));
}

// The same for a term x of a plain sum, a product with an exact 1: only x is rounded.
inline double term_magnitude(double x, double floor) {
    if (floor == 0) return std::fabs(x);
    return 0.5 * (floored_magnitude(x, floor) + std::fabs(x));
}

// Throws OracleError unless the counts of inputs, outputs and scales match and every operand's
// dtype is allowed: floating-point operands must be float64, scales always float64.
void check_operands(const OracleArgs& a, const Signature& sig);

// Throws OracleError naming the operand when `t` does not have the shape `expected`.
void check_shape(const Signature& sig, const char* role, size_t i, const Tensor& t,
                 const std::vector<int64_t>& expected);
// Every output and its scale must have the shape `expected`.
void check_output_shapes(const OracleArgs& a, const Signature& sig, const std::vector<int64_t>& expected);
// For a reduction over `dim`: the output may drop the axis or keep it with size 1 (keepdim);
// both lay the remaining elements out in the same row-major order.
void check_reduced_shapes(const OracleArgs& a, const Signature& sig, const std::vector<int64_t>& in_shape,
                          size_t dim);

[[noreturn]] void fail(const Signature& sig, const std::string& message);

// Logical elements in row-major order. Float tensors must be float64 (checked before); integer
// tensors read exactly as their values.
std::vector<double> read_values(const Tensor& t);
std::vector<int64_t> read_indices(const Tensor& t);
// Stores values (float64 output) or integral values (integer output) in row-major order.
void write_values(Tensor& t, const std::vector<double>& v);

// Attributes. A missing attribute takes `fallback`; `required_attribute` throws when missing.
double attribute(const OracleArgs& a, const char* key, double fallback);
double required_attribute(const OracleArgs& a, const Signature& sig, const char* key);
// An integral attribute in [lo, hi].
int64_t int_attribute(const OracleArgs& a, const Signature& sig, const char* key, int64_t fallback,
                      int64_t lo, int64_t hi);
// Attribute "dim" (default -1), normalised to [0, rank) as PyTorch does for negative values.
size_t reduction_dim(const OracleArgs& a, const Signature& sig, size_t rank);
// For oracles defined over the last dimension only: an attribute "dim" naming any other axis
// is refused rather than ignored.
void check_last_dim(const OracleArgs& a, const Signature& sig, size_t rank);

// Sum2 of Ogita, Rump and Oishi: a running sum and the exact rounding error of each addition
// (Knuth's TwoSum), so the result is as accurate as a sum carried in twice the precision and
// rounded once. It needs IEEE double arithmetic without contraction or reassociation (the
// library is built with -ffp-contract=off and never with -ffast-math). A non-finite running sum
// is returned as is: its IEEE value (Inf, NaN) is the result, and the error terms are
// meaningless there. The sum starts at +0, so a sum of -0 terms is +0, as PyTorch's is.
struct CompensatedSum {
    double sum = 0.0;
    double error = 0.0;

    void add(double x) {
        const double t = sum + x;
        const double z = t - sum;
        error += (sum - (t - z)) + (x - z);
        sum = t;
    }
    // Adds a product a·b whose rounding error fma recovers exactly (TwoProduct).
    void add_product(double a, double b) {
        const double p = a * b;
        add(p);
        if (std::isfinite(p)) error += std::fma(a, b, -p);
    }
    double value() const { return std::isfinite(sum) ? sum + error : sum; }
};

// Maximum with PyTorch's semantics along a reduction: the first NaN wins, then the first of
// equal maxima (-0 and +0 are equal, so the earlier one is kept).
struct FirstMax {
    double value = -INFINITY;
    int64_t index = -1;

    void add(double x, int64_t i) {
        if (index >= 0 && std::isnan(value)) return;
        if (index < 0 || std::isnan(x) || x > value) {
            value = x;
            index = i;
        }
    }
};

// A row-major tensor seen as [outer, n, inner] around one axis: lane (o, i) holds the n
// elements at o·n·inner + k·inner + i, k = 0..n-1.
struct AxisView {
    int64_t outer = 1, n = 1, inner = 1;

    AxisView(const std::vector<int64_t>& shape, size_t dim);
    int64_t lanes() const { return outer * inner; }
    int64_t at(int64_t lane, int64_t k) const {
        return (lane / inner) * n * inner + k * inner + lane % inner;
    }
};

int64_t product(const std::vector<int64_t>& dims);

// The built-in oracles, one group per file.
void matmul(const OracleArgs& a);        // matmul.cpp
void bmm(const OracleArgs& a);
void sum(const OracleArgs& a);           // reductions.cpp
void mean(const OracleArgs& a);
void max(const OracleArgs& a);
void argmax(const OracleArgs& a);
void cumsum(const OracleArgs& a);        // cumsum.cpp
void softmax(const OracleArgs& a);       // softmax.cpp
void log_softmax(const OracleArgs& a);
void layernorm(const OracleArgs& a);     // norms.cpp
void rmsnorm(const OracleArgs& a);
void relu(const OracleArgs& a);          // elementwise.cpp
void gelu(const OracleArgs& a);
void silu(const OracleArgs& a);
void exp(const OracleArgs& a);
void log(const OracleArgs& a);
void sqrt(const OracleArgs& a);
void reciprocal(const OracleArgs& a);
void div(const OracleArgs& a);
void gather(const OracleArgs& a);        // gather.cpp

}  // namespace kcv::oracles
