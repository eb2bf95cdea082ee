// The discrete-event simulator: interprets a Program against stage costs and a
// topology and predicts its timeline (a Trace) and Metrics.
//
// Model (see docs/SIMULATOR.md, "Devices and compute" and "Communication"):
// - every device has one compute stream; the workers placed on one device
//   share it, first come first served in simulated time (ties: lower worker);
//   so do the workers on the devices of one unit of a level 0 marked
//   shared_compute (streams of one GPU, sim/topology.h), unless its
//   shared_speedup is above 1: then they compute at once, sharing that
//   capacity and their host's issuing (Level::shared_speedup);
// - communication runs beside compute: SEND is issued without blocking the
//   worker, transfers cross the topology as `Network` states, RECV blocks the
//   worker until the data is there;
// - ALLREDUCE starts when the last replica of the stage has issued it and lasts
//   Network::allreduce_time(stage devices, stage params); STEP waits for it;
//   STEP then runs on the compute stream for the stage's optimizer time
//   (StageCost::step, zero unless the profile gives optimizer_ms);
// - memory is followed action by action (MemoryTracker).
//
// Measurement window:
// - flush schedules (1f1b, gpipe, dp): the whole run is one iteration.
// - pipedream: with N minibatches, NOAM = ceil(workers / replicas of stage 0)
//   and R = lcm of the replica counts, c_k = end of minibatch k's backward on
//   stage 0. The window is [c_a, c_b] with a = NOAM + m and b the largest
//   index <= N - NOAM - 1 - m with (b - a) a multiple of R, where the margin
//   m = R when R > 1 and N >= 2 NOAM + 3 R + 1 (else 0): it leaves out
//   warm-up and cool-down, and with replicas also their first round (every
//   replica's first minibatch) and their last. Time per minibatch =
//   (c_b - c_a) / (b - a); busy time and bubbles are measured inside the
//   window. `simulate_plan` runs `pipedream_minibatches(plan)` minibatches.
//
// Deterministic: same inputs, bit-identical outputs. No globals: any number of
// simulations may run at once on different threads.
#pragma once

#include <vector>

#include "sim/metrics.h"
#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/program.h"
#include "sim/result.h"
#include "sim/stage_costs.h"
#include "sim/topology.h"
#include "sim/trace.h"

