// Auditing a corpus of Python candidates (KernelBench convention): a pool of Python workers per
// GPU, a resumable journal (one record per line, flushed per record), shards, progress.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kcv {

struct CorpusEntry {
    std::string id;          // unique within the corpus
    std::string problem;     // path of the problem module (defines Model, get_inputs, ...)
    std::string candidate;   // path of the candidate module (defines ModelNew)
    nlohmann::json label;    // labels the corpus ships, if any
};

// A corpus is a JSON-lines file of {"id", "problem", "candidate", "label"?}, or a directory
// holding such a file named corpus.jsonl. Relative candidate paths resolve against the corpus
// file's folder; relative problem paths against problems_dir (else the corpus folder).
// Throws std::runtime_error naming the file and line of a malformed entry.
std::vector<CorpusEntry> load_corpus(const std::string& corpus, const std::string& problems_dir);

struct AuditOptions {
    std::string journal;
    std::string device = "cpu";      // "cpu" | "cuda"
    int gpus = -1;                   // -1: every GPU of the host
    int workers_per_gpu = 2;
    int cpu_workers = 1;
    int shard_index = 0, shard_count = 1;
    uint64_t seed = 0;
    bool quick = false;
    double stage_timeout_s = 300;
    std::string python = "python3";
    int64_t limit = -1;              // at most this many new records in this run
    // Each stage a worker enters, as a line on stderr with the seconds since the audit began:
    // where the time of a slow or silent audit goes.
    bool trace = false;
    double probe_budget_mib = 0;     // > 0: settings.probe_budget_bytes of every request
};

struct AuditProgress {
    int64_t done = 0, total = 0, skipped = 0;   // skipped: already in the journal
    double rate_per_s = 0, eta_s = 0;
    std::string last;
};

// Appends a record per candidate to the journal; on a rerun, candidates already in the journal
// are skipped, so an interrupted audit loses and duplicates nothing. Returns the new records'
// count.
int64_t run_audit(const std::vector<CorpusEntry>& entries, const AuditOptions& opts,
                  const std::function<void(const AuditProgress&)>& progress = {});

// Which entries belong to shard i of n (stable: by a hash of the id).
bool in_shard(const std::string& id, int index, int count);
// Number of NVIDIA GPUs visible (honours CUDA_VISIBLE_DEVICES), 0 if none.
int count_gpus();

}  // namespace kcv
