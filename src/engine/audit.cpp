// The audit loop: a queue of candidates, one thread per worker slot (each owning a Python
// worker pinned to one GPU), a single journal writer that appends and flushes a line per record.
#include "kcv/audit.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "engine/python_worker.hpp"
#include "kcv/aggregate.hpp"
#include "kcv/record.hpp"

namespace kcv {
namespace fs = std::filesystem;

bool in_shard(const std::string& id, int index, int count) {
    if (count <= 1) return true;
    return XXH3_64bits(id.data(), id.size()) % static_cast<uint64_t>(count) == static_cast<uint64_t>(index);
}

int count_gpus() {
    if (const char* vis = std::getenv("CUDA_VISIBLE_DEVICES")) {
        std::string v = vis;
        if (v.empty() || v == "-1") return 0;
        return static_cast<int>(std::count(v.begin(), v.end(), ',')) + 1;
    }
    std::error_code ec;
    int n = 0;
    for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
        (void)e;
        ++n;
    }
    return n;
}

std::vector<CorpusEntry> load_corpus(const std::string& corpus, const std::string& problems_dir) {
    fs::path file = corpus;
    if (fs::is_directory(file)) file /= "corpus.jsonl";
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read corpus '" + file.string() + "'");
    const fs::path base = file.parent_path();
    const fs::path pdir = problems_dir.empty() ? base : fs::path(problems_dir);
    std::vector<CorpusEntry> out;
    std::set<std::string> ids;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = file.string() + ":" + std::to_string(n);
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const std::exception& e) {
            throw std::runtime_error(where + ": not JSON (" + e.what() + ")");
        }
        CorpusEntry e;
        for (const char* key : {"id", "problem", "candidate"}) {
            if (!j.contains(key) || !j[key].is_string()) {
                throw std::runtime_error(where + ": missing string field '" + key + "'");
            }
        }
        e.id = j["id"];
        if (!ids.insert(e.id).second) throw std::runtime_error(where + ": duplicate id '" + e.id + "'");
        const fs::path prob = j["problem"].get<std::string>(), cand = j["candidate"].get<std::string>();
        e.problem = (prob.is_absolute() ? prob : pdir / prob).string();
        e.candidate = (cand.is_absolute() ? cand : base / cand).string();
        if (j.contains("label")) e.label = j["label"];
        out.push_back(std::move(e));
    }
    return out;
}

namespace {

// Ids already recorded. A partial last line (an interrupted append) is cut off so the next
// append starts on a fresh line.
std::set<std::string> journal_ids(const std::string& path) {
    std::set<std::string> ids;
    if (!fs::exists(path)) return ids;
    {
        std::ifstream in(path, std::ios::binary);
        std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!all.empty() && all.back() != '\n') {
            const auto keep = all.rfind('\n');
            fs::resize_file(path, keep == std::string::npos ? 0 : keep + 1);
        }
    }
    for (const auto& r : read_journal(path)) {
        if (r.contains("corpus_id")) ids.insert(r["corpus_id"].get<std::string>());
    }
    return ids;
}

class JournalWriter {
public:
    explicit JournalWriter(const std::string& path) {
        if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
        fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd_ < 0) throw std::runtime_error("cannot open journal '" + path + "'");
    }
    ~JournalWriter() { close(fd_); }
    void append(const nlohmann::json& rec) {
        const std::string line = rec.dump() + "\n";
        std::lock_guard<std::mutex> lock(mu_);
        size_t done = 0;
        while (done < line.size()) {
            ssize_t n = write(fd_, line.data() + done, line.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) throw std::runtime_error("cannot write the journal");
            done += static_cast<size_t>(n);
        }
        fdatasync(fd_);
    }

private:
    int fd_ = -1;
    std::mutex mu_;
};

nlohmann::json finish(nlohmann::json rec, const CorpusEntry& e) {
    // Rebuilding through Record recomputes the floor and failed gates in C++, whatever the
    // worker sent.
    nlohmann::json out = to_json(record_from_json(rec));
    out["corpus_id"] = e.id;
    out["problem"] = e.problem;
    out["candidate"]["path"] = e.candidate;
    if (!e.label.is_null()) out["label"] = e.label;
    return out;
}

}  // namespace

