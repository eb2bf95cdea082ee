// What `baton` says about itself: a bare `baton` shows its commands; what it
// hands to baton-exec.
#include <filesystem>
#include <string>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

TEST_CASE("baton with no arguments prints the command list and exits 2", "[cli][usage]") {
  const CliRun bare = run_baton("", "usage-bare");
  const CliRun help = run_baton("--help", "usage-help");
  INFO("stderr: " << bare.err);
  CHECK(bare.exit_code == 2);  // still a usage error, as for any missing argument
  CHECK(help.exit_code == 0);
  CHECK(bare.out == help.out);
  for (const char* command : {"plan", "simulate", "sweep", "check", "import", "profile", "validate"})
    CHECK(bare.out.find(std::string("  ") + command) != std::string::npos);
}

// tools/executor_handoff.h: baton parses the executor's commands itself and
// hands them to baton-exec, the binary beside it that links LibTorch.
TEST_CASE("baton hands the executor's commands to baton-exec beside it, and names it when it is missing",
          "[cli][usage]") {
  const auto lonely = scratch_dir("usage-lonely") / "baton";
  std::filesystem::copy_file(std::filesystem::path(BATON_BINARY_DIR) / "baton", lonely);
  // What baton answers alone: help, and options its parser refuses.
  const CliRun help = run_baton("validate --help", "usage-lonely-help", lonely);
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--microbatch-size") != std::string::npos);
  const CliRun refused = run_baton("profile measure --model mlp --microbatch-size 0", "usage-lonely-refused", lonely);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--microbatch-size") != std::string::npos);
  // What needs the executor: refused, naming what is missing.
  const std::string run_args =
      "run --model mlp --profile traces/vgg16_v100_mb32.json --topology topologies/cpu_2core.json --stages 0-3,3-6";
  const CliRun alone = run_baton(run_args, "usage-lonely-run", lonely);
  INFO("stderr: " << alone.err);
  CHECK(alone.exit_code == 2);
  CHECK(alone.err.find("baton: run: ") != std::string::npos);
  const CliRun built = run_baton(run_args, "usage-built-run");
  INFO("stderr of the built baton: " << built.err);
#if BATON_EXECUTOR_BUILT
  CHECK(alone.err.find("baton-exec beside this baton, which is missing") != std::string::npos);
  // The built one reaches the executor, which reads the inputs: the profile is not mlp's.
  CHECK(built.exit_code == 2);
  CHECK(built.err.find("the profile has 39 layers but model 'mlp' has 6") != std::string::npos);
#else
  CHECK(alone.err.find("built without LibTorch") != std::string::npos);
  CHECK(built.err == alone.err);
#endif
}
