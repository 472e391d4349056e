// The demo's report page: self-contained (inline CSS and SVG, no network), readable without
// kcv installed.
#include <sstream>

#include "kcv/report.hpp"

namespace kcv {

std::string html_escape(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

namespace {

const char* kStyle = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:left}
th{background:#f4f4f4}.pass{background:#dff3df}.fail{background:#f8d0d0;font-weight:bold}
.na{color:#999}.error{background:#fbefc4}.target{outline:3px solid #a00;outline-offset:-3px}
code{font:12px ui-monospace,monospace;background:#f6f6f6;padding:1px 3px}
.ok{color:#176317;font-weight:bold}.bad{color:#a00;font-weight:bold}
)";

std::string cell(const GateResult& g, bool target) {
    std::string cls = g.verdict == Verdict::na ? "na" : name(g.verdict);
    if (target) cls += " target";
    std::string title = g.reason;
    if (!g.evidence.empty()) title = g.evidence.front().signature;
    return "<td class=\"" + cls + "\" title=\"" + html_escape(title) + "\">" + name(g.verdict) + "</td>";
}

std::string gate_header() {
    std::string s;
    for (const auto& g : all_gates()) s += std::string("<th title=\"") + g.name + "\">" + g.id + "</th>";
    return s;
}

std::string bar_chart(const RedteamReport& r) {
    // Red-team failures per gate: a plain horizontal bar chart in SVG.
    std::vector<std::pair<std::string, int>> counts;
    int maxc = 1;
    for (const auto& g : all_gates()) {
        int n = 0;
        for (const auto& e : r.redteam) {
            for (const auto& f : e.failed_gates) n += f == g.id;
        }
        counts.emplace_back(g.id, n);
        maxc = std::max(maxc, n);
    }
    std::ostringstream os;
    const int h = 22, w = 520;
    os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << (w + 120) << "\" height=\""
       << (counts.size() * h + 10) << "\" role=\"img\" aria-label=\"red-team failures per gate\">";
    for (size_t i = 0; i < counts.size(); ++i) {
        const int bw = counts[i].second * w / maxc;
        const int y = static_cast<int>(i) * h + 5;
        os << "<text x=\"0\" y=\"" << (y + 15) << "\" font-size=\"13\">" << counts[i].first << "</text>"
           << "<rect x=\"70\" y=\"" << y << "\" width=\"" << bw << "\" height=\"" << (h - 6)
           << "\" fill=\"#c0392b\"/><text x=\"" << (75 + bw) << "\" y=\"" << (y + 14) << "\" font-size=\"12\">"
           << counts[i].second << "</text>";
    }
    os << "</svg>";
    return os.str();
}

}  // namespace

std::string render_redteam_html(const RedteamReport& r) {
    std::ostringstream os;
    os << "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kcv demo report</title><style>"
       << kStyle << "</style></head><body>";
    os << "<h1>kcv: red team and positive controls</h1>";
    const bool all_caught = r.caught() == static_cast<int>(r.redteam.size());
    const bool all_clean = r.clean_controls() == static_cast<int>(r.controls.size());
    os << "<p><span class=\"" << (all_caught ? "ok" : "bad") << "\">" << r.caught() << " of " << r.redteam.size()
       << "</span> red-team kernels failed their target gate; <span class=\"" << (all_clean ? "ok" : "bad") << "\">"
       << r.clean_controls() << " of " << r.controls.size()
       << "</span> positive controls failed no gate. A red-team kernel counts as caught only when its "
          "<em>target</em> gate (outlined) fails.</p>";

    os << "<h2>Red team</h2><table><tr><th>kernel</th><th>contract</th><th>target</th><th>caught</th>"
       << gate_header() << "</tr>";
    for (const auto& e : r.redteam) {
        os << "<tr><td title=\"" << html_escape(e.kernel.description) << "\">" << html_escape(e.kernel.name)
           << "</td><td>" << html_escape(e.kernel.contracts.empty() ? "" : e.kernel.contracts.front()) << "</td><td>"
           << e.kernel.target_gate << "</td><td class=\"" << (e.caught ? "pass" : "fail") << "\">"
           << (e.caught ? "yes" : "missed") << "</td>";
        for (const auto& g : e.record.gates) os << cell(g, g.id == e.kernel.target_gate);
        os << "</tr>";
    }
    os << "</table><h3>Failures per gate</h3>" << bar_chart(r);

    os << "<h2>Positive controls</h2><table><tr><th>control</th><th>contract</th>" << gate_header() << "</tr>";
    for (const auto& e : r.controls) {
        for (const auto& rec : e.records) {
            os << "<tr><td>" << html_escape(e.kernel.name) << "</td><td>" << html_escape(rec.contract_id) << "</td>";
            for (const auto& g : rec.gates) os << cell(g, false);
            os << "</tr>";
        }
    }
    os << "</table>";

    os << "<h2>Evidence</h2><p>For each red-team kernel, the first evidence of its target gate, with the "
          "command that replays it.</p>";
    for (const auto& e : r.redteam) {
        os << "<h3>" << html_escape(e.kernel.name) << " <small>(" << html_escape(e.kernel.description)
           << ")</small></h3>";
        for (const auto& g : e.record.gates) {
            if (g.id != e.kernel.target_gate) continue;
            os << "<p>" << g.id << ": <b>" << name(g.verdict) << "</b> " << html_escape(g.reason) << "</p>";
            if (g.evidence.empty()) continue;
            const Evidence& ev = g.evidence.front();
            os << "<table><tr><th>probe</th><td><code>" << html_escape(ev.probe) << "</code></td></tr>"
               << "<tr><th>signature</th><td>" << html_escape(ev.signature) << "</td></tr>";
            if (!ev.actual_bits.empty()) {
                os << "<tr><th>expected / actual</th><td><code>" << ev.expected << " (" << ev.expected_bits
                   << ")</code> / <code>" << ev.actual << " (" << ev.actual_bits << ")</code></td></tr>";
            }
            os << "<tr><th>replay</th><td><code>" << html_escape(ev.replay) << "</code></td></tr></table>";
        }
    }
    os << "</body></html>\n";
    return os.str();
}

}  // namespace kcv
