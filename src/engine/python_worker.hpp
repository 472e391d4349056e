// A Python worker process (`python3 -m kcv.worker`) that loads and runs candidates in the
// KernelBench convention, speaking JSON lines on stdin and stdout. The parent enforces a time
// limit per stage; a crash, an illegal address or a hang becomes a verdict with a code.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace kcv {

struct WorkerConfig {
    std::string python = "python3";
    std::map<std::string, std::string> env;   // added to the inherited environment
    double stage_timeout_s = 300;             // longest silence allowed within one stage
    double load_timeout_s = 900;              // the load stage compiles the candidate
};

class PythonWorker {
public:
    explicit PythonWorker(WorkerConfig cfg);
    ~PythonWorker();
    PythonWorker(const PythonWorker&) = delete;
    PythonWorker& operator=(const PythonWorker&) = delete;

    // Judges one candidate. Always returns a record (JSON): when the worker crashes or hangs,
    // the gates it finished are kept, the gate in progress fails with signature "crash" or
    // "hang", and a fresh worker carries on with the remaining gates.
    nlohmann::json judge(const nlohmann::json& request, const std::function<void(const nlohmann::json&)>& on_event = {});

    // Ends the worker: closes its input, so that it finishes the request in hand and removes
    // its build directory, and kills it if it has not exited within grace_s.
    void finish(double grace_s);

private:
    struct Exchange {
        enum class End { record, crashed, timed_out } end = End::crashed;
        nlohmann::json record;
        std::map<std::string, nlohmann::json> gates;   // per-gate results seen so far
        std::map<std::string, double> gate_seconds;    // per gate: its event's time, or the time seen
        std::string stage;                             // last stage announced
        std::string detail;                            // exit status, signal, stderr tail
    };
    void start();
    void stop(bool kill_now, double grace_s = 0);
    Exchange exchange(const nlohmann::json& request, const std::function<void(const nlohmann::json&)>& on_event);
    std::string stderr_tail() const;

    WorkerConfig cfg_;
    pid_t pid_ = -1;
    int to_child_ = -1, from_child_ = -1;
    std::string stderr_path_;
    std::string pending_;   // bytes read past the last newline
};

}  // namespace kcv
