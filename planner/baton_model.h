// baton's own cost model: an analytic estimate of a placed plan's speed and
// memory that agrees with the simulator (sim/simulator.h, docs/SIMULATOR.md)
// rather than with PipeDream's optimizer.
//
// Per stage s with r_s replicas on devices D_s (tF, tB per microbatch):
//   compute_s   = tF_s + tB_s
//   allreduce_s = Network::allreduce_time(D_s, params_s)   (0 when r_s = 1)
//   pipedream:  period_s = (compute_s + allreduce_s) / r_s  (each replica all-reduces
//               and steps after every backward; STEP waits for the collective)
//   flush:      period_s = compute_s / r_s                 (one all-reduce per iteration)
// Links: every activation sent forward and gradient sent back is booked on its
// directional links exactly as the simulator routes it (round robin over
// replicas); link_load = max over links of bytes per minibatch / bandwidth.
// Pipeline depth: a worker of stage s keeps w_s + 1 of its microbatches in
// flight (w_s = its warm-up forwards), and one microbatch needs path_s =
// sum_{j>=s} compute_j + sum of the transfers on the way down and back, so
//   depth_s = path_s / ((w_s + 1) r_s).
// pipedream time per minibatch T = max(max_s period_s, link_load, max_s depth_s).
// flush iteration (M microbatches):
//   steady = max( max_s (ceil(M / r_s) - 1) compute_s,  (M - 1) link_load )
//   iteration = max_s [ steady + path_0 - back_s + allreduce_s ]
// where back_s is the backward path from stage s down to stage 0 (stage s ends
// that much before stage 0 does, then runs its all-reduce).
// Memory per worker mirrors sim/memory_tracker.h: params x versions + params
// (gradients) + params x optimizer factor + stash x in-flight microbatches.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton {

struct StageEstimate {
  Seconds forward;
  Seconds backward;
  Seconds allreduce;      // one gradient all-reduce among the replicas
  Seconds period;         // time per microbatch this stage needs (see above)
  Seconds link_time;      // busiest link this stage sends on, per microbatch
  Seconds depth;          // pipeline-depth bound (pipedream)
  int weight_versions = 1;
  int inflight = 1;       // microbatches whose activations it holds at peak
  Bytes weights;
  Bytes activations;
  Bytes memory;           // peak per worker
};

struct PlanEstimate {
  std::vector<StageEstimate> stages;
  // pipedream: steady-state time per minibatch; flush: one iteration.
  Seconds iteration_time;
  double samples_per_iteration = 0;
  double throughput_samples_per_s = 0;
  Seconds link_load;
  int bottleneck_stage = 0;
  std::string bottleneck;  // "compute", "all-reduce", "link", "pipeline depth"
  Bytes peak_memory;
};

// Precondition: check_plan(plan, profile, topology) holds (devices assigned).
PlanEstimate estimate_plan(const Profile& profile, const Topology& topology, const Plan& plan,
                           Optimizer optimizer);

// Pieces the search reuses.
// Warm-up forwards of stage s and its peak in-flight microbatches under `schedule`.
int inflight_microbatches(Schedule schedule, int downstream_workers, int replicas, int microbatches);
Bytes stage_memory(Schedule schedule, Bytes params, Bytes stash, int downstream_workers, int replicas,
                   int microbatches, Optimizer optimizer);

}  // namespace baton
