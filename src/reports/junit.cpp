// The report as JUnit XML, for CI systems: one testsuite per journal, one testcase per candidate,
// one <failure> per failed gate (its message the evidence's signature, its text the evidence and
// the replay command), one <error> per gate kcv could not judge, and one <error> for a candidate
// that could not be judged at all. Counts follow the usual reading: a testcase counts once, as
// failed if any gate failed, else as an error if anything errored.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "kcv/gate.hpp"
#include "kcv/journal_report.hpp"

namespace kcv {
namespace {

// Text for XML 1.0: markup escaped, and characters XML 1.0 forbids (controls other than tab and
// line breaks, U+FFFE and U+FFFF) replaced by U+FFFD. Inside attributes, line breaks and tabs are
// written as character references so that attribute normalisation keeps them.
std::string xml(const std::string& s, bool attribute) {
    std::string o;
    o.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == 0xEF && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0xBF &&
            (static_cast<unsigned char>(s[i + 2]) == 0xBE || static_cast<unsigned char>(s[i + 2]) == 0xBF)) {
            o += "\xEF\xBF\xBD";
            i += 2;
            continue;
        }
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            case '\'': o += "&apos;"; break;
            case '\n': o += attribute ? "&#10;" : "\n"; break;
            case '\r': o += attribute ? "&#13;" : "\r"; break;
            case '\t': o += attribute ? "&#9;" : "\t"; break;
            default:
                if (c < 0x20) o += "\xEF\xBF\xBD";
                else o += static_cast<char>(c);
        }
    }
    return o;
}

std::string joined(const nlohmann::json& arr, const char* sep) {
    std::string s;
    if (!arr.is_array()) return s;
    for (const auto& x : arr) s += (s.empty() ? "" : sep) + (x.is_string() ? x.get<std::string>() : x.dump());
    return s;
}

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", std::isfinite(s) && s >= 0 ? s : 0.0);
    return buf;
}

std::string evidence_text(const nlohmann::json& g) {
    std::ostringstream os;
    const GateDef* def = find_gate(g.value("id", ""));
    os << g.value("id", "") << " " << (def ? def->name : "") << ": " << g.value("verdict", "") << "\n";
    const std::string sig = joined(g.value("signature", nlohmann::json::array()), ", ");
    if (!sig.empty()) os << "signature: " << sig << "\n";
    if (!g.value("code", std::string()).empty()) os << "code: " << g.value("code", "") << "\n";
    os << "reason: " << g.value("reason", "") << "\n";
    for (const auto& ev : g.value("evidence", nlohmann::json::array())) {
        os << "\nprobe: " << ev.value("probe", "") << "\n" << ev.value("signature", "") << "\n";
        const std::string coords = report_detail::coords_text(ev.value("worst_coords", nlohmann::json::array()));
        if (!coords.empty()) os << "element: " << ev.value("output", "") << " at " << coords << "\n";
        if (!ev.value("actual_bits", std::string()).empty()) {
            os << "expected: " << report_detail::number(report_detail::json_number(ev.value("expected", nlohmann::json())))
               << " (" << ev.value("expected_bits", "") << ")\nactual:   "
               << report_detail::number(report_detail::json_number(ev.value("actual", nlohmann::json()))) << " ("
               << ev.value("actual_bits", "") << ")\n";
        }
        if (!ev.value("replay", std::string()).empty()) os << "replay: " << ev.value("replay", "") << "\n";
    }
    return os.str();
}

std::string message_of(const nlohmann::json& g) {
    const auto ev = g.value("evidence", nlohmann::json::array());
    if (!ev.empty() && !ev.front().value("signature", std::string()).empty())
        return ev.front().value("signature", "");
    return g.value("reason", "");
}

}  // namespace

std::string render_report_junit(const ReportData& d) {
    std::ostringstream cases;
    long long tests = 0, failures = 0, errors = 0;
    double total_time = 0;
    for (const auto& r : d.records) {
        ++tests;
        const double t = r.value("seconds", 0.0);
        total_time += std::isfinite(t) && t > 0 ? t : 0;
        cases << "    <testcase name=\"" << xml(record_id(r), true) << "\" classname=\""
              << xml("kcv." + record_operator(r), true) << "\" time=\"" << seconds(t) << "\">\n";
        bool failed = false, errored = false;
        if (r.contains("error") && r["error"].is_object()) {
            errored = true;
            cases << "      <error type=\"" << xml(r["error"].value("code", std::string("error")), true)
                  << "\" message=\"" << xml(r["error"].value("message", std::string()), true) << "\"/>\n";
        }
        for (const auto& g : r.value("gates", nlohmann::json::array())) {
            const std::string v = g.value("verdict", "error");
            if (v == "fail") {
                failed = true;
                cases << "      <failure type=\"" << xml(g.value("id", ""), true) << "\" message=\""
                      << xml(message_of(g), true) << "\">" << xml(evidence_text(g), false) << "</failure>\n";
            } else if (v == "error" && !(r.contains("error") && r["error"].is_object())) {
                errored = true;
                cases << "      <error type=\"" << xml(g.value("id", ""), true) << "\" message=\""
                      << xml(g.value("code", std::string("error")) + ": " + g.value("reason", std::string()), true)
                      << "\"/>\n";
            }
        }
        if (r.contains("standard_check"))
            cases << "      <system-out>standard check: " << xml(r["standard_check"].dump(), false) << "</system-out>\n";
        cases << "    </testcase>\n";
        failures += failed;
        errors += !failed && errored;
    }
    std::ostringstream os;
    os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    os << "<testsuites name=\"kcv\" tests=\"" << tests << "\" failures=\"" << failures << "\" errors=\"" << errors
       << "\" time=\"" << seconds(total_time) << "\">\n";
    os << "  <testsuite name=\"" << xml(d.title + ": " + d.source, true) << "\" tests=\"" << tests
       << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\"0\" time=\""
       << seconds(total_time) << "\">\n";
    os << cases.str();
    os << "  </testsuite>\n</testsuites>\n";
    return os.str();
}

}  // namespace kcv
