// Subcommands over journals: report, calibrate, disputes, and replay (one probe with a smaller
// input, the reproducer a dispute packet names).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "kcv/aggregate.hpp"
#include "kcv/calibrate.hpp"
#include "kcv/disputes.hpp"
#include "kcv/gate.hpp"
#include "kcv/journal_report.hpp"
#include "kcv/record.hpp"
#include "kcv/report.hpp"

namespace kcv::cli {
namespace {
namespace fs = std::filesystem;

constexpr int kExitPass = 0, kExitFail = 1, kExitError = 2;

std::string paint(const ConsoleStyle& st, const char* code, const std::string& s) {
    return st.color ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
}

// A progress bar on stderr when it is a terminal; elsewhere a line per stage, so logs stay
// readable.
class ProgressBar {
public:
    ProgressBar() : tty_(isatty(2) != 0), style_(console_style_for(2)) {}
    ~ProgressBar() { finish(); }
    void update(const std::string& what, double fraction, const std::string& stage = "") {
        fraction = std::clamp(fraction, 0.0, 1.0);
        if (!tty_) {
            if (!stage.empty() && stage != last_stage_) std::cerr << stage << "\n";
            last_stage_ = stage;
            return;
        }
        const auto now = std::chrono::steady_clock::now();
        if (fraction < 1.0 && now - last_ < std::chrono::milliseconds(80)) return;
        last_ = now;
        constexpr int kWidth = 28;
        const int filled = static_cast<int>(fraction * kWidth + 0.5);
        std::string bar = std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(kWidth - filled), '.');
        char pct[16];
        std::snprintf(pct, sizeof pct, "%3.0f%%", 100.0 * fraction);
        std::string text = what.size() > 70 ? what.substr(0, 69) + "…" : what;
        std::cerr << "\r\033[K[" << paint(style_, "36", bar) << "] " << pct << " " << text << std::flush;
        shown_ = true;
    }
    void finish() {
        if (tty_ && shown_) std::cerr << "\r\033[K" << std::flush;
        shown_ = false;
    }

private:
    bool tty_;
    ConsoleStyle style_;
    bool shown_ = false;
    std::string last_stage_;
    std::chrono::steady_clock::time_point last_{};
};

nlohmann::json read_json_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    try {
        return nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        throw std::runtime_error("'" + path + "' is not JSON: " + e.what());
    }
}

void write_text(const std::string& path, const std::string& text) {
    if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write '" + path + "'");
    out << text;
    if (!out) throw std::runtime_error("error while writing '" + path + "'");
}

// ---- report

// The summary in GATES.md's order with fixed columns; the last line is the plain count.
std::string render_report_console(const nlohmann::json& s, const ConsoleStyle& st) {
    std::ostringstream os;
    char line[160];
    os << "records " << s.value("records", 0LL) << ", judged " << s.value("judged", 0LL) << ", not judged "
       << s.value("errors", 0LL) << "\n";
    os << "gate    name                              fail   pass    n/a  error  fail rate\n";
    for (const auto& g : all_gates()) {
        const auto& x = s["gates"][g.id];
        std::snprintf(line, sizeof line, "%-7s %-32s %6lld %6lld %6lld %6lld  ", g.id, g.name, x.value("fail", 0LL),
                      x.value("pass", 0LL), x.value("n/a", 0LL), x.value("error", 0LL));
        char rate[16];
        std::snprintf(rate, sizeof rate, "%8.1f%%", 100.0 * x.value("fail_rate", 0.0));
        os << line << (x.value("fail", 0LL) > 0 ? paint(st, "31", rate) : std::string(rate)) << "\n";
    }
    os << "tolerance-free floor:";
    for (const auto& p : profile_names()) {
        std::snprintf(line, sizeof line, "  %s %.1f%%", p.c_str(), 100.0 * s["floor"][p].value("rate", 0.0));
        os << line;
    }
    std::snprintf(line, sizeof line, "\nany violation: %.1f%%\n", 100.0 * s["any_violation"].value("rate", 0.0));
    os << line;
    for (const auto& [tol, d] : s["differential"].items()) {
        os << "standard check at " << tol.substr(4) << ": pass&clean " << d.value("standard_pass_kcv_clean", 0LL)
           << ", pass&violation " << d.value("standard_pass_kcv_violation", 0LL) << ", fail&clean "
           << d.value("standard_fail_kcv_clean", 0LL) << ", fail&violation "
           << d.value("standard_fail_kcv_violation", 0LL) << "\n";
    }
    if (s["parity"].value("compared", 0LL) > 0) {
        os << "parity with shipped labels: " << s["parity"].value("agree", 0LL) << " of "
           << s["parity"].value("compared", 0LL) << " agree\n";
    }
    const long long judged = s.value("judged", 0LL), failed = s["any_violation"].value("count", 0LL);
    os << (judged - failed) << " passed, " << failed << " failed\n";
    return os.str();
}

