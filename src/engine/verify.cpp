// One candidate against one contract: the twelve gates, each in its own forked worker, with
// fairness rule 1 (a gate the positive controls fail does not apply) and rule 17 (a failure
// must replay from its stored seed in a fresh worker before it is reported).
#include "kcv/verify.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "engine/sandbox.hpp"
#include "kcv/execution.hpp"

namespace kcv {
namespace fs = std::filesystem;

std::string file_hash(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "";
    XXH3_state_t* st = XXH3_createState();
    XXH3_128bits_reset(st);
    char buf[1 << 16];
    while (in) {
        in.read(buf, sizeof buf);
        XXH3_128bits_update(st, buf, static_cast<size_t>(in.gcount()));
    }
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    char hex[33];
    std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    return hex;
}

std::string default_kernel_dir() {
    if (const char* env = std::getenv("KCV_KERNEL_DIR")) return env;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path beside = exe.parent_path().parent_path() / "kernels";
        if (fs::is_directory(beside, ec)) return beside.string();
    }
#ifdef KCV_BUILD_KERNEL_DIR
    return KCV_BUILD_KERNEL_DIR;
#else
    return "kernels";
#endif
}

std::string control_path(const std::string& kernel_dir, const std::string& control) {
    return (fs::path(kernel_dir) / ("kcv_controls_" + control + ".so")).string();
}

GateResult run_gate(const GateDef& g, const Contract& c, Backend& candidate,
                    const std::vector<Backend*>& controls, const Settings& s, const std::string& only_probe) {
    std::vector<Probe> probes = g.plan(c, s);
    if (!only_probe.empty()) {
        // A replay runs the gate's probes up to and including this one, in order: a candidate
        // that keeps state across calls (a cache) fails again only after the same history.
        auto it = std::find_if(probes.begin(), probes.end(), [&](const Probe& p) { return p.id == only_probe; });
        probes.erase(it == probes.end() ? probes.begin() : std::next(it), probes.end());
        if (probes.empty()) {
            GateResult r;
            r.id = g.id;
            r.verdict = Verdict::error;
            r.code = "no-such-probe";
            r.reason = "gate " + std::string(g.id) + " plans no probe '" + only_probe + "' for " + c.id;
            return r;
        }
    }
    std::vector<ProbeOutcome> outcomes;
    outcomes.reserve(probes.size());
    ExecContext ctx{c, candidate, controls};
    for (const Probe& p : probes) {
        try {
            outcomes.push_back(execute(ctx, p));
        } catch (const std::exception& e) {
            ProbeOutcome o;
            o.probe = p;
            o.error = e.what();
            outcomes.push_back(std::move(o));
        }
        // A replay runs every probe up to its own.
        if (only_probe.empty()) {
            if (std::optional<GateResult> ended = ends_gate(g, c, s, outcomes, probes.size() - outcomes.size()))
                return std::move(*ended);
        }
    }
    GateResult r = g.judge(c, s, outcomes);
    r.id = g.id;
    r.probes = static_cast<int>(outcomes.size());
    return r;
}

namespace {

GateResult error_result(const std::string& id, const std::string& code, const std::string& reason) {
    GateResult r;
    r.id = id;
    r.verdict = Verdict::error;
    r.code = code;
    r.reason = reason;
    return r;
}

double timeout_of(const Contract& c, const VerifyOptions& o) {
    return o.timeout_s > 0 ? o.timeout_s : c.measurement.timeout_s;
}

// Loads the candidate and the controls, runs the gate; the JSON of the result.
std::string gate_worker(const GateDef& g, const Contract& c, const std::string& candidate,
                        const std::vector<std::string>& control_paths, const Settings& s,
                        const std::string& only_probe) {
    std::unique_ptr<Backend> cand = load_native(candidate);
    std::vector<std::unique_ptr<Backend>> owned;
    std::vector<Backend*> controls;
    for (const auto& p : control_paths) {
        owned.push_back(load_native(p));
        controls.push_back(owned.back().get());
    }
    return to_json(run_gate(g, c, *cand, controls, s, only_probe)).dump();
}

GateResult run_isolated(const GateDef& g, const Contract& c, const std::string& candidate,
                        const std::vector<std::string>& control_paths, const VerifyOptions& o,
                        const std::string& only_probe) {
    auto work = [&] { return gate_worker(g, c, candidate, control_paths, o.settings, only_probe); };
    if (!o.sandbox) {
        try {
            return gate_result_from_json(nlohmann::json::parse(work()));
        } catch (const std::exception& e) {
            return error_result(g.id, "worker-error", e.what());
        }
    }
    SandboxResult sr = run_sandboxed(work, timeout_of(c, o));
    switch (sr.status) {
        case SandboxResult::Status::ok:
            try {
                return gate_result_from_json(nlohmann::json::parse(sr.output));
            } catch (const std::exception& e) {
                return error_result(g.id, "worker-garbled", std::string("unreadable worker answer: ") + e.what());
            }
        case SandboxResult::Status::crashed: {
            // A correct kernel never crashes: this is the candidate's failure, not the verifier's.
            GateResult r = error_result(g.id, sr.describe(), "");
            r.verdict = Verdict::fail;
            r.signature = {"crash"};
            r.reason = "the candidate crashed during " + std::string(g.id) + " (" + sr.describe() + ")";
            return r;
        }
        case SandboxResult::Status::timed_out: {
            GateResult r = error_result(g.id, "timeout", "");
            r.verdict = Verdict::fail;
            r.signature = {"hang"};
            r.reason = "the candidate did not finish " + std::string(g.id) + " within " +
                       std::to_string(timeout_of(c, o)) + " s";
            return r;
        }
        case SandboxResult::Status::failed:
            if (!sr.output.empty() && sr.output[0] == '\x01') {
                return error_result(g.id, "worker-error", sr.output.substr(1));
            }
            return error_result(g.id, "worker-failed", sr.describe());
    }
    return error_result(g.id, "worker-failed", sr.describe());
}

// Results of the positive controls per (contract, gate, control, settings), shared by every
// candidate verified in this process.
std::map<std::string, GateResult>& control_cache() {
    static std::map<std::string, GateResult> cache;
    return cache;
}

}  // namespace

