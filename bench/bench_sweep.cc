// What-if sweep speed for VGG-16 (traces/vgg16_v100_mb32.json, 39 layers) on
// PipeDream's cluster A, two tables:
//   1. simulation alone: 50 inter-server bandwidths x 4 server counts x 3
//      microbatch counts x 4 schedules, each split into 4 balanced stages
//      (`baton sweep --split balanced`), so no planning is timed;
//   2. the README's example with `baton sweep`'s default split, the planner per
//      point: bandwidths 1, 10, 25, 100 Gb/s x 1, 2, 4 servers x 4 schedules.
// Usage: bench_sweep REPO_ROOT [threads...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "planner/sweep.h"

int main(int argc, char** argv) {
  using namespace baton;
  const std::string root = argc > 1 ? argv[1] : ".";
  auto profile = parse_profile(bench::read_text(root + "/traces/vgg16_v100_mb32.json"), "vgg16");
  auto topology = parse_topology(bench::read_text(root + "/topologies/pipedream_a.json"), "pipedream_a");
  if (!profile || !topology) {
    std::fprintf(stderr, "cannot load the shipped VGG-16 profile or cluster A from %s\n", root.c_str());
    return 2;
  }
  const std::vector<Schedule> schedules = {Schedule::kPipeDream, Schedule::kOneFOneB, Schedule::kGPipe,
                                           Schedule::kDataParallel};
  SweepSpec balanced;
  balanced.split = SplitStrategy::kBalanced;
  SweepAxis bandwidth{"bandwidth_gbps.1", {}};
  for (int b = 1; b <= 50; ++b) bandwidth.values.push_back(b);
  balanced.axes = {bandwidth, SweepAxis{"servers", {1, 2, 3, 4}}, SweepAxis{"microbatches", {16, 32, 64}}};
  balanced.schedules = schedules;
  SweepSpec planned;
  planned.split = SplitStrategy::kPlan;
  planned.axes = {SweepAxis{"bandwidth_gbps.1", {1, 10, 25, 100}}, SweepAxis{"servers", {1, 2, 4}}};
  planned.schedules = schedules;
  std::vector<int> thread_counts;
  for (int a = 2; a < argc; ++a) thread_counts.push_back(std::atoi(argv[a]));
  if (thread_counts.empty()) thread_counts.push_back(1);
  std::printf("| split | threads | configurations | seconds | configurations/s |\n|---|---|---|---|---|\n");
  for (SweepSpec* spec : {&balanced, &planned}) {
    for (int threads : thread_counts) {
      spec->threads = threads;
      const auto start = std::chrono::steady_clock::now();
      auto points = run_sweep(*profile, *topology, *spec, [](size_t, size_t) {});
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!points) return 1;
      std::printf("| %s | %d | %zu | %.3f | %.0f |\n", spec == &balanced ? "4 balanced stages" : "planned per point",
                  threads, points->size(), seconds, double(points->size()) / seconds);
    }
  }
  return 0;
}
