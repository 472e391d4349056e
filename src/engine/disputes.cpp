// Disputed verdicts for a person to audit: where kcv and the standard check disagree, a seeded
// sample stratified by gate and operator, each written as a packet with a minimal reproducer.
// A failing probe is shrunk by re-running it alone with smaller dimensions and simpler values
// (the controls must still pass there, so the minimal input stays inside what correct
// implementations handle): native candidates in a sandboxed worker of this process, Python
// candidates through the Python worker's probe override. One driver decides for both.
#include "kcv/disputes.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "engine/python_worker.hpp"
#include "engine/sandbox.hpp"
#include "kcv/execution.hpp"
#include "kcv/journal_report.hpp"

namespace kcv {
namespace fs = std::filesystem;

namespace {

uint64_t draw(uint64_t seed, const std::string& name) { return XXH3_64bits_withSeed(name.data(), name.size(), seed); }

std::string shell_quote(const std::string& s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") ==
                          std::string::npos)
        return s;
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}

std::string num(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

GateResult error_result(const std::string& id, const std::string& code, const std::string& reason) {
    GateResult r;
    r.id = id;
    r.verdict = Verdict::error;
    r.code = code;
    r.reason = reason;
    return r;
}

std::string reprobe_worker(const GateDef& g, const Contract& c, const std::string& candidate,
                           const std::vector<std::string>& control_paths, const Settings& s,
                           const std::string& probe_id, const ProbeOverride& o) {
    std::vector<Probe> probes = g.plan(c, s);
    auto it = std::find_if(probes.begin(), probes.end(), [&](const Probe& p) { return p.id == probe_id; });
    if (it == probes.end())
        return to_json(error_result(g.id, "no-such-probe", "gate " + std::string(g.id) + " plans no probe '" +
                                                               probe_id + "' for " + c.id))
            .dump();
    if (auto problem = override_problem(g.id, c, o)) return to_json(*problem).dump();
    Probe p = *it;
    apply(p, o);
    std::unique_ptr<Backend> cand = load_native(candidate);
    std::vector<std::unique_ptr<Backend>> owned;
    std::vector<Backend*> controls;
    for (const auto& path : control_paths) {
        owned.push_back(load_native(path));
        controls.push_back(owned.back().get());
    }
    ExecContext ctx{c, *cand, controls};
    std::vector<ProbeOutcome> outcomes(1);
    try {
        outcomes[0] = execute(ctx, p);
    } catch (const std::exception& e) {
        outcomes[0].probe = p;
        outcomes[0].error = e.what();
    }
    GateResult r = g.judge(c, s, outcomes);
    r.id = g.id;
    r.probes = 1;
    return to_json(r).dump();
}

std::vector<std::string> control_paths_of(const Contract& c, const VerifyOptions& opts) {
    const std::string kdir = opts.kernel_dir.empty() ? default_kernel_dir() : opts.kernel_dir;
    std::vector<std::string> paths;
    for (const auto& name : c.controls) paths.push_back(control_path(kdir, name));
    return paths;
}

// Sizes worth trying when shrinking: the smallest, and both sides of powers of two (tiles).
std::vector<int64_t> ladder_below(int64_t current, int64_t lo, int64_t hi) {
    std::set<int64_t> v = {1, 2, 3, 4, 5, 6, 7};
    for (int64_t p = 8; p <= (int64_t(1) << 20); p *= 2) v.insert({p - 1, p, p + 1});
    std::vector<int64_t> out;
    for (int64_t x : v)
        if (x < current && x >= lo && x <= hi) out.push_back(x);
    return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

std::string slug(const std::string& s, size_t max) {
    std::string o;
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_' || c == '.';
        o += ok ? c : '_';
    }
    // Too long: keep the end, where ids differ, from a word's start on ("runs_level1_...", not
    // "riton_runs_level1_...").
    if (o.size() > max) {
        const bool at_word = o[o.size() - max - 1] == '_';
        o = o.substr(o.size() - max);
        const size_t cut = at_word ? std::string::npos : o.find('_');
        if (cut != std::string::npos && cut + 1 < o.size()) o = o.substr(cut + 1);
    }
    while (!o.empty() && o.front() == '.') o.erase(o.begin());
    return o.empty() ? "x" : o;
}

}  // namespace

std::vector<Dispute> find_disputes(const std::vector<nlohmann::json>& records, const std::string& tolerance) {
    std::vector<Dispute> out;
    for (size_t i = 0; i < records.size(); ++i) {
        const auto& r = records[i];
        if (r.contains("error")) continue;
        const int standard = standard_verdict(r, tolerance);
        if (standard < 0) continue;
        Dispute d;
        d.id = record_id(r);
        d.operator_name = record_operator(r);
        d.index = i;
        for (const auto& g : r.value("gates", nlohmann::json::array()))
            if (g.value("verdict", "") == "fail") d.failed_gates.push_back(g.value("id", ""));
        const bool violation = !d.failed_gates.empty();
        if (standard == 1 && violation) d.kind = "standard-pass-kcv-fail";
        else if (standard == 0 && !violation) d.kind = "standard-fail-kcv-clean";
        else continue;
        out.push_back(std::move(d));
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> strata_of(const Dispute& d) {
    std::vector<std::pair<std::string, std::string>> s;
    for (const auto& g : d.failed_gates) s.push_back({g, d.operator_name});
    if (s.empty()) s.push_back({"none", d.operator_name});
    return s;
}

std::vector<std::pair<Dispute, std::pair<std::string, std::string>>> stratified_sample(
    const std::vector<Dispute>& disputes, size_t n, uint64_t seed) {
    // gate -> operator -> members (indices into disputes), each list in its drawn order.
    std::map<std::string, std::map<std::string, std::vector<size_t>>> strata;
    for (size_t i = 0; i < disputes.size(); ++i)
        for (const auto& [g, op] : strata_of(disputes[i])) strata[g][op].push_back(i);
    auto by_draw = [&](const std::string& salt) {
        return [&, salt](size_t a, size_t b) {
            const uint64_t da = draw(seed, salt + "|" + disputes[a].id), db = draw(seed, salt + "|" + disputes[b].id);
            if (da != db) return da < db;
            return disputes[a].id != disputes[b].id ? disputes[a].id < disputes[b].id : a < b;
        };
    };
    struct GateTurn {
        std::string gate;
        std::vector<std::string> ops;   // in drawn order
        size_t next_op = 0;
    };
    std::vector<GateTurn> gates;
    std::map<std::pair<std::string, std::string>, size_t> cursor;
    for (auto& [gate, ops] : strata) {
        const std::string g = gate;   // a structured binding cannot be captured before C++20 in clang 14
        GateTurn t;
        t.gate = g;
        for (auto& [op, members] : ops) {
            std::sort(members.begin(), members.end(), by_draw(g + "|" + op));
            t.ops.push_back(op);
        }
        std::sort(t.ops.begin(), t.ops.end(), [&](const std::string& a, const std::string& b) {
            const uint64_t da = draw(seed, "op|" + g + "|" + a), db = draw(seed, "op|" + g + "|" + b);
            return da != db ? da < db : a < b;
        });
        gates.push_back(std::move(t));
    }
    std::sort(gates.begin(), gates.end(), [&](const GateTurn& a, const GateTurn& b) {
        const uint64_t da = draw(seed, "gate|" + a.gate), db = draw(seed, "gate|" + b.gate);
        return da != db ? da < db : a.gate < b.gate;
    });

    std::vector<std::pair<Dispute, std::pair<std::string, std::string>>> out;
    std::set<size_t> taken;
    bool progress = true;
    while (out.size() < n && progress) {
        progress = false;
        for (GateTurn& t : gates) {
            if (out.size() >= n) break;
            // This gate's next operator that still has an untaken member.
            for (size_t tries = 0; tries < t.ops.size(); ++tries) {
                const std::string& op = t.ops[t.next_op % t.ops.size()];
                ++t.next_op;
                auto& members = strata[t.gate][op];
                size_t& cur = cursor[{t.gate, op}];
                while (cur < members.size() && taken.count(members[cur])) ++cur;
                if (cur == members.size()) continue;
                taken.insert(members[cur]);
                out.push_back({disputes[members[cur]], {t.gate, op}});
                ++cur;
                progress = true;
                break;
            }
        }
    }
    return out;
}

nlohmann::json to_json(const ProbeOverride& o) {
    nlohmann::json j = nlohmann::json::object();
    if (!o.dims.empty()) j["dims"] = o.dims;
    if (o.family_scale) j["family_scale"] = *o.family_scale;
    if (o.single_special) j["single_special"] = true;
    return j;
}

ProbeOverride probe_override_from_json(const nlohmann::json& j) {
    if (!j.is_object()) throw std::invalid_argument("a probe override is a JSON object, got " + j.dump());
    ProbeOverride o;
    if (j.contains("dims") && !j["dims"].is_null()) {
        if (!j["dims"].is_object()) throw std::invalid_argument("probe override: dims must map names to sizes");
        for (const auto& [k, v] : j["dims"].items()) {
            if (!v.is_number_integer())
                throw std::invalid_argument("probe override: dimension " + k + " must be an integer, got " + v.dump());
            o.dims[k] = v.get<int64_t>();
        }
    }
    if (j.contains("family_scale") && !j["family_scale"].is_null()) {
        if (!j["family_scale"].is_number() || !(j["family_scale"].get<double>() > 0))
            throw std::invalid_argument("probe override: family_scale must be a positive number");
        o.family_scale = j["family_scale"].get<double>();
    }
    if (j.contains("single_special") && !j["single_special"].is_null()) {
        if (!j["single_special"].is_boolean()) throw std::invalid_argument("probe override: single_special is a boolean");
        o.single_special = j["single_special"].get<bool>();
    }
    return o;
}

std::optional<GateResult> override_problem(const std::string& gate, const Contract& c, const ProbeOverride& o) {
    for (const auto& [k, v] : o.dims) {
        const Dim* d = c.dim(k);
        if (!d) return error_result(gate, "unknown-dim", c.id + " has no dimension '" + k + "'");
        if (v < d->min || v > d->max)
            return error_result(gate, "dim-out-of-range",
                                k + " = " + std::to_string(v) + " lies outside [" + std::to_string(d->min) + ", " +
                                    std::to_string(d->max) + "]");
    }
    return std::nullopt;
}

void apply(Probe& p, const ProbeOverride& o) {
    for (const auto& [k, v] : o.dims) p.dims[k] = v;
    // A class named after the probe's shape ("fails at N=17") must say the shape was changed.
    if (!o.dims.empty() && p.note.is_object() && p.note.contains("signature_class") &&
        p.note["signature_class"].is_string()) {
        std::string at;
        for (const auto& [k, v] : o.dims) at += (at.empty() ? "" : ", ") + k + "=" + std::to_string(v);
        p.note["signature_class"] = p.note["signature_class"].get<std::string>() + " (shrunk to " + at + ")";
    }
    if (o.family_scale) p.family.scale = *o.family_scale;
    if (o.single_special) {
        for (auto& ov : p.overrides) {
            if (ov.specials && ov.specials->pattern == Specials::Pattern::scattered) ov.specials->rate = 0;
        }
    }
}

GateResult run_probe_with(const GateDef& g, const Contract& c, const std::string& candidate,
                          const VerifyOptions& opts, const std::string& probe_id, const ProbeOverride& o) {
    const std::vector<std::string> controls = control_paths_of(c, opts);
    for (const auto& p : controls) {
        if (!fs::exists(p)) return error_result(g.id, "control-missing", "positive control '" + p + "' is missing");
    }
    auto work = [&] { return reprobe_worker(g, c, candidate, controls, opts.settings, probe_id, o); };
    if (!opts.sandbox) {
        try {
            return gate_result_from_json(nlohmann::json::parse(work()));
        } catch (const std::exception& e) {
            return error_result(g.id, "worker-error", e.what());
        }
    }
    const double timeout = opts.timeout_s > 0 ? opts.timeout_s : c.measurement.timeout_s;
    SandboxResult sr = run_sandboxed(work, timeout);
    switch (sr.status) {
        case SandboxResult::Status::ok:
            try {
                return gate_result_from_json(nlohmann::json::parse(sr.output));
            } catch (const std::exception& e) {
                return error_result(g.id, "worker-garbled", e.what());
            }
        case SandboxResult::Status::crashed: {
            GateResult r = error_result(g.id, sr.describe(), "the candidate crashed (" + sr.describe() + ")");
            r.verdict = Verdict::fail;
            r.signature = {"crash"};
            return r;
        }
        case SandboxResult::Status::timed_out: {
            GateResult r = error_result(g.id, "timeout", "the candidate did not finish within " + num(timeout) + " s");
            r.verdict = Verdict::fail;
            r.signature = {"hang"};
            return r;
        }
        case SandboxResult::Status::failed:
            if (!sr.output.empty() && sr.output[0] == '\x01') return error_result(g.id, "worker-error", sr.output.substr(1));
            return error_result(g.id, "worker-failed", sr.describe());
    }
    return error_result(g.id, "worker-failed", sr.describe());
}

std::string replay_override_command(const Contract& c, const std::string& candidate, const Settings& s,
                                    const std::string& probe_id, const ProbeOverride& o) {
    std::ostringstream os;
    const bool builtin = c.source.empty() || c.source.front() == '<' || c.source.starts_with("builtin:");
    os << "kcv replay --contract " << shell_quote(builtin ? c.id : c.source) << " --candidate "
       << shell_quote(candidate) << " --seed " << s.seed;
    if (s.c != Settings{}.c) os << " --c " << num(s.c);
    if (s.ord03_margin != Settings{}.ord03_margin) os << " --margin " << num(s.ord03_margin);
    if (s.quick) os << " --quick";
    os << " --gate " << probe_id.substr(0, probe_id.find('/')) << " --probe " << shell_quote(probe_id);
    for (const auto& [k, v] : o.dims) os << " --dim " << shell_quote(k + "=" + std::to_string(v));
    if (o.family_scale) os << " --scale " << num(*o.family_scale);
    if (o.single_special) os << " --single-special";
    return os.str();
}

ShrinkResult shrink_probe(const Probe& planned, const std::vector<Dim>& dims, const ShrinkTrialFn& trial,
                          int max_trials) {
    ShrinkResult out;
    out.probe = planned.id;
    out.original_dims = planned.dims;
    out.dims = planned.dims;

    int trials = 0;
    std::map<std::string, GateResult> seen;
    // A failure that is kept: the gate fails and the controls are known to pass there.
    auto attempt = [&](const ProbeOverride& o) -> const GateResult& {
        const std::string key = to_json(o).dump();
        auto found = seen.find(key);
        if (found != seen.end()) return found->second;
        ++trials;
        ShrinkTrial t = trial(o);
        const char* controls = t.controls == ShrinkTrial::Controls::pass   ? "pass"
                               : t.controls == ShrinkTrial::Controls::fail ? "fail"
                                                                            : "-";
        out.trials.push_back({{"override", to_json(o)},
                              {"verdict", name(t.result.verdict)},
                              {"signature", t.result.signature},
                              {"controls", controls}});
        GateResult& r = t.result;
        if (r.verdict == Verdict::fail && t.controls != ShrinkTrial::Controls::pass) {
            r.verdict = Verdict::na;
            r.reason = (t.controls == ShrinkTrial::Controls::fail ? "a positive control fails here too: "
                                                                  : "the positive controls did not run here: ") +
                       r.reason;
        }
        return seen.emplace(key, std::move(r)).first->second;
    };

    ProbeOverride best;
    {
        const GateResult& first = attempt(best);
        out.result = first;
        if (first.verdict != Verdict::fail) {
            out.note = "the probe did not fail again when re-run alone (" + std::string(name(first.verdict)) +
                       (first.reason.empty() ? "" : ": " + first.reason) +
                       "); a failure that needs the gate's earlier probes (state kept across calls) is not shrunk";
            return out;
        }
        out.reproduced = true;
    }
    for (int round = 0; round < 2; ++round) {
        bool changed = false;
        for (const Dim& d : dims) {
            if (!d.free || !out.dims.count(d.name)) continue;
            for (int64_t v : ladder_below(out.dims.at(d.name), d.min, d.max)) {
                if (trials >= max_trials) break;
                ProbeOverride o = best;
                o.dims[d.name] = v;
                const GateResult& r = attempt(o);
                if (r.verdict == Verdict::fail) {
                    best = o;
                    out.dims[d.name] = v;
                    out.result = r;
                    changed = true;
                    break;
                }
            }
        }
        if (!changed) break;
    }
    if (planned.family.kind == Family::Kind::band || planned.family.kind == Family::Kind::offset) {
        for (double scale : {10.0, 100.0, 1000.0}) {
            if (scale >= planned.family.scale || trials >= max_trials) break;
            ProbeOverride o = best;
            o.family_scale = scale;
            const GateResult& r = attempt(o);
            if (r.verdict == Verdict::fail) {
                best = o;
                out.result = r;
                break;
            }
        }
    }
    const bool scattered = std::any_of(planned.overrides.begin(), planned.overrides.end(), [](const InputOverride& ov) {
        return ov.specials && ov.specials->pattern == Specials::Pattern::scattered && ov.specials->rate > 0;
    });
    if (scattered && trials < max_trials) {
        ProbeOverride o = best;
        o.single_special = true;
        const GateResult& r = attempt(o);
        if (r.verdict == Verdict::fail) {
            best = o;
            out.result = r;
        }
    }
    out.applied = best;
    if (trials >= max_trials) out.note = "stopped after " + std::to_string(trials) + " trials";
    return out;
}

ShrinkResult shrink_native(const Contract& c, const std::string& candidate, const std::string& gate,
                           const std::string& probe_id, const VerifyOptions& opts, int max_trials) {
    ShrinkResult out;
    out.probe = probe_id;
    const GateDef* g = find_gate(gate);
    if (!g) {
        out.note = "unknown gate " + gate;
        return out;
    }
    const std::vector<Probe> planned = g->plan(c, opts.settings);
    auto it = std::find_if(planned.begin(), planned.end(), [&](const Probe& p) { return p.id == probe_id; });
    if (it == planned.end()) {
        out.note = "gate " + gate + " plans no probe '" + probe_id + "' for " + c.id + " at these settings";
        return out;
    }
    const std::vector<std::string> control_paths = control_paths_of(c, opts);
    out = shrink_probe(
        *it, c.dims,
        [&](const ProbeOverride& o) {
            ShrinkTrial t;
            t.result = run_probe_with(*g, c, candidate, opts, probe_id, o);
            // Controls run only where the candidate fails: only a failure can be kept.
            if (t.result.verdict == Verdict::fail) {
                t.controls = ShrinkTrial::Controls::pass;
                for (const auto& cp : control_paths) {
                    const GateResult cr = run_probe_with(*g, c, cp, opts, probe_id, o);
                    if (cr.verdict == Verdict::fail || cr.verdict == Verdict::error)
                        t.controls = ShrinkTrial::Controls::fail;
                }
            }
            return t;
        },
        max_trials);
    out.replay = replay_override_command(c, candidate, opts.settings, probe_id, out.applied);
    if (out.reproduced)
        for (auto& e : out.result.evidence) e.replay = out.replay;
    return out;
}

namespace {

std::string record_reference(const nlohmann::json& r) {
    return r.contains("reference") && r["reference"].is_string() ? r["reference"].get<std::string>()
                                                                 : r.value("problem", std::string());
}

std::string record_candidate(const nlohmann::json& r) {
    return r.contains("candidate") && r["candidate"].is_object() ? r["candidate"].value("path", std::string())
                                                                 : std::string();
}

// The task's dimensions as the record's contract document lists them.
std::vector<Dim> task_dims(const nlohmann::json& record) {
    std::vector<Dim> dims;
    if (!record.contains("task") || !record["task"].is_object() || !record["task"].contains("contract")) return dims;
    for (const auto& d : record["task"]["contract"].value("dims", nlohmann::json::array())) {
        Dim dim;
        dim.name = d.value("name", std::string());
        dim.nominal = d.value("nominal", int64_t(1));
        dim.free = d.value("free", false);
        dim.min = d.value("min", int64_t(1));
        dim.max = d.value("max", std::numeric_limits<int64_t>::max());
        dims.push_back(std::move(dim));
    }
    return dims;
}

// The gate result of one Python trial, from the worker's record.
GateResult python_gate_result(const nlohmann::json& rec, const std::string& gate) {
    for (const auto& g : rec.value("gates", nlohmann::json::array()))
        if (g.value("id", "") == gate) return gate_result_from_json(g);
    if (rec.contains("error") && rec["error"].is_object())
        return error_result(gate, rec["error"].value("code", "worker-error"), rec["error"].value("message", ""));
    return error_result(gate, "no-result", "the worker's record has no result for " + gate);
}

}  // namespace

nlohmann::json python_probe_request(const nlohmann::json& record, const std::string& gate,
                                    const std::string& probe_id, const ProbeOverride& o) {
    nlohmann::json settings = record.value("settings", nlohmann::json::object());
    if (!settings.is_object()) settings = nlohmann::json::object();
    nlohmann::json po = to_json(o);
    po["probe"] = probe_id;
    settings["probe_override"] = po;
    return {{"id", record_id(record)},
            {"reference", record_reference(record)},
            {"candidate", record_candidate(record)},
            {"device", record.value("device", std::string("cpu"))},
            {"seed", settings.value("seed", uint64_t(0))},
            {"settings", settings},
            {"gates", {gate}}};
}

std::string python_replay_command(const nlohmann::json& record, const std::string& gate, const std::string& probe_id,
                                  const ProbeOverride& o) {
    const auto settings = record.value("settings", nlohmann::json::object());
    std::string device = record.value("device", std::string("cpu"));
    device = device.substr(0, device.find(':'));
    std::ostringstream os;
    os << "kcv verify --reference " << shell_quote(record_reference(record)) << " --candidate "
       << shell_quote(record_candidate(record)) << " --device " << device << " --seed "
       << settings.value("seed", uint64_t(0));
    const Settings defaults;
    if (settings.value("c", defaults.c) != defaults.c) os << " --c " << num(settings.value("c", defaults.c));
    if (settings.value("ord03_margin", defaults.ord03_margin) != defaults.ord03_margin)
        os << " --margin " << num(settings.value("ord03_margin", defaults.ord03_margin));
    if (settings.value("quick", false)) os << " --quick";
    // The probe budget sets the task's sizes, and so the probes a gate plans.
    if (settings.contains("probe_budget_bytes") && settings["probe_budget_bytes"].is_number()) {
        char mib[40];   // every digit: the bytes must come back exactly
        std::snprintf(mib, sizeof mib, "%.17g", settings["probe_budget_bytes"].get<double>() / (1 << 20));
        os << " --probe-budget " << mib;
    }
    os << " --gate " << gate << " --probe " << shell_quote(probe_id);
    for (const auto& [k, v] : o.dims) os << " --dim " << shell_quote(k + "=" + std::to_string(v));
    if (o.family_scale) os << " --scale " << num(*o.family_scale);
    if (o.single_special) os << " --single-special";
    return os.str();
}

ShrinkResult shrink_python(const nlohmann::json& record, const std::string& gate, const std::string& probe_id,
                           const PythonShrinkOptions& opts) {
    WorkerConfig cfg;
    cfg.python = opts.python;
    cfg.stage_timeout_s = opts.stage_timeout_s;
    PythonWorker worker(cfg);
    auto run = [&](const ProbeOverride& o) {
        ShrinkTrial t;
        // The worker runs the control before the candidate and announces its outcome, so that a
        // candidate that kills the worker still leaves the control's verdict behind.
        std::optional<nlohmann::json> announced;
        const nlohmann::json rec =
            worker.judge(python_probe_request(record, gate, probe_id, o), [&](const nlohmann::json& ev) {
                if (ev.value("event", "") == "stage" && ev.contains("control") && ev["control"].is_object())
                    announced = ev["control"];
            });
        t.result = python_gate_result(rec, gate);
        nlohmann::json control;
        if (t.result.detail.is_object() && t.result.detail.contains("control")) control = t.result.detail["control"];
        else if (announced) control = *announced;
        if (control.is_object()) {
            const std::string v = control.value("verdict", "");
            t.controls = v == "pass" || v == "n/a" ? ShrinkTrial::Controls::pass : ShrinkTrial::Controls::fail;
        }
        return t;
    };

    ShrinkResult out;
    out.probe = probe_id;
    // The first trial, unshrunk, also tells what the probe is: its dims, family and specials as
    // the worker planned them (CMP-02 plans probes in the Python layer that libkcv alone cannot).
    std::optional<ShrinkTrial> first = run({});
    const nlohmann::json detail = first->result.detail;
    Probe planned;
    planned.id = probe_id;
    if (detail.is_object() && detail.contains("probe") && detail["probe"].is_object()) {
        try {
            planned = probe_from_json(detail["probe"]);
        } catch (const std::exception& e) {
            out.note = std::string("the worker described the probe in a form this build cannot read: ") + e.what();
        }
    } else if (first->result.verdict == Verdict::fail) {
        out.note = "the worker did not describe the probe (an older kcv.worker?), so only its values can be reduced";
    }
    const std::string why_not = out.note;
    out = shrink_probe(
        planned, task_dims(record),
        [&](const ProbeOverride& o) {
            if (o.empty() && first) {
                ShrinkTrial t = std::move(*first);
                first.reset();
                return t;
            }
            return run(o);
        },
        opts.max_trials);
    if (!why_not.empty()) out.note = why_not + (out.note.empty() ? "" : "; " + out.note);
    worker.finish(5);
    out.replay = python_replay_command(record, gate, probe_id, out.applied);
    if (out.reproduced)
        for (auto& e : out.result.evidence) e.replay = out.replay;
    return out;
}

nlohmann::json to_json(const ShrinkResult& s) {
    return {{"reproduced", s.reproduced}, {"probe", s.probe},      {"original_dims", s.original_dims},
            {"dims", s.dims},             {"override", to_json(s.applied)}, {"result", to_json(s.result)},
            {"trials", s.trials},         {"replay", s.replay},    {"note", s.note}};
}

nlohmann::json python_shrink_request(const nlohmann::json& record, const std::string& gate, const std::string& probe) {
    nlohmann::json dims = nlohmann::json::object();
    if (record.contains("task") && record["task"].is_object() && record["task"].contains("contract")) {
        for (const auto& d : record["task"]["contract"].value("dims", nlohmann::json::array())) {
            if (!d.value("free", false)) continue;
            const int64_t nominal = d.value("nominal", int64_t(1));
            const int64_t lo = d.value("min", int64_t(1));
            const int64_t hi = d.value("max", std::numeric_limits<int64_t>::max());
            dims[d.value("name", std::string("?"))] = {{"nominal", nominal}, {"try", ladder_below(nominal, lo, hi)}};
        }
    }
    nlohmann::json settings = record.value("settings", nlohmann::json::object());
    const std::string reference = record.contains("reference") && record["reference"].is_string()
                                      ? record["reference"].get<std::string>()
                                      : record.value("problem", std::string());
    return {{"id", record_id(record)},
            {"reference", reference},
            {"candidate", record.contains("candidate") && record["candidate"].is_object()
                              ? record["candidate"].value("path", std::string())
                              : std::string()},
            {"device", record.value("device", std::string("cpu"))},
            {"seed", settings.value("seed", uint64_t(0))},
            {"settings", settings},
            {"gates", {gate}},
            {"shrink",
             {{"probe", probe},
              {"criterion", "the gate still fails at the smaller input and the control model_fp32 passes there"},
              {"dims", dims},
              {"order", "each free dimension in turn, sizes in the order listed (smallest first), the first size "
                        "that still fails is kept; two rounds; then the values"},
              {"values", {{"band_scales", {10, 100, 1000}}, {"specials", "a single injected special value"}}},
              {"trial", "this request with settings.probe_override = {\"probe\": probe, \"dims\": {...}, "
                        "\"family_scale\": x?, \"single_special\": bool?}; the worker runs the probe alone on the "
                        "candidate and on the fp32 control and answers a record whose gate carries detail.control"},
              {"run", "kcv disputes on a machine that holds the reference and the candidate"}}}};
}

namespace {

std::string value_bits(const nlohmann::json& ev, const char* v, const char* b) {
    if (!ev.contains(v)) return "";
    std::string s = report_detail::number(report_detail::json_number(ev[v]));
    if (!ev.value(b, std::string()).empty()) s += " (" + ev.value(b, std::string()) + ")";
    return s;
}

// Text for a Markdown list item: a multi-line message (a worker's stderr) goes into a block of
// its own so that it cannot break the list.
std::string md_item_text(const std::string& s) {
    if (s.find('\n') == std::string::npos) return s;
    size_t longest = 0, run = 0;
    for (char c : s) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    const std::string fence(std::max<size_t>(3, longest + 1), '`');
    std::string body = s;
    while (!body.empty() && body.back() == '\n') body.pop_back();
    return "\n\n" + fence + "text\n" + body + "\n" + fence + "\n";
}

void evidence_md(std::ostringstream& os, const nlohmann::json& ev) {
    os << "- probe: `" << ev.value("probe", "") << "`\n";
    if (!ev.value("signature", std::string()).empty())
        os << "- what was seen: " << md_item_text(ev.value("signature", "")) << "\n";
    const std::string coords = report_detail::coords_text(ev.value("worst_coords", nlohmann::json::array()));
    if (!coords.empty()) os << "- element: `" << ev.value("output", "") << "` at " << coords << "\n";
    if (!ev.value("actual_bits", std::string()).empty() || !ev.value("expected_bits", std::string()).empty()) {
        os << "- expected: `" << value_bits(ev, "expected", "expected_bits") << "`\n";
        os << "- actual:   `" << value_bits(ev, "actual", "actual_bits") << "`\n";
        if (ev.contains("detail") && ev["detail"].is_object() && ev["detail"].contains("expected_f64"))
            os << "- y* in float64: `" << report_detail::number(report_detail::json_number(ev["detail"]["expected_f64"]))
               << " (" << ev["detail"].value("expected_f64_bits", std::string()) << ")`\n";
    }
}

std::string dims_text(const DimValues& d) {
    std::string s;
    for (const auto& [k, v] : d) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
    return s.empty() ? "(none)" : s;
}

bool is_python_record(const nlohmann::json& r) {
    return r.contains("reference") || r.contains("problem") || r.contains("task");
}

std::string verify_command(const nlohmann::json& r, const std::string& gate) {
    const auto settings = r.value("settings", nlohmann::json::object());
    const std::string cand = r.contains("candidate") && r["candidate"].is_object()
                                 ? r["candidate"].value("path", std::string())
                                 : std::string();
    std::string cmd;
    if (is_python_record(r)) {
        const std::string ref = r.contains("reference") && r["reference"].is_string() ? r["reference"].get<std::string>()
                                                                                    : r.value("problem", std::string());
        std::string device = r.value("device", std::string("cpu"));
        device = device.substr(0, device.find(':'));
        cmd = "kcv verify --reference " + shell_quote(ref) + " --candidate " + shell_quote(cand) + " --device " + device;
    } else {
        cmd = "kcv verify --contract " + shell_quote(r.value("contract", "")) + " --candidate " + shell_quote(cand);
    }
    cmd += " --seed " + std::to_string(settings.value("seed", uint64_t(0)));
    if (settings.value("quick", false)) cmd += " --quick";
    if (!gate.empty()) cmd += " --gate " + gate;
    return cmd;
}

}  // namespace

DisputeSummary write_dispute_packets(const std::vector<nlohmann::json>& records, const DisputeOptions& opts,
                                     const DisputeProgress& progress) {
    DisputeSummary sum;
    sum.records = records.size();
    for (const auto& r : records) sum.with_standard += standard_verdict(r, opts.tolerance) >= 0;
    const std::vector<Dispute> disputes = find_disputes(records, opts.tolerance);
    sum.disputes = disputes.size();
    const auto sample = stratified_sample(disputes, opts.sample, opts.seed);
    fs::create_directories(opts.out_dir);

    std::map<std::pair<std::string, std::string>, int> population;
    for (const auto& d : disputes)
        for (const auto& s : strata_of(d)) ++population[s];

    std::ostringstream index;
    index << "# Disputed verdicts\n\nJournal `" << opts.journal << "`: " << sum.records << " records, "
          << sum.with_standard << " with the standard check at " << opts.tolerance.substr(4) << ", " << sum.disputes
          << " disputed (kcv and the standard check disagree). Sample of " << sample.size() << ", seed " << opts.seed
          << ", stratified by gate × operator (gates take turns, each gate's operators take turns, members drawn "
             "by XXH3 of the seed and the id; the same seed and journal give the same sample).\n\n"
          << "Regenerate: `kcv disputes " << shell_quote(opts.journal) << " --sample " << opts.sample << " --seed "
          << opts.seed << " --tolerance " << opts.tolerance.substr(4) << "`\n\n"
          << "| # | stratum (gate, operator) | population | candidate | kind | packet |\n|---|---|---:|---|---|---|\n";

    int n = 0;
    for (const auto& [d, stratum] : sample) {
        ++n;
        if (progress) progress(d.id, n - 1, static_cast<int>(sample.size()));
        const nlohmann::json& r = records[d.index];
        char prefix[16];
        std::snprintf(prefix, sizeof prefix, "%02d", n);
        const std::string dir_name =
            std::string(prefix) + "-" + slug(stratum.first, 8) + "-" + slug(stratum.second, 32) + "-" + slug(d.id, 40);
        const fs::path dir = fs::path(opts.out_dir) / dir_name;
        fs::create_directories(dir);
        std::ofstream(dir / "record.json") << r.dump(2) << "\n";

        std::ostringstream md;
        md << "# Disputed: `" << d.id << "` — " << stratum.first << " on " << d.operator_name << "\n\n";
        const auto sc = r.value("standard_check", nlohmann::json::object());
        if (d.kind == "standard-pass-kcv-fail") {
            md << "The standard check **accepts** this candidate at " << opts.tolerance.substr(4)
               << "; kcv finds a violation of **" << join(d.failed_gates, ", ") << "**.\n\n";
        } else {
            md << "The standard check **rejects** this candidate at " << opts.tolerance.substr(4)
               << "; kcv finds **no violation**. Audit whether the standard check's tolerance is too tight for this "
                  "task or whether kcv missed a defect.\n\n";
        }
        md << "Standard check: `" << sc.dump() << "`\n\n";
        md << "Record: [record.json](record.json) (operator `" << d.operator_name << "`, contract `"
           << r.value("contract", "") << "`).\n\n";

        std::string one_command = verify_command(r, stratum.first == "none" ? "" : stratum.first);
        nlohmann::json gate;
        for (const auto& g : r.value("gates", nlohmann::json::array()))
            if (g.value("id", "") == stratum.first) gate = g;
        if (!gate.is_null()) {
            const GateDef* def = find_gate(stratum.first);
            md << "## " << stratum.first << " (" << (def ? def->name : "") << ")\n\n";
            md << "- verdict: " << gate.value("verdict", "") << "\n";
            std::vector<std::string> classes = gate.value("signature", std::vector<std::string>{});
            md << "- signature classes: " << join(classes, ", ") << "\n";
            md << "- reason: " << md_item_text(gate.value("reason", "")) << "\n";
            const auto ev = gate.value("evidence", nlohmann::json::array());
            if (!ev.empty()) {
                md << "\n### Evidence as recorded\n\n";
                evidence_md(md, ev.front());
                const std::string probe = ev.front().value("probe", "");
                const std::string original_replay = ev.front().value("replay", "");
                if (!original_replay.empty()) one_command = original_replay;
                md << "\n### Minimal input\n\n";
                const bool python = is_python_record(r);
                std::string python_why_not;
                if (python && !opts.shrink) python_why_not = "--no-shrink";
                if (python && opts.shrink) {
                    for (const std::string& f : {record_reference(r), record_candidate(r)})
                        if (f.empty() || !fs::exists(f)) python_why_not = "'" + f + "' is not on this machine";
                    if (probe.empty()) python_why_not = "the evidence names no probe";
                }
                if (python && !python_why_not.empty()) {
                    const nlohmann::json req = python_shrink_request(r, stratum.first, probe);
                    std::ofstream(dir / "shrink_request.json") << req.dump(2) << "\n";
                    md << "Not shrunk here (" << python_why_not
                       << "). [shrink_request.json](shrink_request.json) holds what `kcv disputes` sends the Python "
                          "worker where the files are: probe `"
                       << probe << "` of " << stratum.first
                       << " re-run alone with each free dimension of the task lowered to the sizes listed (smallest "
                          "first, keeping the first at which the gate still fails and the fp32 control passes), then "
                          "the values reduced (a scaled band to the smallest scale that still fails, scattered special "
                          "values to a single one). Until then the recorded probe is the reproducer.\n";
                } else if (!opts.shrink) {
                    md << "Not shrunk (--no-shrink).\n";
                } else {
                    const std::string cand = record_candidate(r);
                    std::string why;
                    ShrinkResult sr;
                    try {
                        if (python) {
                            PythonShrinkOptions po;
                            po.python = opts.python;
                            po.stage_timeout_s = opts.stage_timeout_s;
                            po.max_trials = opts.max_trials;
                            sr = shrink_python(r, stratum.first, probe, po);
                        } else {
                            if (cand.empty() || !fs::exists(cand)) throw std::runtime_error("candidate '" + cand + "' is not here");
                            const Contract c = resolve_contract(r.value("contract", ""));
                            validate(c);
                            VerifyOptions vo = opts.verify;
                            const auto st = r.value("settings", nlohmann::json::object());
                            vo.settings.seed = st.value("seed", uint64_t(0));
                            vo.settings.c = st.value("c", 4.0);
                            vo.settings.envelope_factor = st.value("envelope_factor", 2.0);
                            vo.settings.ord03_margin = st.value("ord03_margin", 1.2);
                            vo.settings.quick = st.value("quick", false);
                            sr = shrink_native(c, cand, stratum.first, probe, vo, opts.max_trials);
                        }
                    } catch (const std::exception& e) {
                        why = e.what();
                    }
                    if (!why.empty()) {
                        md << "Not shrunk: " << why << ".\n";
                    } else {
                        std::ofstream(dir / "shrink.json") << to_json(sr).dump(2) << "\n";
                        md << "Shrunk by re-running probe `" << probe << "` alone with smaller inputs ("
                           << sr.trials.size() << " trials, [shrink.json](shrink.json)"
                           << (python ? ", each a request to the Python worker with settings.probe_override" : "")
                           << "); a step is kept only where the gate still fails and every positive control ("
                           << (python ? "the fp32 Model" : "the contract's controls") << ") still passes.\n\n";
                        md << "- dimensions: " << dims_text(sr.original_dims) << " → **" << dims_text(sr.dims) << "**\n";
                        std::vector<std::string> values;
                        if (sr.applied.family_scale) values.push_back("value scale lowered to " + num(*sr.applied.family_scale));
                        if (sr.applied.single_special) values.push_back("a single special value injected");
                        md << "- values: " << (values.empty() ? "as the probe draws them (no simpler values still fail)" : join(values, "; ")) << "\n";
                        if (!sr.note.empty()) md << "- note: " << sr.note << "\n";
                        if (sr.reproduced) {
                            md << "- verdict at the minimal input: " << name(sr.result.verdict) << " — " << sr.result.reason
                               << "\n";
                            if (!sr.result.evidence.empty()) {
                                md << "\n### Evidence at the minimal input\n\n";
                                evidence_md(md, to_json(sr.result.evidence.front()));
                            }
                            one_command = sr.replay;
                        }
                    }
                }
            }
        }
        md << "\n## Replay\n\n```sh\n" << one_command << "\n```\n";
        std::ofstream(dir / "README.md") << md.str();
        sum.packets.push_back(dir.string());
        index << "| " << n << " | " << stratum.first << ", " << stratum.second << " | " << population[stratum] << " | `"
              << d.id << "` | " << d.kind << " | [" << dir_name << "](" << dir_name << "/README.md) |\n";
    }
    if (progress) progress("done", static_cast<int>(sample.size()), static_cast<int>(sample.size()));
    std::ofstream(fs::path(opts.out_dir) / "README.md") << index.str();
    return sum;
}

}  // namespace kcv
