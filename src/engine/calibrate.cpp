// The calibration sweep: the defences re-run at every grid point (composed from one run per c
// and one ORD-03 run per margin), a corpus re-judged from its stored metrics, the tightest
// setting that keeps every control passing, and each gate's margin over the controls.
//
// Re-judging a stored result is sound only where the stored numbers decide it:
// - ratio gates (PRC-01, PRC-02, PRC-03, ORD-01, CMP-01, CMP-02) store r = max over their calls.
//   Under the envelope model r = err / (factor · envelope), so r' = r · factor / factor' exactly.
//   Under the analytic model τ_i = c·A_i + B_i with A_i, B_i ≥ 0, so from c to c' every τ_i
//   scales by a factor within [min(1, c'/c), max(1, c'/c)], and r' lies in
//   [r · min(1, c/c'), r · max(1, c/c')]: a decision where that interval is on one side of 1.
//   Every probe of these gates is one call and every call is checked, so r is the maximum over
//   everything the gate saw.
// - ORD-03 stores the largest judged ratio; it fails iff that ratio exceeds the margin. Its
//   judge measures every output of every call and records each entry's ratio (detail.errors),
//   so a failure re-judged at a looser margin is exact. Records from before that stopped at a
//   call's first failing output and carry no per-entry ratio: for them it is exact only for a
//   contract with one floating-point output.
// - A failure that no tolerance explains (a launch error, a crash, a hang, a NaN or Inf ratio)
//   stays a failure; tolerance-free gates (ORD-02, EXC-01, RES-01, RES-02) and EXC-02 (no metric
//   stored for its ORD-01 part) are kept as recorded.
// Verdicts of n/a (fairness rule 1: the controls at the new setting are not re-run for a corpus)
// and errors are kept.
#include "kcv/calibrate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "kcv/aggregate.hpp"
#include "kcv/contract.hpp"
#include "kcv/dtype.hpp"
#include "kcv/redteam.hpp"

namespace kcv {
namespace {

const std::set<std::string>& ratio_gates() {
    static const std::set<std::string> g = {"PRC-01", "PRC-02", "PRC-03", "ORD-01", "CMP-01", "CMP-02"};
    return g;
}

double number_of(const nlohmann::json& j) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
        const std::string s = j.get<std::string>();
        if (s == "nan") return std::nan("");
        if (s == "inf") return INFINITY;
        if (s == "-inf") return -INFINITY;
    }
    return std::nan("");
}

double number_or_zero(const nlohmann::json& j) {
    const double v = number_of(j);
    return std::isfinite(v) ? v : 0.0;
}

