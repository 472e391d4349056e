// The calibration sweep of GATES.md ("Defences of the verdicts"): the analytic constant c, the
// envelope factor swept with it (factor = c/2) and the ORD-03 margin, judged on the positive
// controls (which must all keep passing), the red team (its catch rate) and a corpus journal
// (its failure rate, re-judged from the stored metrics where that is sound). The tightest setting
// that keeps every control passing is chosen, and each gate's margin over the controls stated.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/gate.hpp"
#include "kcv/verify.hpp"

namespace kcv {

constexpr int kCalibrationVersion = 1;

struct CalibrationGrid {
    std::vector<double> c = {2, 4, 8};
    std::vector<double> margins = {1.0, 1.1, 1.2, 1.5, 2.0};
};

// The settings of one grid point: envelope_factor = c / 2, as GATES.md sweeps them together.
Settings grid_settings(const Settings& base, double c, double margin);

struct CalibrationOptions {
    VerifyOptions verify;        // seed, kernel directory, sandbox; settings.quick is the default
    CalibrationGrid grid;
    std::string corpus;          // a journal to re-judge; "" for none
    bool defences = true;        // run the red team and the controls at every setting
    // Every gate at every grid point (|c|·|margin| runs) instead of the composition below.
    bool exhaustive = false;
};

// Progress of the sweep: which run of how many, and within it, which kernel of how many.
using CalibrationProgress =
    std::function<void(const std::string& what, int run, int runs, int done, int total)>;

// The whole sweep; the document `kcv calibrate --json` writes (docs/reports.md gives its fields).
// Without `exhaustive`, the red team and controls run once per c with every gate (the ORD-03
// margin at the grid's value nearest 1.2) and once per other margin with ORD-03 alone; each grid
// point is then composed from the run of its c and the ORD-03 results of its margin. That is
// exact because ORD-03 reads no setting but the margin (its floor u(out) does not depend on c)
// and no other gate reads the margin.
nlohmann::json calibrate(const CalibrationOptions& opts, const CalibrationProgress& progress = {});

// Pieces of the sweep, each a pure function of JSON (tested alone).

// A red-team JSON (to_json(RedteamReport)) with every record's ORD-03 result replaced by the one
// the same kernel and contract got in `ord03_run`, and failed gates, caught and clean recomputed.
nlohmann::json compose_ord03(const nlohmann::json& base_run, const nlohmann::json& ord03_run);

// Control pass rate and red-team catch rate of a red-team JSON:
// {"controls": {passed, total, rate, failed: [{name, contract, gates}]},
//  "redteam": {caught, total, rate, missed: [names]}}.
nlohmann::json defence_rates(const nlohmann::json& run);

// Per gate with a ratio metric, the largest metric any control record reached, the gate's
// threshold (1 for r; the margin for ORD-03) and margin = threshold / largest.
nlohmann::json gate_margins(const nlohmann::json& run, const Settings& s);

// Re-judging one stored gate result at other settings. States: "pass", "fail" (sound), or
// "undetermined" where the stored metric cannot decide; `how` says which rule applied:
// "kept" (the gate reads neither c nor the margin, or its failure does not depend on them),
// "exact" (recomputed exactly), "bound" (decided by a bound), "undetermined".
struct Rejudged {
    std::string state;   // pass | fail | undetermined | n/a | error
    std::string how;
};
// model: "envelope" when every float output of the contract uses the envelope model, "analytic"
// otherwise, "" when unknown (treated as analytic). float_outputs: the contract's number of
// floating-point outputs, 0 when unknown.
Rejudged rejudge_gate(const nlohmann::json& gate, const Settings& recorded, const Settings& target,
                      const std::string& model, int float_outputs);

// Failure rate of a corpus at `target`: {records, judged, failed_lo, failed_hi, rate_lo, rate_hi,
// undetermined, rate (= rate_lo), per_gate: {id: {fail_lo, fail_hi, judged}}, how: {rule: count}}.
nlohmann::json rejudge_corpus(const std::vector<nlohmann::json>& records, const Settings& target);

// The tightest grid point whose controls all pass: the smallest c, then the smallest margin.
// Returns null when there is none.
nlohmann::json choose_setting(const nlohmann::json& settings);

}  // namespace kcv
