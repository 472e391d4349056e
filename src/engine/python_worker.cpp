// The parent side of the Python worker protocol (docs/kernelbench.md). Requests and events are
// JSON lines. Events: {"event":"stage","stage":S}, {"event":"gate","result":G},
// {"event":"record","record":R}; anything else is passed to the caller. A gate event may carry
// "seconds", the time the worker spent on that gate.
#include "engine/python_worker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kcv/gate.hpp"

extern char** environ;

namespace kcv {
namespace {

using Clock = std::chrono::steady_clock;

void write_all(int fd, const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
        ssize_t n = write(fd, s.data() + done, s.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error(std::string("cannot write to the worker: ") + std::strerror(errno));
        done += static_cast<size_t>(n);
    }
}

std::string describe_status(int status) {
    if (WIFSIGNALED(status)) {
        const char* abbrev = sigabbrev_np(WTERMSIG(status));
        return std::string("killed by SIG") + (abbrev ? abbrev : std::to_string(WTERMSIG(status)).c_str());
    }
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    return "ended";
}

nlohmann::json failed_gate(const std::string& id, const std::string& cls, const std::string& code,
                           const std::string& reason) {
    const GateDef* def = find_gate(id);
    return {{"id", id}, {"name", def ? def->name : ""}, {"tolerance_free", def && def->tolerance_free},
            {"verdict", cls.empty() ? "error" : "fail"}, {"signature", cls.empty() ? nlohmann::json::array()
                                                                                  : nlohmann::json::array({cls})},
            {"code", code}, {"reason", reason}, {"probes", 0}, {"evidence", nlohmann::json::array()}};
}

// The gates the request asks for, in the order of GATES.md.
std::vector<std::string> requested_gates(const nlohmann::json& request) {
    std::set<std::string> asked;
    const bool all = !request.contains("gates") || request["gates"].is_null();
    if (!all) {
        for (const auto& g : request["gates"]) asked.insert(g.get<std::string>());
    }
    std::vector<std::string> ids;
    for (const auto& g : all_gates()) {
        if (all || asked.count(g.id)) ids.push_back(g.id);
    }
    return ids;
}

// Gates timed by earlier workers of the same candidate join the timing of the record; the
// record's own stages (load, standard check, reference) are those of the worker that wrote it.
void merge_gate_seconds(nlohmann::json& rec, const std::map<std::string, double>& seconds) {
    if (!rec.contains("timing") || !rec["timing"].is_object()) rec["timing"] = nlohmann::json::object();
    nlohmann::json& timing = rec["timing"];
    if (!timing.contains("gates_s") || !timing["gates_s"].is_object()) timing["gates_s"] = nlohmann::json::object();
    for (const auto& [id, s] : seconds) {
        if (!timing["gates_s"].contains(id)) timing["gates_s"][id] = s;
    }
}

}  // namespace

PythonWorker::PythonWorker(WorkerConfig cfg) : cfg_(std::move(cfg)) {}
PythonWorker::~PythonWorker() { stop(true); }

void PythonWorker::start() {
    int in_pipe[2], out_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    char tmpl[] = "/tmp/kcv-worker-stderr-XXXXXX";
    int err_fd = mkstemp(tmpl);
    if (err_fd < 0) throw std::runtime_error(std::string("mkstemp: ") + std::strerror(errno));
    stderr_path_ = tmpl;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);

    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
        std::string s = *e;
        const std::string key = s.substr(0, s.find('='));
        if (!cfg_.env.count(key)) env_strings.push_back(s);
    }
    for (const auto& [k, v] : cfg_.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = {cfg_.python, "-u", "-m", "kcv.worker"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int rc = posix_spawnp(&pid_, cfg_.python.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(in_pipe[0]);
    close(out_pipe[1]);
    close(err_fd);
    if (rc != 0) {
        close(in_pipe[1]);
        close(out_pipe[0]);
        pid_ = -1;
        throw std::runtime_error("cannot start '" + cfg_.python + " -m kcv.worker': " + std::strerror(rc));
    }
    to_child_ = in_pipe[1];
    from_child_ = out_pipe[0];
    pending_.clear();
}

void PythonWorker::stop(bool kill_now, double grace_s) {
    if (pid_ < 0) return;
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
    to_child_ = from_child_ = -1;
    int status = 0;
    bool reaped = false;
    if (!kill_now) {
        // The worker reads the end of its input and exits on its own; polling keeps the wait bounded.
        const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
        for (;;) {
            const pid_t r = waitpid(pid_, &status, WNOHANG);
            if (r == pid_ || (r < 0 && errno != EINTR)) {
                reaped = true;
                break;
            }
            if (Clock::now() >= deadline) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    if (!reaped) {
        kill(pid_, SIGKILL);
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
    }
    pid_ = -1;
    if (!stderr_path_.empty()) unlink(stderr_path_.c_str());
    stderr_path_.clear();
}

void PythonWorker::finish(double grace_s) { stop(false, grace_s); }

std::string PythonWorker::stderr_tail() const {
    std::ifstream in(stderr_path_);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (all.size() > 2000) all = "…" + all.substr(all.size() - 2000);
    return all;
}

PythonWorker::Exchange PythonWorker::exchange(const nlohmann::json& request,
                                              const std::function<void(const nlohmann::json&)>& on_event) {
    Exchange ex;
    ex.stage = "load";
    write_all(to_child_, request.dump() + "\n");
    auto deadline = Clock::now() + std::chrono::duration<double>(cfg_.load_timeout_s);
    auto stage_started = Clock::now();
    // The gate in progress when the worker crashed or hung is timed from this side.
    auto time_the_stage = [&] {
        if (ex.stage.starts_with("gate:")) {
            ex.gate_seconds[ex.stage.substr(5)] = std::chrono::duration<double>(Clock::now() - stage_started).count();
        }
    };
    char buf[65536];
    for (;;) {
        // Complete lines first.
        for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
            std::string line = pending_.substr(0, nl);
            pending_.erase(0, nl + 1);
            if (line.empty()) continue;
            nlohmann::json ev;
            try {
                ev = nlohmann::json::parse(line);
            } catch (const std::exception&) {
                continue;   // stray output of a candidate that printed to stdout
            }
            const std::string kind = ev.value("event", "");
            if (kind == "stage") {
                const std::string stage = ev.value("stage", ex.stage);
                // A gate announces each probe as the same stage; its clock starts at the first.
                if (stage != ex.stage) stage_started = Clock::now();
                ex.stage = stage;
                const double limit = ex.stage == "load" ? cfg_.load_timeout_s : cfg_.stage_timeout_s;
                deadline = Clock::now() + std::chrono::duration<double>(limit);
            } else if (kind == "gate" && ev.contains("result")) {
                const std::string id = ev["result"].value("id", "");
                ex.gates[id] = ev["result"];
                if (ev.contains("seconds") && ev["seconds"].is_number()) ex.gate_seconds[id] = ev["seconds"].get<double>();
            } else if (kind == "record") {
                ex.end = Exchange::End::record;
                ex.record = ev.value("record", nlohmann::json::object());
                return ex;
            }
            if (on_event) on_event(ev);
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            ex.end = Exchange::End::timed_out;
            ex.detail = "no progress in stage '" + ex.stage + "' within the time limit";
            time_the_stage();
            kill(pid_, SIGKILL);
            return ex;
        }
        pollfd p{from_child_, POLLIN, 0};
        int n = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;
        ssize_t got = read(from_child_, buf, sizeof buf);
        if (got > 0) {
            pending_.append(buf, static_cast<size_t>(got));
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        // EOF: the worker died.
        int status = 0;
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        ex.end = Exchange::End::crashed;
        time_the_stage();
        ex.detail = describe_status(status);
        const std::string tail = stderr_tail();
        if (!tail.empty()) ex.detail += "; stderr: " + tail;
        close(to_child_);
        close(from_child_);
        to_child_ = from_child_ = -1;
        pid_ = -1;
        return ex;
    }
}

nlohmann::json PythonWorker::judge(const nlohmann::json& request,
                                   const std::function<void(const nlohmann::json&)>& on_event) {
    const std::vector<std::string> requested = requested_gates(request);
    std::vector<std::string> remaining = requested;
    std::map<std::string, nlohmann::json> done;     // gate results of every worker so far
    std::map<std::string, double> gate_seconds;     // and their times
    // The gates of a record the parent writes itself: those finished, else an error with this code.
    auto gates_or = [&](const std::string& code, const std::string& why) {
        nlohmann::json gates = nlohmann::json::array();
        for (const auto& id : requested) gates.push_back(done.count(id) ? done[id] : failed_gate(id, "", code, why));
        return gates;
    };
    auto own_record = [&] {
        nlohmann::json rec = {{"kcv_record", 1},
                              {"reference", request.value("reference", "")},
                              {"candidate", {{"path", request.value("candidate", "")}}}};
        merge_gate_seconds(rec, gate_seconds);
        return rec;
    };

    for (int attempt = 0; attempt <= static_cast<int>(all_gates().size()); ++attempt) {
        if (pid_ < 0) start();
        nlohmann::json req = request;
        req["gates"] = remaining;
        Exchange ex = exchange(req, on_event);
        for (auto& [id, g] : ex.gates) done[id] = g;
        for (const auto& [id, s] : ex.gate_seconds) gate_seconds[id] = s;
        if (ex.end == Exchange::End::record) {
            nlohmann::json rec = ex.record;
            // Gates finished by earlier workers of this candidate join the final record.
            std::map<std::string, nlohmann::json> merged = done;
            for (const auto& g : rec.value("gates", nlohmann::json::array())) merged[g.value("id", "")] = g;
            nlohmann::json gates = nlohmann::json::array();
            for (const auto& g : all_gates()) {
                if (merged.count(g.id)) gates.push_back(merged[g.id]);
            }
            rec["gates"] = gates;
            merge_gate_seconds(rec, gate_seconds);
            return rec;
        }
        const bool hung = ex.end == Exchange::End::timed_out;
        stop(true);
        const std::string code = std::string(hung ? "timeout:" : "crash:") + ex.stage;
        if (!ex.stage.starts_with("gate:")) {
            // The candidate never got as far as the gates: nothing can be judged.
            nlohmann::json rec = own_record();
            rec["error"] = {{"code", code}, {"message", ex.detail}};
            rec["gates"] = gates_or(code, ex.detail);
            return rec;
        }
        const std::string gate = ex.stage.substr(5);
        done[gate] = failed_gate(gate, hung ? "hang" : "crash", code,
                                 std::string("the candidate ") + (hung ? "hung" : "crashed") + " during " + gate +
                                     " (" + ex.detail + ")");
        std::erase_if(remaining, [&](const std::string& id) { return done.count(id) > 0; });
        if (remaining.empty()) {
            nlohmann::json rec = own_record();
            rec["gates"] = gates_or("not-run", "");
            return rec;
        }
    }
    nlohmann::json rec = own_record();
    rec["error"] = {{"code", "not-run"}, {"message", "the worker gave up"}};
    rec["gates"] = gates_or("not-run", "the worker gave up");
    return rec;
}

}  // namespace kcv
