// The candidates of the schedules that run chunks (planner/chunked_plans.h)
// and the planner's choice among them.
#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <tuple>

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

// `chunks` contiguous non-empty ranges covering layers [0, layers).
void check_covers(const std::vector<LayerRange>& ranges, int chunks, int layers) {
  REQUIRE(static_cast<int>(ranges.size()) == chunks);
  CHECK(ranges.front().begin == 0);
  CHECK(ranges.back().end == layers);
  for (size_t c = 0; c < ranges.size(); ++c) {
    CHECK(ranges[c].size() >= 1);
    if (c > 0) CHECK(ranges[c].begin == ranges[c - 1].end);
  }
}

// Each rank's sum of work over its chunks.
std::vector<double> rank_loads(const std::vector<double>& work, const std::vector<LayerRange>& ranges,
                               const std::vector<int>& rank_of, int ranks) {
  std::vector<double> loads(static_cast<size_t>(ranks), 0.0);
  for (size_t c = 0; c < ranges.size(); ++c)
    for (int i = ranges[c].begin; i < ranges[c].end; ++i) loads[rank_of[c]] += work[i];
  return loads;
}

double largest_load(const std::vector<double>& loads) { return *std::max_element(loads.begin(), loads.end()); }

}  // namespace

TEST_CASE("rank-balanced split: each rank's chunks sum to even loads where the chunk-balanced split does not",
          "[chunked_plans]") {
  // Layers of work 4, 1, 1, 1, 1, 1, 1, 1, 1 (12 in all) in 4 chunks on 2 ranks. The largest chunk is
  // at least the first layer's 4, which balanced_split reaches with chunks [0,1) [1,2) [2,5) [5,9)
  // (4, 1, 3, 4): interleaved (chunks 0 and 2 on rank 0) the ranks carry 7 and 5, in the V (chunks 0
  // and 3 on rank 0) 8 and 4; 6 and 6 is reachable in both.
  const std::vector<double> work{4, 1, 1, 1, 1, 1, 1, 1, 1};
  const std::vector<LayerRange> start = balanced_split(work, 4);
  REQUIRE(start == std::vector<LayerRange>{{0, 1}, {1, 2}, {2, 5}, {5, 9}});
  const std::vector<int> interleaved{0, 1, 0, 1}, v_shape{0, 1, 1, 0};
  CHECK(rank_loads(work, start, interleaved, 2) == std::vector<double>{7, 5});
  CHECK(rank_loads(work, start, v_shape, 2) == std::vector<double>{8, 4});
  // Interleaved: the first improving move, cuts taken in order, is the cut between chunks 1 and 2
  // from 2 to 3 (chunks 4, 2, 2, 4).
  CHECK(rank_balanced_split(work, start, interleaved, 2) == std::vector<LayerRange>{{0, 1}, {1, 3}, {3, 5}, {5, 9}});
  // V: the same cut moves from 5 to 7 (chunk 2 grows to 5 layers, chunk 3 keeps 2).
  CHECK(rank_balanced_split(work, start, v_shape, 2) == std::vector<LayerRange>{{0, 1}, {1, 2}, {2, 7}, {7, 9}});
  // One chunk per rank: the split is already the ranks' split and stays.
  CHECK(rank_balanced_split(work, balanced_split(work, 3), {0, 1, 2}, 3) == balanced_split(work, 3));
}

