// baton's cost model: a placed plan rated by simulating its Program
// (sim/rating.h), so that the planner and the simulator share one definition
// of every schedule: its order, warm-up, link use and memory come from the
// schedule's generator and the engine alone, never from formulas restated
// here.
//
// Time: Rating::iteration_time, a flush schedule's iteration or a steady
// state's exact time per minibatch (once the run repeats).
// Memory per worker: the simulator's peak (sim/memory_tracker.h); per stage the
// largest of its workers'.
// Per stage s with r_s replicas on devices D_s (tF, tB per microbatch):
//   allreduce_s = Network::allreduce_time(D_s, params_s)   (0 when r_s = 1)
//   period_s    = the device time the stage's first worker needs per
//                 microbatch of the run, counted from its actions
//                 (sim/worker_demand.h): (tF x forwards + tB x backwards +
//                 allreduce_s x all-reduces) / microbatches simulated
// Bottleneck: the stage with the largest period. When its period is within
// 2% of the time per microbatch the plan achieves, its own work sets the
// pace: "compute", or "all-reduce" when the all-reduce is the larger part of
// the period. Otherwise the workers wait on one another: "communication or
// pipeline depth" (transfers, queued links, or a cycle through several
// stages), and "deadlock" when the Program cannot run.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/metrics.h"
#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton {

struct StageEstimate {
  Seconds forward;
  Seconds backward;
  Seconds allreduce;           // one gradient all-reduce among the replicas
  Seconds period;              // device time per microbatch of the run (see above)
  Seconds allreduce_share;     // the part of period spent in all-reduces
  double busy_fraction = 0.0;  // of its first worker in the measured window
  int weight_versions = 1;     // peak, of its first worker
  int inflight = 1;            // microbatches whose activations it holds at peak
  Bytes weights;
  Bytes activations;  // peak stashed activations, of its first worker
  Bytes memory;       // peak per worker, the largest of the stage's workers
};

struct PlanEstimate {
  std::vector<StageEstimate> stages;
  // Steady state: time per minibatch; flush: one iteration.
  Seconds iteration_time;
  double samples_per_iteration = 0;
  double throughput_samples_per_s = 0;
  int bottleneck_stage = 0;
  // "compute", "all-reduce", "communication or pipeline depth"; "deadlock"
  // when the schedule cannot run.
  std::string bottleneck;
  // false when the Program deadlocks (iteration_time is then infinite).
  bool rated = true;
  // Steady state: the run was seen to repeat, so iteration_time is exact
  // (sim/rating.h); always true for flush schedules.
  bool exact = true;
  Bytes peak_memory;
  Metrics simulated;  // the rated run's metrics
};

// Precondition: check_plan(plan, profile, topology) holds (devices assigned).
PlanEstimate estimate_plan(const Profile& profile, const Topology& topology, const Plan& plan, Optimizer optimizer);

}  // namespace baton
