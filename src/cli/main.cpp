// The kcv command: verify, redteam, demo, contracts, gates.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "engine/python_worker.hpp"
#include "kcv/aggregate.hpp"
#include "kcv/audit.hpp"
#include "kcv/contract.hpp"
#include "kcv/redteam.hpp"
#include "kcv/report.hpp"
#include "kcv/verify.hpp"

namespace {
namespace fs = std::filesystem;

// Exit codes: 0 all gates pass (or n/a), 1 a gate failed, 2 the verifier could not do its job.
constexpr int kExitPass = 0, kExitFail = 1, kExitError = 2;

void write_file(const std::string& path, const std::string& text) {
    if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write '" + path + "'");
    out << text;
    if (!out) throw std::runtime_error("error while writing '" + path + "'");
}

void add_settings(CLI::App* cmd, kcv::VerifyOptions& o) {
    cmd->add_option("--seed", o.settings.seed, "master seed of every probe");
    cmd->add_option("--c", o.settings.c, "constant c of the analytic error model");
    cmd->add_option("--margin", o.settings.ord03_margin, "ORD-03 margin over the controls' envelope");
    cmd->add_flag("--quick", o.settings.quick, "smaller sweeps (recorded in the record)");
    cmd->add_option("--kernels", o.kernel_dir, "directory of the project's kernels (controls, red team)");
    cmd->add_flag("!--no-sandbox", o.sandbox, "run gates in this process (no crash isolation)");
}

// A terminal progress line on stderr, only on a TTY.
kcv::Progress progress_line() {
    if (!isatty(2)) return {};
    return [](const std::string& what, int done, int total) {
        std::cerr << "\r\033[K[" << done << "/" << total << "] " << what << std::flush;
        if (done == total) std::cerr << "\r\033[K";
    };
}

int cmd_verify(const std::string& contract, const std::string& candidate, const std::string& json_out,
               const std::vector<std::string>& gates, const std::string& probe, kcv::VerifyOptions o) {
    o.only_gates = gates;
    o.only_probe = probe;
    if (!probe.empty() && gates.empty()) o.only_gates = {probe.substr(0, probe.find('/'))};
    kcv::Contract c;
    try {
        c = kcv::resolve_contract(contract);
        kcv::validate(c);
    } catch (const std::exception& e) {
        std::cerr << "kcv: bad contract: " << e.what() << "\n";
        if (!json_out.empty()) {
            kcv::Record r;
            r.contract_id = contract;
            r.candidate = candidate;
            r.error = e.what();
            r.error_code = "bad-contract";
            write_file(json_out, kcv::to_json(r).dump(2) + "\n");
        }
        return kExitError;
    }
    kcv::Record r = kcv::verify(c, candidate, o);
    std::cout << kcv::render_record(r, kcv::console_style_for(1));
    if (!json_out.empty()) write_file(json_out, kcv::to_json(r).dump(2) + "\n");
    if (!r.error.empty()) return kExitError;
    return kcv::any_violation(r) ? kExitFail : kExitPass;
}

// One probe of a Python candidate, re-run alone with parts of its input overridden (a replay
// written by kcv disputes): the worker's settings.probe_override.
struct ProbeReplay {
    std::string probe;
    std::vector<std::string> dims;   // NAME=SIZE
    double scale = 0;
    bool single_special = false;
    bool any_override() const { return !dims.empty() || scale > 0 || single_special; }
};

nlohmann::json probe_override_json(const ProbeReplay& p) {
    nlohmann::json o = {{"probe", p.probe}};
    for (const auto& d : p.dims) {
        const auto eq = d.find('=');
        if (eq == std::string::npos || eq == 0) throw std::runtime_error("--dim takes NAME=SIZE, got '" + d + "'");
        size_t used = 0;
        int64_t v = 0;
        try {
            v = std::stoll(d.substr(eq + 1), &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || eq + 1 + used != d.size()) throw std::runtime_error("--dim " + d + ": SIZE is not an integer");
        o["dims"][d.substr(0, eq)] = v;
    }
    if (p.scale > 0) o["family_scale"] = p.scale;
    if (p.single_special) o["single_special"] = true;
    return o;
}

// A Python candidate (KernelBench convention) is judged by a Python worker process.
int cmd_verify_python(const std::string& reference, const std::string& candidate, const std::string& device,
                      const std::string& json_out, std::vector<std::string> gates, const kcv::VerifyOptions& o,
                      double stage_timeout_s, const std::string& python, const ProbeReplay& replay,
                      double probe_budget_mib) {
    nlohmann::json settings = kcv::to_json(o.settings);
    if (probe_budget_mib > 0) settings["probe_budget_bytes"] = static_cast<int64_t>(probe_budget_mib * (1 << 20));
    if (!replay.probe.empty()) {
        const std::string probe_gate = replay.probe.substr(0, replay.probe.find('/'));
        if (gates.empty()) gates = {probe_gate};
        if (gates.size() != 1) throw std::runtime_error("--probe replays one probe of one gate: give one --gate");
        settings["probe_override"] = probe_override_json(replay);
    } else if (replay.any_override()) {
        throw std::runtime_error("--dim, --scale and --single-special apply to one probe: give --probe");
    }
    kcv::WorkerConfig cfg;
    cfg.python = python;
    cfg.stage_timeout_s = stage_timeout_s;
    kcv::PythonWorker worker(cfg);
    nlohmann::json req = {{"id", candidate},
                          {"reference", fs::absolute(reference).string()},
                          {"candidate", fs::absolute(candidate).string()},
                          {"device", device},
                          {"seed", o.settings.seed},
                          {"settings", settings},
                          {"stage_timeout_s", stage_timeout_s}};
    if (!gates.empty()) req["gates"] = gates;
    const bool tty = isatty(2);
    nlohmann::json raw = worker.judge(req, [&](const nlohmann::json& ev) {
        if (tty && ev.value("event", "") == "stage") std::cerr << "\r\033[K" << ev.value("stage", "") << std::flush;
    });
    if (tty) std::cerr << "\r\033[K";
    kcv::Record r = kcv::record_from_json(raw);
    if (r.contract_id.empty()) r.contract_id = reference;
    if (r.candidate.empty()) r.candidate = candidate;
    std::cout << kcv::render_record(r, kcv::console_style_for(1));
    if (raw.contains("standard_check")) std::cout << "standard check: " << raw["standard_check"].dump() << "\n";
    if (!json_out.empty()) write_file(json_out, kcv::to_json(r).dump(2) + "\n");
    if (!r.error.empty()) return kExitError;
    return kcv::any_violation(r) ? kExitFail : kExitPass;
}

int cmd_audit(const std::string& corpus, const std::string& problems, kcv::AuditOptions o, const std::string& shard) {
    if (!shard.empty()) {
        const auto slash = shard.find('/');
        if (slash == std::string::npos) throw std::runtime_error("--shard takes i/n, e.g. 0/4");
        o.shard_index = std::stoi(shard.substr(0, slash));
        o.shard_count = std::stoi(shard.substr(slash + 1));
        if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count) {
            throw std::runtime_error("--shard " + shard + ": need 0 <= i < n");
        }
    }
    const auto entries = kcv::load_corpus(corpus, problems);
    const bool tty = isatty(2);
    const int64_t n = kcv::run_audit(entries, o, [&](const kcv::AuditProgress& p) {
        char line[256];
        std::snprintf(line, sizeof line, "[%lld/%lld] %.2f kernels/s, ETA %.0f s, %lld already in the journal  %s",
                      static_cast<long long>(p.done), static_cast<long long>(p.total), p.rate_per_s, p.eta_s,
                      static_cast<long long>(p.skipped), p.last.c_str());
        if (tty) std::cerr << "\r\033[K" << line << std::flush;
        else std::cerr << line << "\n";
    });
    if (tty) std::cerr << "\n";
    std::cerr << "audit: " << n << " new records in " << o.journal << "\n";
    const nlohmann::json summary = kcv::aggregate(kcv::read_journal(o.journal));
    write_file(o.journal + ".summary.json", summary.dump(2) + "\n");
    std::cout << kcv::render_summary(summary);
    return kExitPass;
}

int cmd_redteam(const std::string& json_out, const std::string& html_out, const kcv::VerifyOptions& o,
                const std::string& device = "cpu") {
    const std::string kdir = o.kernel_dir.empty() ? kcv::default_kernel_dir() : o.kernel_dir;
    const std::string scan = device == "cuda" ? (fs::path(kdir) / "cuda").string() : kdir;
    kcv::RedteamReport rep = kcv::run_redteam(o, progress_line(), scan);
    std::cout << kcv::render_redteam(rep, kcv::console_style_for(1));
    if (!json_out.empty()) write_file(json_out, kcv::to_json(rep).dump(2) + "\n");
    if (!html_out.empty()) write_file(html_out, kcv::render_redteam_html(rep));
    const bool ok = rep.caught() == static_cast<int>(rep.redteam.size()) &&
                    rep.clean_controls() == static_cast<int>(rep.controls.size());
    return ok ? kExitPass : kExitFail;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kcv: contract-grade correctness verification of GPU and CPU kernels"};
    app.set_version_flag("--version", KCV_VERSION);
    app.require_subcommand(1);

    kcv::VerifyOptions vo;
    std::string contract, candidate, json_out, probe;
    std::vector<std::string> only_gates;
    auto* verify = app.add_subcommand("verify", "verify one candidate against a contract");
    std::string reference, device = "cpu", python = "python3";
    double stage_timeout = 300;
    auto* contract_opt = verify->add_option("--contract", contract, "built-in contract id or a contract file");
    auto* reference_opt = verify->add_option("--reference", reference, "KernelBench problem module (defines Model)");
    contract_opt->excludes(reference_opt);
    verify->add_option("--candidate", candidate, "shared library exporting kcv_kernel, or a module defining ModelNew")
        ->required();
    verify->add_option("--device", device, "cpu or cuda (Python candidates)")->check(CLI::IsMember({"cpu", "cuda"}));
    verify->add_option("--stage-timeout", stage_timeout, "seconds without progress before a stage counts as hung");
    verify->add_option("--python", python, "interpreter for Python workers");
    verify->add_option("--json", json_out, "write the record here");
    verify->add_option("--gate", only_gates, "run only these gates (repeatable)");
    verify->add_option("--probe", probe, "run only this probe (a replay)");
    ProbeReplay py_replay;
    double probe_budget_mib = 0;
    verify->add_option("--probe-budget", probe_budget_mib,
                       "MiB a call above which the gates probe a KernelBench task at halved sizes (default 1)")
        ->check(CLI::PositiveNumber);
    verify->add_option("--dim", py_replay.dims, "with --probe (Python): NAME=SIZE, repeatable");
    verify->add_option("--scale", py_replay.scale, "with --probe (Python): scale of the probe's value family");
    verify->add_flag("--single-special", py_replay.single_special,
                     "with --probe (Python): a single special value instead of scattered ones");
    add_settings(verify, vo);

    kcv::VerifyOptions ro;
    std::string rt_json, rt_html;
    std::string rt_device = "cpu";
    auto* redteam = app.add_subcommand("redteam", "run the red team and the positive controls");
    redteam->add_option("--json", rt_json, "write {redteam, controls} here");
    redteam->add_option("--device", rt_device, "cpu: the CPU forms; cuda: the CUDA forms (needs a GPU)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
    redteam->add_option("--html", rt_html, "write the report page here");
    add_settings(redteam, ro);

    kcv::VerifyOptions dm;
    std::string demo_out = "kcv-demo";
    auto* demo = app.add_subcommand("demo", "the red team and the controls, with a report page");
    demo->add_option("--out", demo_out, "directory for report.html and redteam.json");
    add_settings(demo, dm);

    kcv::AuditOptions ao;
    std::string corpus, problems, shard;
    auto* audit = app.add_subcommand("audit", "audit a corpus of Python candidates into a resumable journal");
    audit->add_option("corpus", corpus, "corpus.jsonl, or a directory holding one")->required();
    audit->add_option("--problems", problems, "directory the corpus's problem paths are relative to");
    audit->add_option("--out", ao.journal, "journal (JSON lines), appended to and resumed")->required();
    audit->add_option("--device", ao.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    audit->add_option("--workers-per-gpu", ao.workers_per_gpu, "worker processes per GPU");
    audit->add_option("--workers", ao.cpu_workers, "worker processes on the CPU");
    audit->add_option("--gpus", ao.gpus, "GPUs to use (default: all visible)");
    audit->add_option("--shard", shard, "i/n: audit only shard i of n");
    audit->add_option("--seed", ao.seed, "master seed");
    audit->add_option("--limit", ao.limit, "at most this many new records");
    audit->add_option("--stage-timeout", ao.stage_timeout_s, "seconds without progress before a stage counts as hung");
    audit->add_option("--python", ao.python, "interpreter for Python workers");
    audit->add_flag("--quick", ao.quick, "smaller sweeps");
    audit->add_option("--probe-budget", ao.probe_budget_mib,
                      "MiB a call above which the gates probe a task at halved sizes (default 1)")
        ->check(CLI::PositiveNumber);
    audit->add_flag("--trace", ao.trace, "print each stage a worker enters, with the time since the start");

    std::string summary_journal;
    auto* summarize = app.add_subcommand("summary", "summarise a journal: rates, floors, differential, parity");
    summarize->add_option("journal", summary_journal, "journal of an audit")->required();

    std::string contract_id;
    auto* contracts = app.add_subcommand("contracts", "list the built-in contracts, or print one");
    contracts->add_option("id", contract_id, "a contract to print as JSON");

    auto* gates_cmd = app.add_subcommand("gates", "list the twelve gates");

    kcv::cli::Commands more;
    kcv::cli::add_report_commands(app, more);
    kcv::cli::add_corpus_command(app, more);

    CLI11_PARSE(app, argc, argv);
    try {
        for (auto& [sub, run] : more.entries) {
            if (*sub) return run();
        }
        if (*verify) {
            if (!reference.empty()) {
                py_replay.probe = probe;
                return cmd_verify_python(reference, candidate, device, json_out, only_gates, vo, stage_timeout, python,
                                         py_replay, probe_budget_mib);
            }
            if (contract.empty()) throw std::runtime_error("verify needs --contract (native) or --reference (Python)");
            if (py_replay.any_override())
                throw std::runtime_error("--dim, --scale and --single-special are for Python candidates; a native "
                                         "probe is replayed with them by kcv replay");
            return cmd_verify(contract, candidate, json_out, only_gates, probe, vo);
        }
        if (*audit) return cmd_audit(corpus, problems, ao, shard);
        if (*summarize) {
            std::cout << kcv::render_summary(kcv::aggregate(kcv::read_journal(summary_journal)));
            return kExitPass;
        }
        if (*redteam) return cmd_redteam(rt_json, rt_html, ro, rt_device);
        if (*demo) {
            const std::string json = (fs::path(demo_out) / "redteam.json").string();
            const std::string html = (fs::path(demo_out) / "report.html").string();
            const int rc = cmd_redteam(json, html, dm);
            std::cout << "report: " << html << "\nrecords: " << json << "\n";
            return rc;
        }
        if (*contracts) {
            if (!contract_id.empty()) {
                std::cout << kcv::to_json(kcv::resolve_contract(contract_id)) << "\n";
            } else {
                for (const auto& id : kcv::builtin_contract_ids()) std::cout << id << "\n";
            }
            return kExitPass;
        }
        if (*gates_cmd) {
            for (const auto& g : kcv::all_gates()) {
                std::cout << g.id << "  " << g.name << (g.tolerance_free ? "  (tolerance-free)" : "") << "\n";
            }
            return kExitPass;
        }
    } catch (const std::exception& e) {
        std::cerr << "kcv: " << e.what() << "\n";
        return kExitError;
    }
    return kExitError;
}
