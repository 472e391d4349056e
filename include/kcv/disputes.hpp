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

// Re-running one probe of one gate with parts of its input overridden: a native candidate
// through run_probe_with, a Python candidate through the worker's `settings.probe_override`.
struct ProbeOverride {
    DimValues dims;                      // dimensions to set (others stay as the probe has them)
    std::optional<double> family_scale;  // the value family's scale (PRC-02 bands, offsets)
    bool single_special = false;         // scattered special values cut down to one
    bool empty() const { return dims.empty() && !family_scale && !single_special; }
};
nlohmann::json to_json(const ProbeOverride& o);
// Reads {"dims": {...}, "family_scale": x?, "single_special": bool?}; other keys (the worker's
// "probe") are ignored. Throws std::invalid_argument on a malformed field.
ProbeOverride probe_override_from_json(const nlohmann::json& j);

// Why the override cannot apply to contract c (a dimension it does not have, or one outside its
// range), as a gate result of gate `gate` with verdict error and a code; nullopt if it can.
std::optional<GateResult> override_problem(const std::string& gate, const Contract& c, const ProbeOverride& o);

// The probe as planned, with the override applied: dims set, the family's scale replaced,
// scattered special values cut to a single one.
void apply(Probe& p, const ProbeOverride& o);

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
// fails, scattered special values to a single one. A step is kept only where the gate fails and
// the positive controls pass (fairness rule 1), so the minimal input stays one that correct
// implementations handle.
struct ShrinkResult {
    bool reproduced = false;        // the probe, unshrunk, failed again
    std::string probe;
    DimValues original_dims, dims;
    ProbeOverride applied;          // the smallest failing override found
    GateResult result;              // the gate at the shrunk input
    nlohmann::json trials = nlohmann::json::array();   // every attempt: {override, verdict, signature, controls}
    std::string replay;             // one command replaying the shrunk probe
    std::string note;               // why nothing was shrunk, where that is the case
};
nlohmann::json to_json(const ShrinkResult& s);

// One trial of a shrink: the gate on the candidate at an override, and what the positive
// controls did there. A failure counts only where the controls are known to pass.
struct ShrinkTrial {
    enum class Controls : uint8_t { not_run, pass, fail };
    GateResult result;
    Controls controls = Controls::not_run;
};
using ShrinkTrialFn = std::function<ShrinkTrial(const ProbeOverride&)>;

// The shrink driver, whatever runs the trials: `planned` is the probe as its gate planned it
// (its dims, family and special values say what can be reduced), `dims` the contract's
// dimensions (the free ones are lowered, within their ranges). The same override is never tried
// twice; at most max_trials trials. Fills everything but `replay` (the caller knows the command).
ShrinkResult shrink_probe(const Probe& planned, const std::vector<Dim>& dims, const ShrinkTrialFn& trial,
                          int max_trials = 40);

// The driver over run_probe_with: trials run the probe on the candidate, and where it fails, on
// every positive control of the contract.
ShrinkResult shrink_native(const Contract& c, const std::string& candidate, const std::string& gate,
                           const std::string& probe_id, const VerifyOptions& opts, int max_trials = 40);

// The driver over a Python worker (`python -m kcv.worker`, one worker for all trials): each
// trial is a request built from the record (reference, candidate, device, seed, settings) with
// `gates: [gate]` and `settings.probe_override`, so that the worker runs the probe alone on the
// candidate and on the fp32 control. The probe's dims and values come from the worker's answer
// to the first trial; the free dimensions from the task contract in the record.
struct PythonShrinkOptions {
    std::string python = "python3";
    double stage_timeout_s = 300;
    int max_trials = 40;
};
ShrinkResult shrink_python(const nlohmann::json& record, const std::string& gate, const std::string& probe_id,
                           const PythonShrinkOptions& opts = {});

// The worker request of one Python trial (shrink_python's): the record's reference, candidate,
// device, seed and settings, `gates: [gate]` and `settings.probe_override`.
nlohmann::json python_probe_request(const nlohmann::json& record, const std::string& gate,
                                    const std::string& probe_id, const ProbeOverride& o);

// The command that replays a probe of a Python record with an override: `kcv verify --reference
// ... --gate G --probe ID [--dim k=v ...] [--scale x] [--single-special]`.
std::string python_replay_command(const nlohmann::json& record, const std::string& gate, const std::string& probe_id,
                                  const ProbeOverride& o);

// For a Python candidate that cannot be shrunk here (its files are not on this machine, or
// --no-shrink): the requests a worker would need, with the ladders of sizes to try for every
// free dimension of the task and the value reductions, documented in the packet.
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
    std::string python = "python3";   // for re-running Python candidates
    double stage_timeout_s = 300;
};
struct DisputeSummary {
    size_t records = 0, with_standard = 0, disputes = 0;
    std::vector<std::string> packets;   // folders written
};
using DisputeProgress = std::function<void(const std::string& what, int done, int total)>;
DisputeSummary write_dispute_packets(const std::vector<nlohmann::json>& records, const DisputeOptions& opts,
                                     const DisputeProgress& progress = {});

}  // namespace kcv
