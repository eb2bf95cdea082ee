// baton's own cost model: an analytic estimate of a placed plan's speed and
// memory that agrees with the simulator (sim/simulator.h, docs/SIMULATOR.md)
// rather than with PipeDream's optimizer. It never runs the simulator.
//
// Time. The plan is written as a timed event graph (planner/event_graph.h:
// the forwards, backwards and all-reduce joins of every worker in the
// generator's order, data edges through transfer nodes of latency + bytes /
// bandwidth), every directional link is made a FIFO server in the order its
// transfers are issued (planner/link_servers.h), and the graph is solved in
// max-plus algebra (planner/max_plus.h):
//   pipedream: T = max( lambda / R,  link_load,  device_load )
//     lambda      = maximum cycle mean of the graph of one period of R = lcm_s r_s
//                   minibatches: the period of the steady state (when the links'
//                   order repeats every K periods: of the graph of K periods, / K)
//     link_load   = max over directional links of the seconds per minibatch they
//                   carry (each activation and gradient booked on its links as the
//                   simulator routes it, round robin over replicas); with the links
//                   as servers lambda / R already holds it, it stays as a bound
//     device_load = max over devices of the compute per minibatch of the workers
//                   placed on them (devices shared by several workers are not in
//                   the graph)
//   flush (1f1b, gpipe, dp), one iteration of M microbatches:
//     T = max( longest path of the iteration's DAG,  M x link_load,  M x device_load )
// The bottleneck names the stage carrying most of the critical cycle (or path)
// and what the cycle is made of: "compute" (one stage's own work), "all-reduce",
// "transfer" (time on the wire and latency outweigh compute), "link" (mostly
// transfers queued one after another on a link), "pipeline depth" (a cycle or
// path through several stages); or the bound that binds: "link", "device".
// Accuracy: exact against the simulator (devices not shared) when the links'
// serving order is the one a run from the start settles into, which is found
// for every shipped pair (planner/link_servers.h, planner/link_order.h);
// otherwise an order from a fixed point, reported through link_order_settled
// and contended_links.
//
// Per stage s with r_s replicas on devices D_s (tF, tB per microbatch):
//   allreduce_s = Network::allreduce_time(D_s, params_s)   (0 when r_s = 1)
//   pipedream:  period_s = (tF_s + tB_s + allreduce_s) / r_s  (the stage's own cycle:
//               each replica all-reduces and steps after every backward)
//   flush:      period_s = (tF_s + tB_s) / r_s
// Memory per worker mirrors sim/memory_tracker.h: params x versions + params
// (gradients) + params x optimizer factor + stash x in-flight microbatches.
// Cost: following the run (about linear in 32 to 256 periods of the graph's
// 4 S R nodes), then one max-plus solve on K <= 12 periods; or one solve per
// link-order round (at most kMaxOrderRounds) when the run does not repeat.
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
  Seconds period;         // time per microbatch this stage needs alone (see above)
  Seconds link_time;      // busiest link this stage sends on, per microbatch
  // The critical cycle's time per minibatch (pipedream) or the critical path
  // (flush) when it runs through this stage and spans several stages; else 0.
  Seconds depth;
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
  Seconds link_load;       // busiest link, seconds per minibatch (microbatch for flush)
  // pipedream: maximum cycle mean / R; flush: longest path of the iteration.
  Seconds critical_time;
  int bottleneck_stage = 0;
  // "compute", "all-reduce", "transfer", "link", "pipeline depth", "device";
  // "deadlock" when the schedule cannot run.
  std::string bottleneck;
  // false when the event graph was not solved: the lcm of the replica counts
  // exceeds kMaxEventGraphPeriod (iteration_time is then the link and device
  // bounds only) or the schedule deadlocks (iteration_time is infinite).
  bool modelled = true;
  // The order in which shared links serve transfers (planner/link_servers.h):
  // settled when it is the run's repeating order or a fixed point; contended
  // when a link fed by several workers queues in the steady state (then the
  // order, and the period, depend on how the run started).
  bool link_order_settled = true;
  int contended_links = 0;
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
