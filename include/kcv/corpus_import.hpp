// Turning the folders that kernel-generation harnesses leave behind into a kcv corpus
// (corpus.jsonl: {"id", "problem", "candidate", "label"?}), with the labels they ship.
//
// Three layouts are read, found by what a folder holds:
//   kernelbench-run  eval_results.json beside level_<L>_problem_<P>_sample_<S>_kernel.py
//                    (KernelBench's generate-then-evaluate scripts);
//   per-problem      per_problem/level_<L>/problem_<P>.json beside
//                    generated_kernels/level_<L>/problem_<P>.py (one verdict file per problem);
//   triton-dump      results.jsonl beside kernels/level<L>_problem<P>_triton.py, where a kernel
//                    is written only after KernelBench's check accepted it.
// A source folder that is none of these is searched for run folders below it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kcv/audit.hpp"

namespace kcv {

struct CorpusImportOptions {
    std::string source;         // a run folder, or a folder holding run folders
    std::string problems_dir;   // the problems: level<L>/<P>_<Name>.py below it
    std::string format = "auto";   // "auto", "kernelbench-run", "per-problem", "triton-dump"
};

struct CorpusImport {
    std::vector<CorpusEntry> entries;   // problem and candidate paths are absolute
    std::vector<std::string> runs;      // "<format> <folder>: <n> candidates", one per run read
    std::vector<std::string> skipped;   // why each labelled result or file was left out
    std::vector<std::string> merged;    // entries folded into another with the same files
};

// Throws std::runtime_error naming the file when a label file cannot be parsed, when no run is
// found, or when the problems folder is missing.
CorpusImport import_corpus(const CorpusImportOptions& opts);

// A uniform sample of n entries, the same for the same seed on any machine (by a hash of each
// id); the entries keep their order. n at or above the size returns them all.
std::vector<CorpusEntry> sample_corpus(const std::vector<CorpusEntry>& entries, size_t n, uint64_t seed);

// Copies every entry's problem and candidate into folder (problems/<level folder>/<file>,
// candidates/<id>.py) and returns the entries pointing at the copies: a corpus that travels
// alone, to a GPU machine say. Links are followed, so the copies are plain files.
std::vector<CorpusEntry> bundle_corpus(const std::vector<CorpusEntry>& entries, const std::string& folder);

// Writes entries as corpus.jsonl lines, with paths relative to the file's folder so that the
// corpus and its files can move together.
void write_corpus(const std::vector<CorpusEntry>& entries, const std::string& path);

}  // namespace kcv
