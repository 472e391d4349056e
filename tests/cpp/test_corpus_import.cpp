// Reading harness run folders into a corpus: the three layouts, labels, merging of re-evaluated
// files, sampling, and the errors for bad input. The folders are built here by the tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "kcv/audit.hpp"
#include "kcv/corpus_import.hpp"

namespace {
namespace fs = std::filesystem;
using kcv::CorpusEntry;

void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

const CorpusEntry* find(const std::vector<CorpusEntry>& es, const std::string& id) {
    for (const auto& e : es) {
        if (e.id == id) return &e;
    }
    return nullptr;
}

class CorpusImport : public ::testing::Test {
protected:
    void SetUp() override {
        root = fs::temp_directory_path() / ("kcv-test-corpus-" + std::to_string(getpid()));
        fs::remove_all(root);
        const fs::path pb = root / "problems";
        put(pb / "level1/1_Add.py", "# add\n");
        put(pb / "level1/2_Mul.py", "# mul\n");
        put(pb / "level1/12_Other.py", "# twelve, so that 1 and 12 are told apart\n");
        put(pb / "level2/7_Conv.py", "# conv\n");

        const fs::path kb = root / "runs/kb_run";
        put(kb / "eval_results.json", R"({
            "1": [{"sample_id": 0, "compiled": true, "correctness": true}],
            "2": [{"sample_id": 0, "compiled": false, "correctness": false}],
            "9": [{"sample_id": 0, "compiled": true, "correctness": true}]})");
        put(kb / "level_1_problem_1_sample_0_kernel.py", "class ModelNew: pass  # one\n");
        put(kb / "level_1_problem_2_sample_0_kernel.py", "class ModelNew: pass  # two\n");
        put(kb / "level_1_problem_2_sample_1_kernel.py", "class ModelNew: pass  # two, again\n");
        put(kb / "notes.txt", "not a kernel\n");

        const fs::path pp = root / "runs/pp_run";
        put(pp / "per_problem/level_2/problem_7.json",
            R"({"status": "evaluated", "problem_name": "7_Conv.py", "model_name": "m",
                "eval_result": {"compiled": true, "correctness": false, "runtime_stats": {"mean": 1}}})");
        put(pp / "generated_kernels/level_2/problem_7.py", "class ModelNew: pass  # conv\n");
        put(pp / "per_problem/level_2/problem_8.json", R"({"status": "extraction_failed"})");

        const fs::path dump = root / "runs/dump";
        put(dump / "results.jsonl",
            R"({"level": 1, "problem_id": 12, "problem_name": "12_Other.py", "kernel_path": "/far/away/level1_problem12_triton.py", "attempts": 2})"
            "\n\n");
        put(dump / "kernels/level1_problem12_triton.py", "class ModelNew: pass  # triton\n");

        // A re-evaluation that links to the first run's file and disagrees with its label.
        const fs::path re = root / "runs/retime";
        put(re / "eval_results.json", R"({"1": [{"sample_id": 0, "compiled": true, "correctness": false}]})");
        fs::create_symlink("../kb_run/level_1_problem_1_sample_0_kernel.py", re / "level_1_problem_1_sample_0_kernel.py");
    }
    void TearDown() override { fs::remove_all(root); }

    kcv::CorpusImport import(const std::string& format = "auto") {
        return kcv::import_corpus({(root / "runs").string(), (root / "problems").string(), format});
    }

    fs::path root;
};

TEST_F(CorpusImport, ReadsEveryLayoutWithItsLabels) {
    const auto got = import();
    ASSERT_EQ(got.runs.size(), 4u);
    ASSERT_EQ(got.entries.size(), 5u);

    const auto* a = find(got.entries, "runs/kb_run/level1/problem1/sample0");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(fs::path(a->problem).filename(), "1_Add.py");
    EXPECT_EQ(fs::path(a->candidate).filename(), "level_1_problem_1_sample_0_kernel.py");
    EXPECT_EQ(a->label["correctness"], true);
    EXPECT_EQ(a->label["source"], "eval_results.json");

    const auto* b = find(got.entries, "runs/kb_run/level1/problem2/sample0");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->label["compiled"], false);
    const auto* unlabelled = find(got.entries, "runs/kb_run/level1/problem2/sample1");
    ASSERT_NE(unlabelled, nullptr);
    EXPECT_TRUE(unlabelled->label.is_null());

    const auto* pp = find(got.entries, "runs/pp_run/level2/problem7");
    ASSERT_NE(pp, nullptr);
    EXPECT_EQ(fs::path(pp->problem).filename(), "7_Conv.py");
    EXPECT_EQ(pp->label["correctness"], false);
    EXPECT_EQ(pp->label["model_name"], "m");
    EXPECT_FALSE(pp->label.contains("runtime_stats"));

    const auto* tr = find(got.entries, "runs/dump/level1/problem12");
    ASSERT_NE(tr, nullptr);
    EXPECT_EQ(fs::path(tr->problem).filename(), "12_Other.py");
    EXPECT_EQ(fs::path(tr->candidate), fs::absolute(root / "runs/dump/kernels/level1_problem12_triton.py"));
    EXPECT_EQ(tr->label["correctness"], true);
    EXPECT_EQ(tr->label["attempts"], 2);
}

TEST_F(CorpusImport, SaysWhyResultsWereLeftOut) {
    const auto got = import();
    std::set<std::string> why(got.skipped.begin(), got.skipped.end());
    EXPECT_TRUE(why.count("runs/kb_run: problem 9 sample 0 has a result but no kernel file")) << got.skipped.size();
    bool no_file = false;
    for (const auto& s : got.skipped) no_file |= s.starts_with("runs/pp_run/level2/problem8: no kernel file");
    EXPECT_TRUE(no_file);
    EXPECT_EQ(got.skipped.size(), 2u);
}

