// The table of the twelve gates, and the JSON form of results and settings.
#include <algorithm>
#include <sstream>

#include "gates/gate_common.hpp"

namespace kcv {

const std::vector<GateDef>& all_gates() {
    static const std::vector<GateDef> all = {
        gates::prc01(), gates::prc02(), gates::prc03(), gates::ord01(), gates::ord02(), gates::ord03(),
        gates::cmp01(), gates::cmp02(), gates::exc01(), gates::exc02(), gates::res01(), gates::res02(),
    };
    return all;
}

const GateDef* find_gate(const std::string& id) {
    for (const auto& g : all_gates()) {
        if (id == g.id) return &g;
    }
    return nullptr;
}

std::optional<GateResult> ends_gate(const GateDef& g, const Contract& c, const Settings& s,
                                    const std::vector<ProbeOutcome>& outcomes, size_t remaining) {
    if (outcomes.empty()) return std::nullopt;
    const ProbeOutcome& last = outcomes.back();
    if (last.probe.out_of_range_indices) return std::nullopt;
    const bool refused = std::any_of(last.calls.begin(), last.calls.end(), [](const CallOutcome& co) {
        return co.facts.status != 0 && co.reference_error.empty() && !co.reference.empty();
    });
    if (!refused) return std::nullopt;
    GateResult r;
    try {
        r = g.judge(c, s, outcomes);
    } catch (const std::exception&) {
        return std::nullopt;   // a judge that cannot decide on part of its probes runs them all
    }
    if (r.verdict != Verdict::fail) return std::nullopt;
    r.id = g.id;
    r.probes = static_cast<int>(outcomes.size());
    if (remaining > 0)
        r.detail["not_run"] = {{"probes", remaining},
                               {"after", last.probe.id},
                               {"reason", "the candidate returned an error at probe " + last.probe.id +
                                              " and the gate had failed; the remaining probes could only repeat "
                                              "that failure"}};
    return r;
}

const char* name(Verdict v) {
    switch (v) {
        case Verdict::pass: return "pass";
        case Verdict::fail: return "fail";
        case Verdict::na: return "n/a";
        case Verdict::error: return "error";
    }
    return "error";
}

namespace {
Verdict verdict_from(const std::string& s) {
    if (s == "pass") return Verdict::pass;
    if (s == "fail") return Verdict::fail;
    if (s == "n/a") return Verdict::na;
    return Verdict::error;
}

// Shell-quotes an argument for a replay command line.
std::string quote(const std::string& s) {
    if (s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") ==
        std::string::npos)
        return s;
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}
}  // namespace

nlohmann::json to_json(const Settings& s) {
    return {{"seed", s.seed}, {"c", s.c}, {"envelope_factor", s.envelope_factor},
            {"ord03_margin", s.ord03_margin}, {"quick", s.quick}};
}

nlohmann::json to_json(const Evidence& e) {
    nlohmann::json j = {{"probe", e.probe}, {"signature", e.signature}, {"output", e.output},
                        {"first_index", e.first_index}, {"worst_index", e.worst_index},
                        {"first_coords", e.first_coords}, {"worst_coords", e.worst_coords},
                        {"expected_bits", e.expected_bits}, {"actual_bits", e.actual_bits},
                        {"replay", e.replay}};
    // JSON has no NaN or Inf: such values travel as strings.
    auto num = [](double v) -> nlohmann::json {
        if (std::isfinite(v)) return v;
        return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
    };
    j["expected"] = num(e.expected);
    j["actual"] = num(e.actual);
    j["ratio"] = num(e.ratio);
    if (!e.detail.is_null()) j["detail"] = e.detail;
    return j;
}

namespace {
double num_from(const nlohmann::json& j) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
        const auto s = j.get<std::string>();
        if (s == "nan") return std::nan("");
        if (s == "inf") return INFINITY;
        if (s == "-inf") return -INFINITY;
    }
    return 0;
}
}  // namespace

nlohmann::json to_json(const GateResult& g) {
    const GateDef* def = find_gate(g.id);
    nlohmann::json ev = nlohmann::json::array();
    for (const auto& e : g.evidence) ev.push_back(to_json(e));
    nlohmann::json j = {{"id", g.id},
                        {"name", def ? def->name : ""},
                        {"tolerance_free", def ? def->tolerance_free : false},
                        {"verdict", name(g.verdict)},
                        {"signature", g.signature},
                        {"reason", g.reason},
                        {"probes", g.probes},
                        {"evidence", ev}};
    j["metric"] = std::isfinite(g.metric) ? nlohmann::json(g.metric)
                                          : nlohmann::json(std::isnan(g.metric) ? "nan" : "inf");
    if (!g.code.empty()) j["code"] = g.code;
    if (!g.detail.is_null()) j["detail"] = g.detail;
    return j;
}

GateResult gate_result_from_json(const nlohmann::json& j) {
    GateResult g;
    g.id = j.value("id", "");
    g.verdict = verdict_from(j.value("verdict", "error"));
    g.signature = j.value("signature", std::vector<std::string>{});
    g.reason = j.value("reason", "");
    g.code = j.value("code", "");
    g.probes = j.value("probes", 0);
    if (j.contains("metric")) g.metric = num_from(j["metric"]);
    if (j.contains("detail")) g.detail = j["detail"];
    for (const auto& e : j.value("evidence", nlohmann::json::array())) {
        Evidence x;
        x.probe = e.value("probe", "");
        x.signature = e.value("signature", "");
        x.output = e.value("output", "");
        x.first_index = e.value("first_index", int64_t(-1));
        x.worst_index = e.value("worst_index", int64_t(-1));
        x.first_coords = e.value("first_coords", std::vector<int64_t>{});
        x.worst_coords = e.value("worst_coords", std::vector<int64_t>{});
        x.expected = num_from(e.value("expected", nlohmann::json(0)));
        x.actual = num_from(e.value("actual", nlohmann::json(0)));
        x.ratio = num_from(e.value("ratio", nlohmann::json(0)));
        x.expected_bits = e.value("expected_bits", "");
        x.actual_bits = e.value("actual_bits", "");
        x.replay = e.value("replay", "");
        if (e.contains("detail")) x.detail = e["detail"];
        g.evidence.push_back(std::move(x));
    }
    return g;
}

std::string replay_command(const Contract& c, const std::string& candidate, const Settings& s,
                           const std::string& probe_id) {
    std::ostringstream os;
    const bool builtin = c.source.empty() || c.source.front() == '<' || c.source.starts_with("builtin:");
    os << "kcv verify --contract " << quote(builtin ? c.id : c.source) << " --candidate "
       << quote(candidate) << " --seed " << s.seed;
    if (s.c != Settings{}.c) os << " --c " << s.c;
    if (s.ord03_margin != Settings{}.ord03_margin) os << " --margin " << s.ord03_margin;
    if (s.quick) os << " --quick";
    const auto slash = probe_id.find('/');
    os << " --gate " << probe_id.substr(0, slash) << " --probe " << quote(probe_id);
    return os.str();
}

}  // namespace kcv
