// The candidates of the schedules that run chunks (planner/chunked_plans.h)
// and the planner's choice among them.
#include <algorithm>
#include <functional>
#include <random>

#include "tests/catch_compat.h"

#include "planner/baton_model.h"
#include "planner/chunked_plans.h"
#include "planner/planner.h"

using namespace baton;

namespace {

double largest(const std::vector<double>& work, const std::vector<LayerRange>& ranges) {
  double most = 0.0;
  for (const LayerRange& r : ranges) {
    double sum = 0.0;
    for (int i = r.begin; i < r.end; ++i) sum += work[i];
    most = std::max(most, sum);
  }
  return most;
}

// The least largest range over every split, by enumeration.
double brute_force(const std::vector<double>& work, int chunks) {
  const int layers = static_cast<int>(work.size());
  double best = 1e300;
  std::vector<int> cuts;
  std::function<void(int, int)> place = [&](int from, int left) {
    if (left == 0) {
      std::vector<LayerRange> ranges;
      int begin = 0;
      for (int c : cuts) {
        ranges.push_back({begin, c});
        begin = c;
      }
      ranges.push_back({begin, layers});
      best = std::min(best, largest(work, ranges));
      return;
    }
    for (int c = from; c <= layers - left; ++c) {
      cuts.push_back(c);
      place(c + 1, left - 1);
      cuts.pop_back();
    }
  };
  place(1, chunks - 1);
  return best;
}

}  // namespace

TEST_CASE("balanced split: contiguous ranges covering every layer, the largest as small as any split's",
          "[chunked_plans]") {
  CHECK(balanced_split({1, 1, 1, 1}, 2) == std::vector<LayerRange>{{0, 2}, {2, 4}});
  CHECK(balanced_split({5, 1, 1, 1, 1, 1}, 2) == std::vector<LayerRange>{{0, 1}, {1, 6}});
  CHECK(balanced_split({1, 2, 3}, 4).empty());  // more chunks than layers
  std::mt19937 random(7);
  std::uniform_real_distribution<double> time(0.1, 3.0);
  for (int trial = 0; trial < 60; ++trial) {
    const int layers = 3 + trial % 7;
    std::vector<double> work(static_cast<size_t>(layers));
    for (double& w : work) w = time(random);
    for (int chunks = 1; chunks <= layers; ++chunks) {
      const std::vector<LayerRange> ranges = balanced_split(work, chunks);
      REQUIRE(static_cast<int>(ranges.size()) == chunks);
      CHECK(ranges.front().begin == 0);
      CHECK(ranges.back().end == layers);
      for (size_t i = 0; i < ranges.size(); ++i) {
        CHECK(ranges[i].size() >= 1);
        if (i > 0) CHECK(ranges[i].begin == ranges[i - 1].end);
      }
      CHECK(largest(work, ranges) == Approx(brute_force(work, chunks)).epsilon(1e-12));
    }
  }
}

TEST_CASE("chunked candidates: p ranks x r whole-pipeline replicas on all devices, v chunks each", "[chunked_plans]") {
  const Profile profile =
      make_uniform_profile(12, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(1000), Bytes(4000));
  const Topology topology = make_flat_topology(8, 100.0, Seconds::from_us(5));
  const auto interleaved = chunked_candidates(profile, topology, Schedule::kInterleaved1F1B, 16);
  // (p, v) with p | 8, p >= 2, v in {2, 3, 4} and p v <= 12 layers: (2, 2) (2, 3) (2, 4) (4, 2) (4, 3);
  // M = 16 is a multiple of p r = 8 for all of them.
  CHECK(interleaved.size() == 5);
  for (const Plan& plan : interleaved) {
    INFO(stages_to_string(plan.stages) << " v = " << plan.virtual_stages);
    CHECK(plan.num_ranks() * plan.stages[0].replicas == 8);
    CHECK(plan.num_workers() == 8);
    CHECK(check_plan(plan, profile, topology, "candidate").ok());
    // Uniform layers split as evenly as they go: chunk sizes differ by at most one layer.
    int fewest = 99, most = 0;
    for (const StagePlan& stage : plan.stages) {
      fewest = std::min(fewest, stage.layers.size());
      most = std::max(most, stage.layers.size());
    }
    CHECK(most - fewest <= 1);
  }
  // The V shapes: v = 2, and at least 2 p r = 16 microbatches on all 8 devices.
  CHECK(chunked_candidates(profile, topology, Schedule::kZbV, 8).empty());
  const auto v_shapes = chunked_candidates(profile, topology, Schedule::kDualPipeV, 16);
  CHECK(v_shapes.size() == 2);  // p = 2 and 4; p = 8 would need 16 chunks of 12 layers
  for (const Plan& plan : v_shapes) CHECK(plan.virtual_stages == 2);
}

TEST_CASE("the planner takes the fastest chunked layout that fits", "[chunked_plans][planner]") {
  const Profile profile =
      make_uniform_profile(16, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(1 << 20), Bytes(1 << 22));
  const Topology topology = make_flat_topology(8, 100.0, Seconds::from_us(5));
  PlannerOptions options;
  options.schedule = Schedule::kInterleaved1F1B;
  options.microbatches = 16;
  auto outcome = make_plan(profile, topology, options);
  REQUIRE(outcome.ok());
  CHECK(outcome->best.plan.schedule == Schedule::kInterleaved1F1B);
  double fastest = 1e300;
  for (const Plan& plan : chunked_candidates(profile, topology, Schedule::kInterleaved1F1B, 16)) {
    const PlanEstimate e = estimate_plan(profile, topology, plan, Optimizer::kAdam);
    fastest = std::min(fastest, e.iteration_time.value / e.samples_per_iteration);
  }
  CHECK(outcome->best.time_per_sample_s() == Approx(fastest).epsilon(1e-12));
}
