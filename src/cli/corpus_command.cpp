// `kcv corpus`: a harness's run folders in, corpus.jsonl out (include/kcv/corpus_import.hpp).
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "kcv/corpus_import.hpp"

namespace kcv::cli {
namespace {

struct CorpusArgs {
    CorpusImportOptions opts;
    std::string out = "corpus.jsonl";
    bool list_skipped = false;
    bool bundle = false;
    size_t sample = 0;
    uint64_t seed = 0;
};

int run_corpus(const CorpusArgs& a) {
    const CorpusImport got = import_corpus(a.opts);
    auto entries = a.sample > 0 ? sample_corpus(got.entries, a.sample, a.seed) : got.entries;
    if (a.bundle) entries = bundle_corpus(entries, std::filesystem::absolute(a.out).parent_path().string());
    write_corpus(entries, a.out);
    for (const auto& r : got.runs) std::cerr << r << "\n";
    if (a.list_skipped) {
        for (const auto& s : got.skipped) std::cerr << "skipped " << s << "\n";
        for (const auto& s : got.merged) std::cerr << "merged " << s << "\n";
    }
    if (entries.size() != got.entries.size()) {
        std::cout << "sampled " << entries.size() << " of " << got.entries.size() << " (seed " << a.seed << ")\n";
    }
    std::cout << entries.size() << " candidates written to " << a.out << "; " << got.merged.size()
              << " merged into an entry with the same files; " << got.skipped.size() << " left out"
              << (got.skipped.empty() || a.list_skipped ? "" : " (--list-skipped says why)") << "\n";
    return entries.empty() ? 2 : 0;
}

}  // namespace

void add_corpus_command(CLI::App& app, Commands& commands) {
    auto a = std::make_shared<CorpusArgs>();
    auto* sub = app.add_subcommand("corpus", "turn a harness's run folders into corpus.jsonl, with their labels");
    sub->add_option("source", a->opts.source, "a run folder, or a folder holding run folders")->required();
    sub->add_option("--problems", a->opts.problems_dir, "problems folder holding level<L>/<P>_<Name>.py")
        ->required();
    sub->add_option("--out", a->out, "corpus file to write");
    sub->add_option("--format", a->opts.format, "layout of the runs")
        ->check(CLI::IsMember({"auto", "kernelbench-run", "per-problem", "triton-dump"}));
    sub->add_option("--sample", a->sample, "write a uniform sample of this many candidates");
    sub->add_option("--seed", a->seed, "seed of the sample");
    sub->add_flag("--bundle", a->bundle, "copy the problems and candidates beside the corpus file");
    sub->add_flag("--list-skipped", a->list_skipped, "say why each result or file was left out");
    commands.add(sub, [a] { return run_corpus(*a); });
}

}  // namespace kcv::cli
