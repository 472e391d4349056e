// Corpus-level numbers from per-candidate records. Rates are over the candidates the gate was
// judged on (pass or fail); n/a and error are counted apart so no rate hides them.
#include "kcv/aggregate.hpp"

#include <fstream>
#include <iomanip>
#include <sstream>

#include "kcv/gate.hpp"
#include "kcv/record.hpp"

namespace kcv {

std::vector<nlohmann::json> read_journal(const std::string& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        try {
            out.push_back(nlohmann::json::parse(line));
        } catch (const std::exception&) {
            // Only an interrupted final write leaves a partial line; it is re-done on resume.
        }
    }
    return out;
}

namespace {

double rate(int64_t num, int64_t den) { return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0; }

// The standard check's verdict at one tolerance, if the record carries one.
std::optional<bool> standard(const nlohmann::json& r, const char* key) {
    if (!r.contains("standard_check") || !r["standard_check"].is_object()) return std::nullopt;
    const auto& s = r["standard_check"];
    if (!s.contains(key) || !s[key].is_boolean()) return std::nullopt;
    return s[key].get<bool>();
}

// A shipped label of correctness, under the names corpora use.
std::optional<bool> label(const nlohmann::json& r) {
    if (!r.contains("label") || !r["label"].is_object()) return std::nullopt;
    for (const char* k : {"correctness", "correct", "passed"}) {
        if (r["label"].contains(k) && r["label"][k].is_boolean()) return r["label"][k].get<bool>();
    }
    return std::nullopt;
}

// An error message's first line, at most 200 bytes.
std::string first_line(std::string msg) {
    if (const auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
    if (msg.size() > 200) msg = msg.substr(0, 200) + "…";
    return msg;
}

// Why kcv's run of the standard check came out otherwise than the shipped label, from what the
// record holds: the candidate did not load here, or how many trials passed and by how much.
std::string disagreement_reason(const nlohmann::json& j, bool label) {
    const auto& sc = j["standard_check"];
    if (j.contains("error") && j["error"].is_object()) {
        return "did not load here (" + j["error"].value("code", "error") + "): " +
               first_line(j["error"].value("message", ""));
    }
    std::ostringstream os;
    if (sc.contains("error") && sc["error"].is_string() && !sc["error"].get<std::string>().empty()) {
        // Whose call raised, where the record says (KernelBench casts every input to float32, so
        // the reference itself can raise).
        const std::string by = sc.contains("raised_by") && sc["raised_by"].is_string() ? sc["raised_by"].get<std::string>() : "";
        if (by == "reference") os << "the standard check's reference raised here: ";
        else if (by == "candidate") os << "the candidate raised in the standard check here: ";
        else os << "the standard check raised here: ";
        os << first_line(sc["error"].get<std::string>());
        return os.str();
    }
    os << (label ? "labelled correct, but " : "labelled incorrect, but ") << sc.value("passed_1e-2", 0) << " of "
       << sc.value("trials", 5) << " trials passed at 1e-2 here";
    // Labels do not say their harness's tolerance; KernelBench's went from 1e-2 to 1e-4 for
    // float32, so a label that matches the check at 1e-4 is most likely a 1e-4 harness's.
    const char* sep = " (";
    if (sc.contains("passed_1e-4")) {
        os << sep << sc.value("passed_1e-4", 0) << " at 1e-4"
           << (sc.value("tol_1e-4", false) == label ? ", as labelled" : "");
        sep = "; ";
    }
    if (sc.contains("max_abs_diff") && sc["max_abs_diff"].is_number()) {
        os << sep << "largest |difference| " << sc["max_abs_diff"].get<double>();
        sep = "; ";
    }
    if (*sep == ';') os << ")";
    return os.str();
}

}  // namespace

nlohmann::json aggregate(const std::vector<nlohmann::json>& records) {
    nlohmann::json per_gate = nlohmann::json::object();
    std::map<std::string, std::map<std::string, int64_t>> counts;
    std::map<std::string, int64_t> floor_count;
    int64_t judged = 0, errors = 0, any = 0;
    // differential[tol][standard pass?][kcv clean?]
    int64_t diff[2][2][2] = {};
    int64_t parity_agree = 0, parity_total = 0;
    nlohmann::json disagreements = nlohmann::json::array();
    const char* tols[2] = {"tol_1e-2", "tol_1e-4"};

    for (const auto& j : records) {
        Record r = record_from_json(j);
        // Parity compares the corpus's label with kcv's run of the same standard check; a
        // candidate that does not load here fails that check, as it fails KernelBench's.
        if (auto l = label(j)) {
            if (auto s = standard(j, tols[0])) {
                ++parity_total;
                if (*l == *s) {
                    ++parity_agree;
                } else {
                    disagreements.push_back({{"id", j.value("corpus_id", r.candidate)},
                                             {"label", *l},
                                             {"standard_check", j["standard_check"]},
                                             {"reason", disagreement_reason(j, *l)}});
                }
            }
        }
        if (!r.error.empty()) {
            ++errors;
            continue;
        }
        ++judged;
        for (const auto& g : r.gates) ++counts[g.id][name(g.verdict)];
        for (const auto& p : profile_names()) floor_count[p] += under_floor(r, p);
        const bool violation = any_violation(r);
        any += violation;
        for (int t = 0; t < 2; ++t) {
            if (auto s = standard(j, tols[t])) ++diff[t][*s ? 1 : 0][violation ? 0 : 1];
        }
    }
    for (const auto& g : all_gates()) {
        auto& c = counts[g.id];
        per_gate[g.id] = {{"name", g.name},
                          {"tolerance_free", g.tolerance_free},
                          {"pass", c["pass"]},
                          {"fail", c["fail"]},
                          {"n/a", c["n/a"]},
                          {"error", c["error"]},
                          {"fail_rate", rate(c["fail"], c["pass"] + c["fail"])}};
    }
    nlohmann::json floors = nlohmann::json::object();
    for (const auto& p : profile_names()) floors[p] = {{"count", floor_count[p]}, {"rate", rate(floor_count[p], judged)}};
    nlohmann::json differential = nlohmann::json::object();
    for (int t = 0; t < 2; ++t) {
        differential[tols[t]] = {
            {"standard_pass_kcv_clean", diff[t][1][1]},
            {"standard_pass_kcv_violation", diff[t][1][0]},
            {"standard_fail_kcv_clean", diff[t][0][1]},
            {"standard_fail_kcv_violation", diff[t][0][0]},
            {"violation_rate_among_standard_pass", rate(diff[t][1][0], diff[t][1][0] + diff[t][1][1])},
        };
    }
    return {{"records", records.size()},
            {"judged", judged},
            {"errors", errors},
            {"gates", per_gate},
            {"floor", floors},
            {"any_violation", {{"count", any}, {"rate", rate(any, judged)}}},
            {"differential", differential},
            {"parity", {{"compared", parity_total}, {"agree", parity_agree}, {"disagreements", disagreements}}}};
}

std::string render_summary(const nlohmann::json& s) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(1);
    os << "records " << s["records"] << "  judged " << s["judged"] << "  not judged (errors) " << s["errors"] << "\n";
    os << "gate     fail rate   fail   pass    n/a  error\n";
    // In the order of GATES.md; numbers are taken out of the JSON so that setw applies.
    for (const auto& def : all_gates()) {
        const auto& g = s["gates"][def.id];
        os << std::left << std::setw(9) << def.id << std::right << std::setw(8)
           << 100.0 * g["fail_rate"].get<double>() << "%" << std::setw(7) << g["fail"].get<int64_t>() << std::setw(7)
           << g["pass"].get<int64_t>() << std::setw(7) << g["n/a"].get<int64_t>() << std::setw(7)
           << g["error"].get<int64_t>() << "\n";
    }
    os << "tolerance-free floor:";
    for (const auto& [p, f] : s["floor"].items()) os << "  " << p << " " << 100.0 * f["rate"].get<double>() << "%";
    os << "\nany violation: " << 100.0 * s["any_violation"]["rate"].get<double>() << "%\n";
    for (const auto& [tol, d] : s["differential"].items()) {
        os << "standard check " << tol << ": pass&clean " << d["standard_pass_kcv_clean"] << ", pass&violation "
           << d["standard_pass_kcv_violation"] << ", fail&clean " << d["standard_fail_kcv_clean"]
           << ", fail&violation " << d["standard_fail_kcv_violation"] << "\n";
    }
    const auto& par = s["parity"];
    if (par["compared"].get<int64_t>() > 0) {
        os << "parity with shipped labels: " << par["agree"] << " of " << par["compared"] << " agree\n";
        // The first few reasons; the report and the summary JSON list them all.
        size_t shown = 0;
        for (const auto& x : par["disagreements"]) {
            if (++shown > 10) {
                os << "  … and " << par["disagreements"].size() - 10 << " more in the summary JSON\n";
                break;
            }
            os << "  " << x.value("id", "") << ": " << x.value("reason", "") << "\n";
        }
    }
    const int64_t judged = s["judged"].get<int64_t>();
    const int64_t failed = s["any_violation"]["count"].get<int64_t>();
    os << (judged - failed) << " passed, " << failed << " failed\n";
    return os.str();
}

}  // namespace kcv
