// Helpers shared by the Megatron CLI tests. Include after tests/catch_compat.h.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace baton::testing {

// `plan` (its flags, on topologies/h100_32x8.json) with --json and with
// --emit megatron: the launch line, simulated on the planned d, predicts the
// planned time for the same model. Returns the launch line.
inline std::string plan_simulates_back(const std::string& plan, const std::string& tag) {
  const CliRun json = run_baton(plan + " --json", tag + "-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  const CliRun flags = run_baton(plan + " --emit megatron", tag + "-emit");
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  const int d = planned["layout"]["data_parallel_size"].get<int>();
  const CliRun run = run_baton("simulate --topology topologies/h100_32x8.json " + line + " --data-parallel-size " +
                                   std::to_string(d) + " --json",
                               tag + "-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json back = nlohmann::json::parse(run.out);
  CHECK(back["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(back["model"] == planned["model"]);
  return line;
}

}  // namespace baton::testing
