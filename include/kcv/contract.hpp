// A Kernel Contract: what "correct" means for one task, in eight parts (identifier, scope,
// precondition, postcondition, tolerance, reference oracle, measurement protocol, violation
// signature). Contracts are TOML or JSON files a person reads and writes; docs/contracts.md
// gives the format, and contracts/ holds the built-in ones.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kcv/dtype.hpp"

namespace kcv {

// A dimension of the task. Free dimensions are swept by CMP-01 (and K by PRC-01).
struct Dim {
    std::string name;
    int64_t nominal = 1;
    bool free = false;
    int64_t min = 1;
    int64_t max = std::numeric_limits<int64_t>::max();
    bool operator==(const Dim&) const = default;
};

// Precondition on one input: its value domain.
struct Domain {
    bool nonfinite = true;     // may hold NaN/±Inf (EXC-01 injects only where true)
    bool subnormal = true;     // may hold subnormals (EXC-02)
    double lo = -std::numeric_limits<double>::infinity();
    double hi = std::numeric_limits<double>::infinity();
    // Structural zeros that stay zero under every probe: "none", "lower_triangular",
    // "upper_triangular".
    std::string structure = "none";
    bool operator==(const Domain&) const = default;
};

// The task's own input distribution for one input.
struct Distribution {
    // "normal" (mean a, std b), "uniform" [a, b), "integer" [a, b], "positive" U(a,b) a>=0,
    // "logits" (normal scaled by b).
    std::string kind = "normal";
    double a = 0.0, b = 1.0;
    bool operator==(const Distribution&) const = default;
};

struct InputSpec {
    std::string name;
    DType dtype = DType::f32;
    std::vector<std::string> shape;   // dimension names or integer literals
    Domain domain;
    Distribution distribution;
    bool index = false;               // an index tensor (gather): never gets special values
    bool operator==(const InputSpec&) const = default;
};

enum class ErrorModelKind : uint8_t { elementwise, reduction, scan, envelope };
const char* name(ErrorModelKind k);

// Postcondition and tolerance for one output.
struct OutputSpec {
    std::string name;
    DType dtype = DType::f32;
    std::vector<std::string> shape;
    DType accumulator = DType::f32;   // the declared accumulator, u(acc)
    ErrorModelKind model = ErrorModelKind::elementwise;
    // Accumulation length K_i as an expression over dimension names: "K", "M*N", "1".
    std::string k = "1";
    // Where the contract allows an operand format (semantics.bf16_operands, tf32_operands): how
    // many rounded operands one term of this output passes through, each costing u(op) relative.
    // 2 for a sum of products a·b with both operands rounded once; more where the algorithm the
    // contract admits chains products whose intermediates are rounded too (docs/gates.md,
    // "Analytic model").
    int operand_roundings = 2;
    bool operator==(const OutputSpec&) const = default;
};

enum class Determinism : uint8_t { not_guaranteed, run_to_run, gpu_to_gpu };
const char* name(Determinism d);

struct Semantics {
    Determinism determinism = Determinism::run_to_run;
    std::vector<std::string> in_place;   // inputs the operation may write
    std::string index_policy = "none";   // gather: "raise" | "clamp" | "zero"
    bool strided_inputs = false;         // the interface takes arbitrary strides and offsets
    bool tf32_operands = false;          // operands may be rounded to tf32 (PRC-03)
    bool bf16_operands = false;
    bool operator==(const Semantics&) const = default;
};

struct Measurement {
    int seeds = 5;           // ORD-01 seeds
    int runs = 3;            // ORD-02 runs
    double timeout_s = 60;   // per stage (gate) in the sandbox
    int64_t memory_cap_bytes = int64_t(1) << 30;   // CMP-01 and PRC-01 skip shapes beyond it
    // ORD-03's margin for this contract where it is wider than the setting's (0: none declared);
    // at least 1. Chosen from the contract's own controls, each judged against the others' envelope
    // over many seeds (bench/ord03_sweep.py; docs/gates.md, "ORD-03").
    double ord03_margin = 0;
    bool operator==(const Measurement&) const = default;
};

struct Contract {
    // 1. identifier, 2. scope
    std::string id;
    std::string version = "1";
    std::string scope;
    // 3. precondition
    std::vector<Dim> dims;
    std::vector<InputSpec> inputs;
    std::map<std::string, double> attributes;   // passed to the kernel and the oracle
    // 4. postcondition and 5. tolerance
    std::vector<OutputSpec> outputs;
    Semantics semantics;
    // 6. reference oracle
    std::string oracle;
    // 7. measurement protocol
    Measurement measurement;
    // 8. violation signatures the task expects to matter (documentation; every gate's classes
    // are always reported)
    std::vector<std::string> violation_signatures;
    // Positive controls: names of trusted kernels for this task (ORD-03, fairness rule 1).
    std::vector<std::string> controls;
    std::string source;   // file the contract came from, for messages

    const Dim* dim(const std::string& name) const;   // nullptr when there is none
    // Field by field, `source` included: compare contracts read from the same place.
    bool operator==(const Contract&) const = default;
};

// Dimension bindings for one probe.
using DimValues = std::map<std::string, int64_t>;
DimValues nominal_dims(const Contract& c);
// Evaluates a shape entry or a K expression ("M*N", "K", "4") under bindings; throws
// ContractError on an unknown name.
int64_t eval_dim_expr(const std::string& expr, const DimValues& dims);
std::vector<int64_t> eval_shape(const std::vector<std::string>& shape, const DimValues& dims);

struct ContractError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Parsing. TOML, or JSON when the first non-space character is '{'; every error names the
// file, the field and the problem ("m.toml:12: inputs[1].dtype: unknown dtype 'f33'; ...").
// Unknown keys are errors. parse_* never crash on any input (the reader is fuzzed). They check
// each field alone; validate() checks how fields refer to each other.
Contract parse_contract(const std::string& text, const std::string& source = "<string>");
Contract load_contract(const std::string& path);   // parse only; throws if unreadable
// Built-in contracts, by id ("matmul-f32", "softmax-f32", ...) or a file path (an existing
// file wins over a built-in id). The result is validated.
Contract resolve_contract(const std::string& id_or_path);
std::vector<std::string> builtin_contract_ids();   // sorted
namespace detail {
// contracts/*.toml keyed by file stem, generated at build time by cmake/embed_contracts.cmake.
const std::map<std::string, std::string>& builtin_contract_texts();
}  // namespace detail
// Checks cross-references (shape names, oracle exists, K expressions, unique names, ranges);
// throws ContractError naming the source and the field.
void validate(const Contract& c);
// The whole contract as pretty-printed JSON; parse_contract(to_json(c), c.source) == c.
std::string to_json(const Contract& c);

}  // namespace kcv
