// Reading harness run folders into corpus entries (include/kcv/corpus_import.hpp). Each layout
// has one reader; they share the problem lookup and the id scheme
// "<run>/level<L>/problem<P>[/sample<S>]".
#include "kcv/corpus_import.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <stdexcept>

#include <xxhash.h>

namespace kcv {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;

json read_json_file(const fs::path& p) {
    std::ifstream in(p);
    if (!in) throw std::runtime_error("cannot read '" + p.string() + "'");
    try {
        return json::parse(in);
    } catch (const std::exception& e) {
        throw std::runtime_error("'" + p.string() + "' is not JSON: " + e.what());
    }
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

// Problem files are level<L>/<P>_<Name>.py; harnesses name them by id, some also by file name.
class ProblemIndex {
public:
    explicit ProblemIndex(fs::path root) : root_(std::move(root)) {
        if (!fs::is_directory(root_)) {
            throw std::runtime_error("problems folder '" + root_.string() + "' does not exist");
        }
    }

    std::optional<fs::path> find(int level, int problem, const std::string& name) {
        const fs::path dir = root_ / ("level" + std::to_string(level));
        if (!name.empty() && fs::is_regular_file(dir / name)) return fs::absolute(dir / name);
        auto [it, fresh] = levels_.try_emplace(level);
        if (fresh) {
            static const std::regex file_re(R"((\d+)_.*\.py)");
            for (const auto& p : sorted_entries(dir)) {
                std::smatch m;
                const std::string f = p.filename().string();
                if (std::regex_match(f, m, file_re)) it->second.emplace(std::stoi(m[1]), fs::absolute(p));
            }
        }
        auto found = it->second.find(problem);
        if (found == it->second.end()) return std::nullopt;
        return found->second;
    }

private:
    fs::path root_;
    std::map<int, std::map<int, fs::path>> levels_;
};

enum class Layout { kernelbench_run, per_problem, triton_dump };

const char* layout_name(Layout l) {
    switch (l) {
        case Layout::kernelbench_run: return "kernelbench-run";
        case Layout::per_problem: return "per-problem";
        case Layout::triton_dump: return "triton-dump";
    }
    return "?";
}

std::optional<Layout> detect(const fs::path& dir) {
    if (fs::is_regular_file(dir / "eval_results.json")) return Layout::kernelbench_run;
    if (fs::is_directory(dir / "per_problem")) return Layout::per_problem;
    if (fs::is_regular_file(dir / "results.jsonl") && fs::is_directory(dir / "kernels")) return Layout::triton_dump;
    return std::nullopt;
}

std::optional<Layout> layout_from_name(const std::string& format) {
    if (format == "auto") return std::nullopt;
    if (format == "kernelbench-run") return Layout::kernelbench_run;
    if (format == "per-problem") return Layout::per_problem;
    if (format == "triton-dump") return Layout::triton_dump;
    throw std::runtime_error("unknown corpus format '" + format +
                             "' (auto, kernelbench-run, per-problem or triton-dump)");
}

std::string entry_id(const std::string& run, int level, int problem, std::optional<int> sample = std::nullopt) {
    std::string id = run + "/level" + std::to_string(level) + "/problem" + std::to_string(problem);
    if (sample) id += "/sample" + std::to_string(*sample);
    return id;
}

struct Reader {
    ProblemIndex& problems;
    CorpusImport& out;
    std::string run;   // the run's name in ids

    // Adds an entry when both files exist; otherwise says why it was left out.
    bool add(const std::string& id, int level, int problem, const std::string& problem_name,
             const fs::path& candidate, json label) {
        if (!fs::is_regular_file(candidate)) {
            out.skipped.push_back(id + ": no kernel file " + candidate.string());
            return false;
        }
        const auto prob = problems.find(level, problem, problem_name);
        if (!prob) {
            out.skipped.push_back(id + ": no problem level" + std::to_string(level) + "/" + std::to_string(problem) +
                                  "_*.py under the problems folder");
            return false;
        }
        out.entries.push_back({id, prob->string(), fs::absolute(candidate).string(), std::move(label)});
        return true;
    }
};

int read_kernelbench_run(const fs::path& dir, Reader& r) {
    const fs::path labels_file = dir / "eval_results.json";
    const json labels = read_json_file(labels_file);
    if (!labels.is_object()) throw std::runtime_error("'" + labels_file.string() + "': expected an object of problem ids");
    std::map<std::pair<int, int>, json> by_sample;   // (problem, sample) -> shipped result
    for (const auto& [pid, results] : labels.items()) {
        for (const auto& res : results.is_array() ? results : json::array({results})) {
            if (!res.is_object()) continue;
            by_sample[{std::stoi(pid), res.value("sample_id", 0)}] = res;
        }
    }
    static const std::regex kernel_re(R"(level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py)");
    int n = 0;
    std::map<std::pair<int, int>, bool> seen;
    for (const auto& p : sorted_entries(dir)) {
        std::smatch m;
        const std::string f = p.filename().string();
        if (!std::regex_match(f, m, kernel_re)) continue;
        const int level = std::stoi(m[1]), problem = std::stoi(m[2]), sample = std::stoi(m[3]);
        json label;
        if (auto it = by_sample.find({problem, sample}); it != by_sample.end()) {
            label = it->second;
            label["source"] = "eval_results.json";
            seen[{problem, sample}] = true;
        }
        n += r.add(entry_id(r.run, level, problem, sample), level, problem, "", p, std::move(label));
    }
    for (const auto& [key, res] : by_sample) {
        if (!seen.count(key)) {
            r.out.skipped.push_back(r.run + ": problem " + std::to_string(key.first) + " sample " +
                                    std::to_string(key.second) + " has a result but no kernel file");
        }
    }
    return n;
}

int read_per_problem(const fs::path& dir, Reader& r) {
    static const std::regex level_re(R"(level_(\d+))"), file_re(R"(problem_(\d+)\.json)");
    int n = 0;
    for (const auto& level_dir : sorted_entries(dir / "per_problem")) {
        std::smatch lm;
        const std::string ln = level_dir.filename().string();
        if (!fs::is_directory(level_dir) || !std::regex_match(ln, lm, level_re)) continue;
        const int level = std::stoi(lm[1]);
        for (const auto& p : sorted_entries(level_dir)) {
            std::smatch m;
            const std::string f = p.filename().string();
            if (!std::regex_match(f, m, file_re)) continue;
            const int problem = std::stoi(m[1]);
            const json verdict = read_json_file(p);
            json label;
            if (verdict.contains("eval_result") && verdict["eval_result"].is_object()) {
                label = verdict["eval_result"];
                label.erase("runtime_stats");
                label.erase("ref_runtime_stats");
            } else {
                label = json::object();
            }
            for (const char* k : {"status", "model_name", "backend", "precision"}) {
                if (verdict.contains(k)) label[k] = verdict[k];
            }
            label["source"] = "per_problem/" + ln + "/" + f;
            const fs::path kernel = dir / "generated_kernels" / ln / ("problem_" + std::to_string(problem) + ".py");
            n += r.add(entry_id(r.run, level, problem), level, problem, verdict.value("problem_name", ""), kernel,
                       std::move(label));
        }
    }
    return n;
}

int read_triton_dump(const fs::path& dir, Reader& r) {
    const fs::path results = dir / "results.jsonl";
    std::ifstream in(results);
    if (!in) throw std::runtime_error("cannot read '" + results.string() + "'");
    int n = 0;
    std::string line;
    for (int ln = 1; std::getline(in, line); ++ln) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        json j;
        try {
            j = json::parse(line);
        } catch (const std::exception& e) {
            throw std::runtime_error(results.string() + ":" + std::to_string(ln) + ": not JSON (" + e.what() + ")");
        }
        if (!j.contains("level") || !j.contains("problem_id")) {
            throw std::runtime_error(results.string() + ":" + std::to_string(ln) + ": needs level and problem_id");
        }
        const int level = j["level"].get<int>(), problem = j["problem_id"].get<int>();
        // The recorded kernel_path is the harness machine's; the file sits in kernels/ here.
        const std::string file = j.contains("kernel_path")
                                     ? fs::path(j["kernel_path"].get<std::string>()).filename().string()
                                     : "level" + std::to_string(level) + "_problem" + std::to_string(problem) + "_triton.py";
        json label = {{"compiled", true},
                      {"correctness", true},
                      {"basis", "the harness writes a kernel only after KernelBench's check accepted it"},
                      {"source", "results.jsonl:" + std::to_string(ln)}};
        if (j.contains("attempts")) label["attempts"] = j["attempts"];
        n += r.add(entry_id(r.run, level, problem), level, problem, j.value("problem_name", ""), dir / "kernels" / file,
                   std::move(label));
    }
    return n;
}

int read_run(Layout layout, const fs::path& dir, Reader& r) {
    switch (layout) {
        case Layout::kernelbench_run: return read_kernelbench_run(dir, r);
        case Layout::per_problem: return read_per_problem(dir, r);
        case Layout::triton_dump: return read_triton_dump(dir, r);
    }
    return 0;
}

// Run folders at or below root, in path order; a run's own subfolders are not searched.
void find_runs(const fs::path& root, std::optional<Layout> forced, std::vector<std::pair<Layout, fs::path>>& runs) {
    if (auto l = detect(root)) {
        if (!forced || *forced == *l) {
            runs.emplace_back(*l, root);
            return;
        }
    }
    for (const auto& p : sorted_entries(root)) {
        if (fs::is_directory(p) && !fs::is_symlink(p)) find_runs(p, forced, runs);
    }
}

std::optional<bool> correctness_of(const json& label) {
    if (label.is_object() && label.contains("correctness") && label["correctness"].is_boolean()) {
        return label["correctness"].get<bool>();
    }
    return std::nullopt;
}

// Harnesses re-evaluate the same kernel file in several runs (re-timing runs link to the
// generation run's files). One entry per problem and file keeps the audit from judging a kernel
// twice; every shipped label stays, under "also", and a disagreement between them is flagged.
void merge_same_files(CorpusImport& out) {
    std::map<std::pair<std::string, std::string>, size_t> first;
    std::vector<CorpusEntry> kept;
    for (auto& e : out.entries) {
        const auto key = std::make_pair(fs::weakly_canonical(e.problem).string(), fs::weakly_canonical(e.candidate).string());
        auto [it, fresh] = first.try_emplace(key, kept.size());
        if (fresh) {
            kept.push_back(std::move(e));
            continue;
        }
        CorpusEntry& k = kept[it->second];
        if (!k.label.is_object()) k.label = json::object();
        json other = {{"id", e.id}};
        if (e.label.is_object()) {
            for (const char* f : {"compiled", "correctness", "source"}) {
                if (e.label.contains(f)) other[f] = e.label[f];
            }
        }
        const auto mine = correctness_of(k.label), theirs = correctness_of(e.label);
        if (!mine && theirs) {
            // The entry's own label is the first definite one.
            for (const char* f : {"compiled", "correctness", "source"}) {
                if (e.label.contains(f)) k.label[f] = e.label[f];
            }
            other = {{"id", k.id}, {"note", "no verdict in this run"}};
        }
        k.label["also"].push_back(other);
        if (mine && theirs && *mine != *theirs) k.label["labels_disagree"] = true;
 out.merged.push_back(e.id + ": the same kernel file as " + k.id + " (its label kept under \"also\")");
    }
    out.entries = std::move(kept);
}

}  // namespace

