// Float64 reference oracles. Each computes y* from the exact values of the inputs and, beside
// it, the magnitude scale s_i of the analytic error model (for a sum or dot product, Σ|term|).
// An oracle refuses (throws OracleError) any floating-point operand that is not float64:
// reduced-precision arithmetic cannot sneak into a reference.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kcv/tensor.hpp"

namespace kcv {

struct OracleError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct OracleArgs {
    const std::vector<Tensor>& inputs;               // float64 (or integer index tensors)
    const std::map<std::string, double>& attributes;
    std::vector<Tensor>& outputs;                    // float64, shaped by the caller
    std::vector<Tensor>& scales;                     // float64, same shapes as outputs
    // N_F, the smallest normal of the operand format the contract allows (tf32, bf16), or 0.
    // Rounding an operand a to F errs by at most u(F)·max(|a|, N_F): below N_F the error is
    // absolute, set by F's subnormal step. An oracle whose scale is a sum of products then
    // floors each operand's magnitude at N_F, s_i = Σ ½·(max(|a|, N_F)·|b| + |a|·max(|b|, N_F)),
    // so that the operand term 2·u(F)·s_i bounds that rounding at every scale. Wherever no
    // operand is below N_F this is Σ|a·b|, bit for bit (a zero operand stays zero: it rounds
    // exactly). matmul, bmm, sum, mean, cumsum and the recurrence's gdn_forward and gdn_backward
    // (every product of their magnitude recursions) floor their scales. The others do not: the
    // normalisations' and softmax's scales are not sums of products of the inputs.
    double operand_floor = 0;
};

using OracleFn = void (*)(const OracleArgs&);

// nullptr when unknown. Names: matmul, bmm, sum, mean, max, argmax, cumsum, softmax,
// log_softmax, layernorm, rmsnorm, relu, gelu, silu, exp, log, sqrt, reciprocal, div, gather.
OracleFn find_oracle(const std::string& name);
std::vector<std::string> oracle_names();

// An oracle that lives outside libkcv: "external:<runner>", e.g. "external:kernelbench" for a
// KernelBench Model run in float64 by the Python package. Contracts may name one; the caller
// that runs the probes computes y* with the runner, and libkcv's gates judge what it computed.
inline constexpr std::string_view kExternalOraclePrefix = "external:";
inline bool is_external_oracle(std::string_view name) { return name.starts_with(kExternalOraclePrefix); }

// The runner of an external oracle, lent by the caller that has one (the Python bridge runs a
// KernelBench Model in float64): given a probe's sizes (its dims) and inputs in their own
// dtypes, it returns y* in float64, one tensor per output. A gate that needs the reference on
// inputs of its own making (EXC-02's flushed subnormals, PRC-03's rounded operands) reaches it
// through the judgement's Settings::external_runner and run_oracle.
using ExternalRunner = std::function<std::vector<Tensor>(const std::map<std::string, int64_t>& dims,
                                                         const std::vector<Tensor>& inputs)>;

// Convenience: widens inputs exactly, allocates outputs and scales of the given shapes, runs.
// An external oracle runs through `runner` at the probe's `dims` (without one it cannot run in
// libkcv), and gives no scales (tensors without a buffer: s_i = |y*_i|). `operand_floor` is
// OracleArgs::operand_floor.
void run_oracle(const std::string& name, const std::vector<Tensor>& inputs,
                const std::map<std::string, double>& attributes,
                const std::vector<std::vector<int64_t>>& output_shapes,
                std::vector<Tensor>& outputs, std::vector<Tensor>& scales,
                const std::map<std::string, int64_t>& dims = {}, const ExternalRunner* runner = nullptr,
                double operand_floor = 0);

}  // namespace kcv