TEST_CASE("rank-balanced split with links: a cut that sends much moves where little crosses, the ranks kept even",
          "[chunked_plans]") {
  // 8 layers of work 1 in 4 chunks on 2 ranks (interleaved: chunks 0 and 2 on rank 0). Every cut
  // crosses the one link between the ranks, at 1 s per byte; a cut after layer 1 (position 2) sends
  // 10 bytes, any other 0.1. The chunk-balanced start [0,2) [2,4) [4,6) [6,8) loads each rank with 4
  // and the link with 10 + 0.1 + 0.1 = 10.2 per microbatch.
  const std::vector<double> work(8, 1.0);
  std::vector<std::vector<double>> out(9, std::vector<double>(9, 0.1));
  for (int i = 0; i < 2; ++i) out[i][2] = 10.0;
  ChunkLinks links;
  links.link = {0, 0, 0};
  links.seconds_per_byte = {1.0, 1.0, 1.0};
  links.out = &out;
  links.links = 1;
  const std::vector<int> interleaved{0, 1, 0, 1};
  const std::vector<LayerRange> start{{0, 2}, {2, 4}, {4, 6}, {6, 8}};
  const std::vector<LayerRange> moved = rank_balanced_split(work, start, interleaved, 2, &links);
  // The cut at 2 moves to 1 (ranks 3 and 5, link 0.3: [5, 3, 0.3] sorts under [10.2, 4, 4]), then
  // the cut at 4 to 3 (ranks 4 and 4); no single move improves on that.
  CHECK(moved == std::vector<LayerRange>{{0, 1}, {1, 3}, {3, 6}, {6, 8}});
  CHECK(rank_loads(work, moved, interleaved, 2) == std::vector<double>{4, 4});
  // Without links the start is already even and stays.
  CHECK(rank_balanced_split(work, start, interleaved, 2) == start);
}

TEST_CASE("rank-balanced split: contiguous, never a larger rank load than its start, and no single cut move improves",
          "[chunked_plans]") {
  std::mt19937 random(11);
  std::uniform_real_distribution<double> time(0.1, 3.0);
  for (int trial = 0; trial < 80; ++trial) {
    const int ranks = 2 + trial % 3;
    const int v = 2 + trial % 2;
    const int chunks = ranks * v;
    const int layers = chunks + trial % 9;
    std::vector<double> work(static_cast<size_t>(layers));
    for (double& w : work) w = time(random);
    std::vector<int> rank_of;
    for (int c = 0; c < chunks; ++c)
      rank_of.push_back(trial % 2 == 0 ? c % ranks : (c < ranks ? c : 2 * ranks - 1 - c));  // v = 2: the V
    if (trial % 2 == 1 && v != 2) continue;
    const std::vector<LayerRange> start = balanced_split(work, chunks);
    const std::vector<LayerRange> even = rank_balanced_split(work, start, rank_of, ranks);
    check_covers(even, chunks, layers);
    const double reached = largest_load(rank_loads(work, even, rank_of, ranks));
    CHECK(reached <= largest_load(rank_loads(work, start, rank_of, ranks)) * (1 + 1e-12));
    // A local optimum: moving any one cut by one layer leaves the largest load no smaller.
    for (size_t c = 0; c + 1 < even.size(); ++c) {
      for (int step : {-1, 1}) {
        std::vector<LayerRange> moved = even;
        moved[c].end += step;
        moved[c + 1].begin += step;
        if (moved[c].size() < 1 || moved[c + 1].size() < 1) continue;
        CHECK(largest_load(rank_loads(work, moved, rank_of, ranks)) >= reached * (1 - 1e-12));
      }
    }
  }
}

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
      check_covers(ranges, chunks, layers);
      CHECK(largest(work, ranges) == Approx(brute_force(work, chunks)).epsilon(1e-12));
    }
  }
}