// JSON has no NaN or Inf: they travel as strings, as records write them.
nlohmann::json json_num(double v) {
    if (std::isfinite(v)) return v;
    return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

double rate(int64_t num, int64_t den) { return den > 0 ? double(num) / double(den) : 0.0; }

// A failure whose cause is not a ratio over a threshold: no setting can turn it into a pass.
bool setting_independent_failure(const nlohmann::json& g) {
    if (!g.value("code", std::string()).empty()) return true;
    for (const auto& cls : g.value("signature", nlohmann::json::array())) {
        const std::string s = cls.is_string() ? cls.get<std::string>() : "";
        if (s == "crash" || s == "hang" || s == "launch-error") return true;
    }
    for (const auto& ev : g.value("evidence", nlohmann::json::array())) {
        if (ev.contains("detail") && ev["detail"].is_object() && ev["detail"].contains("status")) return true;
    }
    const double m = number_of(g.value("metric", nlohmann::json(0)));
    return !std::isfinite(m);
}

std::vector<std::string> failed_gates_of(const nlohmann::json& record) {
    std::vector<std::string> f;
    for (const auto& g : record.value("gates", nlohmann::json::array()))
        if (g.value("verdict", "") == "fail") f.push_back(g.value("id", ""));
    return f;
}

void refresh_record(nlohmann::json& record) {
    const auto f = failed_gates_of(record);
    record["failed_gates"] = f;
    record["any_violation"] = !f.empty();
}

void replace_ord03(nlohmann::json& record, const nlohmann::json* gate) {
    if (!gate || !record.contains("gates")) return;
    for (auto& g : record["gates"])
        if (g.value("id", "") == "ORD-03") g = *gate;
    refresh_record(record);
}

// The models of a record's contract: from the task document a Python record carries, else from
// the contract id; "" and 0 when neither is known.
struct ModelInfo {
    std::string model;
    int float_outputs = 0;
};

ModelInfo model_of(const nlohmann::json& record, std::map<std::string, ModelInfo>& cache) {
    ModelInfo mi;
    if (record.contains("task") && record["task"].is_object() && record["task"].contains("contract")) {
        const auto& doc = record["task"]["contract"];
        bool all_envelope = true, any = false;
        for (const auto& o : doc.value("outputs", nlohmann::json::array())) {
            bool is_float = true;
            try {
                is_float = info(parse_dtype(o.value("dtype", std::string("f32")))).is_float;
            } catch (const std::exception&) {
            }
            if (!is_float) continue;
            ++mi.float_outputs;
            any = true;
            const auto tol = o.value("tolerance", nlohmann::json::object());
            if (tol.value("model", std::string("elementwise")) != "envelope") all_envelope = false;
        }
        mi.model = any ? (all_envelope ? "envelope" : "analytic") : "";
        return mi;
    }
    const std::string id = record.value("contract", "");
    if (id.empty()) return mi;
    auto it = cache.find(id);
    if (it != cache.end()) return it->second;
    try {
        const Contract c = resolve_contract(id);
        bool all_envelope = true;
        for (const auto& o : c.outputs) {
            if (!info(o.dtype).is_float) continue;
            ++mi.float_outputs;
            if (o.model != ErrorModelKind::envelope) all_envelope = false;
        }
        mi.model = mi.float_outputs > 0 ? (all_envelope ? "envelope" : "analytic") : "";
    } catch (const std::exception&) {
    }
    cache[id] = mi;
    return mi;
}

Settings settings_of(const nlohmann::json& record) {
    Settings s;
    if (!record.contains("settings") || !record["settings"].is_object()) return s;
    const auto& j = record["settings"];
    s.seed = j.value("seed", uint64_t(0));
    s.c = j.value("c", 4.0);
    s.envelope_factor = j.value("envelope_factor", 2.0);
    s.ord03_margin = j.value("ord03_margin", 1.2);
    s.quick = j.value("quick", false);
    return s;
}

}  // namespace

Settings grid_settings(const Settings& base, double c, double margin) {
    Settings s = base;
    s.c = c;
    s.envelope_factor = c / 2;
    s.ord03_margin = margin;
    return s;
}

nlohmann::json compose_ord03(const nlohmann::json& base_run, const nlohmann::json& ord03_run) {
    std::map<std::pair<std::string, std::string>, nlohmann::json> ord03;
    auto gate_of = [](const nlohmann::json& record) -> nlohmann::json {
        for (const auto& g : record.value("gates", nlohmann::json::array()))
            if (g.value("id", "") == "ORD-03") return g;
        return nullptr;
    };
    for (const auto& e : ord03_run.value("redteam", nlohmann::json::array())) {
        const auto& rec = e.value("record", nlohmann::json::object());
        if (auto g = gate_of(rec); !g.is_null()) ord03[{e.value("name", ""), rec.value("contract", "")}] = g;
    }
    for (const auto& e : ord03_run.value("controls", nlohmann::json::array())) {
        for (const auto& rec : e.value("records", nlohmann::json::array()))
            if (auto g = gate_of(rec); !g.is_null()) ord03[{e.value("name", ""), rec.value("contract", "")}] = g;
    }
    auto find = [&](const std::string& name, const nlohmann::json& rec) -> const nlohmann::json* {
        auto it = ord03.find({name, rec.value("contract", "")});
        return it == ord03.end() ? nullptr : &it->second;
    };

    nlohmann::json out = base_run;
    int caught = 0, clean = 0;
    for (auto& e : out["redteam"]) {
        auto& rec = e["record"];
        replace_ord03(rec, find(e.value("name", ""), rec));
        e["failed_gates"] = failed_gates_of(rec);
        const auto& f = e["failed_gates"];
        e["caught"] = std::find(f.begin(), f.end(), e.value("target_gate", "")) != f.end();
        caught += e["caught"].get<bool>();
    }
    for (auto& e : out["controls"]) {
        std::set<std::string> failed;
        bool errors = false;
        for (auto& rec : e["records"]) {
            replace_ord03(rec, find(e.value("name", ""), rec));
            for (const auto& g : failed_gates_of(rec)) failed.insert(g);
            errors = errors || rec.contains("error");
        }
        e["failed_gates"] = std::vector<std::string>(failed.begin(), failed.end());
        e["clean"] = failed.empty() && !errors;
        clean += e["clean"].get<bool>();
    }
    out["summary"] = {{"redteam_caught", caught},
                      {"redteam_total", out["redteam"].size()},
                      {"controls_clean", clean},
                      {"controls_total", out["controls"].size()}};
    return out;
}

