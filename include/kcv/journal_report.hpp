// Reports over a journal of records (or a red-team JSON): the same aggregated data rendered as a
// self-contained HTML page with charts, Markdown, CSV (one row per candidate × gate) and JUnit
// XML (one testcase per candidate, one failure per failed gate). docs/reports.md describes them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kcv {

// Records as the reports read them. A journal (JSON lines of records) is taken as it is; a
// red-team JSON (`kcv redteam --json`) is flattened into one record per red-team kernel and one
// per (control, contract), each annotated with `corpus_id`, `kcv_role` ("redteam" or "control"),
// and for the red team `target_gate` and `caught`.
struct JournalInput {
    std::string source;                   // the file read
    std::string kind;                     // "journal" | "redteam"
    std::vector<nlohmann::json> records;
    nlohmann::json redteam;               // the red-team JSON itself when kind == "redteam"
};
// Throws std::runtime_error naming the file when it cannot be read or holds no records.
JournalInput load_journal_input(const std::string& path);
// The red-team JSON flattened as above.
std::vector<nlohmann::json> redteam_records(const nlohmann::json& redteam);
bool is_redteam_json(const nlohmann::json& j);

// Names the reports use for a record: its corpus id (else the candidate path), its operator (the
// problem module's name for a Python candidate, else the contract id) and its role.
std::string record_id(const nlohmann::json& record);
std::string record_operator(const nlohmann::json& record);
std::string record_role(const nlohmann::json& record);   // "candidate" unless annotated

// The standard check's verdict at "tol_1e-2" or "tol_1e-4": 1 pass, 0 fail, -1 absent.
int standard_verdict(const nlohmann::json& record, const std::string& tolerance);

struct ReportOptions {
    std::string title = "kcv report";
    int worst_examples = 12;
    nlohmann::json redteam;       // a red-team JSON to show as the defences, or null
    nlohmann::json calibration;   // a `kcv calibrate --json` document, or null
};

// Everything the renderings share, computed once.
struct ReportData {
    std::string title, source;
    std::vector<nlohmann::json> records;
    nlohmann::json summary;       // aggregate(records)
    nlohmann::json worst;         // array of examples: {id, operator, gate, verdict, signature, evidence...}
    nlohmann::json redteam;       // as given, or null
    nlohmann::json calibration;   // as given, or null
};
ReportData build_report_data(const JournalInput& in, const ReportOptions& opts);

// The worst failures: first the single worst of every gate that failed anywhere (tolerance-free
// gates first), then the rest by severity, at most `n`, each (candidate, gate) once. Severity:
// a tolerance-free gate above a tolerance gate, then the larger ratio (NaN and Inf largest).
nlohmann::json worst_examples(const std::vector<nlohmann::json>& records, int n);

std::string render_report_html(const ReportData& d);
std::string render_report_markdown(const ReportData& d);
std::string render_report_csv(const ReportData& d);
std::string render_report_junit(const ReportData& d);
// A page of its own for a `kcv calibrate` document (the same charts as the report's section).
std::string render_calibration_page(const nlohmann::json& calibration);

// Writes report.html, report.md, report.csv and report.junit.xml into dir (created); returns
// their paths. `step` is told each file as it is written.
std::vector<std::string> write_report(const ReportData& d, const std::string& dir,
                                      const std::function<void(const std::string&, int, int)>& step = {});

// Pieces shared by the renderings.
namespace report_detail {
std::string percent(double rate);                   // "12.5%"
std::string number(double v);                      // shortest readable form; "nan", "inf"
double json_number(const nlohmann::json& j);        // numbers, or "nan"/"inf"/"-inf" strings
std::string coords_text(const nlohmann::json& coords);   // "(3, 17)"
}  // namespace report_detail

}  // namespace kcv
