// The baton search's candidates: under the pipedream schedule, a stage priced
// as one call per pass, and devices that share one compute stream.
//
// Under the pipedream schedule: one period of
// the pipedream schedule is R = lcm of the stages' replica counts minibatches;
// the simulator measures a steady state over periods up to
// kMaxSteadyStatePeriod, so a candidate with a larger R could only be ranked
// last. The search must not propose such plans: on every shipped profile and
// topology (256 devices included) every candidate's R is at most that cap, and
// every candidate is one the model can rate.
#include "tests/catch_compat.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "planner/baton_model.h"
#include "planner/baton_search.h"
#include "planner/planner.h"
#include "sim/profile.h"
#include "sim/simulator.h"
#include "sim/stage_costs.h"
#include "sim/topology.h"
#include "tests/planner/model_support.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using model_testing::json_files;
using model_testing::read_text;
using testing::close_rel;

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

// Layers of forward = backward = t / 2 ms, free links, `devices` devices.
Profile halves_profile(const std::vector<double>& ms, CallCost call) {
  std::vector<model_testing::LayerSpec> specs;
  for (double t : ms) specs.push_back({t / 2, t / 2, 0, 0});
  Profile profile = model_testing::chain_profile(specs);
  profile.call_cost = call;
  return profile;
}

SearchOptions straight_1f1b(const Topology& topology) {
  SearchOptions options;
  options.schedule = Schedule::kOneFOneB;
  options.microbatches = 8;
  options.straight = true;
  options.memory_limit = topology.device.memory;
  return options;
}

// The planner's 1F1B outcome over `microbatches` (it simulates its candidates).
PlannerOutcome planned_1f1b(const Profile& profile, const Topology& topology, int microbatches) {
  PlannerOptions options;
  options.schedule = Schedule::kOneFOneB;
  options.microbatches = microbatches;
  auto outcome = make_plan(profile, topology, options);
  REQUIRE(outcome.ok());
  return std::move(*outcome);
}

std::string stages_of(const Plan& plan) {
  std::string text;
  for (const StagePlan& stage : plan.stages)
    text += (text.empty() ? "" : ",") + std::to_string(stage.layers.begin) + "-" + std::to_string(stage.layers.end) +
            "x" + std::to_string(stage.replicas);
  return text;
}

TEST_CASE("baton search: a stage's passes are one call each (the profile's call_cost)") {
  // Layers of 2, 2, 2 and 3 ms (forward and backward half each) on 2 devices.
  // Summed per layer, the best split is 2|2: max(4, 5) = 5 ms against 3|1's
  // max(6, 3) = 6. With a call costing 0.5 ms forward and 1 ms backward, a
  // stage of n layers saves (n - 1) 1.5 ms: 2|2 gives max(2.5, 3.5) = 3.5 ms,
  // 3|1 max(3, 3) = 3 ms, and one device 9 - 4.5 = 4.5 ms, so 3|1 ranks first.
  const Topology topology = make_flat_topology(2, 1e6, Seconds(0.0));
  const std::vector<double> layers{2, 2, 2, 3};
  const SearchResult summed = search_plans(halves_profile(layers, CallCost{}), topology, straight_1f1b(topology));
  REQUIRE_FALSE(summed.candidates.empty());
  CHECK(stages_of(summed.candidates.front()) == "0-2x1,2-4x1");
  const CallCost call{Seconds::from_ms(0.5), Seconds::from_ms(1.0), Seconds(0.0)};
  const SearchResult calls = search_plans(halves_profile(layers, call), topology, straight_1f1b(topology));
  REQUIRE_FALSE(calls.candidates.empty());
  CHECK(stages_of(calls.candidates.front()) == "0-3x1,3-4x1");
}

TEST_CASE("baton planner: one device is the whole model as one stage, one call per pass") {
  const CallCost call{Seconds::from_ms(0.5), Seconds::from_ms(1.0), Seconds(0.0)};
  const Profile profile = halves_profile({2, 2, 2, 3}, call);
  const Topology topology = make_flat_topology(2, 1e6, Seconds(0.0));
  const PlannerOutcome outcome = planned_1f1b(profile, topology, 8);
  // 9 ms of layers less 3 calls of 1.5 ms, per sample of the profile's microbatch.
  CHECK(close_rel(outcome.single_device_per_sample.ms(), (9.0 - 3 * 1.5) / profile.microbatch_size));
}

TEST_CASE("baton search: devices that are streams of one GPU take turns (shared_compute)") {
  // Four streams of one device: any split of the 4 layers (3 ms each) asks
  // the one compute stream for all of them, 12 ms per microbatch less the
  // calls each stage saves, so the whole model on one worker (12 - 3 x 1.5 =
  // 7.5 ms) ranks first; four stages of one layer (3 ms each on devices of
  // their own) would rank first if each stream were a device.
  const CallCost call{Seconds::from_ms(0.5), Seconds::from_ms(1.0), Seconds(0.0)};
  const Profile profile = halves_profile({3, 3, 3, 3}, call);
  Topology separate = make_flat_topology(4, 1e6, Seconds(0.0));
  CHECK(stages_of(search_plans(profile, separate, straight_1f1b(separate)).candidates.front()) ==
        "0-1x1,1-2x1,2-3x1,3-4x1");
  Topology shared = separate;
  shared.levels.front().shared_compute = true;
  const SearchResult found = search_plans(profile, shared, straight_1f1b(shared));
  REQUIRE_FALSE(found.candidates.empty());
  CHECK(stages_of(found.candidates.front()) == "0-4x1");
  // The planner, which simulates its candidates, chooses that worker: 8
  // microbatches of one call per pass each, 8 x 7.5 ms (no optimizer time).
  const PlannerOutcome outcome = planned_1f1b(profile, shared, 8);
  CHECK(stages_of(outcome.best.plan) == "0-4x1");
  CHECK(close_rel(outcome.best.estimate.iteration_time.ms(), 8 * 7.5));
}

