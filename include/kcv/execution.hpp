// Execution: runs a probe on the oracle, the positive controls and the candidate, and returns
// buffers plus facts. Nothing here judges; gates do.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kcv/contract.hpp"
#include "kcv/kcv_kernel.h"
#include "kcv/probe.hpp"
#include "kcv/tensor.hpp"

namespace kcv {

// A loaded kernel: a candidate or a positive control.
class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // Runs one call. Returns the kernel's status (0 = success); message in *error.
    virtual int call(const Contract& c, std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                     std::string* error) = 0;
    // Static resources, if the kernel reports them (RES-02).
    virtual bool resources(kcv_resources* out) { (void)out; return false; }
};

struct BackendError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A shared library exporting kcv_kernel. Throws BackendError if it cannot be loaded.
std::unique_ptr<Backend> load_native(const std::string& path);

// Facts about one call of the candidate.
struct CallFacts {
    int status = 0;                        // kernel's return code
    std::string error;                     // its message
    std::vector<uint64_t> input_hash_before, input_hash_after;   // Tensor::hash_storage
    std::vector<std::string> guard_damage; // "input x: after band, first byte +12, 40 bytes"
    std::vector<std::pair<uintptr_t, uintptr_t>> input_ranges, output_ranges;
    double seconds = 0;
};

// Everything a call produced.
struct CallOutcome {
    CallSpec spec;
    std::vector<Tensor> inputs;            // as the candidate received them (after the call)
    std::vector<Tensor> reference;         // y*, float64, one per output
    std::vector<Tensor> scale;             // s_i, float64
    std::string reference_error;           // the oracle refused these inputs (gather policy "raise")
    std::vector<Tensor> outputs;           // the candidate's outputs, in their dtype
    std::vector<std::vector<Tensor>> controls;   // per control, its outputs (probe.with_controls)
    std::vector<int> control_status;
    CallFacts facts;
};

struct ProbeOutcome {
    Probe probe;
    std::vector<std::vector<int64_t>> output_shapes;
    std::vector<int64_t> k;                // accumulation length per output
    std::vector<CallOutcome> calls;
    std::string error;                     // non-empty: the probe could not be run (not a verdict)
    std::vector<int64_t> injected;         // logical indices of injected specials, first input hit
    std::optional<kcv_resources> resources;   // the candidate's static resources, if exported
};

struct ExecContext {
    const Contract& contract;
    Backend& candidate;
    std::vector<Backend*> controls;
};

// Runs one probe. Never throws for a candidate's misbehaviour: statuses and damage land in the
// facts. Throws only for verifier errors (bad contract, unknown oracle).
ProbeOutcome execute(const ExecContext& ctx, const Probe& probe);

}  // namespace kcv
