// Text and JSON reports of simulated plans (used by `baton simulate`).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton::cli {

struct SimulatedPlan {
  Plan plan;
  std::string topology_name;
  int simulated_microbatches = 0;
  Simulation simulation;
};

// One run: a per-stage table and the headline figures. Several: one column per schedule.
std::string simulations_text(const std::vector<SimulatedPlan>& runs, const Profile& profile, const Topology& topology);
// One run: the metrics (sim/metrics.h: metrics_to_json) with "schedule", "plan",
// "device_memory_bytes", "fits" (every device's peak within it) and each of
// "devices" with its own "fits"; several: an array of those.
nlohmann::json simulations_json(const std::vector<SimulatedPlan>& runs, const Profile& profile,
                                const Topology& topology);

}  // namespace baton::cli
