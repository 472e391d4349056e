// Aggregation over a journal of records: per-gate failure rates, the tolerance-free floor under
// each profile, the any-violation rate, the 2×2 differential against the standard check at both
// tolerances, and parity of the standard check with labels the corpus ships.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kcv {

// Reads a journal (JSON lines). A truncated last line (an interrupted write) is ignored.
std::vector<nlohmann::json> read_journal(const std::string& path);

// The summary, as JSON (docs/record.md describes its fields).
nlohmann::json aggregate(const std::vector<nlohmann::json>& records);

// A console rendering of a summary, ending with a plain summary line.
std::string render_summary(const nlohmann::json& summary);

}  // namespace kcv
