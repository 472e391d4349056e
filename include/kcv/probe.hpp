// A probe: plain, serialisable data saying how to exercise a candidate once. Gates plan probes;
// the executor runs them on the oracle, the controls and the candidate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/buffer.hpp"
#include "kcv/contract.hpp"
#include "kcv/families.hpp"
#include "kcv/tensor.hpp"

namespace kcv {

// Ambient state a call runs under (CMP-02, EXC-02).
struct Env {
    bool ftz = false;        // MXCSR flush-to-zero during the candidate's call
    bool daz = false;        // MXCSR denormals-are-zero during the candidate's call
    int threads = 0;         // OMP_NUM_THREADS for the call; 0 leaves it alone
    bool operator==(const Env&) const = default;
};

// One call of the candidate within a probe. Calls of a probe run in order in one process on
// one loaded candidate, so state kept across calls (caches) is visible.
struct CallSpec {
    uint64_t input_seed = 0;                   // inputs are a pure function of this seed
    Poison output_poison = Poison::bytes(0xFF);
    Env env;
};

// Input-wide overrides for one input (by name; empty name = every floating-point input).
struct InputOverride {
    std::string input;
    Family family;
    std::optional<Specials> specials;
};

struct Probe {
    std::string gate;                    // "ORD-01"
    std::string id;                      // unique within a record: "ORD-01/normal/seed=3"
    DimValues dims;                      // every contract dimension bound
    Family family;                       // for every floating-point input
    std::vector<InputOverride> overrides;
    Layout layout;                       // for every input where the contract allows strides
    size_t guard_bytes = GuardedBuffer::kDefaultGuard;
    Poison guard_poison = Poison::bytes(0xA5);
    bool check_guards = false;           // the gate judges guard damage: executors must look for it
    std::vector<CallSpec> calls;         // at least one
    bool with_controls = false;          // also run the contract's positive controls
    bool out_of_range_indices = false;   // gather: plant indices outside the valid range
    // Non-empty: before the probe's calls, the candidate instance that serves them is called once
    // at these dimensions, on inputs drawn from prime_seed; that call is not judged. A candidate
    // that sizes itself by the first shape it serves shows at the probe's own dimensions (CMP-01).
    DimValues prime_dims;
    uint64_t prime_seed = 0;
    nlohmann::json note;                 // gate-private facts (e.g. the K this probe sweeps)
};

nlohmann::json to_json(const Probe& p);
Probe probe_from_json(const nlohmann::json& j);

}  // namespace kcv
