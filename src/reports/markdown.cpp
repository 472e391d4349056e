// The report as Markdown: the same sections as the page, as tables a repository or an issue
// renders.
#include <algorithm>
#include <sstream>

#include "kcv/gate.hpp"
#include "kcv/journal_report.hpp"
#include "kcv/record.hpp"

namespace kcv {
namespace {

using report_detail::json_number;
using report_detail::number;
using report_detail::percent;

// A table cell: pipes and line breaks would end the cell.
std::string cell(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '|') o += "\\|";
        else if (c == '\n' || c == '\r') o += ' ';
        else o += c;
    }
    return o;
}

std::string join(const nlohmann::json& arr, const char* sep = ", ") {
    std::string s;
    if (!arr.is_array()) return s;
    for (const auto& x : arr) s += (s.empty() ? "" : sep) + (x.is_string() ? x.get<std::string>() : x.dump());
    return s;
}

// A fence longer than any backtick run inside, so a replay command cannot end its block.
std::string fenced(const std::string& text) {
    size_t longest = 0, run = 0;
    for (char c : text) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    const std::string fence(std::max<size_t>(3, longest + 1), '`');
    return fence + "\n" + text + "\n" + fence + "\n";
}

// A list item's text: multi-line messages (a worker's stderr) go into a block of their own.
std::string item(const std::string& text) {
    if (text.find('\n') == std::string::npos) return text;
    std::string body = text;
    while (!body.empty() && body.back() == '\n') body.pop_back();
    return "\n\n" + fenced(body);
}

std::string value_with_bits(const nlohmann::json& ev, const char* value, const char* bits) {
    if (!ev.contains(value)) return "";
    std::string s = number(json_number(ev[value]));
    const std::string b = ev.value(bits, "");
    if (!b.empty()) s += " (" + b + ")";
    return s;
}

void calibration_md(std::ostringstream& os, const nlohmann::json& cal) {
    os << "## Calibration\n\n";
    if (!cal.is_object() || !cal.contains("settings") || !cal["settings"].is_array()) {
        os << "No calibration given (`kcv calibrate --json cal.json`, then `--calibration cal.json`).\n\n";
        return;
    }
    os << "| c | factor | margin | controls passing | red team caught | corpus failure rate |\n"
          "|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& st : cal["settings"]) {
        const auto ctl = st.value("controls", nlohmann::json::object());
        const auto rt = st.value("redteam", nlohmann::json::object());
        const auto co = st.value("corpus", nlohmann::json::object());
        os << "| " << number(st.value("c", 0.0)) << " | " << number(st.value("envelope_factor", 0.0)) << " | "
           << number(st.value("ord03_margin", 0.0)) << " | " << ctl.value("passed", 0) << "/" << ctl.value("total", 0)
           << " | " << rt.value("caught", 0) << "/" << rt.value("total", 0) << " | ";
        if (co.contains("rate_lo")) {
            os << percent(co.value("rate_lo", 0.0));
            if (co.value("rate_hi", 0.0) != co.value("rate_lo", 0.0)) os << " – " << percent(co.value("rate_hi", 0.0));
        } else {
            os << "—";
        }
        os << " |\n";
    }
    os << "\n";
    if (cal.contains("chosen") && cal["chosen"].is_object()) {
        const auto& ch = cal["chosen"];
        os << "**Chosen:** c = " << number(ch.value("c", 0.0)) << ", envelope factor = "
           << number(ch.value("envelope_factor", 0.0)) << ", ORD-03 margin = " << number(ch.value("ord03_margin", 0.0))
           << " (" << ch.value("why", "") << ").\n\n";
    } else {
        os << "**No setting keeps every control passing.**\n\n";
    }
    if (cal.contains("gate_margins") && !cal["gate_margins"].empty()) {
        os << "| gate | threshold | largest control metric | where | margin |\n|---|---:|---:|---|---:|\n";
        for (const auto& gm : cal["gate_margins"]) {
            os << "| " << gm.value("gate", "") << " | " << number(json_number(gm.value("threshold", nlohmann::json(0))))
               << " | " << number(json_number(gm.value("largest_control_metric", nlohmann::json(0)))) << " | "
               << cell(gm.value("control", "")) << " | " << number(json_number(gm.value("margin", nlohmann::json(0))))
               << "× |\n";
        }
        os << "\n";
    }
}

}  // namespace

