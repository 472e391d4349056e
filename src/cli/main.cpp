// The kcv command: verify, redteam, demo, contracts, gates.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

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

int cmd_redteam(const std::string& json_out, const std::string& html_out, const kcv::VerifyOptions& o) {
    kcv::RedteamReport rep = kcv::run_redteam(o, progress_line());
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
    verify->add_option("--contract", contract, "built-in contract id or a contract file")->required();
    verify->add_option("--candidate", candidate, "shared library exporting kcv_kernel")->required();
    verify->add_option("--json", json_out, "write the record here");
    verify->add_option("--gate", only_gates, "run only these gates (repeatable)");
    verify->add_option("--probe", probe, "run only this probe (a replay)");
    add_settings(verify, vo);

    kcv::VerifyOptions ro;
    std::string rt_json, rt_html;
    auto* redteam = app.add_subcommand("redteam", "run the red team and the positive controls");
    redteam->add_option("--json", rt_json, "write {redteam, controls} here");
    redteam->add_option("--html", rt_html, "write the report page here");
    add_settings(redteam, ro);

    kcv::VerifyOptions dm;
    std::string demo_out = "kcv-demo";
    auto* demo = app.add_subcommand("demo", "the red team and the controls, with a report page");
    demo->add_option("--out", demo_out, "directory for report.html and redteam.json");
    add_settings(demo, dm);

    std::string contract_id;
    auto* contracts = app.add_subcommand("contracts", "list the built-in contracts, or print one");
    contracts->add_option("id", contract_id, "a contract to print as JSON");

    auto* gates_cmd = app.add_subcommand("gates", "list the twelve gates");

    CLI11_PARSE(app, argc, argv);
    try {
        if (*verify) return cmd_verify(contract, candidate, json_out, only_gates, probe, vo);
        if (*redteam) return cmd_redteam(rt_json, rt_html, ro);
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
            for (const auto& g : kcv::gates()) {
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
