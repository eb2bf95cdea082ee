// baton: plan, simulate and execute pipeline-parallel training.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tools/cli_support.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "baton: plan, simulate and execute pipeline-parallel training (PipeDream-style).\n"
      "Typical flow: `baton simulate --profile traces/vgg16.json --topology "
      "topologies/pipedream_a.json --stages 0-13x15,13-41x1 --schedule pipedream`.",
      "baton"};
  app.require_subcommand(1);
  baton::cli::CommandResult result;
  baton::cli::add_simulate_command(app, result);
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
