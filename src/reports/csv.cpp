// The report as CSV (RFC 4180): one row per candidate × gate, every gate of every record, so a
// spreadsheet or a dataframe can slice verdicts any way.
#include <map>
#include <sstream>

#include "kcv/gate.hpp"
#include "kcv/journal_report.hpp"
#include "kcv/record.hpp"

namespace kcv {
namespace {

std::string field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}

std::string joined(const nlohmann::json& arr, const char* sep) {
    std::string s;
    if (!arr.is_array()) return s;
    for (const auto& x : arr) s += (s.empty() ? "" : sep) + (x.is_string() ? x.get<std::string>() : x.dump());
    return s;
}

std::string num_field(const nlohmann::json& j) {
    if (j.is_null()) return "";
    return report_detail::number(report_detail::json_number(j));
}

const char* kColumns[] = {"candidate", "operator", "contract", "role", "gate", "gate_name", "tolerance_free",
                          "verdict", "signature", "code", "metric", "reason", "probe", "output", "worst_coords",
                          "expected", "expected_bits", "actual", "actual_bits", "ratio", "replay",
                          "standard_1e-2", "standard_1e-4", "under_floor_strict", "record_error"};

}  // namespace

std::string render_report_csv(const ReportData& d) {
    std::ostringstream os;
    bool first = true;
    for (const char* c : kColumns) {
        os << (first ? "" : ",") << c;
        first = false;
    }
    os << "\r\n";
    for (const auto& r : d.records) {
        std::map<std::string, nlohmann::json> by_id;
        for (const auto& g : r.value("gates", nlohmann::json::array())) by_id[g.value("id", "")] = g;
        auto std_field = [&](const char* tol) {
            const int v = standard_verdict(r, tol);
            return v < 0 ? std::string() : std::string(v ? "pass" : "fail");
        };
        const std::string floor_strict =
            r.contains("floor") && r["floor"].is_object() && r["floor"].contains("strict") &&
                    r["floor"]["strict"].is_boolean()
                ? (r["floor"]["strict"].get<bool>() ? "true" : "false")
                : "";
        const std::string record_error =
            r.contains("error") && r["error"].is_object() ? r["error"].value("code", std::string("error")) : "";
        for (const auto& def : all_gates()) {
            auto it = by_id.find(def.id);
            const nlohmann::json g = it == by_id.end() ? nlohmann::json::object() : it->second;
            const auto ev_list = g.value("evidence", nlohmann::json::array());
            const nlohmann::json ev = ev_list.empty() ? nlohmann::json::object() : ev_list.front();
            const std::vector<std::string> row = {
                record_id(r),
                record_operator(r),
                r.value("contract", ""),
                record_role(r),
                def.id,
                def.name,
                def.tolerance_free ? "true" : "false",
                it == by_id.end() ? "not-run" : g.value("verdict", "error"),
                joined(g.value("signature", nlohmann::json::array()), ";"),
                g.value("code", ""),
                num_field(g.value("metric", nlohmann::json())),
                g.value("reason", ""),
                ev.value("probe", ""),
                ev.value("output", ""),
                joined(ev.value("worst_coords", nlohmann::json::array()), " "),
                num_field(ev.value("expected", nlohmann::json())),
                ev.value("expected_bits", ""),
                num_field(ev.value("actual", nlohmann::json())),
                ev.value("actual_bits", ""),
                num_field(ev.value("ratio", nlohmann::json())),
                ev.value("replay", ""),
                std_field("tol_1e-2"),
                std_field("tol_1e-4"),
                floor_strict,
                record_error,
            };
            for (size_t i = 0; i < row.size(); ++i) os << (i ? "," : "") << field(row[i]);
            os << "\r\n";
        }
    }
    return os.str();
}

}  // namespace kcv