TEST_F(CorpusImport, OneEntryPerKernelFileWithEveryLabelKept) {
    const auto got = import();
    ASSERT_EQ(got.merged.size(), 1u);
    EXPECT_TRUE(got.merged[0].starts_with("runs/retime/level1/problem1/sample0: the same kernel file as runs/kb_run/"));
    EXPECT_EQ(find(got.entries, "runs/retime/level1/problem1/sample0"), nullptr);
    const auto* a = find(got.entries, "runs/kb_run/level1/problem1/sample0");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->label["correctness"], true);
    ASSERT_EQ(a->label["also"].size(), 1u);
    EXPECT_EQ(a->label["also"][0]["id"], "runs/retime/level1/problem1/sample0");
    EXPECT_EQ(a->label["also"][0]["correctness"], false);
    EXPECT_EQ(a->label["labels_disagree"], true);
}

TEST_F(CorpusImport, FormatCanBeForced) {
    const auto got = import("triton-dump");
    ASSERT_EQ(got.entries.size(), 1u);
    EXPECT_EQ(got.entries[0].id, "runs/dump/level1/problem12");
    EXPECT_THROW(import("harness-x"), std::runtime_error);
}

TEST_F(CorpusImport, WrittenCorpusLoadsBackAndMovesWithItsFiles) {
    const auto got = import();
    const fs::path file = root / "corpus.jsonl";
    kcv::write_corpus(got.entries, file.string());
    {
        std::ifstream in(file);
        std::string first;
        std::getline(in, first);
        EXPECT_EQ(first.find(root.string()), std::string::npos) << "paths should be relative: " << first;
    }
    const fs::path moved = root.string() + "-moved";
    fs::remove_all(moved);
    fs::rename(root, moved);
    const auto back = kcv::load_corpus((moved / "corpus.jsonl").string(), "");
    fs::rename(moved, root);
    ASSERT_EQ(back.size(), got.entries.size());
    for (size_t i = 0; i < back.size(); ++i) {
        EXPECT_EQ(back[i].id, got.entries[i].id);
        EXPECT_EQ(back[i].label, got.entries[i].label);
        EXPECT_EQ(fs::path(back[i].candidate).filename(), fs::canonical(got.entries[i].candidate).filename());
        EXPECT_TRUE(fs::path(back[i].problem).lexically_normal().string().starts_with(moved.string()))
            << back[i].problem;
    }
}

TEST_F(CorpusImport, BundleCopiesFilesSoTheCorpusTravelsAlone) {
    const auto got = import();
    const fs::path dir = root / "bundle";
    const auto bundled = kcv::bundle_corpus(got.entries, dir.string());
    kcv::write_corpus(bundled, (dir / "corpus.jsonl").string());
    const auto back = kcv::load_corpus((dir / "corpus.jsonl").string(), "");
    ASSERT_EQ(back.size(), got.entries.size());
    for (size_t i = 0; i < back.size(); ++i) {
        EXPECT_TRUE(fs::path(back[i].candidate).lexically_normal().string().starts_with(dir.string())) << back[i].candidate;
        EXPECT_FALSE(fs::is_symlink(back[i].candidate)) << back[i].candidate;
        std::ifstream a(back[i].candidate), b(got.entries[i].candidate);
        std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
        EXPECT_EQ(sa, sb) << back[i].id;
        EXPECT_FALSE(sa.empty());
    }
    EXPECT_TRUE(fs::is_regular_file(dir / "problems/level2/7_Conv.py"));
    EXPECT_TRUE(fs::is_regular_file(dir / "candidates/runs.kb_run.level1.problem1.sample0.py"));
}

TEST_F(CorpusImport, SamplesAreSeededSubsetsInCorpusOrder) {
    std::vector<CorpusEntry> all;
    for (int i = 0; i < 200; ++i) all.push_back({"id" + std::to_string(i), "p", "c", {}});
    const auto s1 = kcv::sample_corpus(all, 20, 7), s2 = kcv::sample_corpus(all, 20, 7),
               s3 = kcv::sample_corpus(all, 20, 8);
    ASSERT_EQ(s1.size(), 20u);
    std::vector<std::string> a, b, c;
    for (const auto& e : s1) a.push_back(e.id);
    for (const auto& e : s2) b.push_back(e.id);
    for (const auto& e : s3) c.push_back(e.id);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    size_t last = 0;
    for (const auto& id : a) {
        const size_t at = std::stoul(id.substr(2));
        EXPECT_TRUE(id == a.front() || at > last) << id;
        last = at;
    }
    EXPECT_EQ(kcv::sample_corpus(all, 500, 7).size(), 200u);
}

TEST_F(CorpusImport, BadInputIsNamed) {
    try {
        kcv::import_corpus({(root / "runs").string(), (root / "nowhere").string(), "auto"});
        FAIL() << "a missing problems folder was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("nowhere"), std::string::npos) << e.what();
    }
    put(root / "runs/kb_run/eval_results.json", "{\"1\": [");
    try {
        import();
        FAIL() << "a broken eval_results.json was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("eval_results.json"), std::string::npos) << e.what();
    }
    fs::create_directories(root / "empty");
    EXPECT_THROW(kcv::import_corpus({(root / "empty").string(), (root / "problems").string(), "auto"}),
                 std::runtime_error);
}

}  // namespace
