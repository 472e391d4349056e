// Reading what the reports are made from: a journal of records, a single record, or a red-team
// JSON flattened into records; and the names a report gives each record.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "kcv/aggregate.hpp"
#include "kcv/journal_report.hpp"
#include "kcv/record.hpp"

namespace kcv {
namespace fs = std::filesystem;

bool is_redteam_json(const nlohmann::json& j) {
    return j.is_object() && j.contains("redteam") && j["redteam"].is_array() && j.contains("controls") &&
           j["controls"].is_array();
}

std::vector<nlohmann::json> redteam_records(const nlohmann::json& rt) {
    std::vector<nlohmann::json> out;
    for (const auto& e : rt.value("redteam", nlohmann::json::array())) {
        nlohmann::json r = e.value("record", nlohmann::json::object());
        r["corpus_id"] = e.value("name", record_id(r));
        r["kcv_role"] = "redteam";
        r["target_gate"] = e.value("target_gate", "");
        r["caught"] = e.value("caught", false);
        if (e.contains("description")) r["description"] = e["description"];
        out.push_back(std::move(r));
    }
    for (const auto& e : rt.value("controls", nlohmann::json::array())) {
        for (const auto& rec : e.value("records", nlohmann::json::array())) {
            nlohmann::json r = rec;
            r["corpus_id"] = e.value("name", std::string("control")) + " on " + rec.value("contract", "?");
            r["kcv_role"] = "control";
            out.push_back(std::move(r));
        }
    }
    return out;
}

namespace {

void check_versions(const std::vector<nlohmann::json>& records, const std::string& path) {
    for (size_t i = 0; i < records.size(); ++i) {
        const auto& r = records[i];
        if (!r.is_object()) throw std::runtime_error(path + ": record " + std::to_string(i + 1) + " is not an object");
        if (r.contains("kcv_record") && r["kcv_record"] != kRecordVersion) {
            throw std::runtime_error(path + ": record " + std::to_string(i + 1) + " has kcv_record " +
                                     r["kcv_record"].dump() + "; this kcv reads version " +
                                     std::to_string(kRecordVersion));
        }
    }
}

}  // namespace

JournalInput load_journal_input(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();

    JournalInput out;
    out.source = path;
    // A whole-file JSON document (a red-team JSON, one record written by `kcv verify --json`, or
    // an array of records) parses as one; a journal of several lines does not.
    const nlohmann::json whole = nlohmann::json::parse(text, nullptr, false);
    if (!whole.is_discarded() && is_redteam_json(whole)) {
        out.kind = "redteam";
        out.redteam = whole;
        out.records = redteam_records(whole);
    } else if (!whole.is_discarded() && whole.is_array()) {
        out.kind = "journal";
        out.records.assign(whole.begin(), whole.end());
    } else if (!whole.is_discarded() && whole.is_object() && whole.contains("gates")) {
        out.kind = "journal";
        out.records.push_back(whole);
    } else if (!whole.is_discarded()) {
        throw std::runtime_error("'" + path +
                                 "' is one JSON document but neither a record, an array of records nor a red-team "
                                 "JSON (kcv redteam --json)");
    } else {
        out.kind = "journal";
        out.records = read_journal(path);
    }
    if (out.records.empty()) throw std::runtime_error("'" + path + "' holds no records");
    check_versions(out.records, path);
    return out;
}

std::string record_id(const nlohmann::json& r) {
    if (r.contains("corpus_id") && r["corpus_id"].is_string()) return r["corpus_id"].get<std::string>();
    if (r.contains("candidate") && r["candidate"].is_object()) {
        const std::string p = r["candidate"].value("path", "");
        if (!p.empty()) return p;
    }
    if (r.contains("id") && r["id"].is_string()) return r["id"].get<std::string>();
    return "?";
}

std::string record_operator(const nlohmann::json& r) {
    // A Python candidate's task is its problem module; its contract id is derived from that name.
    for (const char* key : {"problem", "reference"}) {
        if (r.contains(key) && r[key].is_string() && !r[key].get<std::string>().empty())
            return fs::path(r[key].get<std::string>()).stem().string();
    }
    const std::string c = r.value("contract", "");
    return c.empty() ? "?" : c;
}

std::string record_role(const nlohmann::json& r) {
    if (r.contains("kcv_role") && r["kcv_role"].is_string()) return r["kcv_role"].get<std::string>();
    return "candidate";
}

int standard_verdict(const nlohmann::json& r, const std::string& tolerance) {
    if (!r.contains("standard_check") || !r["standard_check"].is_object()) return -1;
    const auto& s = r["standard_check"];
    if (!s.contains(tolerance) || !s[tolerance].is_boolean()) return -1;
    return s[tolerance].get<bool>() ? 1 : 0;
}

namespace report_detail {

std::string percent(double rate) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * rate);
    return buf;
}

std::string number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

double json_number(const nlohmann::json& j) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
        const std::string s = j.get<std::string>();
        if (s == "nan") return std::nan("");
        if (s == "inf") return INFINITY;
        if (s == "-inf") return -INFINITY;
    }
    return std::nan("");
}

std::string coords_text(const nlohmann::json& coords) {
    if (!coords.is_array() || coords.empty()) return "";
    std::string s = "(";
    for (size_t i = 0; i < coords.size(); ++i) s += (i ? ", " : "") + coords[i].dump();
    return s + ")";
}

}  // namespace report_detail
}  // namespace kcv
