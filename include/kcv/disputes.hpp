// Hand audit of disputed verdicts (GATES.md, fairness rule 18): the candidates on which kcv and
// the standard check disagree, sampled by stratum (gate × operator) with a seeded sampler, each
// written as a packet a person can audit: the record, the probe, a minimal input that still
// fails, expected against actual, and one command that replays it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/contract.hpp"
#include "kcv/gate.hpp"
#include "kcv/verify.hpp"

namespace kcv {

struct Dispute {
    std::string id;            // record_id
    std::string operator_name; // record_operator
    // "standard-pass-kcv-fail": the standard check accepts, a gate fails;
    // "standard-fail-kcv-clean": the standard check rejects, no gate fails.
    std::string kind;
    std::vector<std::string> failed_gates;
    size_t index = 0;          // in the journal
};
// Records carrying the standard check at `tolerance` ("tol_1e-2" or "tol_1e-4") whose verdict
// disagrees with kcv's any-violation. Records kcv could not judge are not disputes.
std::vector<Dispute> find_disputes(const std::vector<nlohmann::json>& records, const std::string& tolerance);

// A dispute's strata: (gate, operator) for each failed gate, or ("none", operator) when kcv
// found nothing.
std::vector<std::pair<std::string, std::string>> strata_of(const Dispute& d);

// At most n disputes, each once: gates take turns (in an order drawn from the seed), each gate's
// operators take turns within it, and members of a stratum come in an order drawn from the
// seed. The draw hashes (seed, name) with XXH3, so the sample depends only on the seed and the
// disputes' ids, not on the journal's order or the platform. Each picked dispute is returned
// with the stratum it was drawn for (pair.second).
std::vector<std::pair<Dispute, std::pair<std::string, std::string>>> stratified_sample(
    const std::vector<Dispute>& disputes, size_t n, uint64_t seed);

// Re-running one probe of one gate on a native candidate with parts of its input overridden.
struct ProbeOverride {
    DimValues dims;                      // dimensions to set (others stay as the probe has them)
    std::optional<double> family_scale;  // the value family's scale (PRC-02 bands, offsets)
    bool single_special = false;         // scattered special values cut down to one
    bool empty() const { return dims.empty() && !family_scale && !single_special; }
};
nlohmann::json to_json(const ProbeOverride& o);

// The probe `probe_id` of gate g, as planned for c under s, with the override applied, run on
// the candidate (and the contract's controls) in a sandboxed worker and judged by the gate.
// Errors (no such probe, a dimension the contract does not have, a probe that cannot run) come
// back as verdict error with a code; a crash or hang of the candidate as a failure.
GateResult run_probe_with(const GateDef& g, const Contract& c, const std::string& candidate,
                          const VerifyOptions& opts, const std::string& probe_id, const ProbeOverride& o);

// The command that replays run_probe_with: `kcv replay ...`.
std::string replay_override_command(const Contract& c, const std::string& candidate, const Settings& s,
                                    const std::string& probe_id, const ProbeOverride& o);

// Shrinking a failing probe: each free dimension in turn is lowered to the smallest size (from a
// ladder of small sizes and tile boundaries, within the dimension's range) at which the gate
// still fails, twice over; then the values: a scaled family to the smallest scale that still
// fails, scattered special values to a single one.
struct ShrinkResult {
    bool reproduced = false;        // the probe, unshrunk, failed again
    std::string probe;
    DimValues original_dims, dims;
    ProbeOverride applied;          // the smallest failing override found
    GateResult result;              // the gate at the shrunk input
    nlohmann::json trials = nlohmann::json::array();   // every attempt: {override, verdict}
    std::string replay;             // one command replaying the shrunk probe
    std::string note;               // why nothing was shrunk, where that is the case
};
ShrinkResult shrink_native(const Contract& c, const std::string& candidate, const std::string& gate,
                           const std::string& probe_id, const VerifyOptions& opts, int max_trials = 40);
nlohmann::json to_json(const ShrinkResult& s);

// For a Python candidate: the request the worker would need to shrink the probe (the worker
// protocol has no shrink yet), with the ladders of sizes to try for every free dimension of the
// task and the value reductions, documented in the packet.
nlohmann::json python_shrink_request(const nlohmann::json& record, const std::string& gate, const std::string& probe);

struct DisputeOptions {
    size_t sample = 10;
    uint64_t seed = 0;
    std::string tolerance = "tol_1e-2";
    std::string out_dir = "kcv-disputes";
    std::string journal;              // named in the packets
    bool shrink = true;
    int max_trials = 40;
    VerifyOptions verify;             // for re-running native candidates
};
struct DisputeSummary {
    size_t records = 0, with_standard = 0, disputes = 0;
    std::vector<std::string> packets;   // folders written
};
using DisputeProgress = std::function<void(const std::string& what, int done, int total)>;
DisputeSummary write_dispute_packets(const std::vector<nlohmann::json>& records, const DisputeOptions& opts,
                                     const DisputeProgress& progress = {});

}  // namespace kcv