CorpusImport import_corpus(const CorpusImportOptions& opts) {
    const fs::path root = fs::absolute(opts.source);
    if (!fs::is_directory(root)) throw std::runtime_error("corpus source '" + opts.source + "' is not a folder");
    if (opts.problems_dir.empty()) throw std::runtime_error("corpus import needs the problems folder (--problems)");
    ProblemIndex problems(fs::absolute(opts.problems_dir));
    const auto forced = layout_from_name(opts.format);

    std::vector<std::pair<Layout, fs::path>> runs;
    find_runs(root, forced, runs);
    if (runs.empty()) {
        throw std::runtime_error("no run folder under '" + opts.source +
                                 "' (looked for eval_results.json, per_problem/, or results.jsonl with kernels/)");
    }
    CorpusImport out;
    for (const auto& [layout, dir] : runs) {
        const fs::path rel = dir == root ? dir.filename() : dir.lexically_relative(root.parent_path());
        Reader r{problems, out, rel.generic_string()};
        const int n = read_run(layout, dir, r);
        out.runs.push_back(std::string(layout_name(layout)) + " " + rel.generic_string() + ": " + std::to_string(n) +
                           " candidates");
    }
    merge_same_files(out);
    return out;
}

std::vector<CorpusEntry> sample_corpus(const std::vector<CorpusEntry>& entries, size_t n, uint64_t seed) {
    if (n >= entries.size()) return entries;
    std::vector<std::pair<uint64_t, size_t>> keyed;
    for (size_t i = 0; i < entries.size(); ++i) {
        keyed.emplace_back(XXH3_64bits_withSeed(entries[i].id.data(), entries[i].id.size(), seed), i);
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<size_t> chosen;
    for (size_t i = 0; i < n; ++i) chosen.push_back(keyed[i].second);
    std::sort(chosen.begin(), chosen.end());
    std::vector<CorpusEntry> out;
    for (size_t i : chosen) out.push_back(entries[i]);
    return out;
}

std::vector<CorpusEntry> bundle_corpus(const std::vector<CorpusEntry>& entries, const std::string& folder) {
    const fs::path root = fs::absolute(folder);
    std::vector<CorpusEntry> out;
    for (CorpusEntry e : entries) {
        const fs::path prob = fs::canonical(e.problem), cand = fs::canonical(e.candidate);
        // Problems keep their level folder: the same problem serves many candidates.
        const fs::path prob_to = root / "problems" / prob.parent_path().filename() / prob.filename();
        std::string flat = e.id;
        std::replace(flat.begin(), flat.end(), '/', '.');
        const fs::path cand_to = root / "candidates" / (flat + ".py");
        for (const auto& [from, to] : {std::pair{prob, prob_to}, std::pair{cand, cand_to}}) {
            fs::create_directories(to.parent_path());
            fs::copy_file(from, to, fs::copy_options::overwrite_existing);
        }
        e.problem = prob_to.string();
        e.candidate = cand_to.string();
        out.push_back(std::move(e));
    }
    return out;
}

void write_corpus(const std::vector<CorpusEntry>& entries, const std::string& path) {
    const fs::path file = fs::absolute(path);
    const fs::path base = fs::weakly_canonical(file.parent_path());
    std::error_code ec;
    fs::create_directories(base, ec);
    const fs::path tmp = file.string() + ".tmp";
    {
        std::ofstream o(tmp);
        if (!o) throw std::runtime_error("cannot write '" + tmp.string() + "'");
        for (const auto& e : entries) {
            const auto rel = [&](const std::string& p) {
                const fs::path r = fs::weakly_canonical(p).lexically_relative(base);
                return r.empty() ? p : r.generic_string();
            };
            json j = {{"id", e.id}, {"problem", rel(e.problem)}, {"candidate", rel(e.candidate)}};
            if (!e.label.is_null()) j["label"] = e.label;
            o << j.dump() << "\n";
        }
        if (!o.flush()) throw std::runtime_error("cannot write '" + tmp.string() + "'");
    }
    fs::rename(tmp, file);
}

}  // namespace kcv
