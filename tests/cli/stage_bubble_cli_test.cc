// `baton simulate`'s per-stage table gives a replicated stage's bubble over all
// its replicas: one figure when they agree, their range when they do not.
//
// tests/data/tiny_profile.json on tiny_topology.json, GPipe, 3 microbatches,
// stage 0 (layers 0-3: 5 ms forward, 10 ms backward) on 2 replicas and stage 1
// (layers 3-6: 5.5 ms, 11 ms) on one. Replica 0 of stage 0 runs microbatches 0
// and 2, replica 1 runs microbatch 1, stage 1 all three: over the iteration T a
// worker running n microbatches of a stage idles 1 - n (F + B) / T.
#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

}  // namespace

TEST_CASE("simulate: a replicated stage's bubble column spans its replicas' bubbles", "[cli][simulate][bubble]") {
  const std::string command =
      "simulate --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json "
      "--stages 0-3x2,3-6x1 --schedule gpipe --microbatches 3";
  const CliRun json_run = run_baton(command + " --json", "stage-bubble-json");
  REQUIRE(json_run.exit_code == 0);
  const nlohmann::json result = nlohmann::json::parse(json_run.out);
  const double T = result["iteration_time_s"].get<double>();
  const double stage0 = 0.005 + 0.010, stage1 = 0.0055 + 0.011;
  const double two = 1 - 2 * stage0 / T, one = 1 - stage0 / T, three = 1 - 3 * stage1 / T;
  REQUIRE(result["workers"].size() == 3);
  CHECK(std::abs(result["workers"][0]["bubble_fraction"].get<double>() - two) < 1e-9);
  CHECK(std::abs(result["workers"][1]["bubble_fraction"].get<double>() - one) < 1e-9);
  CHECK(std::abs(result["workers"][2]["bubble_fraction"].get<double>() - three) < 1e-9);

  const CliRun text = run_baton(command, "stage-bubble-text");
  REQUIRE(text.exit_code == 0);
  INFO(text.out);
  const std::string low = percent(two);
  const std::string range = low.substr(0, low.size() - 1) + "-" + percent(one);
  CHECK(text.out.find(" " + range + "\n") != std::string::npos);
  CHECK(text.out.find(" " + percent(three) + "\n") != std::string::npos);
}