TEST_CASE("baton search: streams of one GPU that compute at once (shared_speedup)") {
  // The same four layers of 3 ms, no call cost, on four streams of one device
  // whose capacity is 4 (every action at rate 1 whatever else runs). A unit
  // is valued at the longest of its demand over the capacity, what its
  // workers issue (one host's launching) and its largest single demand:
  // - issued in no time: 4 stages of one layer give max(12 / 4, 0, 3) = 3 ms
  //   against the one worker's 12 ms: the four stages rank first, as on
  //   devices of their own;
  // - issued as long as they run (host times equal to the device's): every
  //   split is max(12 / 4, 12, ...) = 12 ms, a tie the first found (fewest
  //   stages) wins, as when they take turns.
  Topology shared = make_flat_topology(4, 1e6, Seconds(0.0));
  shared.levels.front().shared_compute = true;
  shared.levels.front().shared_speedup = 4.0;
  for (double share : {0.0, 1.0}) {
    INFO("host share " << share);
    Profile profile = halves_profile({3, 3, 3, 3}, CallCost{});
    for (Layer& layer : profile.layers) {
      layer.host_forward = layer.forward * share;
      layer.host_backward = layer.backward * share;
    }
    const SearchResult found = search_plans(profile, shared, straight_1f1b(shared));
    REQUIRE_FALSE(found.candidates.empty());
    CHECK(stages_of(found.candidates.front()) == (share == 0.0 ? "0-1x1,1-2x1,2-3x1,3-4x1" : "0-4x1"));
  }
}

TEST_CASE("baton search: a flush schedule's fill counts (the split of least bottleneck is not the fastest)") {
  // 16 layers of 3 ms (forward 1, backward 2) with 8 MiB of parameters each
  // and nothing to send, on 16 devices of one 100 Gb/s level without latency,
  // 1F1B over M = 16 microbatches. A stage of k layers on r replicas has a
  // period of 3k ceil(16 / r) / 16 ms plus its all-reduce over 16, and the
  // least of all, 3 ms, is the straight pipeline's, 16 one-layer stages (no
  // all-reduce), which takes (M + 16 - 1) 3 ms = 93 ms. Data parallelism over
  // the 16 devices runs each replica's one microbatch in 48 ms and all-reduces
  // 128 MiB over a ring of 16 in 2 (16 - 1) / 16 x 128 MiB / 12.5 GB/s =
  // 20.13 ms: 68.1 ms, the fastest (two stages of 8 replicas take 2 x 24 + 24 ms
  // and all-reduce 64 MiB over 8, 81.4 ms; four of 4, 4 x 12 + 36 ms and
  // more); its bottleneck, 3 + 20.13 / 16 = 4.26 ms, is larger than that of
  // the best splits whose first stage has 1, 2, 4, 8, 3, 6, 5 or 10 replicas
  // (3 ms and 3k ceil(16 / k) / 16 ms = 3.375 and 3.75 ms), so the 8 best by
  // bottleneck miss it.
  const Topology topology = make_flat_topology(16, 100.0, Seconds(0.0));
  const Profile profile =
      model_testing::chain_profile(std::vector<model_testing::LayerSpec>(16, {1.0, 2.0, 0, int64_t{8} << 20}));
  SearchOptions search;
  search.schedule = Schedule::kOneFOneB;
  search.microbatches = 16;
  search.memory_limit = topology.device.memory;
  const SearchResult found = search_plans(profile, topology, search);
  REQUIRE(found.candidates.size() > 8);
  const auto data_parallel = [](const Plan& plan) { return stages_of(plan) == "0-16x16"; };
  CHECK_FALSE(std::any_of(found.candidates.begin(), found.candidates.begin() + 8, data_parallel));
  CHECK(std::any_of(found.candidates.begin(), found.candidates.end(), data_parallel));
  CHECK(stages_of(found.candidates.front()) ==
        "0-1x1,1-2x1,2-3x1,3-4x1,4-5x1,5-6x1,6-7x1,7-8x1,8-9x1,9-10x1,10-11x1,"
        "11-12x1,12-13x1,13-14x1,14-15x1,15-16x1");

  const PlannerOutcome outcome = planned_1f1b(profile, topology, 16);
  CHECK(stages_of(outcome.best.plan) == "0-16x16");
  const double allreduce_ms = 2.0 * 15.0 / 16.0 * double(int64_t{128} << 20) / 12.5e9 * 1e3;
  CHECK(close_rel(outcome.best.estimate.iteration_time.ms(), 48.0 + allreduce_ms));
}

TEST_CASE("baton planner: progress after each schedule and microbatch count it searched") {
  // --schedule auto: pipedream once, the seven others at 8, 16, 32 and 64
  // microbatches: 1 + 7 x 4 = 29 searches, reported in order.
  const Profile profile = halves_profile({2, 2, 2, 3}, CallCost{});
  const Topology topology = make_flat_topology(2, 1e6, Seconds(0.0));
  PlannerOptions options;
  std::vector<std::string> searched;
  int last = 0;
  options.progress = [&](std::string_view what, int done, int total) {
    searched.emplace_back(what);
    CHECK(done == last + 1);
    CHECK(total == 29);
    last = done;
  };
  REQUIRE(make_plan(profile, topology, options).ok());
  REQUIRE(searched.size() == 29);
  CHECK(searched.front() == "pipedream");
  CHECK(searched[1] == "1f1b M=8");
  CHECK(searched.back() == "dualpipev M=64");
}

}  // namespace
}  // namespace baton