struct ReportArgs {
    std::string journal, out = "kcv-report", redteam, calibration, title = "kcv report";
    int worst = 12;
};

int run_report(const ReportArgs& a) {
    ProgressBar bar;
    bar.update("reading " + a.journal, 0.05);
    const JournalInput in = load_journal_input(a.journal);
    ReportOptions opts;
    opts.title = a.title;
    opts.worst_examples = a.worst;
    if (!a.redteam.empty()) {
        opts.redteam = read_json_file(a.redteam);
        if (!is_redteam_json(opts.redteam)) throw std::runtime_error("'" + a.redteam + "' is not a red-team JSON");
    }
    if (!a.calibration.empty()) {
        opts.calibration = read_json_file(a.calibration);
        if (!opts.calibration.is_object() || !opts.calibration.contains("settings"))
            throw std::runtime_error("'" + a.calibration + "' is not a calibration JSON (kcv calibrate --json)");
    }
    bar.update("aggregating " + std::to_string(in.records.size()) + " records", 0.2);
    const ReportData data = build_report_data(in, opts);
    const auto paths = write_report(data, a.out, [&](const std::string& file, int i, int n) {
        bar.update(i < n ? "writing " + file : "done", 0.3 + 0.7 * double(i) / double(n));
    });
    bar.finish();
    std::cout << render_report_console(data.summary, console_style_for(1));
    for (const auto& p : paths) std::cout << "wrote " << p << "\n";
    return kExitPass;
}

// ---- calibrate

struct CalibrateArgs {
    CalibrationOptions opts;
    std::string json_out, html_out;
    bool full = false, no_defences = false;
};

std::string rate_cell(const nlohmann::json& co) {
    if (!co.contains("rate_lo")) return "-";
    char buf[64];
    if (co.value("rate_hi", 0.0) != co.value("rate_lo", 0.0))
        std::snprintf(buf, sizeof buf, "%5.1f%% - %5.1f%%", 100 * co.value("rate_lo", 0.0), 100 * co.value("rate_hi", 0.0));
    else
        std::snprintf(buf, sizeof buf, "%5.1f%%", 100 * co.value("rate_lo", 0.0));
    return buf;
}

