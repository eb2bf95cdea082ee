// Helpers shared by the simulator tests.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "tests/catch_compat.h"

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton::testing {

inline bool close_rel(double actual, double expected, double tolerance = 1e-9) {
  const double scale = std::max(std::abs(expected), 1e-300);
  return std::abs(actual - expected) / scale <= tolerance;
}

// A plan over `profile` with the given stages string ("0-2x1,2-4x1").
inline Plan make_plan(const std::string& stages, Schedule schedule, int microbatches, const Topology& topology) {
  Plan plan;
  plan.schedule = schedule;
  plan.batches = microbatches;
  auto parsed = parse_stages(stages);
  REQUIRE(parsed.ok());
  plan.stages = *parsed;
  REQUIRE(assign_devices(plan, topology).ok());
  return plan;
}

// One layer per stage, uniform stages, evenly split stages string "0-1,1-2,...".
inline std::string one_layer_per_stage(int stages) {
  std::string text;
  for (int s = 0; s < stages; ++s) text += (s ? "," : "") + std::to_string(s) + "-" + std::to_string(s + 1);
  return text;
}

inline Simulation simulate_ok(const Plan& plan, const Profile& profile, const Topology& topology,
                              SimOptions options = {}) {
  auto result = simulate_plan(plan, profile, topology, options);
  if (!result) FAIL(result.error().message);
  return std::move(result).value();
}

// The zero-bubble paper's cost in seconds (sim/trace.h: longest_compute_span).
inline double longest_stage_span(const Simulation& sim) { return longest_compute_span(sim.trace).value; }

}  // namespace baton::testing