TEST_CASE("chunked candidates: p ranks x r whole-pipeline replicas on the first d = p r devices, v chunks each",
          "[chunked_plans]") {
  const Profile profile =
      make_uniform_profile(12, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(1000), Bytes(4000));
  const Topology topology = make_flat_topology(8, 100.0, Seconds::from_us(5));
  const auto layouts = [](const std::vector<Plan>& plans) {
    std::set<std::tuple<int, int, int>> found;  // (d, p, v)
    for (const Plan& plan : plans) found.insert({plan.num_workers(), plan.num_ranks(), plan.virtual_stages});
    return found;
  };
  const auto interleaved = chunked_candidates(profile, topology, Schedule::kInterleaved1F1B, 16);
  // d | M = 16 and d <= 8 devices: d = 8, 4, 2; p | d, p >= 2, v in {2, 3, 4}, p v <= 12 layers:
  // d 8: (2, 2) (2, 3) (2, 4) (4, 2) (4, 3); d 4: the same five; d 2: (2, 2) (2, 3) (2, 4).
  CHECK(layouts(interleaved) == std::set<std::tuple<int, int, int>>{{8, 2, 2},
                                                                    {8, 2, 3},
                                                                    {8, 2, 4},
                                                                    {8, 4, 2},
                                                                    {8, 4, 3},
                                                                    {4, 2, 2},
                                                                    {4, 2, 3},
                                                                    {4, 2, 4},
                                                                    {4, 4, 2},
                                                                    {4, 4, 3},
                                                                    {2, 2, 2},
                                                                    {2, 2, 3},
                                                                    {2, 2, 4}});
  int previous_workers = 8;
  for (const Plan& plan : interleaved) {
    INFO(stages_to_string(plan.stages) << " v = " << plan.virtual_stages);
    CHECK(plan.num_ranks() * plan.stages[0].replicas == plan.num_workers());
    CHECK(plan.num_workers() <= previous_workers);  // from the most workers down
    previous_workers = plan.num_workers();
    CHECK(check_plan(plan, profile, topology, "candidate").ok());
    std::set<int> devices;
    for (const StagePlan& stage : plan.stages) devices.insert(stage.devices.begin(), stage.devices.end());
    CHECK(devices.size() == static_cast<size_t>(plan.num_workers()));
    CHECK(*devices.rbegin() == plan.num_workers() - 1);  // the first d devices
    // Uniform layers: every rank carries 12 / p layers' work in both splits (the rank-balanced split
    // starts from the balanced one, whose chunks differ by at most one layer).
    std::vector<int> rank_layers(static_cast<size_t>(plan.num_ranks()), 0);
    for (int s = 0; s < plan.num_stages(); ++s) rank_layers[plan.rank_of(s)] += plan.stages[s].layers.size();
    for (int n : rank_layers) CHECK(n == 12 / plan.num_ranks());
  }
  // The V shapes: v = 2 and M >= 2 d. zbv with M = 8: d <= 4: (4, 2) (4, 4) (3, 3) (2, 2).
  CHECK(layouts(chunked_candidates(profile, topology, Schedule::kZbV, 8)) ==
        std::set<std::tuple<int, int, int>>{{4, 2, 2}, {4, 4, 2}, {3, 3, 2}, {2, 2, 2}});
  // dualpipev with M = 16: d <= 8 and 2 p <= 12 chunks: d 8: p 2, 4; d 6: p 2, 3, 6; d 5: p 5; d 4: p 2,
  // 4; d 3: p 3; d 2: p 2 (d 7 would need p 7, 14 chunks).
  const auto v_shapes = layouts(chunked_candidates(profile, topology, Schedule::kDualPipeV, 16));
  CHECK(v_shapes == std::set<std::tuple<int, int, int>>{{8, 2, 2},
                                                        {8, 4, 2},
                                                        {6, 2, 2},
                                                        {6, 3, 2},
                                                        {6, 6, 2},
                                                        {5, 5, 2},
                                                        {4, 2, 2},
                                                        {4, 4, 2},
                                                        {3, 3, 2},
                                                        {2, 2, 2}});
  // Too few microbatches for any layout: interleaved-1f1b with M = 1, zbv with M = 3.
  CHECK(chunked_candidates(profile, topology, Schedule::kInterleaved1F1B, 1).empty());
  CHECK(chunked_candidates(profile, topology, Schedule::kZbV, 3).empty());
}

TEST_CASE(
    "chunked schedules: a cluster larger than the microbatches can feed is planned on fewer devices, and "
    "too few microbatches is named",
    "[chunked_plans][planner]") {
  const Profile profile =
      make_uniform_profile(16, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(1 << 20), Bytes(1 << 22));
  const Topology topology = make_flat_topology(32, 100.0, Seconds::from_us(5));
  PlannerOptions options;
  options.schedule = Schedule::kInterleaved1F1B;
  options.microbatches = 16;  // 32 devices: no layout on all of them (M must be a multiple of p r)
  auto outcome = make_plan(profile, topology, options);
  REQUIRE(outcome.ok());
  CHECK(outcome->best.plan.num_workers() <= 16);
  CHECK(16 % outcome->best.plan.num_workers() == 0);
  options.schedule = Schedule::kZbV;
  options.microbatches = 3;
  outcome = make_plan(profile, topology, options);
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.error().message.find("no layout of zbv takes 3 microbatches") != std::string::npos);
  CHECK(outcome.error().message.find("at least 4") != std::string::npos);
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