std::string render_calibration(const nlohmann::json& cal, const ConsoleStyle& st) {
    std::ostringstream os;
    const bool defences = !cal["settings"].empty() && cal["settings"][0].contains("controls");
    os << "calibration sweep: c x ORD-03 margin, envelope factor = c/2"
       << (defences && cal.value("quick", false) ? " (defences run with --quick)" : "") << "\n";
    os << "    c  factor  margin  controls   red team  corpus failure rate\n";
    int ok = 0, bad = 0;
    for (const auto& s : cal["settings"]) {
        char line[160];
        const auto ctl = s.value("controls", nlohmann::json::object());
        const auto rt = s.value("redteam", nlohmann::json::object());
        const bool clean = ctl.value("total", 0) > 0 && ctl.value("passed", 0) == ctl.value("total", 0);
        if (ctl.value("total", 0) > 0) (clean ? ok : bad)++;
        std::snprintf(line, sizeof line, "%5g  %6g  %6g  ", s.value("c", 0.0), s.value("envelope_factor", 0.0),
                      s.value("ord03_margin", 0.0));
        char c1[32] = "   -   ", c2[32] = "   -   ";
        if (defences) {
            std::snprintf(c1, sizeof c1, "%3d/%-3d", ctl.value("passed", 0), ctl.value("total", 0));
            std::snprintf(c2, sizeof c2, "%3d/%-3d", rt.value("caught", 0), rt.value("total", 0));
        }
        const bool chosen = cal.contains("chosen") && cal["chosen"].is_object() && cal["chosen"]["c"] == s["c"] &&
                            cal["chosen"]["ord03_margin"] == s["ord03_margin"];
        os << line << (ctl.value("total", 0) == 0 ? std::string(c1) : paint(st, clean ? "32" : "31;1", c1)) << "    " << c2
           << "    " << rate_cell(s.value("corpus", nlohmann::json::object())) << (chosen ? "   <- chosen" : "") << "\n";
        for (const auto& f : ctl.value("failed", nlohmann::json::array())) {
            os << "        control " << f.value("name", "") << " on " << f.value("contract", "") << " fails "
               << f.value("gates", nlohmann::json::array()).dump() << "\n";
        }
    }
    if (cal.contains("chosen") && cal["chosen"].is_object()) {
        const auto& c = cal["chosen"];
        os << "chosen: c = " << report_detail::number(c.value("c", 0.0)) << ", envelope factor = "
           << report_detail::number(c.value("envelope_factor", 0.0))
           << ", ORD-03 margin = " << report_detail::number(c.value("ord03_margin", 0.0)) << " (" << c.value("why", "")
           << ")\n";
    } else if (defences) {
        os << paint(st, "31;1", "no setting keeps every control passing") << "\n";
    }
    if (!cal.value("gate_margins", nlohmann::json::array()).empty()) {
        os << "gate margins over the positive controls (threshold / largest control metric):\n";
        for (const auto& g : cal["gate_margins"]) {
            const auto num = [&](const char* k) { return report_detail::number(report_detail::json_number(g[k])); };
            char line[200];
            std::snprintf(line, sizeof line, "  %-7s threshold %-5s largest control %-10s margin %-9s ", g.value("gate", "").c_str(),
                          num("threshold").c_str(), num("largest_control_metric").c_str(), (num("margin") + "x").c_str());
            os << line << "(" << g.value("control", "") << ")\n";
        }
    }
    const nlohmann::json method = cal.value("method", nlohmann::json::object());
    for (const auto& [k, v] : method.items()) {
        if (v.is_string()) os << k << ": " << v.get<std::string>() << "\n";
    }
    os << ok << " passed, " << bad << " failed\n";
    return os.str();
}

int run_calibrate(CalibrateArgs a) {
    a.opts.verify.settings.quick = !a.full;
    a.opts.defences = !a.no_defences;
    if (a.no_defences && a.opts.corpus.empty())
        throw std::runtime_error("calibrate: --no-defences leaves nothing to sweep without --corpus");
    ProgressBar bar;
    const nlohmann::json cal = calibrate(a.opts, [&](const std::string& what, int run, int runs, int done, int total) {
        const double inner = total > 0 ? double(done) / double(total) : 0.0;
        const double f = runs > 0 ? (double(run) + inner) / double(runs) : 1.0;
        bar.update("run " + std::to_string(std::min(run + 1, runs)) + "/" + std::to_string(runs) + " " + what, f,
                   run < runs ? "calibrate: run " + std::to_string(run + 1) + " of " + std::to_string(runs) : "");
    });
    bar.finish();
    if (!a.json_out.empty()) write_text(a.json_out, cal.dump(2) + "\n");
    if (!a.html_out.empty()) write_text(a.html_out, render_calibration_page(cal));
    std::cout << render_calibration(cal, console_style_for(1));
    if (!a.opts.defences) return kExitPass;
    return cal["chosen"].is_null() ? kExitFail : kExitPass;
}

// ---- disputes

struct DisputesArgs {
    std::string journal;
    DisputeOptions opts;
    std::string tolerance = "1e-2";
    bool no_shrink = false;
};