namespace baton {

enum class Optimizer { kSgd, kMomentum, kAdam };
// Optimizer state per parameter byte: SGD 0, momentum 1, Adam 2.
double optimizer_state_factor(Optimizer optimizer);
Result<Optimizer> parse_optimizer(std::string_view name);

struct SimOptions {
  // Which optimizer's state counts in memory. Default Adam (2 x params).
  Optimizer optimizer = Optimizer::kAdam;
  // Record one Span per action (costs time and memory; metrics don't need it).
  bool record_trace = true;
  // Nonzero: a noisy machine, drawn with this seed from the topology's
  // DeviceType::compute_noise (every compute action takes its cost times the
  // mean of one drawn factor per layer of its stage) and allreduce_noise
  // (every all-reduce takes one drawn extra time). 0: deterministic.
  uint64_t noise_seed = 0;
  // simulate_plan without a trace: when the replicas are interchangeable,
  // simulate one of them (its all-reduces still span all replicas), which
  // gives every figure of the metrics but the per-worker list (replica 0's
  // workers only) and the action count (replica 0's) exactly, in 1 / d of the
  // time. Interchangeable: a flush schedule, no noise, every stage with the
  // same d >= 2 replicas and a number of microbatches divisible by d (so
  // replica j runs microbatches j, j + d, ... on every stage and talks only to
  // replica j of the next and previous stages), and no link of sim/network.h
  // that carries the transfers of two replicas (their timelines are then
  // equal). Otherwise, and with a trace, every replica is simulated.
  bool one_replica = false;
  // Without a trace or noise, on a flush schedule: when the run's state
  // repeats itself, shifted by a whole number of microbatches and a span of
  // time, and the actions ahead repeat likewise, jump over the repeats
  // instead of simulating them (sim/engine_repeats.cc). Every figure of the
  // metrics is that of the full run (to rounding: within 1e-9 relative).
  bool skip_repeats = false;
  // Nonempty (one factor > 0 per worker of the Program): worker w's compute
  // actions take their cost times worker_slowdown[w], the workers of a shared
  // machine at different speeds (validate replays each measured step's; see
  // sim/validation_figures.h, predict_run). Replicas are then not
  // interchangeable (one_replica is ignored).
  std::vector<double> worker_slowdown = {};
  // Nonempty (one time >= 0 per worker of the Program): worker w spends
  // worker_action_overhead[w] of its own before each action it runs, compute
  // or not: an executor's dispatch and bookkeeping and the calling thread's
  // share of issuing a transfer, time that is neither compute nor waiting
  // (exec::WorkerStats::overhead; validate replays each run with its own, see
  // sim/validation_figures.h, predict_run). It holds the worker, not its
  // device. Replicas are then not interchangeable (one_replica is ignored),
  // and repeats are not skipped.
  std::vector<Seconds> worker_action_overhead = {};
};

struct Simulation {
  Metrics metrics;
  Trace trace;  // empty spans unless SimOptions::record_trace
  // End of each microbatch's last backward on stage 0 (index: microbatch),
  // what the steady-state window and sim/rating.h measure.
  std::vector<Seconds> stage0_completion;
  bool one_replica = false;  // one replica stood for all (SimOptions::one_replica)
};

// Whether the plan's replicas are interchangeable on `topology` (SimOptions::one_replica).
bool replicas_interchangeable(const Plan& plan, const Topology& topology);
// Whether a simulation with `options` runs one replica for all: asked for,
// without a trace or noise, and the replicas interchangeable.
bool simulates_one_replica(const Plan& plan, const Topology& topology, const SimOptions& options);

// Simulates `program`; `costs[s]` describes stage s; workers sit on the
// devices given in program.workers. Fails (as a value) on a deadlock.
Result<Simulation> simulate_program(const Program& program, const std::vector<StageCost>& costs,
                                    const Topology& topology, int microbatch_size, const SimOptions& options);

// The makespans of `samples` simulations of `program` on a noisy machine: the
// topology's compute and all-reduce noise drawn with seeds first_seed,
// first_seed + 1, ... (no trace is recorded). Without noise every sample is
// the deterministic makespan. Fails (as a value) on a deadlock.
Result<std::vector<Seconds>> noisy_makespans(const Program& program, const std::vector<StageCost>& costs,
                                             const Topology& topology, int microbatch_size, const SimOptions& options,
                                             int samples, uint64_t first_seed = 1);

// Fewest minibatches that give pipedream a steady-state window: 4 NOAM + 3 R.
int min_pipedream_minibatches(const Plan& plan);
// The largest period R the simulator measures a steady state over.
inline constexpr int64_t kMaxSteadyStatePeriod = 4096;
// R: the lcm of the stages' replica counts (capped at kMaxSteadyStatePeriod).
int64_t pipedream_period(const Plan& plan);
// The minibatches a pipedream simulation runs: at least min_pipedream_minibatches,
// rounded up to a multiple of R so every replica of a stage runs as many
// minibatches (and all-reduces) as its peers.
int pipedream_minibatches(const Plan& plan);

// The microbatches a simulation of `plan` runs: pipedream_minibatches under a
// schedule that runs a steady state (runs_steady_state), else plan.batches.
int simulated_microbatches(const Plan& plan);

// Checks the plan, builds its Program (with simulated_microbatches(plan)
// microbatches) and simulates it. `simulated`, when given, receives that
// Program (one replica's when SimOptions::one_replica applied).
Result<Simulation> simulate_plan(const Plan& plan, const Profile& profile, const Topology& topology,
                                 const SimOptions& options, Program* simulated = nullptr);

}  // namespace baton