nlohmann::json defence_rates(const nlohmann::json& run) {
    int passed = 0, total = 0, caught = 0, rt_total = 0;
    nlohmann::json failed = nlohmann::json::array(), missed = nlohmann::json::array();
    for (const auto& e : run.value("controls", nlohmann::json::array())) {
        for (const auto& rec : e.value("records", nlohmann::json::array())) {
            ++total;
            const auto f = failed_gates_of(rec);
            if (f.empty() && !rec.contains("error")) {
                ++passed;
            } else {
                nlohmann::json x = {{"name", e.value("name", "")}, {"contract", rec.value("contract", "")}, {"gates", f}};
                if (rec.contains("error")) x["error"] = rec["error"];
                failed.push_back(std::move(x));
            }
        }
    }
    for (const auto& e : run.value("redteam", nlohmann::json::array())) {
        ++rt_total;
        if (e.value("caught", false)) ++caught;
        else missed.push_back(e.value("name", ""));
    }
    return {{"controls", {{"passed", passed}, {"total", total}, {"rate", rate(passed, total)}, {"failed", failed}}},
            {"redteam", {{"caught", caught}, {"total", rt_total}, {"rate", rate(caught, rt_total)}, {"missed", missed}}}};
}

// ORD-03's margin for one stored gate result at a setting's margin: the wider of it and the
// contract's own (measurement.ord03_margin, which the gate records as detail.contract_margin).
double ord03_margin_for(const nlohmann::json& gate, double setting) {
    const auto d = gate.find("detail");
    if (d == gate.end() || !d->is_object()) return setting;
    return std::max(setting, number_or_zero(d->value("contract_margin", nlohmann::json(0))));
}

nlohmann::json gate_margins(const nlohmann::json& run, const Settings& s) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& def : all_gates()) {
        const std::string id = def.id;
        const bool ord03 = id == "ORD-03";
        if (!ord03 && !ratio_gates().count(id)) continue;
        double largest = -1;
        std::string where;
        int judged = 0;
        for (const auto& e : run.value("controls", nlohmann::json::array())) {
            for (const auto& rec : e.value("records", nlohmann::json::array())) {
                for (const auto& g : rec.value("gates", nlohmann::json::array())) {
                    const std::string v = g.value("verdict", "");
                    if (g.value("id", "") != id || (v != "pass" && v != "fail")) continue;
                    ++judged;
                    double m = number_of(g.value("metric", nlohmann::json(0)));
                    if (std::isnan(m)) m = INFINITY;
                    // Against the setting's margin, a contract's wider one as the share of it used.
                    if (ord03) m *= s.ord03_margin / ord03_margin_for(g, s.ord03_margin);
                    if (m > largest) {
                        largest = m;
                        where = e.value("name", std::string()) + " on " + rec.value("contract", std::string());
                    }
                }
            }
        }
        if (judged == 0) continue;
        const double threshold = ord03 ? s.ord03_margin : 1.0;
        out.push_back({{"gate", id},
                       {"threshold", threshold},
                       {"largest_control_metric", json_num(largest)},
                       {"control", where},
                       {"controls_judged", judged},
                       {"margin", json_num(largest > 0 ? threshold / largest : INFINITY)}});
    }
    return out;
}

