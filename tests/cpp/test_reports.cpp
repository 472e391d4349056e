// Reports over journals (HTML, Markdown, CSV, JUnit), the calibration sweep's re-judging and
// composition, and dispute sampling and shrinking.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "kcv/aggregate.hpp"
#include "kcv/calibrate.hpp"
#include "kcv/disputes.hpp"
#include "kcv/error_model.hpp"
#include "kcv/journal_report.hpp"
#include "kcv/tensor.hpp"

namespace fs = std::filesystem;
using namespace kcv;
using nlohmann::json;

namespace {

fs::path temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("kcv-test-reports-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

// A record with every gate passing except those given: {gate id, gate json overrides}.
json make_record(const std::string& id, const std::string& contract, const std::map<std::string, json>& gates,
                 int std_1e2 = -1, int std_1e4 = -1) {
    json g = json::array();
    for (const auto& def : all_gates()) {
        json x = {{"id", def.id}, {"verdict", "pass"}, {"signature", json::array()}, {"reason", "ok"},
                  {"metric", 0.25}, {"probes", 1}, {"evidence", json::array()}};
        auto it = gates.find(def.id);
        if (it != gates.end())
            for (const auto& [k, v] : it->second.items()) x[k] = v;
        g.push_back(x);
    }
    json r = {{"kcv_record", 1}, {"contract", contract}, {"candidate", {{"path", "/c/" + id + ".so"}}},
              {"settings", {{"seed", 0}, {"c", 4.0}, {"envelope_factor", 2.0}, {"ord03_margin", 1.2}, {"quick", true}}},
              {"gates", g}, {"corpus_id", id}, {"seconds", 1.5}};
    json sc = json::object();
    if (std_1e2 >= 0) sc["tol_1e-2"] = std_1e2 == 1;
    if (std_1e4 >= 0) sc["tol_1e-4"] = std_1e4 == 1;
    if (!sc.empty()) r["standard_check"] = sc;
    return r;
}

json failing(const std::string& cls, double ratio, const std::string& probe) {
    json ev = {{"probe", probe}, {"signature", cls + " seen"}, {"output", "y"}, {"worst_index", 17},
               {"worst_coords", {0, 17}}, {"expected", 1.5}, {"expected_bits", "0x3fc00000"},
               {"actual", 0.0}, {"actual_bits", "0x00000000"}, {"replay", "kcv verify --probe " + probe}};
    ev["ratio"] = std::isfinite(ratio) ? json(ratio) : json(std::isnan(ratio) ? "nan" : "inf");
    return {{"verdict", "fail"}, {"signature", {cls}}, {"reason", cls + " reason"}, {"evidence", {ev}},
            {"metric", ev["ratio"]}};
}

std::vector<json> sample_journal() {
    return {
        make_record("a", "relu-f32", {{"EXC-01", failing("nan-swallowed", NAN, "EXC-01/scattered-0.005")}}, 1, 1),
        make_record("b", "relu-f32", {{"ORD-01", failing("error-bound", 3.0, "ORD-01/task/seed=0")}}, 1, 0),
        make_record("c", "softmax-f32", {}, 1, 1),
        make_record("d", "softmax-f32", {{"ORD-01", failing("error-bound", 7.0, "ORD-01/task/seed=1")},
                                         {"CMP-01", failing("fails at N=17", 2.0, "CMP-01/N=17")}},
                    0, 0),
        make_record("e", "matmul-f32", {}, 0, 0),
    };
}

// A minimal RFC 4180 reader: the test's own, so the writer is checked against the format.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
    std::vector<std::vector<std::string>> rows(1);
    std::string field;
    bool quoted = false, in_quotes = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_quotes) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
            else if (c == '"') in_quotes = false;
            else field += c;
        } else if (c == '"' && field.empty() && !quoted) {
            in_quotes = quoted = true;
        } else if (c == ',') {
            rows.back().push_back(field), field.clear(), quoted = false;
        } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
            rows.back().push_back(field), field.clear(), quoted = false;
            rows.emplace_back();
            ++i;
        } else {
            field += c;
        }
    }
    if (rows.back().empty() && field.empty()) rows.pop_back();
    else rows.back().push_back(field);
    return rows;
}

size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

ReportData data_of(const std::vector<json>& records) {
    JournalInput in;
    in.source = "test.jsonl";
    in.kind = "journal";
    in.records = records;
    return build_report_data(in, ReportOptions{});
}

}  // namespace

// ---- loading

TEST(JournalInput, ReadsJournalLinesSingleRecordsArraysAndRedTeamJson) {
    const fs::path dir = temp_dir("load");
    const auto recs = sample_journal();
    {
        std::ofstream out(dir / "j.jsonl");
        for (const auto& r : recs) out << r.dump() << "\n";
    }
    JournalInput in = load_journal_input((dir / "j.jsonl").string());
    EXPECT_EQ(in.kind, "journal");
    ASSERT_EQ(in.records.size(), recs.size());
    EXPECT_EQ(record_id(in.records[3]), "d");

    std::ofstream(dir / "one.json") << recs[1].dump(2);
    in = load_journal_input((dir / "one.json").string());
    ASSERT_EQ(in.records.size(), 1u);
    EXPECT_EQ(record_id(in.records[0]), "b");

    std::ofstream(dir / "arr.json") << json(recs).dump();
    EXPECT_EQ(load_journal_input((dir / "arr.json").string()).records.size(), recs.size());

    const json rt = {{"redteam", {{{"name", "relu_fmaxf"}, {"target_gate", "EXC-01"}, {"caught", true},
                                   {"description", "fmaxf"}, {"record", recs[0]}}}},
                     {"controls", {{{"name", "elementwise"}, {"contracts", {"relu-f32", "exp-f32"}}, {"clean", true},
                                    {"records", {recs[2], recs[4]}}}}},
                     {"summary", {{"redteam_caught", 1}}}};
    std::ofstream(dir / "rt.json") << rt.dump(2);
    in = load_journal_input((dir / "rt.json").string());
    EXPECT_EQ(in.kind, "redteam");
    ASSERT_EQ(in.records.size(), 3u);
    EXPECT_EQ(record_id(in.records[0]), "relu_fmaxf");
    EXPECT_EQ(record_role(in.records[0]), "redteam");
    EXPECT_EQ(in.records[0]["target_gate"], "EXC-01");
    EXPECT_EQ(record_id(in.records[1]), "elementwise on softmax-f32");
    EXPECT_EQ(record_id(in.records[2]), "elementwise on matmul-f32");
    EXPECT_EQ(record_role(in.records[2]), "control");
    EXPECT_TRUE(is_redteam_json(in.redteam));
    fs::remove_all(dir);
}

