// The data every rendering of a journal shares: the aggregate, and the worst failures with
// their evidence.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "kcv/aggregate.hpp"
#include "kcv/gate.hpp"
#include "kcv/journal_report.hpp"

namespace kcv {
namespace fs = std::filesystem;

namespace {

struct Example {
    nlohmann::json j;
    size_t gate_order = 0;
    bool tolerance_free = false;
    double severity = 0;   // +inf for NaN and Inf ratios
    std::string id, gate;
};

size_t gate_index(const std::string& id) {
    const auto& gates = all_gates();
    for (size_t i = 0; i < gates.size(); ++i)
        if (id == gates[i].id) return i;
    return gates.size();
}

// NaN and Inf outrank every finite ratio: a non-finite output is the worst kind of wrong.
double severity_of(const nlohmann::json& gate, const nlohmann::json& evidence) {
    double v = std::nan("");
    if (evidence.is_object() && evidence.contains("ratio")) v = report_detail::json_number(evidence["ratio"]);
    if ((std::isnan(v) || v == 0) && gate.contains("metric")) v = report_detail::json_number(gate["metric"]);
    if (std::isnan(v) || std::isinf(v)) return INFINITY;
    return v;
}

bool more_severe(const Example& a, const Example& b) {
    if (a.tolerance_free != b.tolerance_free) return a.tolerance_free;
    if (a.severity != b.severity) return a.severity > b.severity;
    if (a.id != b.id) return a.id < b.id;
    return a.gate_order < b.gate_order;
}

}  // namespace

nlohmann::json worst_examples(const std::vector<nlohmann::json>& records, int n) {
    std::vector<Example> all;
    for (const auto& r : records) {
        for (const auto& g : r.value("gates", nlohmann::json::array())) {
            if (g.value("verdict", "") != "fail") continue;
            const std::string gid = g.value("id", "");
            const GateDef* def = find_gate(gid);
            const auto ev = g.value("evidence", nlohmann::json::array());
            const nlohmann::json first = ev.empty() ? nlohmann::json::object() : ev.front();
            Example e;
            e.id = record_id(r);
            e.gate = gid;
            e.gate_order = gate_index(gid);
            e.tolerance_free = def && def->tolerance_free;
            e.severity = severity_of(g, first);
            e.j = {{"id", e.id},
                   {"operator", record_operator(r)},
                   {"contract", r.value("contract", "")},
                   {"role", record_role(r)},
                   {"gate", gid},
                   {"gate_name", def ? def->name : ""},
                   {"tolerance_free", e.tolerance_free},
                   {"signature", g.value("signature", nlohmann::json::array())},
                   {"reason", g.value("reason", "")},
                   {"code", g.value("code", "")},
                   {"evidence", first}};
            if (r.contains("standard_check")) e.j["standard_check"] = r["standard_check"];
            all.push_back(std::move(e));
        }
    }
    std::sort(all.begin(), all.end(), more_severe);

    nlohmann::json out = nlohmann::json::array();
    std::set<std::pair<std::string, std::string>> taken;
    // One per gate first, so that a gate failing rarely is not crowded out by a common one.
    std::vector<const Example*> per_gate(all_gates().size() + 1, nullptr);
    for (const auto& e : all) {
        if (!per_gate[e.gate_order]) per_gate[e.gate_order] = &e;
    }
    std::vector<const Example*> firsts;
    for (const Example* e : per_gate)
        if (e) firsts.push_back(e);
    std::sort(firsts.begin(), firsts.end(), [](const Example* a, const Example* b) { return more_severe(*a, *b); });
    auto take = [&](const Example& e) {
        if (static_cast<int>(out.size()) >= n) return;
        if (!taken.insert({e.id, e.gate}).second) return;
        out.push_back(e.j);
    };
    for (const Example* e : firsts) take(*e);
    for (const auto& e : all) take(e);
    return out;
}

ReportData build_report_data(const JournalInput& in, const ReportOptions& opts) {
    ReportData d;
    d.title = opts.title;
    d.source = in.source;
    d.records = in.records;
    d.summary = aggregate(in.records);
    d.worst = worst_examples(in.records, opts.worst_examples);
    d.redteam = !opts.redteam.is_null() ? opts.redteam : in.redteam;
    d.calibration = opts.calibration;
    return d;
}

std::vector<std::string> write_report(const ReportData& d, const std::string& dir,
                                      const std::function<void(const std::string&, int, int)>& step) {
    fs::create_directories(dir);
    struct Out {
        const char* file;
        std::string (*render)(const ReportData&);
    };
    const Out outs[] = {{"report.html", render_report_html},
                        {"report.md", render_report_markdown},
                        {"report.csv", render_report_csv},
                        {"report.junit.xml", render_report_junit}};
    std::vector<std::string> paths;
    int i = 0;
    for (const Out& o : outs) {
        const std::string path = (fs::path(dir) / o.file).string();
        if (step) step(o.file, i, 4);
        std::ofstream f(path, std::ios::binary);
        if (!f) throw std::runtime_error("cannot write '" + path + "'");
        f << o.render(d);
        if (!f) throw std::runtime_error("error while writing '" + path + "'");
        paths.push_back(path);
        ++i;
    }
    if (step) step("done", 4, 4);
    return paths;
}

}  // namespace kcv