namespace {

// An ORD-03 result whose judge measured every output of every call: each recorded entry carries
// its ratio (older records stopped at a call's first failing output and carry none).
bool measured_to_the_end(const nlohmann::json& gate) {
    const auto d = gate.find("detail");
    if (d == gate.end() || !d->is_object()) return false;
    const auto e = d->find("errors");
    if (e == d->end() || !e->is_array() || e->empty()) return false;
    return std::all_of(e->begin(), e->end(), [](const nlohmann::json& x) { return x.is_object() && x.contains("ratio"); });
}

}  // namespace

Rejudged rejudge_gate(const nlohmann::json& gate, const Settings& recorded, const Settings& target,
                      const std::string& model, int float_outputs) {
    const std::string id = gate.value("id", "");
    const std::string verdict = gate.value("verdict", "error");
    if (verdict != "pass" && verdict != "fail") return {verdict, "kept"};
    const bool ord03 = id == "ORD-03";
    if (!ord03 && !ratio_gates().count(id)) return {verdict, "kept"};
    if (verdict == "fail" && setting_independent_failure(gate)) return {"fail", "kept"};
    const double r = number_of(gate.value("metric", nlohmann::json(0)));
    if (std::isnan(r)) return {verdict, "kept"};

    // A stored verdict its own metric does not explain came from something else the gate saw.
    const bool failed_by_metric = ord03 ? r > ord03_margin_for(gate, recorded.ord03_margin) : r > 1.0;
    if (failed_by_metric != (verdict == "fail")) return {verdict, "kept"};

    if (ord03) {
        if (r > ord03_margin_for(gate, target.ord03_margin)) return {"fail", "exact"};
        if (verdict == "pass" || float_outputs == 1 || measured_to_the_end(gate)) return {"pass", "exact"};
        return {"undetermined", "undetermined"};
    }
    if (model == "envelope") {
        const double scaled = r * recorded.envelope_factor / target.envelope_factor;
        return {scaled <= 1.0 ? "pass" : "fail", "exact"};
    }
    const double up = recorded.c / target.c;
    const double lo = r * std::min(1.0, up), hi = r * std::max(1.0, up);
    if (lo > 1.0) return {"fail", target.c == recorded.c ? "exact" : "bound"};
    if (hi <= 1.0) return {"pass", target.c == recorded.c ? "exact" : "bound"};
    return {"undetermined", "undetermined"};
}

nlohmann::json rejudge_corpus(const std::vector<nlohmann::json>& records, const Settings& target) {
    std::map<std::string, ModelInfo> cache;
    int64_t judged = 0, lo = 0, hi = 0, undetermined = 0;
    std::map<std::string, std::array<int64_t, 3>> per_gate;   // fail_lo, fail_hi, judged
    std::map<std::string, int64_t> how;
    for (const auto& r : records) {
        if (r.contains("error")) continue;
        ++judged;
        const ModelInfo mi = model_of(r, cache);
        const Settings rec = settings_of(r);
        bool fails = false, maybe = false;
        for (const auto& g : r.value("gates", nlohmann::json::array())) {
            const Rejudged x = rejudge_gate(g, rec, target, mi.model, mi.float_outputs);
            auto& pg = per_gate[g.value("id", "")];
            ++how[x.how];
            if (x.state == "fail") {
                fails = true;
                ++pg[0], ++pg[1], ++pg[2];
            } else if (x.state == "undetermined") {
                maybe = true;
                ++pg[1], ++pg[2];
            } else if (x.state == "pass") {
                ++pg[2];
            }
        }
        lo += fails;
        hi += fails || maybe;
        undetermined += !fails && maybe;
    }
    nlohmann::json gates = nlohmann::json::object();
    for (const auto& def : all_gates()) {
        const auto& pg = per_gate[def.id];
        gates[def.id] = {{"fail_lo", pg[0]}, {"fail_hi", pg[1]}, {"judged", pg[2]}};
    }
    return {{"records", records.size()},     {"judged", judged},
            {"failed_lo", lo},               {"failed_hi", hi},
            {"rate_lo", rate(lo, judged)},   {"rate_hi", rate(hi, judged)},
            {"rate", rate(lo, judged)},      {"undetermined", undetermined},
            {"per_gate", gates},             {"how", how}};
}

