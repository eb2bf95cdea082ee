// baton: plan, simulate and execute pipeline-parallel training.
#include <malloc.h>

#include <cstdio>
#include <exception>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "tools/cli_support.h"
#include "tools/commands.h"

namespace {

// Freed memory stays in the process. LibTorch's CPU allocator frees and
// allocates tensors of the same sizes every microbatch; where glibc hands
// large blocks back to the system (mmap above a threshold that moves, heap
// tops trimmed), each new one page-faults again, and how often depends on the
// order of the work: vgg-mini's profiled backward took 1.38 ms per microbatch
// so and 1.23 ms with memory kept, which is what a one-worker run of the
// executor measures either way. Profile, calibration and runs are all baton
// processes, so they all allocate alike.
void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest; fixed, not sliding
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory();
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
  }
  return result.exit_code;
}
