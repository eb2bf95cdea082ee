// What-if sweep speed: simulated configurations per second for VGG-16
// (traces/vgg16_v100_mb32.json, 39 layers) on PipeDream's cluster A, over a grid
// of inter-server bandwidths x server counts x microbatch counts x 4 schedules,
// with the balanced 4-stage split. Usage: bench_sweep REPO_ROOT [threads...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "planner/sweep.h"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace baton;
  const std::string root = argc > 1 ? argv[1] : ".";
  auto profile = parse_profile(slurp(root + "/traces/vgg16_v100_mb32.json"), "vgg16");
  auto topology = parse_topology(slurp(root + "/topologies/pipedream_a.json"), "pipedream_a");
  if (!profile || !topology) {
    std::fprintf(stderr, "cannot load the shipped VGG-16 profile or cluster A from %s\n", root.c_str());
    return 2;
  }
  SweepSpec spec;
  SweepAxis bandwidth{"bandwidth_gbps.1", {}};
  for (int b = 1; b <= 50; ++b) bandwidth.values.push_back(b);
  spec.axes = {bandwidth, SweepAxis{"servers", {1, 2, 3, 4}}, SweepAxis{"microbatches", {16, 32, 64}}};
  spec.schedules = {Schedule::kPipeDream, Schedule::kOneFOneB, Schedule::kGPipe, Schedule::kDataParallel};
  std::printf("| threads | configurations | seconds | configurations/s |\n|---|---|---|---|\n");
  for (int a = 2; a < std::max(argc, 3); ++a) {
    spec.threads = argc > 2 ? std::atoi(argv[a]) : 1;
    const auto start = std::chrono::steady_clock::now();
    auto points = run_sweep(*profile, *topology, spec, [](size_t, size_t) {});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!points) return 1;
    std::printf("| %d | %zu | %.3f | %.0f |\n", spec.threads, points->size(), seconds, double(points->size()) / seconds);
  }
  return 0;
}