TEST(JournalInput, RefusesAnUnknownRecordVersionAndAnEmptyFile) {
    const fs::path dir = temp_dir("version");
    json r = sample_journal()[0];
    r["kcv_record"] = 2;
    std::ofstream(dir / "v2.jsonl") << r.dump() << "\n";
    EXPECT_THROW(load_journal_input((dir / "v2.jsonl").string()), std::runtime_error);
    std::ofstream(dir / "empty.jsonl") << "\n";
    EXPECT_THROW(load_journal_input((dir / "empty.jsonl").string()), std::runtime_error);
    EXPECT_THROW(load_journal_input((dir / "missing.jsonl").string()), std::runtime_error);
    std::ofstream(dir / "cal.json") << json{{"settings", json::array()}, {"grid", {{"c", {2}}}}}.dump(2);
    try {
        load_journal_input((dir / "cal.json").string());
        FAIL() << "took a calibration document for records";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("neither a record"), std::string::npos) << e.what();
    }
    fs::remove_all(dir);
}

TEST(JournalInput, OperatorIsTheProblemNameForPythonAndTheContractOtherwise) {
    json py = make_record("x", "kernelbench.19_ReLU", {});
    py["problem"] = "/data/level1/19_ReLU.py";
    EXPECT_EQ(record_operator(py), "19_ReLU");
    json py2 = make_record("y", "kernelbench.t", {});
    py2["reference"] = "problems/matmul.py";
    EXPECT_EQ(record_operator(py2), "matmul");
    EXPECT_EQ(record_operator(make_record("z", "softmax-f32", {})), "softmax-f32");
    json no_id = make_record("w", "c", {});
    no_id.erase("corpus_id");
    EXPECT_EQ(record_id(no_id), "/c/w.so");
    EXPECT_EQ(standard_verdict(make_record("s", "c", {}, 1, 0), "tol_1e-2"), 1);
    EXPECT_EQ(standard_verdict(make_record("s", "c", {}, 1, 0), "tol_1e-4"), 0);
    EXPECT_EQ(standard_verdict(make_record("s", "c", {}), "tol_1e-2"), -1);
}

// ---- worst examples

TEST(WorstExamples, ToleranceFreeFirstThenLargestRatioOnePerGateFirst) {
    std::vector<json> recs = {
        make_record("r1", "c", {{"ORD-01", failing("error-bound", 50.0, "p1")}}),
        make_record("r2", "c", {{"ORD-01", failing("error-bound", 80.0, "p2")}}),
        make_record("r3", "c", {{"ORD-01", failing("error-bound", 60.0, "p3")}, {"CMP-01", failing("n", 1.5, "p4")}}),
        make_record("r4", "c", {{"RES-01", failing("oob-write", 0.0, "p5")}}),
        make_record("r5", "c", {{"ORD-01", failing("error-bound", NAN, "p6")}}),
    };
    const json w = worst_examples(recs, 4);
    ASSERT_EQ(w.size(), 4u);
    // RES-01 is tolerance-free; then the worst of ORD-01 (NaN outranks 80) and of CMP-01; then
    // by severity the next ORD-01 (80).
    EXPECT_EQ(w[0]["gate"], "RES-01");
    EXPECT_EQ(w[0]["id"], "r4");
    EXPECT_EQ(w[1]["gate"], "ORD-01");
    EXPECT_EQ(w[1]["id"], "r5");
    EXPECT_EQ(w[2]["gate"], "CMP-01");
    EXPECT_EQ(w[3]["id"], "r2");
    EXPECT_EQ(w[3]["evidence"]["probe"], "p2");
    EXPECT_EQ(worst_examples(recs, 100).size(), 6u);
    EXPECT_TRUE(worst_examples({make_record("ok", "c", {})}, 5).empty());
}

// ---- renderings

