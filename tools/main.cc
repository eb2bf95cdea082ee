// baton: plan, simulate and execute pipeline-parallel training.
#include <cstdio>
#include <exception>
#include <new>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "sim/allocator.h"
#include "tools/cli_support.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  baton::keep_freed_memory();
  CLI::App app{
      "baton: plan, simulate and execute pipeline-parallel training (PipeDream-style).\n"
      "Try: baton simulate --profile traces/vgg16_v100_mb32.json --topology "
      "topologies/pipedream_a.json --stages 0-31x15,31-39x1 --schedule pipedream,1f1b,gpipe,dp\n"
      "Each command explains itself: baton COMMAND --help",
      "baton"};
  app.require_subcommand(1);
  baton::cli::CommandResult result;
  baton::cli::add_plan_command(app, result);
  baton::cli::add_import_command(app, result);
  baton::cli::add_simulate_command(app, result);
  baton::cli::add_sweep_command(app, result);
  baton::cli::add_check_command(app, result);
  CLI::App* profile = app.add_subcommand("profile", "Make layer profiles: derived from an architecture, or measured");
  profile->require_subcommand(1);
  baton::cli::add_profile_analytic_command(*profile, result);
  baton::cli::add_profile_measure_command(*profile, result);
  baton::cli::add_run_command(app, result);
  baton::cli::add_compare_command(app, result);
  baton::cli::add_calibrate_command(app, result);
  baton::cli::add_validate_command(app, result);
  baton::cli::add_kernels_command(app, result);
  if (argc <= 1) {
    // As git does: a bare `baton` shows what it can do, and is still a usage error.
    std::fputs(app.help().c_str(), stdout);
    return baton::cli::kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : baton::cli::kExitBadInput;
  } catch (const baton::cli::UsageError& e) {
    std::fprintf(stderr, "baton: %s\n", e.what());
    return baton::cli::kExitBadInput;
  } catch (const std::bad_alloc&) {
    // The inputs' checks bound what a command builds (kMaxMicrobatchStages);
    // this is the last word where the machine has less memory than that.
    std::fputs(
        "baton: out of memory: the machine could not hold what this command builds (a smaller batch, "
        "fewer microbatches or a smaller sweep needs less)\n",
        stderr);
    return 1;
  }
  return result.exit_code;
}