std::string render_report_markdown(const ReportData& d) {
    const auto& s = d.summary;
    const long long judged = s.value("judged", 0LL), failed = s["any_violation"].value("count", 0LL);
    std::ostringstream os;
    os << "# " << d.title << "\n\nFrom `" << d.source << "`: " << s.value("records", 0LL) << " records, " << judged
       << " judged, " << s.value("errors", 0LL) << " could not be judged. Any violation: "
       << percent(s["any_violation"].value("rate", 0.0)) << "; tolerance-free floor (strict): "
       << percent(s["floor"]["strict"].value("rate", 0.0)) << ".\n\n";

    os << "## Failure rate per gate\n\n| gate | name | tolerance-free | fail | pass | n/a | error | fail rate |\n"
          "|---|---|:-:|---:|---:|---:|---:|---:|\n";
    for (const auto& g : all_gates()) {
        const auto& x = s["gates"][g.id];
        os << "| " << g.id << " | " << g.name << " | " << (g.tolerance_free ? "yes" : "") << " | " << x.value("fail", 0LL)
           << " | " << x.value("pass", 0LL) << " | " << x.value("n/a", 0LL) << " | " << x.value("error", 0LL) << " | "
           << percent(x.value("fail_rate", 0.0)) << " |\n";
    }

    os << "\n## Tolerance-free floor per profile\n\n| profile | under the floor | rate |\n|---|---:|---:|\n";
    for (const auto& p : profile_names()) {
        os << "| " << p << " | " << s["floor"][p].value("count", 0LL) << " | " << percent(s["floor"][p].value("rate", 0.0))
           << " |\n";
    }

    os << "\n## Differential against the standard check\n\n";
    for (const auto& [tol, dd] : s["differential"].items()) {
        os << "At " << tol.substr(4) << " (rows: standard check; columns: kcv):\n\n"
           << "| | kcv clean | kcv violation |\n|---|---:|---:|\n"
           << "| standard pass | " << dd.value("standard_pass_kcv_clean", 0LL) << " | "
           << dd.value("standard_pass_kcv_violation", 0LL) << " |\n"
           << "| standard fail | " << dd.value("standard_fail_kcv_clean", 0LL) << " | "
           << dd.value("standard_fail_kcv_violation", 0LL) << " |\n\n"
           << "Among standard passes, " << percent(dd.value("violation_rate_among_standard_pass", 0.0))
           << " violate a gate.\n\n";
    }
    const auto& par = s["parity"];
    if (par.value("compared", 0LL) > 0) {
        os << "Parity with the shipped labels: " << par.value("agree", 0LL) << " of " << par.value("compared", 0LL)
           << " agree.\n\n";
        for (const auto& x : par["disagreements"]) {
            os << "- `" << x.value("id", "") << "`: label " << x["label"].dump() << "; " << x.value("reason", "")
               << "\n";
        }
        if (!par["disagreements"].empty()) os << "\n";
    }

    calibration_md(os, d.calibration);

    if (!d.redteam.is_null()) {
        const auto sum = d.redteam.value("summary", nlohmann::json::object());
        os << "## Defences\n\n" << sum.value("redteam_caught", 0) << " of " << sum.value("redteam_total", 0)
           << " red-team kernels failed their target gate; " << sum.value("controls_clean", 0) << " of "
           << sum.value("controls_total", 0) << " positive controls failed no gate.\n\n"
           << "| red-team kernel | target | caught | failed gates |\n|---|---|---|---|\n";
        for (const auto& e : d.redteam.value("redteam", nlohmann::json::array())) {
            os << "| " << cell(e.value("name", "")) << " | " << e.value("target_gate", "") << " | "
               << (e.value("caught", false) ? "yes" : "**missed**") << " | "
               << join(e.value("failed_gates", nlohmann::json::array()), " ") << " |\n";
        }
        os << "\n";
    }

    os << "## Worst examples\n\n";
    if (d.worst.empty()) os << "No gate failed.\n\n";
    for (const auto& ex : d.worst) {
        const auto& ev = ex["evidence"];
        os << "### " << ex.value("gate", "") << " (" << ex.value("gate_name", "") << ") — `" << ex.value("id", "")
           << "`\n\n";
        os << "- operator: " << ex.value("operator", "") << " (" << ex.value("role", "") << ")\n";
        os << "- signature: " << join(ex.value("signature", nlohmann::json::array())) << "\n";
        os << "- reason: " << item(ex.value("reason", "")) << "\n";
        if (ev.is_object() && !ev.empty()) {
            os << "- probe: `" << ev.value("probe", "") << "`\n";
            os << "- evidence: " << item(ev.value("signature", "")) << "\n";
            const std::string coords = report_detail::coords_text(ev.value("worst_coords", nlohmann::json::array()));
            if (!coords.empty()) os << "- element: " << ev.value("output", "") << " at " << coords << "\n";
            if (!ev.value("actual_bits", std::string()).empty()) {
                os << "- expected: `" << value_with_bits(ev, "expected", "expected_bits") << "`, actual: `"
                   << value_with_bits(ev, "actual", "actual_bits") << "`\n";
            }
            if (!ev.value("replay", std::string()).empty()) os << "\n" << fenced(ev.value("replay", ""));
        }
        os << "\n";
    }

    os << "## Every candidate\n\n| candidate | operator | failed gates | standard 1e-2 | standard 1e-4 |\n"
          "|---|---|---|:-:|:-:|\n";
    constexpr size_t kMaxRows = 500;
    for (size_t i = 0; i < d.records.size() && i < kMaxRows; ++i) {
        const auto& r = d.records[i];
        std::string failed_gates;
        for (const auto& g : r.value("gates", nlohmann::json::array()))
            if (g.value("verdict", "") == "fail") failed_gates += (failed_gates.empty() ? "" : " ") + g.value("id", "");
        if (r.contains("error") && r["error"].is_object())
            failed_gates = "not judged: " + r["error"].value("code", std::string("error"));
        auto std_cell = [&](const char* tol) {
            const int v = standard_verdict(r, tol);
            return v < 0 ? std::string("—") : std::string(v ? "pass" : "fail");
        };
        os << "| " << cell(record_id(r)) << " | " << cell(record_operator(r)) << " | " << cell(failed_gates) << " | "
           << std_cell("tol_1e-2") << " | " << std_cell("tol_1e-4") << " |\n";
    }
    if (d.records.size() > kMaxRows)
        os << "\n" << (d.records.size() - kMaxRows) << " more candidates are in report.csv.\n";
    os << "\n" << (judged - failed) << " passed, " << failed << " failed\n";
    return os.str();
}

}  // namespace kcv