TEST(ReportHtml, SelfContainedWithChartsAndEscapedText) {
    auto recs = sample_journal();
    recs[0]["corpus_id"] = "<script>alert(1)</script>";
    ReportOptions opts;
    opts.calibration = {{"grid", {{"c", {2, 4}}, {"ord03_margin", {1.0, 1.2}}}},
                        {"settings",
                         {{{"c", 2}, {"envelope_factor", 1}, {"ord03_margin", 1.0},
                           {"controls", {{"passed", 3}, {"total", 3}, {"rate", 1.0}}},
                           {"redteam", {{"caught", 18}, {"total", 19}, {"rate", 18.0 / 19}}},
                           {"corpus", {{"rate_lo", 0.2}, {"rate_hi", 0.3}, {"rate", 0.2}}}},
                          {{"c", 4}, {"envelope_factor", 2}, {"ord03_margin", 1.2},
                           {"controls", {{"passed", 3}, {"total", 3}, {"rate", 1.0}}},
                           {"redteam", {{"caught", 17}, {"total", 19}, {"rate", 17.0 / 19}}},
                           {"corpus", {{"rate_lo", 0.1}, {"rate_hi", 0.1}, {"rate", 0.1}}}}}},
                        {"chosen", {{"c", 2}, {"envelope_factor", 1}, {"ord03_margin", 1.0}, {"why", "tightest"}}}};
    JournalInput in;
    in.source = "t.jsonl";
    in.records = recs;
    const std::string html = render_report_html(build_report_data(in, opts));
    EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
    EXPECT_EQ(count(html, "<script"), 0u);
    EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
    // The only URL is the SVG namespace; nothing is fetched.
    EXPECT_EQ(count(html, "http"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
    EXPECT_EQ(count(html, "<link"), 0u);
    // gate rates, floor, two differential matrices, three calibration curves
    EXPECT_EQ(count(html, "<svg"), 7u);
    EXPECT_NE(html.find("failure rate per gate"), std::string::npos);
    EXPECT_NE(html.find("0x3fc00000"), std::string::npos);
    EXPECT_NE(html.find("kcv verify --probe EXC-01/scattered-0.005"), std::string::npos);
    EXPECT_NE(html.find("2 passed, 3 failed"), std::string::npos);
}

TEST(ReportMarkdown, TablesEscapePipesAndFencesOutlastBackticks) {
    auto recs = sample_journal();
    recs[1]["corpus_id"] = "a|b";
    recs[1]["gates"][3]["evidence"][0]["replay"] = "echo ```x```";
    const std::string md = render_report_markdown(data_of(recs));
    EXPECT_NE(md.find("| a\\|b |"), std::string::npos);
    EXPECT_NE(md.find("````\necho ```x```\n````"), std::string::npos);
    EXPECT_NE(md.find("| ORD-01 | reordered-reduction tolerance |  | 2 | 3 | 0 | 0 | 40.0% |"), std::string::npos) << md;
    EXPECT_NE(md.find("| standard pass | 1 | 2 |"), std::string::npos);
    EXPECT_NE(md.find("2 passed, 3 failed\n"), std::string::npos);
}

TEST(ReportCsv, OneRowPerCandidateAndGateThatParsesBack) {
    auto recs = sample_journal();
    recs[2]["corpus_id"] = "comma, \"quote\"\nnewline";
    const std::string csv = render_report_csv(data_of(recs));
    const auto rows = parse_csv(csv);
    ASSERT_EQ(rows.size(), 1 + recs.size() * all_gates().size());
    const auto& head = rows[0];
    for (const auto& row : rows) ASSERT_EQ(row.size(), head.size());
    auto col = [&](const std::string& name) {
        return size_t(std::find(head.begin(), head.end(), name) - head.begin());
    };
    // Record c's first gate, with its awkward id intact.
    const auto& c_row = rows[1 + 2 * all_gates().size()];
    EXPECT_EQ(c_row[col("candidate")], "comma, \"quote\"\nnewline");
    EXPECT_EQ(c_row[col("gate")], "PRC-01");
    // Record a's EXC-01 row (9th gate).
    const auto& a_exc = rows[1 + 8];
    EXPECT_EQ(a_exc[col("gate")], "EXC-01");
    EXPECT_EQ(a_exc[col("verdict")], "fail");
    EXPECT_EQ(a_exc[col("tolerance_free")], "true");
    EXPECT_EQ(a_exc[col("ratio")], "nan");
    EXPECT_EQ(a_exc[col("worst_coords")], "0 17");
    EXPECT_EQ(a_exc[col("expected_bits")], "0x3fc00000");
    EXPECT_EQ(a_exc[col("standard_1e-2")], "pass");
    EXPECT_EQ(rows[1 + 3][col("metric")], "0.25");
}

TEST(ReportJunit, TestcasePerCandidateFailurePerFailedGateAndCleanXmlText) {
    auto recs = sample_journal();
    recs[3]["corpus_id"] = std::string("ctl\x01") + "\"q\"";
    json err = make_record("broken", "c", {});
    err["error"] = {{"code", "load-failed"}, {"message", "cannot load <x>"}};
    recs.push_back(err);
    json gate_error = make_record("half", "c", {{"RES-02", {{"verdict", "error"}, {"code", "timeout"}}}});
    recs.push_back(gate_error);
    const std::string x = render_report_junit(data_of(recs));
    EXPECT_EQ(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"kcv\" tests=\"7\" failures=\"3\" "
                      "errors=\"2\"",
                      0),
              0u)
        << x.substr(0, 200);
    EXPECT_EQ(count(x, "<testcase "), 7u);
    EXPECT_EQ(count(x, "<failure "), 4u);   // a: EXC-01, b: ORD-01, d: ORD-01 and CMP-01
    EXPECT_EQ(count(x, "<error "), 2u);
    EXPECT_NE(x.find("name=\"ctl\xEF\xBF\xBD&quot;q&quot;\""), std::string::npos);
    EXPECT_NE(x.find("message=\"cannot load &lt;x&gt;\""), std::string::npos);
    EXPECT_EQ(x.find('\x01'), std::string::npos);
    EXPECT_NE(x.find("<failure type=\"CMP-01\" message=\"fails at N=17 seen\">"), std::string::npos);
}

TEST(Report, WritesFourFiles) {
    const fs::path dir = temp_dir("write");
    const auto paths = write_report(data_of(sample_journal()), (dir / "out").string());
    ASSERT_EQ(paths.size(), 4u);
    for (const auto& p : paths) EXPECT_GT(fs::file_size(p), 100u) << p;
    fs::remove_all(dir);
}

// ---- calibration

TEST(Rejudge, EnvelopeModelScalesExactlyWithTheFactor) {
    Settings rec;   // c 4, factor 2
    const json g = {{"id", "ORD-01"}, {"verdict", "pass"}, {"metric", 0.75}};
    EXPECT_EQ(rejudge_gate(g, rec, grid_settings(rec, 2, 1.2), "envelope", 1).state, "fail");   // 1.5
    EXPECT_EQ(rejudge_gate(g, rec, grid_settings(rec, 2, 1.2), "envelope", 1).how, "exact");
    EXPECT_EQ(rejudge_gate(g, rec, grid_settings(rec, 3, 1.2), "envelope", 1).state, "pass");   // 1.0
    const json f = {{"id", "CMP-01"}, {"verdict", "fail"}, {"metric", 1.5}};
    EXPECT_EQ(rejudge_gate(f, rec, grid_settings(rec, 8, 1.2), "envelope", 1).state, "pass");   // 0.75
    EXPECT_EQ(rejudge_gate(f, rec, grid_settings(rec, 6, 1.2), "envelope", 1).state, "pass");   // 1.0
}

TEST(Rejudge, AnalyticModelDecidesOnlyWhereTheBoundDoes) {
    Settings rec;
    auto state = [&](const char* v, double r, double c) {
        return rejudge_gate({{"id", "ORD-01"}, {"verdict", v}, {"metric", r}}, rec, grid_settings(rec, c, 1.2),
                            "analytic", 1)
            .state;
    };
    EXPECT_EQ(state("pass", 0.4, 2), "pass");          // r' <= 0.8
    EXPECT_EQ(state("pass", 0.9, 2), "undetermined");  // r' in [0.9, 1.8]
    EXPECT_EQ(state("pass", 0.9, 8), "pass");          // r' <= 0.9
    EXPECT_EQ(state("fail", 3.0, 8), "fail");          // r' >= 1.5
    EXPECT_EQ(state("fail", 1.5, 8), "undetermined");  // r' in [0.75, 1.5]
    EXPECT_EQ(state("fail", 1.5, 2), "fail");          // r' >= 1.5
    EXPECT_EQ(state("fail", 1.5, 4), "fail");
    EXPECT_EQ(rejudge_gate({{"id", "ORD-01"}, {"verdict", "fail"}, {"metric", 1.5}}, rec, grid_settings(rec, 4, 1.2),
                           "analytic", 1)
                  .how,
              "exact");
}

TEST(Rejudge, Ord03ComparesTheStoredRatioWithTheMargin) {
    Settings rec;   // margin 1.2
    const json pass = {{"id", "ORD-03"}, {"verdict", "pass"}, {"metric", 1.125}};
    EXPECT_EQ(rejudge_gate(pass, rec, grid_settings(rec, 2, 1.1), "", 0).state, "fail");
    EXPECT_EQ(rejudge_gate(pass, rec, grid_settings(rec, 2, 1.125), "", 0).state, "pass");
    const json fail = {{"id", "ORD-03"}, {"verdict", "fail"}, {"metric", 1.25}};
    EXPECT_EQ(rejudge_gate(fail, rec, grid_settings(rec, 4, 1.5), "analytic", 1).state, "pass");
    // A record from a judge that stopped at a call's first failing output (no per-entry ratio):
    // with two float outputs the other is unseen.
    EXPECT_EQ(rejudge_gate(fail, rec, grid_settings(rec, 4, 1.5), "analytic", 2).state, "undetermined");
    EXPECT_EQ(rejudge_gate(fail, rec, grid_settings(rec, 4, 1.0), "analytic", 2).state, "fail");
    // The judge now measures every output and records each one's ratio: exact.
    json whole = fail;
    whole["detail"]["errors"] = json::array({json{{"output", "o"}, {"ratio", 1.25}}, json{{"output", "ht"}, {"ratio", 0.5}}});
    const Rejudged r = rejudge_gate(whole, rec, grid_settings(rec, 4, 1.5), "analytic", 2);
    EXPECT_EQ(r.state, "pass");
    EXPECT_EQ(r.how, "exact");
}

TEST(Rejudge, KeepsWhatNoThresholdExplains) {
    Settings rec;
    const Settings loose = grid_settings(rec, 8, 2.0);
    EXPECT_EQ(rejudge_gate({{"id", "EXC-01"}, {"verdict", "fail"}}, rec, loose, "", 0).how, "kept");
    EXPECT_EQ(rejudge_gate({{"id", "EXC-02"}, {"verdict", "fail"}, {"metric", 9.0}}, rec, loose, "", 0).state, "fail");
    const json launch = {{"id", "ORD-01"}, {"verdict", "fail"}, {"metric", 0.0},
                         {"evidence", {{{"probe", "p"}, {"detail", {{"status", 3}}}}}}};
    EXPECT_EQ(rejudge_gate(launch, rec, loose, "analytic", 1).state, "fail");
    EXPECT_EQ(rejudge_gate({{"id", "ORD-01"}, {"verdict", "fail"}, {"metric", "inf"}}, rec, loose, "envelope", 1).state,
              "fail");
    EXPECT_EQ(rejudge_gate({{"id", "ORD-01"}, {"verdict", "fail"}, {"metric", 0.5}}, rec, loose, "envelope", 1).how,
              "kept");
    EXPECT_EQ(rejudge_gate({{"id", "ORD-01"}, {"verdict", "n/a"}}, rec, loose, "analytic", 1).state, "n/a");
}

// The bound the analytic re-judging rests on, checked against the error model itself: for
// random outputs, the ratio at c' lies within [r·min(1, c/c'), r·max(1, c/c')], and a decided
// re-judgement agrees with the recomputed ratio.
TEST(Rejudge, AnalyticBoundHoldsAgainstTheErrorModel) {
    const uint64_t seed = 20240601;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    OutputSpec spec;
    spec.model = ErrorModelKind::reduction;
    for (int trial = 0; trial < 200; ++trial) {
        const int64_t n = 1 + int64_t(rng() % 64), k = 1 + int64_t(rng() % 4096);
        Tensor ystar = Tensor::empty(DType::f64, {n}), scale = Tensor::empty(DType::f64, {n});
        Tensor y = Tensor::empty(DType::f32, {n});
        const double noise = std::ldexp(1.0, -int(rng() % 20) - 4);
        for (int64_t i = 0; i < n; ++i) {
            const double ys = u(rng) * std::ldexp(1.0, int(rng() % 10) - 5);
            ystar.set(i, ys);
            scale.set(i, std::fabs(ys) * (1 + 10 * std::fabs(u(rng))));
            y.set(i, ys + noise * u(rng) * std::fabs(ys));
        }
        const double c0 = 4;
        const double r0 = analytic_ratio(y, ystar, scale, k, params_for(spec, c0)).r;
        for (double c1 : {2.0, 8.0}) {
            const double r1 = analytic_ratio(y, ystar, scale, k, params_for(spec, c1)).r;
            const double lo = r0 * std::min(1.0, c0 / c1), hi = r0 * std::max(1.0, c0 / c1);
            ASSERT_GE(r1, lo * (1 - 1e-12)) << "seed " << seed << " trial " << trial << " c' " << c1;
            ASSERT_LE(r1, hi * (1 + 1e-12)) << "seed " << seed << " trial " << trial << " c' " << c1;
            Settings rec;
            const json g = {{"id", "ORD-01"}, {"verdict", r0 <= 1 ? "pass" : "fail"}, {"metric", r0}};
            const Rejudged x = rejudge_gate(g, rec, grid_settings(rec, c1, 1.2), "analytic", 1);
            if (x.state == "pass") {
                EXPECT_LE(r1, 1.0) << "seed " << seed << " trial " << trial;
            }
            if (x.state == "fail") {
                EXPECT_GT(r1, 1.0) << "seed " << seed << " trial " << trial;
            }
        }
    }
}

TEST(Rejudge, CorpusCountsCertainAndUndeterminedFailures) {
    std::vector<json> recs = {
        make_record("p", "x", {{"ORD-01", {{"metric", 0.9}}}}),                                // undetermined at c=2
        make_record("f", "x", {{"ORD-01", failing("error-bound", 3.0, "p")}}),                  // fails everywhere
        make_record("t", "x", {{"EXC-01", failing("nan-swallowed", NAN, "p")}}),              // kept
        make_record("ok", "x", {}),
    };
    recs.push_back(make_record("err", "x", {}));
    recs.back()["error"] = {{"code", "load-failed"}, {"message", "m"}};
    const json at2 = rejudge_corpus(recs, grid_settings(Settings{}, 2, 1.2));
    EXPECT_EQ(at2["judged"], 4);
    EXPECT_EQ(at2["failed_lo"], 2);
    EXPECT_EQ(at2["failed_hi"], 3);
    EXPECT_EQ(at2["undetermined"], 1);
    EXPECT_DOUBLE_EQ(at2["rate_lo"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(at2["rate_hi"].get<double>(), 0.75);
    EXPECT_EQ(at2["per_gate"]["ORD-01"]["fail_lo"], 1);
    EXPECT_EQ(at2["per_gate"]["ORD-01"]["fail_hi"], 2);
    const json at8 = rejudge_corpus(recs, grid_settings(Settings{}, 8, 1.2));
    EXPECT_EQ(at8["failed_lo"], 2);   // 3.0 at c=4 is at least 1.5 at c=8
    EXPECT_EQ(at8["failed_hi"], 2);
}

namespace {
json rt_run(const std::string& ord03_verdict_rt, const std::string& ord03_verdict_ctl, double ord03_metric_ctl) {
    json rt_rec = make_record("rt", "exp-f32", {{"ORD-03", {{"verdict", ord03_verdict_rt}, {"metric", 1.3}}},
                                                {"ORD-01", {{"metric", 0.5}}}});
    json ctl_rec = make_record("ctl", "exp-f32", {{"ORD-03", {{"verdict", ord03_verdict_ctl}, {"metric", ord03_metric_ctl}}},
                                                  {"ORD-01", {{"metric", 0.125}}},
                                                  {"CMP-01", {{"metric", 0.0}}}});
    json other = make_record("rt2", "relu-f32", {{"EXC-01", failing("nan-swallowed", NAN, "p")}});
    return {{"redteam",
             {{{"name", "exp_few_ulp_bias"}, {"target_gate", "ORD-03"}, {"record", rt_rec},
               {"failed_gates", json::array()}, {"caught", false}},
              {{"name", "relu_fmaxf"}, {"target_gate", "EXC-01"}, {"record", other},
               {"failed_gates", {"EXC-01"}}, {"caught", true}}}},
            {"controls", {{{"name", "elementwise"}, {"contracts", {"exp-f32"}}, {"records", {ctl_rec}},
                           {"failed_gates", json::array()}, {"clean", true}}}}};
}
}  // namespace

TEST(Calibrate, ComposesOrd03FromItsOwnRun) {
    const json base = rt_run("pass", "pass", 1.0);
    json tight = rt_run("fail", "fail", 1.0);
    tight["redteam"][0]["record"]["gates"][3]["metric"] = 0.875;
    const json composed = compose_ord03(base, tight);
    EXPECT_TRUE(composed["redteam"][0]["caught"].get<bool>());
    EXPECT_EQ(composed["redteam"][0]["failed_gates"], json({"ORD-03"}));
    EXPECT_EQ(composed["redteam"][0]["record"]["any_violation"], true);
    EXPECT_TRUE(composed["redteam"][1]["caught"].get<bool>());
    EXPECT_FALSE(composed["controls"][0]["clean"].get<bool>());
    EXPECT_EQ(composed["summary"]["redteam_caught"], 2);
    EXPECT_EQ(composed["summary"]["controls_clean"], 0);
    // The other gates come from the base run.
    EXPECT_EQ(composed["redteam"][0]["record"]["gates"][3]["metric"], 0.5);

    const json rates = defence_rates(composed);
    EXPECT_EQ(rates["controls"]["passed"], 0);
    EXPECT_EQ(rates["controls"]["total"], 1);
    EXPECT_EQ(rates["controls"]["failed"][0]["gates"], json({"ORD-03"}));
    EXPECT_EQ(rates["redteam"]["caught"], 2);
    const json base_rates = defence_rates(base);
    EXPECT_EQ(base_rates["redteam"]["missed"], json({"exp_few_ulp_bias"}));
    EXPECT_DOUBLE_EQ(base_rates["controls"]["rate"].get<double>(), 1.0);
}

TEST(Calibrate, GateMarginsAreThresholdOverTheLargestControlMetric) {
    const json m = gate_margins(rt_run("pass", "pass", 0.8), grid_settings(Settings{}, 4, 1.2));
    std::map<std::string, json> by;
    for (const auto& g : m) by[g["gate"]] = g;
    EXPECT_DOUBLE_EQ(by["ORD-01"]["margin"].get<double>(), 8.0);        // 1 / 0.125
    EXPECT_DOUBLE_EQ(by["ORD-03"]["margin"].get<double>(), 1.5);        // 1.2 / 0.8
    EXPECT_EQ(by["CMP-01"]["margin"], "inf");                           // the control is exact
    EXPECT_DOUBLE_EQ(by["PRC-01"]["largest_control_metric"].get<double>(), 0.25);
    EXPECT_EQ(by["ORD-01"]["control"], "elementwise on exp-f32");
    EXPECT_EQ(by.count("EXC-01"), 0u);   // tolerance-free: no threshold
}

TEST(Calibrate, ChoosesTheSmallestCThenTheSmallestMarginWithEveryControlPassing) {
    auto pt = [](double c, double m, int passed) {
        return json{{"c", c}, {"envelope_factor", c / 2}, {"ord03_margin", m},
                    {"controls", {{"passed", passed}, {"total", 3}}}, {"redteam", {{"caught", 1}, {"total", 2}}}};
    };
    const json s = {pt(2, 1.0, 2), pt(2, 1.1, 2), pt(4, 1.5, 3), pt(4, 1.2, 3), pt(8, 1.0, 3)};
    const json ch = choose_setting(s);
    EXPECT_EQ(ch["c"], 4);
    EXPECT_EQ(ch["ord03_margin"], 1.2);
    EXPECT_TRUE(choose_setting(json{pt(2, 1.0, 2)}).is_null());
}

// ---- disputes

namespace {
std::vector<json> dispute_journal() {
    std::vector<json> recs;
    const char* ops[] = {"relu-f32", "softmax-f32", "matmul-f32"};
    for (int i = 0; i < 30; ++i) {
        const std::string op = ops[i % 3];
        std::map<std::string, json> gates;
        if (i % 5 == 0) gates["EXC-01"] = failing("nan-swallowed", NAN, "EXC-01/p");
        if (i % 4 == 1) gates["ORD-01"] = failing("error-bound", 2.0, "ORD-01/p");
        // Standard passes for most, fails for every 7th.
        recs.push_back(make_record("cand" + std::to_string(i), op, gates, i % 7 == 0 ? 0 : 1, 0));
    }
    return recs;
}
}  // namespace

TEST(Disputes, FindsBothKindsOfDisagreement) {
    const auto recs = dispute_journal();
    const auto d = find_disputes(recs, "tol_1e-2");
    std::set<std::string> kinds;
    for (const auto& x : d) {
        kinds.insert(x.kind);
        const bool violation = !x.failed_gates.empty();
        const int standard = standard_verdict(recs[x.index], "tol_1e-2");
        EXPECT_EQ(violation, standard == 1) << x.id;
    }
    EXPECT_EQ(kinds.size(), 2u);
    // cand0 fails EXC-01 and the standard check: they agree, no dispute.
    EXPECT_TRUE(std::none_of(d.begin(), d.end(), [](const Dispute& x) { return x.id == "cand0"; }));
    // Under 1e-4 every standard verdict is a fail: only kcv-clean records are disputes.
    for (const auto& x : find_disputes(recs, "tol_1e-4")) EXPECT_EQ(x.kind, "standard-fail-kcv-clean");
}

TEST(Disputes, SampleIsSeededStratifiedAndIndependentOfJournalOrder) {
    auto recs = dispute_journal();
    const auto d = find_disputes(recs, "tol_1e-2");
    std::set<std::pair<std::string, std::string>> strata;
    for (const auto& x : d)
        for (const auto& s : strata_of(x)) strata.insert(s);
    const auto a = stratified_sample(d, strata.size(), 7);
    ASSERT_EQ(a.size(), strata.size());
    std::set<std::string> gates_seen, ids;
    for (const auto& [x, s] : a) {
        gates_seen.insert(s.first);
        EXPECT_TRUE(ids.insert(x.id).second) << "picked twice: " << x.id;
        const auto st = strata_of(x);
        EXPECT_NE(std::find(st.begin(), st.end(), s), st.end());
    }
    EXPECT_EQ(gates_seen, (std::set<std::string>{"EXC-01", "ORD-01", "none"}));

    std::reverse(recs.begin(), recs.end());
    const auto d2 = find_disputes(recs, "tol_1e-2");
    const auto b = stratified_sample(d2, strata.size(), 7);
    ASSERT_EQ(b.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].first.id, b[i].first.id) << i;
        EXPECT_EQ(a[i].second, b[i].second) << i;
    }
    const auto all = stratified_sample(d, 1000, 7);
    EXPECT_EQ(all.size(), d.size());
    EXPECT_EQ(stratified_sample(d, 3, 7).size(), 3u);
    bool differs = false;
    for (uint64_t seed = 8; seed < 16 && !differs; ++seed) {
        const auto c = stratified_sample(d, strata.size(), seed);
        for (size_t i = 0; i < c.size(); ++i) differs = differs || c[i].first.id != a[i].first.id;
    }
    EXPECT_TRUE(differs) << "the seed does not change the draw";
}

TEST(Disputes, ReplayCommandNamesEveryOverride) {
    Contract c = resolve_contract("relu-f32");
    Settings s;
    s.quick = true;
    ProbeOverride o;
    o.dims = {{"N", 1}, {"R", 1}};
    o.single_special = true;
    EXPECT_EQ(replay_override_command(c, "/k/x y.so", s, "CMP-01/N=17", o),
              "kcv replay --contract relu-f32 --candidate '/k/x y.so' --seed 0 --quick --gate CMP-01 "
              "--probe CMP-01/N=17 --dim N=1 --dim R=1 --single-special");
}

TEST(Disputes, PythonShrinkRequestListsTheLaddersOfTheTasksFreeDims) {
    json r = make_record("py", "kernelbench.relu", {});
    r["reference"] = "/p/relu.py";
    r["device"] = "cuda:1";
    r["task"] = {{"contract", {{"dims", {{{"name", "batch_size"}, {"nominal", 16}, {"free", true}, {"min", 1}},
                                         {{"name", "fixed"}, {"nominal", 8}, {"free", false}}}}}}};
    const json req = python_shrink_request(r, "CMP-01", "CMP-01/batch_size=17");
    EXPECT_EQ(req["reference"], "/p/relu.py");
    EXPECT_EQ(req["gates"], json({"CMP-01"}));
    EXPECT_EQ(req["shrink"]["probe"], "CMP-01/batch_size=17");
    EXPECT_EQ(req["shrink"]["dims"]["batch_size"]["try"], json({1, 2, 3, 4, 5, 6, 7, 8, 9, 15}));
    EXPECT_FALSE(req["shrink"]["dims"].contains("fixed"));
}

#ifdef KCV_TEST_KERNEL_DIR
// End to end on the project's kernels: the red-team kernel without a tail mask fails CMP-01 at
// N = 17; shrinking finds R = 1, N = 1 (one element, never written), where the control passes.
TEST(Disputes, ShrinksAMissingTailMaskToOneElement) {
    VerifyOptions vo;
    vo.settings.quick = true;
    vo.kernel_dir = KCV_TEST_KERNEL_DIR;
    const std::string cand = std::string(KCV_TEST_KERNEL_DIR) + "/kcv_redteam_relu_missing_tail_mask.so";
    ASSERT_TRUE(fs::exists(cand)) << cand;
    const Contract c = resolve_contract("relu-f32");
    const ShrinkResult s = shrink_native(c, cand, "CMP-01", "CMP-01/N=17", vo);
    ASSERT_TRUE(s.reproduced) << s.note;
    EXPECT_EQ(s.original_dims, (DimValues{{"N", 17}, {"R", 4}}));
    EXPECT_EQ(s.dims, (DimValues{{"N", 1}, {"R", 1}}));
    EXPECT_EQ(s.result.verdict, Verdict::fail);
    ASSERT_FALSE(s.result.evidence.empty());
    EXPECT_EQ(s.result.evidence.front().worst_coords, (std::vector<int64_t>{0, 0}));
    EXPECT_EQ(s.replay, "kcv replay --contract relu-f32 --candidate " + cand +
                            " --seed 0 --quick --gate CMP-01 --probe CMP-01/N=17 --dim N=1 --dim R=1");
    // The honest control does not fail the minimal input.
    const GateResult ctl = run_probe_with(*find_gate("CMP-01"), c, control_path(KCV_TEST_KERNEL_DIR, "elementwise"), vo,
                                          "CMP-01/N=17", s.applied);
    EXPECT_EQ(ctl.verdict, Verdict::pass) << ctl.reason;
    // An unknown probe or dimension is an error, not a verdict on the candidate.
    EXPECT_EQ(run_probe_with(*find_gate("CMP-01"), c, cand, vo, "CMP-01/N=5", {}).code, "no-such-probe");
    ProbeOverride bad;
    bad.dims["Q"] = 3;
    EXPECT_EQ(run_probe_with(*find_gate("CMP-01"), c, cand, vo, "CMP-01/N=17", bad).code, "unknown-dim");
}
#endif

#ifdef KCV_TEST_KERNEL_DIR
// Packets end to end: a native candidate the standard check would accept is shrunk and replayed;
// a clean one the standard check rejects gets the command that re-verifies it.
TEST(Disputes, WritesPacketsWithAShrunkReproducer) {
    VerifyOptions vo;
    vo.settings.quick = true;
    vo.kernel_dir = KCV_TEST_KERNEL_DIR;
    const std::string tail = std::string(KCV_TEST_KERNEL_DIR) + "/kcv_redteam_relu_missing_tail_mask.so";
    const std::string honest = control_path(KCV_TEST_KERNEL_DIR, "elementwise");
    const Contract c = resolve_contract("relu-f32");
    json a = to_json(verify(c, tail, vo));
    a["corpus_id"] = "tail";
    a["standard_check"] = {{"tol_1e-2", true}, {"tol_1e-4", true}};
    json b = to_json(verify(c, honest, vo));
    b["corpus_id"] = "honest";
    b["standard_check"] = {{"tol_1e-2", false}, {"tol_1e-4", false}};
    json none = b;
    none["corpus_id"] = "unchecked";
    none.erase("standard_check");
    ASSERT_EQ(a["failed_gates"], json({"CMP-01"}));
    ASSERT_EQ(b["failed_gates"], json::array());

    const fs::path dir = temp_dir("packets");
    DisputeOptions o;
    o.sample = 5;
    o.out_dir = (dir / "d").string();
    o.journal = "j.jsonl";
    o.verify = vo;
    const DisputeSummary s = write_dispute_packets({a, b, none}, o);
    EXPECT_EQ(s.records, 3u);
    EXPECT_EQ(s.with_standard, 2u);
    EXPECT_EQ(s.disputes, 2u);
    ASSERT_EQ(s.packets.size(), 2u);
    auto read = [](const fs::path& p) {
        std::ifstream in(p);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    std::map<std::string, std::string> readme;
    for (const auto& p : s.packets) {
        EXPECT_TRUE(fs::exists(fs::path(p) / "record.json")) << p;
        readme[read(fs::path(p) / "record.json").find("\"tail\"") != std::string::npos ? "tail" : "honest"] =
            read(fs::path(p) / "README.md");
    }
    const std::string& t = readme["tail"];
    const std::string probe = a["gates"][6]["evidence"][0]["probe"];
    EXPECT_EQ(probe, "CMP-01/N=1");
    EXPECT_NE(t.find("The standard check **accepts**"), std::string::npos) << t;
    EXPECT_NE(t.find("- dimensions: N=1, R=4 → **N=1, R=1**"), std::string::npos) << t;
    EXPECT_NE(t.find("```sh\nkcv replay --contract relu-f32 --candidate " + tail +
                     " --seed 0 --quick --gate CMP-01 --probe CMP-01/N=1 --dim R=1\n```"),
              std::string::npos)
        << t;
    EXPECT_NE(t.find("- expected: `"), std::string::npos) << t;
    const std::string& h = readme["honest"];
    EXPECT_NE(h.find("The standard check **rejects**"), std::string::npos) << h;
    EXPECT_NE(h.find("```sh\nkcv verify --contract relu-f32 --candidate " + honest + " --seed 0 --quick\n```"),
              std::string::npos)
        << h;
    const std::string index = read(dir / "d" / "README.md");
    EXPECT_NE(index.find("3 records, 2 with the standard check at 1e-2, 2 disputed"), std::string::npos) << index;
    EXPECT_EQ(count(index, "| standard-"), 2u);
    fs::remove_all(dir);
}
#endif

TEST(CalibrationPage, DrawsTheThreeCurves) {
    const json cal = {{"grid", {{"c", {2, 4}}, {"ord03_margin", {1.0, 2.0}}}},
                      {"quick", true},
                      {"settings",
                       {{{"c", 2}, {"envelope_factor", 1}, {"ord03_margin", 1.0},
                         {"controls", {{"passed", 2}, {"total", 3}, {"rate", 2.0 / 3}}},
                         {"redteam", {{"caught", 3}, {"total", 3}, {"rate", 1.0}}}},
                        {{"c", 4}, {"envelope_factor", 2}, {"ord03_margin", 2.0},
                         {"controls", {{"passed", 3}, {"total", 3}, {"rate", 1.0}}},
                         {"redteam", {{"caught", 2}, {"total", 3}, {"rate", 2.0 / 3}}}}}},
                      {"chosen", nullptr}};
    const std::string html = render_calibration_page(cal);
    // No corpus in the sweep: two curves, one line per c each.
    EXPECT_EQ(count(html, "<svg"), 2u);
    EXPECT_EQ(count(html, "<polyline"), 4u);
    EXPECT_NE(html.find("c ∈ {2, 4}, ORD-03 margin ∈ {1, 2}"), std::string::npos);
    EXPECT_NE(html.find("No setting keeps every control passing."), std::string::npos);
    EXPECT_NE(html.find("<td class=\"fail\">2/3</td>"), std::string::npos);
    EXPECT_EQ(count(html, "<script"), 0u);
}

#ifdef KCV_TEST_KERNEL_DIR
// The sweep on a small battery: composing each grid point from one run per c and one ORD-03 run
// per margin gives exactly what running every gate at every point gives.
TEST(Calibrate, CompositionEqualsTheExhaustiveSweep) {
    const fs::path dir = temp_dir("battery");
    for (const char* k : {"kcv_controls_elementwise.so", "kcv_redteam_relu_fmaxf.so", "kcv_redteam_exp_few_ulp_bias.so"})
        fs::create_symlink(fs::path(KCV_TEST_KERNEL_DIR) / k, dir / k);
    CalibrationOptions o;
    o.verify.settings.quick = true;
    o.verify.kernel_dir = dir.string();
    o.grid.c = {2, 4};
    // exp_few_ulp_bias's ORD-03 ratio is about 3.6 here: caught at 1.2, missed at 4, so a
    // composition that took ORD-03 from the wrong run would show.
    o.grid.margins = {1.2, 4.0};
    const json composed = calibrate(o);
    o.exhaustive = true;
    const json exhaustive = calibrate(o);
    ASSERT_EQ(composed["settings"].size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
        const json& a = composed["settings"][i];
        const json& b = exhaustive["settings"][i];
        EXPECT_EQ(a["defences_from"], i % 2 == 0 ? "run" : "composed") << i;
        EXPECT_EQ(a["redteam"]["missed"], i % 2 == 0 ? json::array() : json({"exp_few_ulp_bias"})) << i;
        EXPECT_EQ(b["defences_from"], "run");
        EXPECT_EQ(a["controls"], b["controls"]) << i;
        EXPECT_EQ(a["redteam"], b["redteam"]) << i;
        EXPECT_EQ(a["gate_margins"], b["gate_margins"]) << i;
        EXPECT_EQ(a["controls"]["total"], 8);    // the elementwise control serves eight contracts
        EXPECT_EQ(a["redteam"]["total"], 2);
    }
    EXPECT_EQ(composed["chosen"], exhaustive["chosen"]);
    EXPECT_FALSE(composed["chosen"].is_null());
    fs::remove_all(dir);
}
#endif
