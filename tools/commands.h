// The subcommands of `baton`. Each adds itself to the CLI11 app; its callback
// throws cli::UsageError on bad input (exit 2) and returns the exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace baton::cli {

// Every subcommand stores its exit code here from its callback.
struct CommandResult {
  int exit_code = 0;
};

void add_simulate_command(CLI::App& app, CommandResult& result);
// `baton profile ...`: subcommands of the `profile` command.
void add_profile_analytic_command(CLI::App& profile, CommandResult& result);

}  // namespace baton::cli
