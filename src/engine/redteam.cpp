// Runs the red team and the positive controls through the same verify() every candidate gets.
#include "kcv/redteam.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "engine/sandbox.hpp"

namespace kcv {
namespace fs = std::filesystem;

namespace {
using manifest_fn = const char* (*)();

// A contract that cannot be read is that kernel's recorded error, not the end of the run.
Record verify_named(const std::string& contract, const KernelManifest& k, const VerifyOptions& opts) {
    try {
        Contract c = resolve_contract(contract);
        validate(c);
        return verify(c, k.path, opts);
    } catch (const std::exception& e) {
        Record r;
        r.contract_id = contract;
        r.candidate = k.path;
        r.error = e.what();
        r.error_code = "bad-contract";
        return r;
    }
}

std::string read_manifest(const std::string& path) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(dlerror());
    auto fn = reinterpret_cast<manifest_fn>(dlsym(h, "kcv_kernel_manifest"));
    if (!fn) throw std::runtime_error(path + " exports no kcv_kernel_manifest");
    std::string s = fn();
    dlclose(h);
    return s;
}

std::vector<std::string> failed_of(const Record& r) {
    std::vector<std::string> f;
    for (const auto& g : r.gates) {
        if (g.verdict == Verdict::fail) f.push_back(g.id);
    }
    return f;
}
}  // namespace

std::vector<KernelManifest> discover_kernels(const std::string& dir) {
    std::vector<KernelManifest> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string file = entry.path().filename().string();
        const bool ours = file.starts_with("kcv_redteam_") || file.starts_with("kcv_controls_");
        if (!ours || entry.path().extension() != ".so") continue;
        const std::string path = entry.path().string();
        SandboxResult sr = run_sandboxed([&] { return read_manifest(path); }, 30);
        if (sr.status != SandboxResult::Status::ok) {
            throw std::runtime_error("cannot read the manifest of " + path + ": " +
                                     (sr.output.empty() ? sr.describe() : sr.output.substr(1)));
        }
        const auto j = nlohmann::json::parse(sr.output);
        KernelManifest m;
        m.path = path;
        m.role = j.value("role", "");
        m.name = j.value("name", file);
        m.description = j.value("description", "");
        m.target_gate = j.value("target_gate", "");
        m.contracts = j.value("contracts", std::vector<std::string>{});
        out.push_back(std::move(m));
    }
    std::sort(out.begin(), out.end(), [](const KernelManifest& a, const KernelManifest& b) { return a.name < b.name; });
    return out;
}

int RedteamReport::caught() const {
    return static_cast<int>(std::count_if(redteam.begin(), redteam.end(), [](const auto& e) { return e.caught; }));
}
int RedteamReport::clean_controls() const {
    return static_cast<int>(
        std::count_if(controls.begin(), controls.end(), [](const ControlEntry& e) { return e.clean(); }));
}

bool ControlEntry::clean() const {
    return failed_gates.empty() &&
           std::all_of(records.begin(), records.end(), [](const Record& r) { return r.error.empty(); });
}

RedteamReport run_redteam(const VerifyOptions& opts, const Progress& progress, const std::string& scan_dir) {
    const std::string dir = opts.kernel_dir.empty() ? default_kernel_dir() : opts.kernel_dir;
    const auto kernels = discover_kernels(scan_dir.empty() ? dir : scan_dir);
    int total = 0, done = 0;
    for (const auto& k : kernels) total += k.role == "redteam" ? 1 : static_cast<int>(k.contracts.size());

    RedteamReport rep;
    for (const auto& k : kernels) {
        if (k.role == "redteam") {
            if (progress) progress(k.name, done, total);
            RedteamEntry e;
            e.kernel = k;
            if (k.contracts.empty()) {
                e.record.error = "red-team kernel names no contract";
                e.record.error_code = "bad-manifest";
            } else {
                e.record = verify_named(k.contracts.front(), k, opts);
            }
            e.failed_gates = failed_of(e.record);
            e.caught = std::find(e.failed_gates.begin(), e.failed_gates.end(), k.target_gate) != e.failed_gates.end();
            rep.redteam.push_back(std::move(e));
            ++done;
        } else if (k.role == "control") {
            ControlEntry e;
            e.kernel = k;
            std::set<std::string> failed;
            for (const auto& cid : k.contracts) {
                if (progress) progress(k.name + " on " + cid, done, total);
                e.records.push_back(verify_named(cid, k, opts));
                for (const auto& g : failed_of(e.records.back())) failed.insert(g);
                ++done;
            }
            e.failed_gates.assign(failed.begin(), failed.end());
            rep.controls.push_back(std::move(e));
        }
    }
    if (progress) progress("done", done, total);
    return rep;
}

nlohmann::json to_json(const RedteamReport& r) {
    nlohmann::json rt = nlohmann::json::array(), ctl = nlohmann::json::array();
    for (const auto& e : r.redteam) {
        rt.push_back({{"name", e.kernel.name},
                      {"description", e.kernel.description},
                      {"contract", e.kernel.contracts.empty() ? "" : e.kernel.contracts.front()},
                      {"target_gate", e.kernel.target_gate},
                      {"failed_gates", e.failed_gates},
                      {"caught", e.caught},
                      {"record", to_json(e.record)}});
    }
    for (const auto& e : r.controls) {
        nlohmann::json recs = nlohmann::json::array();
        for (const auto& rec : e.records) recs.push_back(to_json(rec));
        ctl.push_back({{"name", e.kernel.name},
                       {"contracts", e.kernel.contracts},
                       {"failed_gates", e.failed_gates},
                       {"clean", e.clean()},
                       {"records", recs}});
    }
    return {{"redteam", rt},
            {"controls", ctl},
            {"summary", {{"redteam_caught", r.caught()}, {"redteam_total", r.redteam.size()},
                         {"controls_clean", r.clean_controls()}, {"controls_total", r.controls.size()}}}};
}

}  // namespace kcv