Record verify(const Contract& c, const std::string& candidate_path, const VerifyOptions& o) {
    const auto t0 = std::chrono::steady_clock::now();
    Record rec;
    rec.contract_id = c.id;
    rec.candidate = candidate_path;
    rec.candidate_hash = file_hash(candidate_path);
    rec.settings = o.settings;

    const std::string kdir = o.kernel_dir.empty() ? default_kernel_dir() : o.kernel_dir;
    std::vector<std::string> control_paths;
    for (const auto& name : c.controls) control_paths.push_back(control_path(kdir, name));

    auto all_error = [&](const std::string& code, const std::string& msg) {
        rec.error = msg;
        rec.error_code = code;
        for (const auto& g : all_gates()) rec.gates.push_back(error_result(g.id, code, msg));
    };
    if (rec.candidate_hash.empty()) {
        all_error("load-failed", "cannot read candidate '" + candidate_path + "'");
        return rec;
    }
    for (const auto& p : control_paths) {
        if (!fs::exists(p)) {
            all_error("control-missing", "positive control '" + p + "' of contract " + c.id + " is missing");
            return rec;
        }
    }
    // Loading runs the library's constructors: do it in a worker too.
    {
        auto probe_load = [&] { return load_native(candidate_path)->name(); };
        SandboxResult sr = o.sandbox ? run_sandboxed(probe_load, timeout_of(c, o)) : SandboxResult{};
        if (!o.sandbox) {
            try {
                sr.output = probe_load();
                sr.status = SandboxResult::Status::ok;
            } catch (const std::exception& e) {
                sr.output = std::string("\x01") + e.what();
            }
        }
        if (sr.status != SandboxResult::Status::ok) {
            const std::string why = (!sr.output.empty() && sr.output[0] == '\x01') ? sr.output.substr(1)
                                                                                   : sr.describe();
            all_error("load-failed", "cannot load candidate '" + candidate_path + "': " + why);
            return rec;
        }
        rec.extra["candidate_name"] = sr.output;
    }

    const std::string settings_key = to_json(o.settings).dump();
    for (const auto& g : all_gates()) {
        const bool wanted = o.only_gates.empty() ||
                            std::find(o.only_gates.begin(), o.only_gates.end(), g.id) != o.only_gates.end();
        if (!wanted) {
            GateResult r = error_result(g.id, "", "not requested");
            r.verdict = Verdict::na;
            rec.gates.push_back(r);
            continue;
        }
        if (std::string why = g.not_applicable(c); !why.empty()) {
            GateResult r = error_result(g.id, "", why);
            r.verdict = Verdict::na;
            rec.gates.push_back(r);
            continue;
        }
        std::string control_failure;
        if (o.check_controls) {
            for (const auto& cp : control_paths) {
                if (fs::equivalent(cp, candidate_path)) continue;
                const std::string key = c.id + "|" + g.id + "|" + cp + "|" + settings_key + "|" + o.only_probe;
                auto it = control_cache().find(key);
                if (it == control_cache().end()) {
                    it = control_cache().emplace(key, run_isolated(g, c, cp, control_paths, o, o.only_probe)).first;
                }
                if (it->second.verdict == Verdict::fail || it->second.verdict == Verdict::error) {
                    control_failure = "positive control " + fs::path(cp).stem().string() + " " +
                                      name(it->second.verdict) + "s this gate here (" + it->second.reason + ")";
                    break;
                }
            }
        }
        if (!control_failure.empty()) {
            GateResult r = error_result(g.id, "", control_failure);
            r.verdict = Verdict::na;
            rec.gates.push_back(r);
            continue;
        }
        GateResult r = run_isolated(g, c, candidate_path, control_paths, o, o.only_probe);
        if (r.verdict == Verdict::fail && o.confirm_failures && !r.evidence.empty() && r.code.empty()) {
            const std::string probe = r.evidence.front().probe;
            GateResult again = run_isolated(g, c, candidate_path, control_paths, o, probe);
            r.detail["replayed"] = probe;
            if (again.verdict != Verdict::fail) {
                r.verdict = Verdict::error;
                r.code = "not-reproducible";
                r.reason = "failed, but probe " + probe + " did not fail again in a fresh worker (" +
                           name(again.verdict) + "): " + r.reason;
            }
        }
        for (auto& e : r.evidence) {
            if (e.replay.empty() && !e.probe.empty()) e.replay = replay_command(c, candidate_path, o.settings, e.probe);
        }
        rec.gates.push_back(std::move(r));
    }
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rec;
}

}  // namespace kcv
