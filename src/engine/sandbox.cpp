// Fork-based isolation for native CPU candidates. The child writes its answer to a pipe; the
// parent drains the pipe while it waits, so a large answer cannot deadlock, and kills the child
// at the deadline.
#include "engine/sandbox.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace kcv {

std::string SandboxResult::describe() const {
    switch (status) {
        case Status::ok: return "ok";
        case Status::crashed: {
            const char* abbrev = sigabbrev_np(signal);
            return std::string("crash:SIG") + (abbrev ? abbrev : std::to_string(signal).c_str());
        }
        case Status::timed_out: return "timeout";
        case Status::failed: return "worker exited with status " + std::to_string(exit_code);
    }
    return "unknown";
}

namespace {
void write_all(int fd, const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
        ssize_t n = write(fd, s.data() + done, s.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        done += static_cast<size_t>(n);
    }
}
}  // namespace

SandboxResult run_sandboxed(const std::function<std::string()>& work, double timeout_s) {
    SandboxResult r;
    int fds[2];
    if (pipe(fds) != 0) {
        r.status = SandboxResult::Status::failed;
        r.exit_code = -1;
        return r;
    }
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        r.exit_code = -1;
        return r;
    }
    if (pid == 0) {
        close(fds[0]);
        int code = 0;
        try {
            write_all(fds[1], work());
        } catch (const std::exception& e) {
            write_all(fds[1], std::string("\x01") + e.what());
            code = 3;
        } catch (...) {
            code = 4;
        }
        close(fds[1]);
        // _exit: the child must not run the parent's atexit handlers or flush its buffers twice.
        _exit(code);
    }
    close(fds[1]);
    const auto deadline = t0 + std::chrono::duration<double>(timeout_s);
    bool open = true, killed = false;
    char buf[65536];
    while (open) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        int n = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
        if (n < 0 && errno == EINTR) continue;
        if (n > 0) {
            ssize_t got = read(fds[0], buf, sizeof buf);
            if (got > 0) r.output.append(buf, static_cast<size_t>(got));
            else if (got == 0 || errno != EINTR) open = false;
        }
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (killed) {
        r.status = SandboxResult::Status::timed_out;
    } else if (WIFSIGNALED(status)) {
        r.status = SandboxResult::Status::crashed;
        r.signal = WTERMSIG(status);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        r.status = SandboxResult::Status::ok;
    } else {
        r.status = SandboxResult::Status::failed;
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    return r;
}

}  // namespace kcv
