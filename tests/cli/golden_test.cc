// Golden files for whole simulations: the CLI's text summary, its CSV trace and
// its Chrome trace, byte for byte. Regenerate with BATON_UPDATE_GOLDEN=1 after a
// deliberate change, and read the diff before committing it.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kGoldenDir = fs::path(BATON_SOURCE_DIR) / "tests" / "golden";

void compare_with_golden(const std::string& actual, const std::string& golden_name) {
  const fs::path golden = kGoldenDir / golden_name;
  if (std::getenv("BATON_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden, std::ios::binary) << actual;
    WARN("rewrote " << golden.string());
    return;
  }
  REQUIRE(fs::exists(golden));
  const std::string expected = slurp(golden);
  if (expected == actual) return;
  size_t line = 1;
  size_t i = 0;
  for (; i < std::min(expected.size(), actual.size()) && expected[i] == actual[i]; ++i)
    if (expected[i] == '\n') ++line;
  FAIL(golden_name << " differs from the golden file at line " << line
                   << " (run with BATON_UPDATE_GOLDEN=1 to accept a deliberate change)");
}

struct GoldenRun {
  std::string stdout_text;
  std::string csv;
  std::string chrome;
};

GoldenRun simulate(const std::string& schedule, const std::string& stages, int microbatches, const std::string& name) {
  const fs::path dir = scratch_dir("golden-" + name);
  const CliRun run = run_baton(
      "simulate --profile tests/data/tiny_profile.json --topology "
      "tests/data/tiny_topology.json --stages " +
          stages + " --schedule " + schedule + " --microbatches " + std::to_string(microbatches) + " --csv '" +
          (dir / "t.csv").string() + "' --trace '" + (dir / "t.json").string() + "'",
      "golden-" + name);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  return GoldenRun{run.out, slurp(dir / "t.csv"), slurp(dir / "t.json")};
}

}  // namespace

TEST_CASE("golden: pipedream with a replicated stage on 2x2", "[cli][golden]") {
  const GoldenRun run = simulate("pipedream", "0-2,2-4x2,4-6", 16, "pipedream");
  compare_with_golden(run.stdout_text, "simulate_pipedream.txt");
  compare_with_golden(run.csv, "simulate_pipedream.csv");
  compare_with_golden(run.chrome, "simulate_pipedream.chrome.json");
}

TEST_CASE("golden: 1f1b over 4 devices", "[cli][golden]") {
  const GoldenRun run = simulate("1f1b", "0-2,2-3,3-5,5-6", 6, "1f1b");
  compare_with_golden(run.stdout_text, "simulate_1f1b.txt");
  compare_with_golden(run.csv, "simulate_1f1b.csv");
}

TEST_CASE("golden: all four schedules side by side", "[cli][golden]") {
  const GoldenRun run = simulate("pipedream,1f1b,gpipe,dp", "0-3,3-6", 8, "side-by-side");
  compare_with_golden(run.stdout_text, "simulate_side_by_side.txt");
}

TEST_CASE("the simulator is deterministic: same input, byte-identical output", "[cli][determinism]") {
  const GoldenRun first = simulate("pipedream", "0-2,2-4x2,4-6", 16, "det-a");
  const GoldenRun second = simulate("pipedream", "0-2,2-4x2,4-6", 16, "det-b");
  CHECK(first.stdout_text == second.stdout_text);
  CHECK(first.csv == second.csv);
  CHECK(first.chrome == second.chrome);
}

TEST_CASE("the same input gives byte-identical JSON: no run time in simulate's or plan's figures", "[cli][golden]") {
  // The simulator's own run time (once "wall_seconds" and "simulator_wall_s")
  // and the GPT search's ("wall_s") varied from run to run; they are on stderr.
  const std::string gpt =
      "--topology topologies/a100_4x8.json --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
      "--seq-length 1024 --global-batch-size 64 --json";
  for (const std::string& command :
       {std::string("simulate --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json "
                    "--stages 0-39x16 --schedule 1f1b,gpipe --json"),
        "simulate " + gpt + " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2", "plan " + gpt}) {
    const CliRun first = run_baton(command, "same-json-1");
    const CliRun second = run_baton(command, "same-json-2");
    INFO(command << "\n" << first.err);
    REQUIRE(first.exit_code == 0);
    CHECK(first.out.find("wall") == std::string::npos);
    CHECK(first.out == second.out);
  }
}
