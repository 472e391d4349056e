// Console tables: fixed columns, colour only on a terminal, a plain summary line last.
#include <unistd.h>

#include <sstream>

#include "kcv/report.hpp"

namespace kcv {
namespace {

std::string paint(const ConsoleStyle& st, const char* code, const std::string& s) {
    return st.color ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
}

std::string verdict_cell(const ConsoleStyle& st, Verdict v) {
    std::string s = name(v);
    s.resize(6, ' ');
    switch (v) {
        case Verdict::pass: return paint(st, "32", s);
        case Verdict::fail: return paint(st, "31;1", s);
        case Verdict::na: return paint(st, "2", s);
        case Verdict::error: return paint(st, "33", s);
    }
    return s;
}

std::string pad(std::string s, size_t n) {
    if (s.size() > n) s = s.substr(0, n - 1) + "…";
    s.resize(std::max(n, s.size()), ' ');
    return s;
}

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

}  // namespace

ConsoleStyle console_style_for(int fd) {
    ConsoleStyle st;
    st.color = isatty(fd) && !std::getenv("NO_COLOR");
    return st;
}

std::string render_record(const Record& r, const ConsoleStyle& st) {
    std::ostringstream os;
    os << "contract " << r.contract_id << "   candidate " << r.candidate << "   seed " << r.settings.seed << "\n";
    if (!r.error.empty()) os << paint(st, "33", "error (" + r.error_code + "): ") << r.error << "\n";
    os << pad("gate", 8) << pad("name", 32) << "verdict  detail\n";
    int passed = 0, failed = 0, na = 0, errors = 0;
    for (const auto& g : r.gates) {
        const GateDef* def = find_gate(g.id);
        std::string detail = g.signature.empty() ? "" : "[" + join(g.signature) + "] ";
        if (!g.evidence.empty()) detail += g.evidence.front().signature;
        else detail += g.reason;
        os << pad(g.id, 8) << pad(def ? def->name : "", 32) << verdict_cell(st, g.verdict) << "   " << detail << "\n";
        passed += g.verdict == Verdict::pass;
        failed += g.verdict == Verdict::fail;
        na += g.verdict == Verdict::na;
        errors += g.verdict == Verdict::error;
    }
    os << "floor:";
    for (const auto& p : profile_names()) os << "  " << p << (under_floor(r, p) ? " UNDER" : " clear");
    os << "\n";
    for (const auto& g : r.gates) {
        if (g.verdict == Verdict::fail && !g.evidence.empty() && !g.evidence.front().replay.empty()) {
            os << "replay " << g.id << ": " << g.evidence.front().replay << "\n";
        }
    }
    os << passed << " passed, " << failed << " failed, " << na << " n/a, " << errors << " errors\n";
    return os.str();
}

std::string render_redteam(const RedteamReport& r, const ConsoleStyle& st) {
    std::ostringstream os;
    os << "Red team: each kernel must fail its target gate\n";
    os << pad("kernel", 34) << pad("contract", 18) << pad("target", 8) << "caught  failed gates\n";
    for (const auto& e : r.redteam) {
        os << pad(e.kernel.name, 34) << pad(e.kernel.contracts.empty() ? "" : e.kernel.contracts.front(), 18)
           << pad(e.kernel.target_gate, 8)
           << (e.caught ? paint(st, "32", "yes   ") : paint(st, "31;1", "MISSED")) << "  " << join(e.failed_gates, " ")
           << (e.record.error.empty() ? "" : "  error: " + e.record.error) << "\n";
    }
    os << "\nPositive controls: each must fail no gate\n";
    os << pad("control", 34) << pad("contracts", 40) << "failed gates\n";
    for (const auto& e : r.controls) {
        os << pad(e.kernel.name, 34) << pad(join(e.kernel.contracts, " "), 40)
           << (e.failed_gates.empty() ? paint(st, "32", "none") : paint(st, "31;1", join(e.failed_gates, " ")));
        for (const auto& rec : e.records) {
            if (!rec.error.empty()) os << paint(st, "33", "  error on " + rec.contract_id + ": " + rec.error);
        }
        os << "\n";
    }
    os << "\nred team: " << r.caught() << " of " << r.redteam.size() << " caught by their target gate; controls: "
       << r.clean_controls() << " of " << r.controls.size() << " clean\n";
    const int passed = r.caught() + r.clean_controls();
    const int total = static_cast<int>(r.redteam.size() + r.controls.size());
    os << passed << " passed, " << (total - passed) << " failed\n";
    return os.str();
}

}  // namespace kcv
