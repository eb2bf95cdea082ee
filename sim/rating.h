// Rating a plan by simulating its Program: the planner's single source of
// truth for how fast a candidate runs and how much memory it holds. Whatever
// a schedule generator emits is what gets rated; nothing here knows one
// schedule from another beyond runs_steady_state (sim/schedules.h).
//
// - A flush schedule: one iteration of plan.batches, simulated once;
//   the time is its makespan (Metrics::iteration_time).
// - A schedule that runs a steady state: the time per minibatch of the run
//   once it repeats. A max-plus system (which the engine is: every action's
//   end is a max of earlier ends plus durations) becomes periodic after a
//   finite start-up: with c_k the end of minibatch k's backward on stage 0,
//   there are p (a multiple of R, the lcm of the replica counts) and lambda
//   with c_{k+p} = c_k + p lambda for every k past the start-up. rate_plan
//   simulates N = 4 x max(pipedream_minibatches(plan), D) minibatches and
//   looks, in the run before its drain (the last D = (NOAM + 1) R
//   minibatches: the drain reaches back NOAM rounds of stage 0's replicas,
//   R minibatches each; and at least the last quarter: on long pipelines the
//   stages empty one after another and speed stage 0 up well before its last
//   NOAM rounds), for the
//   smallest p = K R (K <= kMaxRepeatPeriods) for which c_{k+p} - c_k is the
//   same (relative 1e-9) for every k of the run's third quarter (and at
//   least three repeats); lambda is then exact.
//   Links shared by several workers can make the run repeat only every few
//   periods (K > 1), or settle only slowly. Not found: once more with 16 N
//   minibatches, then the slope over the whole periods of that run's third
//   quarter, flagged not exact (the agreement test,
//   tests/planner/baton_model_agreement_test.cc, holds it to 2% of the slope
//   of runs 8 and 16 times as long as N).
// Cost: one simulation of 4 N minibatches, linear in the Program's actions;
// 16 N more when the first does not repeat.
// Thread safety: pure.
#pragma once

#include <optional>
#include <vector>

#include "sim/metrics.h"
#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton {

inline constexpr int kMaxRepeatPeriods = 12;

struct Rating {
  Metrics metrics;         // of the run that was rated (memory peaks, busy time, window)
  Seconds iteration_time;  // flush: one iteration; steady state: time per minibatch
  double samples_per_iteration = 0.0;
  double throughput_samples_per_s = 0.0;
  // Steady state: the run was seen to repeat (iteration_time is exact); always
  // true for flush schedules.
  bool exact = true;
  int repeat_minibatches = 0;  // steady state: p, the minibatches after which the run repeats
  int simulated_minibatches = 0;
};

// Precondition: check_plan(plan, profile, topology) holds. Fails (as a value)
// when the Program deadlocks.
Result<Rating> rate_plan(const Plan& plan, const Profile& profile, const Topology& topology, Optimizer optimizer);

// The steady-state time per minibatch read off stage-0 completion times (the
// test above); nullopt when they do not repeat with p = K x period, K <=
// kMaxRepeatPeriods, over the third quarter of the run (at least three
// repeats), and not within `drain` minibatches of its end. Exposed for tests.
struct Repeat {
  Seconds per_minibatch;
  int minibatches = 0;  // p
};
std::optional<Repeat> find_repeat(const std::vector<Seconds>& completions, int64_t period, int drain);

}  // namespace baton