nlohmann::json choose_setting(const nlohmann::json& settings) {
    const nlohmann::json* best = nullptr;
    for (const auto& st : settings) {
        const auto ctl = st.value("controls", nlohmann::json::object());
        if (ctl.value("total", 0) == 0 || ctl.value("passed", -1) != ctl.value("total", 0)) continue;
        if (!best) {
            best = &st;
            continue;
        }
        const double c = st.value("c", 0.0), bc = (*best).value("c", 0.0);
        const double m = st.value("ord03_margin", 0.0), bm = (*best).value("ord03_margin", 0.0);
        if (c < bc || (c == bc && m < bm)) best = &st;
    }
    if (!best) return nullptr;
    const auto& b = *best;
    const auto rt = b.value("redteam", nlohmann::json::object());
    return {{"c", b.value("c", 0.0)},
            {"envelope_factor", b.value("envelope_factor", 0.0)},
            {"ord03_margin", b.value("ord03_margin", 0.0)},
            {"why", "the smallest c, then the smallest ORD-03 margin, at which every positive control passes every "
                    "gate; the red team is caught " +
                        std::to_string(rt.value("caught", 0)) + " of " + std::to_string(rt.value("total", 0)) +
                        " there"}};
}

nlohmann::json calibrate(const CalibrationOptions& opts, const CalibrationProgress& progress) {
    const auto& grid = opts.grid;
    if (grid.c.empty() || grid.margins.empty()) throw std::invalid_argument("calibrate: an empty grid");
    const Settings base = opts.verify.settings;

    // The margin every full run uses: the grid's value nearest the default, 1.2.
    double base_margin = grid.margins.front();
    for (double m : grid.margins)
        if (std::fabs(m - Settings{}.ord03_margin) < std::fabs(base_margin - Settings{}.ord03_margin)) base_margin = m;

    struct Run {
        std::string label;
        Settings settings;
        std::vector<std::string> gates;
        nlohmann::json result;
    };
    std::vector<Run> runs;
    if (opts.defences) {
        if (opts.exhaustive) {
            for (double c : grid.c)
                for (double m : grid.margins) runs.push_back({"", grid_settings(base, c, m), {}, nullptr});
        } else {
            for (double c : grid.c) runs.push_back({"", grid_settings(base, c, base_margin), {}, nullptr});
            for (double m : grid.margins) {
                if (m == base_margin) continue;
                runs.push_back({"", grid_settings(base, grid.c.front(), m), {"ORD-03"}, nullptr});
            }
        }
    }
    const int nruns = static_cast<int>(runs.size());
    for (int i = 0; i < nruns; ++i) {
        Run& run = runs[static_cast<size_t>(i)];
        char label[96];
        std::snprintf(label, sizeof label, "c=%g margin=%g%s", run.settings.c, run.settings.ord03_margin,
                      run.gates.empty() ? "" : " (ORD-03 only)");
        run.label = label;
        VerifyOptions vo = opts.verify;
        vo.settings = run.settings;
        vo.only_gates = run.gates;
        run.result = to_json(run_redteam(vo, [&](const std::string& what, int done, int total) {
            if (progress) progress(run.label + ": " + what, i, nruns, done, total);
        }));
    }
    if (progress) progress("done", nruns, nruns, 1, 1);

    auto full_run = [&](double c, double m) -> const Run* {
        for (const Run& r : runs)
            if (r.gates.empty() && r.settings.c == c && r.settings.ord03_margin == m) return &r;
        return nullptr;
    };
    auto ord03_run = [&](double m) -> const Run* {
        for (const Run& r : runs)
            if (!r.gates.empty() && r.settings.ord03_margin == m) return &r;
        return nullptr;
    };

    std::vector<nlohmann::json> corpus;
    if (!opts.corpus.empty()) corpus = read_journal(opts.corpus);

    nlohmann::json settings = nlohmann::json::array();
    for (double c : grid.c) {
        for (double m : grid.margins) {
            const Settings s = grid_settings(base, c, m);
            nlohmann::json point = {{"c", c}, {"envelope_factor", s.envelope_factor}, {"ord03_margin", m}};
            if (opts.defences) {
                nlohmann::json run;
                if (const Run* r = full_run(c, m)) {
                    run = r->result;
                    point["defences_from"] = "run";
                } else {
                    run = compose_ord03(full_run(c, base_margin)->result, ord03_run(m)->result);
                    point["defences_from"] = "composed";
                }
                const auto rates = defence_rates(run);
                point["controls"] = rates["controls"];
                point["redteam"] = rates["redteam"];
                point["gate_margins"] = gate_margins(run, s);
            }
            if (!opts.corpus.empty()) point["corpus"] = rejudge_corpus(corpus, s);
            settings.push_back(std::move(point));
        }
    }

    nlohmann::json out = {{"kcv_calibration", kCalibrationVersion},
                          {"quick", base.quick},
                          {"seed", base.seed},
                          {"grid", {{"c", grid.c}, {"ord03_margin", grid.margins}, {"envelope_factor", "c/2"}}},
                          {"settings", settings}};
    out["chosen"] = opts.defences ? choose_setting(settings) : nullptr;
    out["gate_margins"] = nlohmann::json::array();
    if (!out["chosen"].is_null()) {
        for (const auto& st : settings) {
            if (st["c"] == out["chosen"]["c"] && st["ord03_margin"] == out["chosen"]["ord03_margin"])
                out["gate_margins"] = st.value("gate_margins", nlohmann::json::array());
        }
    }

    nlohmann::json method = nlohmann::json::object();
    if (opts.defences) {
        method["defences"] =
            std::string("the red team and the positive controls re-run through run_redteam") +
            (base.quick ? " with --quick (smaller sweeps, to keep the sweep tractable)" : " with full sweeps") +
            (opts.exhaustive ? ", every gate at every grid point"
                             : "; once per c with every gate (margin " + json_num(base_margin).dump() +
                                   ") and once per other margin with ORD-03 alone, each grid point composed from "
                                   "the two (exact: ORD-03 reads no setting but the margin, no other gate reads it)");
        method["margins"] = "per gate, threshold / the largest metric any control record reached (threshold 1 for "
                            "the ratio gates, the margin for ORD-03, or the contract's own where wider); "
                            "tolerance-free gates have no threshold. A control's ORD-03 envelope includes its own "
                            "error, so its ratio is at most 1 and every margin >= 1 keeps it passing: ORD-03's "
                            "margin is bounded only by sweeping a contract's controls against each other "
                            "(bench/ord03_sweep.py), which sets the contract's measurement.ord03_margin";
    } else {
        method["defences"] = "not run (--no-defences)";
    }
    if (!opts.corpus.empty()) {
        method["corpus"] =
            "re-judged from the stored metrics, nothing re-run: ORD-03 exactly (ratio vs margin); ratio gates "
            "(PRC-01/02/03, ORD-01, CMP-01, CMP-02) exactly under the envelope model (r scales with 1/factor) and by "
            "the bound r·min(1,c/c') <= r' <= r·max(1,c/c') under the analytic model, undetermined where the bound "
            "straddles 1 (rate_lo counts certain failures, rate_hi adds the undetermined); kept as recorded: "
            "ORD-02, EXC-01, EXC-02, RES-01, RES-02, failures from crashes, hangs, launch errors or non-finite "
            "ratios, n/a verdicts (the controls are not re-run for a corpus) and errors";
        method["corpus_journal"] = opts.corpus;
    }
    out["method"] = method;
    return out;
}

}  // namespace kcv
