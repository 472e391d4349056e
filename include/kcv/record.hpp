// The verdict record: one versioned JSON document per candidate. docs/record.md documents
// every field. Also the profiles of GATES.md and the tolerance-free floor under each.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/gate.hpp"

namespace kcv {

constexpr int kRecordVersion = 1;

struct Record {
    std::string contract_id;
    std::string candidate;          // path or name
    std::string candidate_hash;   // content hash (XXH3-128, hex)
    Settings settings;
    std::vector<GateResult> gates;  // all twelve, in order
    std::string error;              // set when the candidate could not be judged at all
    std::string error_code;         // "load-failed", "bad-contract", ...
    double seconds = 0;
    nlohmann::json extra;           // e.g. the standard check beside the gates
};

// Profiles: strict, ftz, fast-math, relaxed.
const std::vector<std::string>& profile_names();
// True when a failed tolerance-free gate has a signature class the profile does not accept
// (the candidate falls under the floor). A gate that failed with no class counts in every
// profile.
bool under_floor(const Record& r, const std::string& profile);
bool any_violation(const Record& r);   // any gate failed

nlohmann::json to_json(const Record& r);
Record record_from_json(const nlohmann::json& j);

}  // namespace kcv