int run_disputes(DisputesArgs a) {
    a.opts.tolerance = "tol_" + a.tolerance;
    a.opts.journal = a.journal;
    a.opts.shrink = !a.no_shrink;
    const JournalInput in = load_journal_input(a.journal);
    ProgressBar bar;
    const DisputeSummary s = write_dispute_packets(in.records, a.opts, [&](const std::string& what, int done, int total) {
        bar.update("packet " + std::to_string(done + 1) + "/" + std::to_string(total) + " " + what,
                   total > 0 ? double(done) / double(total) : 1.0);
    });
    bar.finish();
    std::cout << s.records << " records, " << s.with_standard << " with the standard check at " << a.tolerance << ", "
              << s.disputes << " disputed\n";
    if (s.with_standard == 0)
        std::cout << "no record carries the standard check (native and red-team records have none): nothing to "
                     "dispute\n";
    for (const auto& p : s.packets) std::cout << "packet " << p << "\n";
    std::cout << s.packets.size() << " packets written to " << a.opts.out_dir << " (index: "
              << (fs::path(a.opts.out_dir) / "README.md").string() << ")\n";
    return kExitPass;
}

// ---- replay

struct ReplayArgs {
    std::string contract, candidate, gate, probe, json_out;
    std::vector<std::string> dims;
    double scale = 0;
    bool single_special = false;
    VerifyOptions vo;
};

int run_replay(const ReplayArgs& a) {
    Contract c = resolve_contract(a.contract);
    validate(c);
    const std::string gate_id = a.gate.empty() ? a.probe.substr(0, a.probe.find('/')) : a.gate;
    const GateDef* g = find_gate(gate_id);
    if (!g) throw std::runtime_error("unknown gate '" + gate_id + "'");
    ProbeOverride o;
    for (const auto& d : a.dims) {
        const auto eq = d.find('=');
        if (eq == std::string::npos) throw std::runtime_error("--dim takes NAME=SIZE, got '" + d + "'");
        o.dims[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
    }
    if (a.scale > 0) o.family_scale = a.scale;
    o.single_special = a.single_special;
    GateResult r = run_probe_with(*g, c, a.candidate, a.vo, a.probe, o);
    const ConsoleStyle st = console_style_for(1);
    const char* color = r.verdict == Verdict::fail ? "31;1" : r.verdict == Verdict::pass ? "32" : "33";
    std::cout << g->id << " " << g->name << " on probe " << a.probe;
    if (!o.empty()) std::cout << " with " << to_json(o).dump();
    std::cout << ": " << paint(st, color, name(r.verdict)) << "\n";
    if (!r.signature.empty()) std::cout << "signature: " << nlohmann::json(r.signature).dump() << "\n";
    if (!r.reason.empty()) std::cout << "reason: " << r.reason << "\n";
    for (const auto& e : r.evidence) {
        std::cout << "evidence: " << e.signature << "\n";
        if (!e.worst_coords.empty()) {
            std::cout << "element: " << e.output << " at " << report_detail::coords_text(e.worst_coords) << "\n";
        }
        if (!e.actual_bits.empty()) {
            std::cout << "expected " << report_detail::number(e.expected) << " (" << e.expected_bits << "), actual "
                      << report_detail::number(e.actual) << " (" << e.actual_bits << ")\n";
        }
    }
    if (!a.json_out.empty()) write_text(a.json_out, to_json(r).dump(2) + "\n");
    const bool failed = r.verdict == Verdict::fail;
    std::cout << (r.verdict == Verdict::pass ? 1 : 0) << " passed, " << (failed ? 1 : 0) << " failed\n";
    if (r.verdict == Verdict::error) return kExitError;
    return failed ? kExitFail : kExitPass;
}

}  // namespace

