// The report page of a journal: self-contained (inline CSS and SVG, no script, no network), with
// the charts of DESIGN.md's report stage and the worst failures with their evidence.
#include <cmath>
#include <map>
#include <sstream>

#include "kcv/gate.hpp"
#include "kcv/journal_report.hpp"
#include "kcv/record.hpp"
#include "reports/journal_svg.hpp"

namespace kcv {
namespace {

using report_detail::json_number;
using report_detail::number;
using report_detail::percent;
using svg::escape;

const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:1240px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.sub{color:#666;margin-top:0}
table{border-collapse:collapse;margin:.8em 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{background:#dff3df}.fail{background:#f8d0d0;font-weight:bold}.na{color:#999}.error{background:#fbefc4}
.kpi{display:flex;gap:1em;flex-wrap:wrap;margin:1em 0}.kpi div{border:1px solid #ddd;border-radius:6px;padding:.5em 1em;min-width:10em}
.kpi b{display:block;font-size:1.5em}.charts{display:flex;gap:2em;flex-wrap:wrap;align-items:flex-start}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f6f6f6}code{padding:1px 3px}
pre{padding:.5em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.example{border:1px solid #ddd;border-left:4px solid #c0392b;border-radius:4px;padding:.2em 1em;margin:1em 0}
.example.tf{border-left-color:#7b1f1f}.bad{color:#a00}.note{color:#555}.grid td{padding:2px 4px;font-size:12px}
svg.chart{max-width:100%;height:auto}.grid th{white-space:nowrap}.wide{overflow-x:auto}figure{margin:.5em 0}
)";

std::string td_verdict(const std::string& v, const std::string& title) {
    const std::string cls = v == "n/a" ? "na" : v;
    return "<td class=\"" + escape(cls) + "\" title=\"" + escape(title) + "\">" + escape(v) + "</td>";
}

std::string join(const nlohmann::json& arr, const char* sep = ", ") {
    std::string s;
    if (!arr.is_array()) return s;
    for (const auto& x : arr) s += (s.empty() ? "" : sep) + (x.is_string() ? x.get<std::string>() : x.dump());
    return s;
}

std::string gate_rate_chart(const nlohmann::json& summary) {
    std::vector<svg::Bar> bars;
    for (const auto& g : all_gates()) {
        const auto& s = summary["gates"][g.id];
        const long long fail = s.value("fail", 0LL), pass = s.value("pass", 0LL);
        svg::Bar b;
        b.label = g.id;
        b.value = s.value("fail_rate", 0.0);
        b.text = percent(b.value) + " (" + std::to_string(fail) + "/" + std::to_string(fail + pass) + ")";
        b.tooltip = std::string(g.id) + " " + g.name + ": " + b.text + "; n/a " + std::to_string(s.value("n/a", 0LL)) +
                    ", error " + std::to_string(s.value("error", 0LL));
        b.color = g.tolerance_free ? "#7b1f1f" : "#d35400";
        bars.push_back(b);
    }
    return svg::bar_chart("failure rate per gate", bars, 1.0);
}

std::string floor_chart(const nlohmann::json& summary) {
    std::vector<svg::Bar> bars;
    const long long judged = summary.value("judged", 0LL);
    for (const auto& p : profile_names()) {
        const auto& f = summary["floor"][p];
        svg::Bar b;
        b.label = p;
        b.value = f.value("rate", 0.0);
        b.text = percent(b.value) + " (" + std::to_string(f.value("count", 0LL)) + "/" + std::to_string(judged) + ")";
        b.color = "#7b1f1f";
        bars.push_back(b);
    }
    svg::Bar any;
    any.label = "any gate";
    any.value = summary["any_violation"].value("rate", 0.0);
    any.text = percent(any.value) + " (" + std::to_string(summary["any_violation"].value("count", 0LL)) + "/" +
               std::to_string(judged) + ")";
    any.tooltip = "any violation (tolerance gates included): " + any.text;
    any.color = "#d35400";
    bars.push_back(any);
    return svg::bar_chart("tolerance-free floor per profile", bars, 1.0);
}

std::string differential_charts(const nlohmann::json& summary) {
    std::ostringstream os;
    long long compared = 0;
    for (const auto& [tol, d] : summary["differential"].items()) {
        compared += d.value("standard_pass_kcv_clean", 0LL) + d.value("standard_pass_kcv_violation", 0LL) +
                    d.value("standard_fail_kcv_clean", 0LL) + d.value("standard_fail_kcv_violation", 0LL);
    }
    if (compared == 0) {
        os << "<p class=\"note\">No record carries a standard check (native candidates and red-team records have "
              "none), so there is no differential to draw.</p>";
    }
    os << "<div class=\"charts\">";
    for (const auto& [tol, d] : summary["differential"].items()) {
        svg::Matrix2 m;
        m.title = "standard check at " + tol.substr(4) + " vs kcv";
        m.row_axis = "standard";
        m.col_axis = "kcv";
        m.rows[0] = "pass";
        m.rows[1] = "fail";
        m.cols[0] = "clean";
        m.cols[1] = "violation";
        m.counts[0][0] = d.value("standard_pass_kcv_clean", 0LL);
        m.counts[0][1] = d.value("standard_pass_kcv_violation", 0LL);
        m.counts[1][0] = d.value("standard_fail_kcv_clean", 0LL);
        m.counts[1][1] = d.value("standard_fail_kcv_violation", 0LL);
        m.alarm[0][1] = true;
        m.alarm[1][0] = true;
        os << "<figure>" << svg::matrix_chart(m) << "<figcaption>among standard passes, "
           << percent(d.value("violation_rate_among_standard_pass", 0.0)) << " violate a gate</figcaption></figure>";
    }
    os << "</div>";
    return os.str();
}

const char* kSeriesColors[] = {"#1f77b4", "#d35400", "#2e8b57", "#8e44ad", "#7f8c8d"};

// Calibration curves: one chart per quantity, the margin on x and one line per c.
std::string calibration_section(const nlohmann::json& cal) {
    std::ostringstream os;
    if (!cal.is_object() || !cal.contains("settings") || !cal["settings"].is_array()) {
        os << "<p class=\"note\">No calibration given: run <code>kcv calibrate --json cal.json</code> and pass "
              "<code>--calibration cal.json</code>.</p>";
        return os.str();
    }
    const nlohmann::json grid = cal.value("grid", nlohmann::json::object());
    std::vector<double> cs = grid.value("c", std::vector<double>{});
    std::vector<double> margins = grid.value("ord03_margin", std::vector<double>{});
    struct Quantity {
        const char* title;
        const char* key;
        const char* rate;
        const char* lo;
        const char* hi;
    };
    const Quantity qs[] = {{"control pass rate (must stay 100%)", "controls", "rate", "", ""},
                           {"red-team catch rate", "redteam", "rate", "", ""},
                           {"corpus failure rate", "corpus", "rate", "rate_lo", "rate_hi"}};
    os << "<div class=\"charts\">";
    for (const Quantity& q : qs) {
        svg::LineChart lc;
        lc.title = q.title;
        lc.x_label = "ORD-03 margin";
        lc.y_label = "rate";
        lc.x_ticks = margins;
        bool any = false;
        for (size_t ci = 0; ci < cs.size(); ++ci) {
            svg::Series s;
            char name[48];
            std::snprintf(name, sizeof name, "c = %g", cs[ci]);
            s.name = name;
            s.color = kSeriesColors[ci % 5];
            for (double m : margins) {
                for (const auto& st : cal["settings"]) {
                    if (st.value("c", 0.0) != cs[ci] || st.value("ord03_margin", 0.0) != m) continue;
                    if (!st.contains(q.key) || !st[q.key].is_object() || !st[q.key].contains(q.rate)) continue;
                    const auto& v = st[q.key];
                    s.points.push_back({m, v.value(q.rate, 0.0)});
                    if (*q.lo) s.band.push_back({v.value(q.lo, 0.0), v.value(q.hi, 0.0)});
                }
            }
            if (!s.points.empty()) any = true;
            lc.series.push_back(std::move(s));
        }
        if (any) os << "<figure>" << svg::line_chart(lc) << "</figure>";
    }
    os << "</div>";
    if (cal.contains("chosen") && cal["chosen"].is_object()) {
        const auto& ch = cal["chosen"];
        os << "<p><b>Chosen setting:</b> c = " << number(ch.value("c", 0.0))
           << ", envelope factor = " << number(ch.value("envelope_factor", 0.0))
           << ", ORD-03 margin = " << number(ch.value("ord03_margin", 0.0)) << " (" << escape(ch.value("why", ""))
           << ").</p>";
    } else {
        os << "<p class=\"bad\"><b>No setting keeps every control passing.</b></p>";
    }
    os << "<table><tr><th>c</th><th>factor</th><th>margin</th><th>controls</th><th>red team caught</th>"
          "<th>corpus failure rate</th></tr>";
    for (const auto& st : cal["settings"]) {
        const auto& ctl = st.value("controls", nlohmann::json::object());
        const auto& rt = st.value("redteam", nlohmann::json::object());
        const auto& co = st.value("corpus", nlohmann::json::object());
        const bool clean = ctl.value("passed", 0) == ctl.value("total", -1);
        os << "<tr><td class=\"num\">" << number(st.value("c", 0.0)) << "</td><td class=\"num\">"
           << number(st.value("envelope_factor", 0.0)) << "</td><td class=\"num\">"
           << number(st.value("ord03_margin", 0.0)) << "</td><td class=\"" << (clean ? "pass" : "fail") << "\">"
           << ctl.value("passed", 0) << "/" << ctl.value("total", 0) << "</td><td>" << rt.value("caught", 0) << "/"
           << rt.value("total", 0) << "</td><td>";
        if (co.contains("rate_lo")) {
            os << percent(co.value("rate_lo", 0.0));
            if (co.value("rate_hi", 0.0) != co.value("rate_lo", 0.0)) os << " – " << percent(co.value("rate_hi", 0.0));
        } else {
            os << "—";
        }
        os << "</td></tr>";
    }
    os << "</table>";
    if (cal.contains("gate_margins") && !cal["gate_margins"].empty()) {
        os << "<h3>Each gate's margin over the positive controls</h3><p class=\"note\">margin = the gate's threshold "
              "/ the largest metric any control reached on it (at the chosen setting).</p>"
              "<table><tr><th>gate</th><th>threshold</th><th>largest control metric</th><th>where</th>"
              "<th>margin</th></tr>";
        for (const auto& gm : cal["gate_margins"]) {
            os << "<tr><td>" << escape(gm.value("gate", "")) << "</td><td class=\"num\">"
               << number(json_number(gm.value("threshold", nlohmann::json(0)))) << "</td><td class=\"num\">"
               << number(json_number(gm.value("largest_control_metric", nlohmann::json(0)))) << "</td><td>"
               << escape(gm.value("control", "")) << "</td><td class=\"num\">"
               << number(json_number(gm.value("margin", nlohmann::json(0)))) << "×</td></tr>";
        }
        os << "</table>";
    }
    if (cal.contains("method")) {
        os << "<h3>What was recomputed</h3><ul>";
        for (const auto& [k, v] : cal["method"].items()) {
            os << "<li><b>" << escape(k) << ":</b> " << escape(v.is_string() ? v.get<std::string>() : v.dump())
               << "</li>";
        }
        os << "</ul>";
    }
    return os.str();
}

std::string defences_section(const nlohmann::json& rt) {
    std::ostringstream os;
    const auto& s = rt.value("summary", nlohmann::json::object());
    os << "<p>" << s.value("redteam_caught", 0) << " of " << s.value("redteam_total", 0)
       << " red-team kernels failed their target gate; " << s.value("controls_clean", 0) << " of "
       << s.value("controls_total", 0) << " positive controls failed no gate.</p>";
    os << "<table><tr><th>red-team kernel</th><th>contract</th><th>target</th><th>caught</th><th>failed gates</th></tr>";
    for (const auto& e : rt.value("redteam", nlohmann::json::array())) {
        const bool caught = e.value("caught", false);
        os << "<tr><td title=\"" << escape(e.value("description", "")) << "\">" << escape(e.value("name", ""))
           << "</td><td>" << escape(e.value("contract", "")) << "</td><td>" << escape(e.value("target_gate", ""))
           << "</td><td class=\"" << (caught ? "pass" : "fail") << "\">" << (caught ? "yes" : "missed") << "</td><td>"
           << escape(join(e.value("failed_gates", nlohmann::json::array()), " ")) << "</td></tr>";
    }
    os << "</table><table><tr><th>positive control</th><th>contracts</th><th>failed gates</th></tr>";
    for (const auto& e : rt.value("controls", nlohmann::json::array())) {
        const bool clean = e.value("clean", false);
        os << "<tr><td>" << escape(e.value("name", "")) << "</td><td>"
           << escape(join(e.value("contracts", nlohmann::json::array()), " ")) << "</td><td class=\""
           << (clean ? "pass" : "fail") << "\">"
           << (clean ? "none" : escape(join(e.value("failed_gates", nlohmann::json::array()), " "))) << "</td></tr>";
    }
    os << "</table>";
    return os.str();
}

std::string value_with_bits(const nlohmann::json& ev, const char* value, const char* bits) {
    if (!ev.contains(value)) return "";
    std::string s = number(json_number(ev[value]));
    const std::string b = ev.value(bits, "");
    if (!b.empty()) s += " (" + b + ")";
    return s;
}

std::string example_html(const nlohmann::json& ex) {
    std::ostringstream os;
    const auto& ev = ex["evidence"];
    os << "<div class=\"example" << (ex.value("tolerance_free", false) ? " tf" : "") << "\">";
    os << "<h3>" << escape(ex.value("gate", "")) << " <small>" << escape(ex.value("gate_name", "")) << "</small> — "
       << escape(ex.value("id", "")) << " <small>(" << escape(ex.value("operator", "")) << ", "
       << escape(ex.value("role", "")) << ")</small></h3>";
    os << "<table>";
    auto row = [&](const char* k, const std::string& v, bool code = false) {
        if (v.empty()) return;
        os << "<tr><th>" << k << "</th><td>" << (code ? "<code>" : "") << escape(v) << (code ? "</code>" : "")
           << "</td></tr>";
    };
    row("signature", join(ex.value("signature", nlohmann::json::array())));
    row("reason", ex.value("reason", ""));
    if (ev.is_object() && !ev.empty()) {
        row("probe", ev.value("probe", ""), true);
        if (ev.value("signature", std::string()) != ex.value("reason", std::string()))
            row("evidence", ev.value("signature", ""));
        std::string where = ev.value("output", "");
        const std::string coords = report_detail::coords_text(ev.value("worst_coords", nlohmann::json::array()));
        if (!coords.empty()) where += " at " + coords;
        if (ev.value("worst_index", -1LL) >= 0) where += " (flat index " + std::to_string(ev.value("worst_index", -1LL)) + ")";
        row("element", where);
        if (!ev.value("actual_bits", std::string()).empty() || !ev.value("expected_bits", std::string()).empty()) {
            row("expected", value_with_bits(ev, "expected", "expected_bits"), true);
            row("actual", value_with_bits(ev, "actual", "actual_bits"), true);
            if (ev.contains("detail") && ev["detail"].is_object() && ev["detail"].contains("expected_f64")) {
                row("y* in float64",
                    number(json_number(ev["detail"]["expected_f64"])) + " (" +
                        ev["detail"].value("expected_f64_bits", std::string()) + ")",
                    true);
            }
        }
        if (ev.contains("ratio") && json_number(ev["ratio"]) != 0) row("ratio", number(json_number(ev["ratio"])));
    }
    if (ex.contains("standard_check")) row("standard check", ex["standard_check"].dump());
    os << "</table>";
    if (ev.is_object() && !ev.value("replay", std::string()).empty())
        os << "<p>replay:</p><pre>" << escape(ev.value("replay", "")) << "</pre>";
    os << "</div>";
    return os.str();
}

std::string candidates_table(const std::vector<nlohmann::json>& records) {
    constexpr size_t kMaxRows = 500;
    std::ostringstream os;
    os << "<div class=\"wide\"><table class=\"grid\"><tr><th>candidate</th><th>operator</th>";
    for (const auto& g : all_gates()) os << "<th title=\"" << escape(g.name) << "\">" << g.id << "</th>";
    os << "<th>standard 1e-2</th><th>standard 1e-4</th></tr>";
    for (size_t i = 0; i < records.size() && i < kMaxRows; ++i) {
        const auto& r = records[i];
        os << "<tr><td>" << escape(record_id(r)) << "</td><td>" << escape(record_operator(r)) << "</td>";
        std::map<std::string, nlohmann::json> by_id;
        for (const auto& g : r.value("gates", nlohmann::json::array())) by_id[g.value("id", "")] = g;
        for (const auto& g : all_gates()) {
            auto it = by_id.find(g.id);
            if (it == by_id.end()) {
                os << "<td class=\"na\">—</td>";
                continue;
            }
            std::string title = it->second.value("reason", "");
            const auto ev = it->second.value("evidence", nlohmann::json::array());
            if (!ev.empty()) title = ev.front().value("signature", title);
            os << td_verdict(it->second.value("verdict", "error"), title);
        }
        for (const char* tol : {"tol_1e-2", "tol_1e-4"}) {
            const int s = standard_verdict(r, tol);
            os << (s < 0 ? "<td class=\"na\">—</td>" : td_verdict(s ? "pass" : "fail", ""));
        }
        os << "</tr>";
    }
    os << "</table></div>";
    if (records.size() > kMaxRows)
        os << "<p class=\"note\">" << (records.size() - kMaxRows) << " more candidates are in report.csv.</p>";
    return os.str();
}

std::string page_head(const std::string& title) {
    return "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
           "content=\"width=device-width,initial-scale=1\"><title>" +
           escape(title) + "</title><style>" + kStyle + "</style></head><body>";
}

}  // namespace

std::string render_report_html(const ReportData& d) {
    const auto& s = d.summary;
    const long long judged = s.value("judged", 0LL), failed = s["any_violation"].value("count", 0LL);
    std::ostringstream os;
    os << page_head(d.title);
    os << "<h1>" << escape(d.title) << "</h1><p class=\"sub\">from <code>" << escape(d.source) << "</code>: "
       << s.value("records", 0LL) << " records, " << judged << " judged, " << s.value("errors", 0LL)
       << " could not be judged</p>";
    os << "<div class=\"kpi\"><div>any violation<b>" << percent(s["any_violation"].value("rate", 0.0))
       << "</b></div><div>tolerance-free floor (strict)<b>" << percent(s["floor"]["strict"].value("rate", 0.0))
       << "</b></div><div>passed / failed<b>" << (judged - failed) << " / " << failed << "</b></div></div>";

    os << "<h2 id=\"gates\">Failure rate per gate</h2><p class=\"note\">Over the candidates judged pass or fail on each gate; "
          "n/a and errors are counted apart. Dark bars: tolerance-free gates.</p>"
       << gate_rate_chart(s);
    os << "<table><tr><th>gate</th><th>name</th><th>tolerance-free</th><th>fail</th><th>pass</th><th>n/a</th>"
          "<th>error</th><th>fail rate</th></tr>";
    for (const auto& g : all_gates()) {
        const auto& x = s["gates"][g.id];
        os << "<tr><td>" << g.id << "</td><td>" << escape(g.name) << "</td><td>" << (g.tolerance_free ? "yes" : "")
           << "</td><td class=\"num\">" << x.value("fail", 0LL) << "</td><td class=\"num\">" << x.value("pass", 0LL)
           << "</td><td class=\"num\">" << x.value("n/a", 0LL) << "</td><td class=\"num\">" << x.value("error", 0LL)
           << "</td><td class=\"num\">" << percent(x.value("fail_rate", 0.0)) << "</td></tr>";
    }
    os << "</table>";

    os << "<h2 id=\"floor\">Tolerance-free floor per profile</h2><p class=\"note\">The share of judged candidates failing at "
          "least one of ORD-02, EXC-01, EXC-02, RES-01, RES-02 with a signature class the profile does not "
          "accept.</p>"
       << floor_chart(s);

    os << "<h2 id=\"differential\">Differential against the standard check</h2>" << differential_charts(s);
    const auto& par = s["parity"];
    if (par.value("compared", 0LL) > 0) {
        os << "<p>Parity of the standard check with the corpus's own labels: " << par.value("agree", 0LL) << " of "
           << par.value("compared", 0LL) << " agree.</p>";
        if (!par["disagreements"].empty()) {
            os << "<table><tr><th>candidate</th><th>label</th><th>why kcv's standard check differs</th></tr>";
            for (const auto& x : par["disagreements"]) {
                os << "<tr><td>" << escape(x.value("id", "")) << "</td><td>" << x["label"].dump() << "</td><td>"
                   << escape(x.value("reason", "")) << "</td></tr>";
            }
            os << "</table>";
        }
    }

    os << "<h2 id=\"calibration\">Calibration</h2>" << calibration_section(d.calibration);
    if (!d.redteam.is_null()) os << "<h2 id=\"defences\">Defences: red team and positive controls</h2>" << defences_section(d.redteam);

    os << "<h2 id=\"worst\">Worst examples</h2>";
    if (d.worst.empty()) os << "<p>No gate failed.</p>";
    for (const auto& ex : d.worst) os << example_html(ex);

    os << "<h2 id=\"candidates\">Every candidate</h2>" << candidates_table(d.records);
    os << "<p>" << (judged - failed) << " passed, " << failed << " failed</p>";
    os << "</body></html>\n";
    return os.str();
}

std::string render_calibration_page(const nlohmann::json& cal) {
    std::ostringstream os;
    os << page_head("kcv calibration") << "<h1>kcv calibration sweep</h1>";
    if (cal.contains("grid")) {
        auto values = [](const nlohmann::json& arr) {
            std::string s;
            for (const auto& x : arr) s += (s.empty() ? "" : ", ") + number(json_number(x));
            return s;
        };
        os << "<p class=\"sub\">c ∈ {" << values(cal["grid"].value("c", nlohmann::json::array())) << "}, ORD-03 margin ∈ {"
           << values(cal["grid"].value("ord03_margin", nlohmann::json::array())) << "}, envelope factor = c/2"
           << (cal.value("quick", false) ? "; red team and controls run with --quick" : "") << "</p>";
    }
    os << calibration_section(cal) << "</body></html>\n";
    return os.str();
}

}  // namespace kcv
