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
void add_plan_command(CLI::App& app, CommandResult& result);
void add_import_command(CLI::App& app, CommandResult& result);
void add_sweep_command(CLI::App& app, CommandResult& result);
void add_check_command(CLI::App& app, CommandResult& result);
// `baton profile ...`: subcommands of the `profile` command.
void add_profile_analytic_command(CLI::App& profile, CommandResult& result);
void add_profile_measure_command(CLI::App& profile, CommandResult& result);
// `profile measure` and `run` need the executor (LibTorch); in a build without
// it they say so and exit 2. `compare` needs sim/ only.
void add_run_command(CLI::App& app, CommandResult& result);
void add_compare_command(CLI::App& app, CommandResult& result);
// `calibrate` (the executor's link as a topology) and `validate` (profile,
// calibrate, plan, simulate, run, compare) need the executor too.
void add_calibrate_command(CLI::App& app, CommandResult& result);
void add_validate_command(CLI::App& app, CommandResult& result);
// `kernels measure` (needs the executor) and `kernels check` (sim/ only).
void add_kernels_command(CLI::App& app, CommandResult& result);

}  // namespace baton::cli
