// Acceptance: for every shipped profile (traces/*.json) and topology
// (topologies/*.json), the planner's predicted time per minibatch for the plan
// it chooses agrees with the simulator's steady state within 2%.
//
// "The plan it chooses": search_plans with the pipedream schedule and the
// topology's device memory as the limit, then choose_plan (the rule the CLI
// uses). "The simulator's steady state": the slope between two long runs
// (tests/planner/model_support.h), which leaves out the start-up transient.
// Pairs where no split fits in memory (search_plans returns no candidate) are
// skipped and listed. One test case per model family keeps each case short;
// a guard case checks that every shipped profile belongs to a family here.
// Each case prints its rows: profile, topology, plan, estimate, simulated, error.
#include "tests/catch_compat.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "planner/baton_choose.h"
#include "planner/baton_search.h"
#include "tests/planner/model_support.h"

using namespace baton;
using namespace baton::model_testing;

namespace {

namespace fs = std::filesystem;

constexpr double kTolerance = 0.02;

// Shipped profiles are named <family>_<device>_mb<size>.json.
const std::vector<std::string> kFamilies{"alexnet", "bert-large", "gnmt16",   "gnmt8",   "gpt-1.3b",
                                         "gpt-13b", "gpt-175b",   "resnet50", "uniform", "vgg16"};

std::string family_of(const fs::path& trace) {
  const std::string name = trace.stem().string();
  return name.substr(0, name.find('_'));
}

void check_pair(const Profile& profile, const fs::path& trace, const Topology& topology) {
  SearchOptions options;
  options.schedule = Schedule::kPipeDream;
  options.memory_limit = topology.device.memory;
  const SearchResult found = search_plans(profile, topology, options);
  if (found.candidates.empty()) {
    fmt::print("{:30} {:22} no split fits in {:.0f} GiB: skipped\n", trace.stem().string(), topology.name,
               topology.device.memory.gib());
    return;
  }
  const auto chosen = choose_plan(found.candidates, profile, topology, options.optimizer);
  REQUIRE(chosen);
  const Seconds estimated = chosen->estimate.iteration_time;
  const Seconds simulated = steady_state_time(chosen->plan, profile, topology);
  const double error = estimated / simulated - 1.0;
  const std::string plan = stages_to_string(chosen->plan.stages);
  fmt::print("{:30} {:22} {:40} estimate {:9.4f} ms simulated {:9.4f} ms error {:+6.2f}% {}\n", trace.stem().string(),
             topology.name, plan, estimated.ms(), simulated.ms(), 100 * error,
             chosen->estimate.exact ? "" : "(no repeat found)");
  INFO(trace.stem().string() << " on " << topology.name << ": " << plan << ", estimate " << estimated.ms()
                             << " ms, simulated " << simulated.ms() << " ms, bottleneck "
                             << chosen->estimate.bottleneck);
  CHECK(std::abs(error) <= kTolerance);
}

void check_family(const std::string& family) {
  for (const fs::path& trace : json_files("traces")) {
    if (family_of(trace) != family) continue;
    auto profile = parse_profile(read_text(trace), trace.string());
    REQUIRE(profile.ok());
    for (const fs::path& file : json_files("topologies")) {
      auto topology = parse_topology(read_text(file), file.string());
      REQUIRE(topology.ok());
      check_pair(*profile, trace, *topology);
    }
  }
}

}  // namespace

TEST_CASE("agreement: every shipped profile belongs to a family checked below", "[agreement]") {
  for (const fs::path& trace : json_files("traces")) {
    INFO(trace.filename().string());
    CHECK(std::find(kFamilies.begin(), kFamilies.end(), family_of(trace)) != kFamilies.end());
  }
}

TEST_CASE("agreement: alexnet", "[agreement]") { check_family("alexnet"); }
TEST_CASE("agreement: bert-large", "[agreement]") { check_family("bert-large"); }
TEST_CASE("agreement: gnmt16", "[agreement]") { check_family("gnmt16"); }
TEST_CASE("agreement: gnmt8", "[agreement]") { check_family("gnmt8"); }
TEST_CASE("agreement: gpt-1.3b", "[agreement]") { check_family("gpt-1.3b"); }
TEST_CASE("agreement: gpt-13b", "[agreement]") { check_family("gpt-13b"); }
TEST_CASE("agreement: gpt-175b", "[agreement]") { check_family("gpt-175b"); }
TEST_CASE("agreement: resnet50", "[agreement]") { check_family("resnet50"); }
TEST_CASE("agreement: uniform", "[agreement]") { check_family("uniform"); }
TEST_CASE("agreement: vgg16", "[agreement]") { check_family("vgg16"); }
