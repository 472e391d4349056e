// The record: JSON form, the profiles of GATES.md and the tolerance-free floor under each.
#include "kcv/record.hpp"

#include <algorithm>
#include <set>

namespace kcv {
namespace {

// Signature classes each profile accepts. "run-to-run" under relaxed is conditional (below).
const std::map<std::string, std::set<std::string>>& accepted() {
    static const std::map<std::string, std::set<std::string>> a = {
        {"strict", {}},
        {"ftz", {"ftz-output", "daz-input"}},
        {"fast-math", {"ftz-output", "daz-input", "nan-swallowed", "inf-lost"}},
        {"relaxed", {"ftz-output", "daz-input", "nan-swallowed", "inf-lost"}},
    };
    return a;
}

bool tolerance_free(const std::string& id) {
    const GateDef* g = find_gate(id);
    return g && g->tolerance_free;
}

}  // namespace

const std::vector<std::string>& profile_names() {
    static const std::vector<std::string> names = {"strict", "ftz", "fast-math", "relaxed"};
    return names;
}

bool under_floor(const Record& r, const std::string& profile) {
    const auto& ok = accepted().at(profile);
    for (const auto& g : r.gates) {
        if (g.verdict != Verdict::fail || !tolerance_free(g.id)) continue;
        if (g.signature.empty()) return true;
        for (const auto& cls : g.signature) {
            if (ok.count(cls)) continue;
            // relaxed accepts run-to-run nondeterminism only when every run passes ORD-01.
            if (profile == "relaxed" && cls == "run-to-run" && g.detail.is_object() &&
                g.detail.value("runs_pass_ord01", false))
                continue;
            return true;
        }
    }
    return false;
}

bool any_violation(const Record& r) {
    return std::any_of(r.gates.begin(), r.gates.end(), [](const GateResult& g) { return g.verdict == Verdict::fail; });
}

nlohmann::json to_json(const Record& r) {
    nlohmann::json gates = nlohmann::json::array();
    std::vector<std::string> failed;
    for (const auto& g : r.gates) {
        gates.push_back(to_json(g));
        if (g.verdict == Verdict::fail) failed.push_back(g.id);
    }
    nlohmann::json floor = nlohmann::json::object();
    for (const auto& p : profile_names()) floor[p] = under_floor(r, p);
    nlohmann::json j = {
        {"kcv_record", kRecordVersion},
        {"kcv_version", KCV_VERSION},
        {"contract", r.contract_id},
        {"candidate", {{"path", r.candidate}, {"xxh3_128", r.candidate_hash}}},
        {"settings", to_json(r.settings)},
        {"gates", gates},
        {"failed_gates", failed},
        {"floor", floor},
        {"any_violation", any_violation(r)},
        {"seconds", r.seconds},
    };
    if (!r.error.empty()) j["error"] = {{"code", r.error_code}, {"message", r.error}};
    if (!r.extra.is_null()) {
        for (const auto& [k, v] : r.extra.items()) j[k] = v;
    }
    return j;
}

Record record_from_json(const nlohmann::json& j) {
    Record r;
    r.contract_id = j.value("contract", "");
    if (j.contains("candidate")) {
        r.candidate = j["candidate"].value("path", "");
        r.candidate_hash = j["candidate"].value("xxh3_128", "");
    }
    if (j.contains("settings")) {
        const auto& s = j["settings"];
        r.settings.seed = s.value("seed", uint64_t(0));
        r.settings.c = s.value("c", 4.0);
        r.settings.envelope_factor = s.value("envelope_factor", 2.0);
        r.settings.ord03_margin = s.value("ord03_margin", 1.2);
        r.settings.quick = s.value("quick", false);
    }
    for (const auto& g : j.value("gates", nlohmann::json::array())) r.gates.push_back(gate_result_from_json(g));
    if (j.contains("error")) {
        r.error = j["error"].value("message", "");
        r.error_code = j["error"].value("code", "");
    }
    r.seconds = j.value("seconds", 0.0);
    static const std::set<std::string> known = {"kcv_record", "kcv_version", "contract", "candidate", "settings",
                                                "gates", "failed_gates", "floor", "any_violation", "seconds", "error"};
    for (const auto& [k, v] : j.items()) {
        if (!known.count(k)) r.extra[k] = v;
    }
    return r;
}

}  // namespace kcv