int64_t run_audit(const std::vector<CorpusEntry>& entries, const AuditOptions& o,
                  const std::function<void(const AuditProgress&)>& progress) {
    const std::set<std::string> done_ids = journal_ids(o.journal);
    std::vector<const CorpusEntry*> todo;
    int64_t skipped = 0;
    for (const auto& e : entries) {
        if (!in_shard(e.id, o.shard_index, o.shard_count)) continue;
        if (done_ids.count(e.id)) {
            ++skipped;
            continue;
        }
        todo.push_back(&e);
    }
    if (o.limit >= 0 && static_cast<int64_t>(todo.size()) > o.limit) todo.resize(static_cast<size_t>(o.limit));

    JournalWriter journal(o.journal);
    std::vector<std::string> slot_gpu;
    if (o.device == "cuda") {
        const int gpus = o.gpus >= 0 ? o.gpus : count_gpus();
        if (gpus == 0) throw std::runtime_error("--device cuda, but no GPU is visible");
        for (int g = 0; g < gpus; ++g) {
            for (int w = 0; w < o.workers_per_gpu; ++w) slot_gpu.push_back(std::to_string(g));
        }
    } else {
        slot_gpu.assign(static_cast<size_t>(std::max(1, o.cpu_workers)), "");
    }

    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const unsigned threads_per_worker = std::max<unsigned>(1, cores / static_cast<unsigned>(slot_gpu.size()));
    std::atomic<size_t> next{0};
    std::atomic<int64_t> finished{0};
    std::mutex progress_mu;
    const auto t0 = std::chrono::steady_clock::now();
    auto slot = [&](const std::string& gpu) {
        WorkerConfig cfg;
        cfg.python = o.python;
        cfg.stage_timeout_s = o.stage_timeout_s;
        if (!gpu.empty()) cfg.env["CUDA_VISIBLE_DEVICES"] = gpu;
        // Each worker's torch would start a thread per core: with several workers the host-side
        // work of the gates (inputs, copies, comparisons) oversubscribes the cores. A share each,
        // unless the caller chose.
        if (!std::getenv("OMP_NUM_THREADS")) cfg.env["OMP_NUM_THREADS"] = std::to_string(threads_per_worker);
        PythonWorker worker(cfg);
        for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
            const CorpusEntry& e = *todo[i];
            nlohmann::json req = {{"id", e.id},
                                  {"reference", e.problem},
                                  {"candidate", e.candidate},
                                  {"device", o.device},
                                  {"seed", o.seed},
                                  {"settings", {{"seed", o.seed}, {"quick", o.quick}}},
                                  {"stage_timeout_s", o.stage_timeout_s}};
            if (o.probe_budget_mib > 0)
                req["settings"]["probe_budget_bytes"] = static_cast<int64_t>(o.probe_budget_mib * (1 << 20));
            nlohmann::json rec;
            std::function<void(const nlohmann::json&)> on_event;
            if (o.trace) {
                on_event = [&](const nlohmann::json& ev) {
                    if (ev.value("event", "") != "stage") return;
                    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    char head[64];
                    std::snprintf(head, sizeof head, "[%8.1f s] ", secs);
                    std::string line = head + e.id + ": " + ev.value("stage", "");
                    if (ev.contains("probe") && ev["probe"].is_string()) line += " " + ev["probe"].get<std::string>();
                    std::lock_guard<std::mutex> lock(progress_mu);
                    std::cerr << line << "\n" << std::flush;
                };
            }
            try {
                rec = worker.judge(req, on_event);
            } catch (const std::exception& ex) {
                rec = {{"error", {{"code", "worker-start"}, {"message", ex.what()}}}};
            }
            journal.append(finish(rec, e));
            const int64_t n = ++finished;
            if (progress) {
                std::lock_guard<std::mutex> lock(progress_mu);
                AuditProgress p;
                p.done = n;
                p.total = static_cast<int64_t>(todo.size());
                p.skipped = skipped;
                const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                p.rate_per_s = secs > 0 ? static_cast<double>(n) / secs : 0;
                p.eta_s = p.rate_per_s > 0 ? static_cast<double>(p.total - n) / p.rate_per_s : 0;
                p.last = e.id;
                progress(p);
            }
        }
    };
    std::vector<std::thread> threads;
    for (const auto& gpu : slot_gpu) threads.emplace_back(slot, gpu);
    for (auto& t : threads) t.join();
    return finished.load();
}

}  // namespace kcv