void add_report_commands(CLI::App& app, Commands& commands) {
    auto ra = std::make_shared<ReportArgs>();
    auto* report = app.add_subcommand("report", "write report.html, report.md, report.csv and report.junit.xml");
    report->add_option("journal", ra->journal, "journal of records, or a red-team JSON (kcv redteam --json)")
        ->required();
    report->add_option("--out", ra->out, "directory for the report files");
    report->add_option("--redteam", ra->redteam, "red-team JSON to show as the defences");
    report->add_option("--calibration", ra->calibration, "calibration JSON (kcv calibrate --json) for the curves");
    report->add_option("--title", ra->title, "title of the report");
    report->add_option("--worst", ra->worst, "number of worst examples shown");
    commands.add(report, [ra] { return run_report(*ra); });

    auto ca = std::make_shared<CalibrateArgs>();
    auto* cal = app.add_subcommand("calibrate", "sweep c and the ORD-03 margin over the defences and a corpus");
    cal->add_option("--corpus", ca->opts.corpus, "journal to re-judge from its stored metrics");
    cal->add_option("--json", ca->json_out, "write the sweep here");
    cal->add_option("--html", ca->html_out, "write a page with the calibration curves here");
    cal->add_option("--c", ca->opts.grid.c, "values of c (default 2,4,8)")->delimiter(',');
    cal->add_option("--margins", ca->opts.grid.margins, "ORD-03 margins (default 1,1.1,1.2,1.5,2)")->delimiter(',');
    cal->add_option("--seed", ca->opts.verify.settings.seed, "master seed");
    cal->add_option("--kernels", ca->opts.verify.kernel_dir, "directory of the project's kernels");
    cal->add_flag("--full", ca->full, "full sweeps for the defences (default: --quick, to keep the sweep tractable)");
    cal->add_flag("--exhaustive", ca->opts.exhaustive, "every gate at every grid point instead of composing");
    cal->add_flag("--no-defences", ca->no_defences, "skip the red team and the controls (corpus only)");
    cal->add_flag("!--no-sandbox", ca->opts.verify.sandbox, "run gates in this process");
    commands.add(cal, [ca] { return run_calibrate(*ca); });

    auto da = std::make_shared<DisputesArgs>();
    auto* disputes = app.add_subcommand("disputes", "sample verdicts kcv and the standard check disagree on");
    disputes->add_option("journal", da->journal, "journal of records")->required();
    disputes->add_option("--sample", da->opts.sample, "number of packets")->required();
    disputes->add_option("--out", da->opts.out_dir, "directory for the packets");
    disputes->add_option("--seed", da->opts.seed, "seed of the sampler");
    disputes->add_option("--tolerance", da->tolerance, "the standard check's tolerance: 1e-2 or 1e-4")
        ->check(CLI::IsMember({"1e-2", "1e-4"}));
    disputes->add_option("--max-trials", da->opts.max_trials, "re-runs allowed per shrink");
    disputes->add_option("--kernels", da->opts.verify.kernel_dir, "directory of the project's kernels");
    disputes->add_option("--python", da->opts.python, "interpreter for the Python worker (Python candidates)");
    disputes->add_option("--stage-timeout", da->opts.stage_timeout_s,
                         "seconds without progress before a stage of a Python trial counts as hung");
    disputes->add_flag("--no-shrink", da->no_shrink, "do not re-run candidates to shrink their input");
    commands.add(disputes, [da] { return run_disputes(*da); });

    auto pa = std::make_shared<ReplayArgs>();
    auto* replay = app.add_subcommand("replay", "re-run one probe of one gate, with smaller dimensions or values");
    replay->add_option("--contract", pa->contract, "built-in contract id or a contract file")->required();
    replay->add_option("--candidate", pa->candidate, "shared library exporting kcv_kernel")->required();
    replay->add_option("--probe", pa->probe, "probe id, e.g. CMP-01/N=17")->required();
    replay->add_option("--gate", pa->gate, "gate (default: the probe's)");
    replay->add_option("--dim", pa->dims, "NAME=SIZE, repeatable");
    replay->add_option("--scale", pa->scale, "scale of the probe's value family");
    replay->add_flag("--single-special", pa->single_special, "inject a single special value");
    replay->add_option("--json", pa->json_out, "write the gate result here");
    replay->add_option("--seed", pa->vo.settings.seed, "master seed");
    replay->add_option("--c", pa->vo.settings.c, "constant c of the analytic error model");
    replay->add_option("--margin", pa->vo.settings.ord03_margin, "ORD-03 margin");
    replay->add_flag("--quick", pa->vo.settings.quick, "the probes as planned with --quick");
    replay->add_option("--kernels", pa->vo.kernel_dir, "directory of the project's kernels");
    replay->add_flag("!--no-sandbox", pa->vo.sandbox, "run in this process");
    commands.add(replay, [pa] { return run_replay(*pa); });
}

}  // namespace kcv::cli
