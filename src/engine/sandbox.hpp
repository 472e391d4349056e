// Runs a function in a forked worker with a time limit; what it prints to the pipe comes back.
// A crash or a hang in the worker becomes a result, never the verifier's own death.
#pragma once

#include <functional>
#include <string>

namespace kcv {

struct SandboxResult {
    enum class Status { ok, crashed, timed_out, failed } status = Status::failed;
    std::string output;      // bytes the worker wrote
    int signal = 0;          // for crashed
    int exit_code = 0;       // for failed
    double seconds = 0;
    std::string describe() const;   // "crash:SIGSEGV", "timeout after 60 s", ...
};

// `work` runs in the child and returns the bytes to send back; the child exits right after.
// Only fork-safe work belongs here: the native CPU path, before any GPU runtime is loaded.
SandboxResult run_sandboxed(const std::function<std::string()>& work, double timeout_s);

}  // namespace kcv
