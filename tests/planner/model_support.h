// Helpers shared by the baton cost-model tests: tiny profiles and plans, and
// the simulator's steady state measured free of its start-up transient.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include "tests/catch_compat.h"

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/simulator.h"
#include "sim/topology.h"
#include "tests/sim/test_support.h"

namespace baton::model_testing {

struct LayerSpec {
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  int64_t output_bytes = 0;  // what the layer hands to the next one
  int64_t param_bytes = 0;
};

// A chain of layers, each consuming the previous one's output.
inline Profile chain_profile(const std::vector<LayerSpec>& specs) {
  Profile profile;
  profile.model = "chain";
  profile.device = "test";
  for (size_t i = 0; i < specs.size(); ++i) {
    Layer layer;
    layer.name = fmt::format("l{}", i);
    layer.forward = Seconds::from_ms(specs[i].forward_ms);
    layer.backward = Seconds::from_ms(specs[i].backward_ms);
    layer.output_bytes = Bytes(specs[i].output_bytes);
    layer.param_bytes = Bytes(specs[i].param_bytes);
    if (i > 0) layer.inputs = {static_cast<int>(i) - 1};
    profile.layers.push_back(layer);
  }
  return profile;
}

inline Plan placed_plan(const std::string& stages, Schedule schedule, int microbatches, const Topology& topology) {
  return baton::testing::make_plan(stages, schedule, microbatches, topology);
}

inline Metrics simulated_metrics(Plan plan, const Profile& profile, const Topology& topology, int minibatches) {
  plan.batches = minibatches;
  SimOptions options;
  options.record_trace = false;
  auto simulation = simulate_plan(plan, profile, topology, options);
  if (!simulation) FAIL(simulation.error().message);
  return simulation->metrics;
}

// The simulator's steady-state time per minibatch of a pipedream plan.
// The simulator's window [c_a, c_b] (c_k: end of minibatch k's backward on
// stage 0) may still hold some of the start-up transient, which fades only as
// 1 / (b - a) (up to 18% on the shipped data while the window began at NOAM). Two
// runs of N1 < N2 minibatches share their timeline up to c_{b1}, so the slope
//     (c_{b2} - c_{b1}) / (b2 - b1)
// cancels the transient and measures the steady state alone. N1 and N2 are
// 8 and 16 times pipedream_minibatches(plan).
inline Seconds steady_state_time(const Plan& plan, const Profile& profile, const Topology& topology) {
  const int base = pipedream_minibatches(plan);
  const Metrics first = simulated_metrics(plan, profile, topology, 8 * base);
  const Metrics second = simulated_metrics(plan, profile, topology, 16 * base);
  const auto window = [](const Metrics& m) { return std::round((m.window_end - m.window_start) / m.iteration_time); };
  return (second.window_end - first.window_end) / (window(second) - window(first));
}

// The shipped .json files of a repository folder (traces, topologies), sorted.
inline std::vector<std::filesystem::path> json_files(const std::string& folder) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(BATON_SOURCE_DIR) / folder))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace baton::model_testing
