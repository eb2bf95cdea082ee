// The planner's front door: from a profile, a topology and options to a chosen
// plan, its runners-up, and the baselines it is compared with.
//
// Two cost models:
// - baton (default): the placement-aware search of planner/baton_search.h,
//   candidates re-rated with planner/baton_model.h, for one schedule or for
//   every schedule and microbatch count (`schedule` unset = auto); with auto,
//   the best candidate of each (schedule, microbatch count) is simulated and
//   the fastest that fits memory wins.
// - pipedream: PipeDream's hierarchical DP (planner/pipedream_dp.h), whose T
//   matches the reference optimizer; the plan runs under the pipedream schedule.
// Expected failures (no split fits the memory limit) are Errors whose message
// names the smallest memory that would fit.
// Thread safety: pure; simulations run on the calling thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/baton_model.h"
#include "sim/metrics.h"
#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton {

enum class CostModel { kBaton, kPipeDream };
Result<CostModel> parse_cost_model(std::string_view name);

struct PlannerOptions {
  CostModel cost_model = CostModel::kBaton;
  bool straight = false;  // no stage replication
  // R > 0: activations and gradients cross cuts compressed R times.
  // pipedream cost model: also switches its activation terms on (as the reference).
  double activation_compression = 0.0;
  // Per device. Unset: the topology's device memory.
  std::optional<Bytes> memory_limit;
  std::optional<Schedule> schedule;  // unset: auto
  int microbatches = 0;              // 0: auto (flush schedules)
  int virtual_stages = 0;            // interleaved-1f1b's chunks per device; 0: 2, 3 and 4
  Optimizer optimizer = Optimizer::kAdam;
  // Called after each (schedule, microbatch count) the baton cost model has
  // searched and rated: what it was, how many are done of how many.
  std::function<void(std::string_view searched, int done, int total)> progress;
};

struct PlanChoice {
  Plan plan;
  PlanEstimate estimate;  // the cost model's own figures
  std::optional<Metrics> simulated;
  double time_per_sample_s() const;  // by the estimate
};

struct PlannerOutcome {
  PlanChoice best;
  std::vector<PlanChoice> runners_up;  // other schedules / microbatch counts, best first
  Seconds single_device_per_sample;    // the whole model as one stage (sim/stage_costs.h), per sample
  // Every device replicating the whole model, at the best plan's samples per
  // optimizer step (a flush schedule's M microbatches, at least one per
  // device; one per device against PipeDream's steady state).
  std::optional<PlanChoice> data_parallel;
  // pipedream cost model: the reference objective T and the layer order its
  // stages refer to (identity for chains).
  std::optional<Seconds> pipedream_time;
  std::vector<int> layer_order;
  Bytes memory_limit;
};

Result<PlannerOutcome> make_plan(const Profile& profile, const Topology& topology, const PlannerOptions& options);

}  // namespace baton
