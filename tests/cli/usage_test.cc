// What `baton` says about itself: a bare `baton` shows its commands.
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
