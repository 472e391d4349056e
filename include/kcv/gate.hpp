// The twelve gates. Each gate is a pair of pure functions: plan (contract → probes) and judge
// (contract, probe outcomes → result). One gate per file under src/gates/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/contract.hpp"
#include "kcv/execution.hpp"
#include "kcv/oracle.hpp"
#include "kcv/probe.hpp"

namespace kcv {

struct Settings {
    uint64_t seed = 0;           // master seed: every probe seed derives from it
    double c = 4.0;              // analytic-model constant (swept by calibration)
    double envelope_factor = 2.0;  // envelope-model factor (swept with c)
    double ord03_margin = 1.2;   // ORD-03 margin (swept by calibration)
    bool quick = false;          // fewer probes: smaller sweeps, for tests only; recorded
    // The caller's runner of an external oracle for this judgement (not recorded; null when the
    // caller has none): gates that need y* on inputs of their own making call it.
    const ExternalRunner* external_runner = nullptr;
};
nlohmann::json to_json(const Settings& s);

enum class Verdict : uint8_t { pass, fail, na, error };
const char* name(Verdict v);

// One explained failure.
struct Evidence {
    std::string probe;                 // probe id
    std::string signature;             // one line: "nan-swallowed: y[3,17] = 0 where y* = NaN"
    std::string output;                // output name
    int64_t first_index = -1, worst_index = -1;
    std::vector<int64_t> first_coords, worst_coords;
    double expected = 0, actual = 0;   // at worst_index (y* rounded to the output dtype, and y)
    std::string expected_bits, actual_bits;
    double ratio = 0;                  // r or the relevant measure, where there is one
    std::string replay;                // a command that replays this probe
    nlohmann::json detail;             // gate-specific facts (fitted slope, guard offsets, ...)
};
nlohmann::json to_json(const Evidence& e);

struct GateResult {
    std::string id;
    Verdict verdict = Verdict::error;
    std::vector<std::string> signature;   // signature classes, e.g. {"nan-swallowed"}
    std::string reason;                   // for n/a and error; a summary line otherwise
    std::string code;                     // error code for error verdicts ("timeout", "crash:SIGSEGV")
    double metric = 0;                    // the gate's headline number (r, err ratio), if any
    int probes = 0;
    std::vector<Evidence> evidence;
    nlohmann::json detail;                // e.g. ORD-02: {"runs_pass_ord01": true}
};
nlohmann::json to_json(const GateResult& g);
GateResult gate_result_from_json(const nlohmann::json& j);

struct GateDef {
    const char* id;
    const char* name;
    bool tolerance_free;
    std::vector<Probe> (*plan)(const Contract&, const Settings&);
    GateResult (*judge)(const Contract&, const Settings&, const std::vector<ProbeOutcome>&);
    // Why the gate does not apply to this contract by construction, or "" if it does
    // (e.g. EXC-02 where no input dtype has subnormals).
    std::string (*not_applicable)(const Contract&);
};

// All twelve, in GATES.md's order: PRC-01 PRC-02 PRC-03 ORD-01 ORD-02 ORD-03 CMP-01 CMP-02
// EXC-01 EXC-02 RES-01 RES-02.
const std::vector<GateDef>& all_gates();
const GateDef* find_gate(const std::string& id);

// The gate's result when it may stop after the last of these outcomes, else nullopt: the
// candidate returned a nonzero status on inputs the reference answered (planted out-of-range
// indices excepted, where the contract may ask for an error) and the gate's judge already fails
// it on the outcomes so far. Later probes could only add evidence to that failure; a candidate
// that raises at every call would otherwise run the whole battery (every CMP-01 size with its
// float64 reference) to fail each gate with the same error. The result is the judge's, with id
// and probes set and, where `remaining` planned probes are left, detail "not_run" saying so.
std::optional<GateResult> ends_gate(const GateDef& g, const Contract& c, const Settings& s,
                                    const std::vector<ProbeOutcome>& outcomes, size_t remaining);

// The replay command for a probe of a candidate.
std::string replay_command(const Contract& c, const std::string& candidate, const Settings& s,
                           const std::string& probe_id);

}  // namespace kcv
