// Subcommands defined outside main.cpp register here: each adds its CLI11 subcommand and the
// function that runs it when that subcommand was given.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>
#include <vector>

namespace kcv::cli {

struct Commands {
    std::vector<std::pair<CLI::App*, std::function<int()>>> entries;
    void add(CLI::App* sub, std::function<int()> run) { entries.emplace_back(sub, std::move(run)); }
};

// report, calibrate, disputes (src/cli/report_commands.cpp).
void add_report_commands(CLI::App& app, Commands& commands);
// corpus (src/cli/corpus_command.cpp).
void add_corpus_command(CLI::App& app, Commands& commands);

}  // namespace kcv::cli
