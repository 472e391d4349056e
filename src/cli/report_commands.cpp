// Subcommands over journals: report, calibrate, disputes.
#include "cli/commands.hpp"

namespace kcv::cli {

void add_report_commands(CLI::App& app, Commands& commands) {
    (void)app;
    (void)commands;
}

}  // namespace kcv::cli
