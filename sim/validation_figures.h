// The figures `baton validate` (tools/cmd_validate.cc) makes from what it
// measured and simulated, apart from the processes and files that produce
// them:
// - the device under load, in slices: a slice's speed is the compute of a
//   profile measured alone / that of one measured with every rank profiling
//   at once, its noise that loaded profile's compute_noise; the slices pooled
//   give the device's compute_noise (all their samples) and relative_speed
//   (their median: one slice that met a slow phase of a shared machine moves
//   it little; validate records it, and predicts each schedule at its run's
//   own speed, run_speed, from the run's compute against its slice's);
// - the prediction: one iteration of the plan's Program as the executor runs
//   it (SGD), simulated once without noise and `samples` times with the
//   topology's noise, of which the q-quantile is the figure;
// - the measurement: quantiles of the run's step wall times after the first
//   (step 0 pays allocations and first connections);
// - whether the device ran during a run at the speed its slice measured just
//   before: the run's compute per step against what the slice expects;
// - how long to run: at least a number of steps, and enough for a wall time by
//   the prediction; pipedream microbatches rounded to whole rounds.
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/simulator.h"
#include "sim/topology.h"
#include "sim/units.h"

namespace baton {

struct LoadedSlice {
  double speed = 1.0;         // compute alone / compute loaded (< 1: slower under load)
  std::vector<double> noise;  // the loaded profile's compute_noise (factors)
};

// Forward plus backward of every layer, one microbatch.
Seconds compute_per_microbatch(const Profile& profile);
// compute_per_microbatch(alone) / compute_per_microbatch(loaded).
double loaded_speed(const Profile& alone, const Profile& loaded);
// `device` with relative_speed the median of the slices' speeds and
// compute_noise all the slices' samples, sorted (empty where no slice has
// any). `slices` must not be empty.
DeviceType pooled_device(const DeviceType& device, const std::vector<LoadedSlice>& slices);

// One iteration of build_program(plan) with SGD's optimizer state, without
// noise, its trace recorded.
Result<Simulation> simulate_iteration(const Plan& plan, const Profile& profile, const Topology& topology);

// What a step of a multi-process run (exec/run_gloo.cc) measures beyond the
// Program's makespan: each step is a world barrier, the actions, a world
// barrier, and its wall time runs from rank 0 leaving the first barrier to
// leaving the second. Gloo's barrier is a dissemination barrier, ceil(log2
// n) rounds of one message among n ranks; the wall holds the rounds of the
// barrier that ends the step after the last rank's last action, and rank 0's
// lead out of the barrier that starts it (it may leave up to as many rounds
// before the others start): 2 ceil(log2 n) rounds, each the step latency of a
// collective on the innermost level that spans the n workers (its
// allreduce_latency, which `calibrate` measures under load, else its
// latency). Zero for one worker and for workers that are streams of one
// device (level 0's shared_compute: the threads backend, whose steps have no
// barrier). Workers are devices 0 .. n - 1.
Seconds executor_step_barrier(const Topology& topology, int workers);

struct IterationPrediction {
  Simulation deterministic;  // simulate_iteration's
  Seconds step_barrier;      // executor_step_barrier of the plan's workers
  // The q-quantile of the noisy makespans (without noise, deterministic's
  // makespan), plus step_barrier: the step wall time the run measures.
  Seconds at_quantile;
  Seconds plain() const { return deterministic.metrics.makespan + step_barrier; }  // without noise
};
// The q-quantile (sim/stats.h) of `samples` noisy simulations of the
// iteration (seeds 1 .. samples), beside the deterministic one; both with
// the executor's step barrier. With no samples, only the deterministic one
// (at_quantile its makespan plus the barrier).
Result<IterationPrediction> predict_iteration(const Plan& plan, const Profile& profile, const Topology& topology,
                                              double q, int samples);

// The compute time a run's workers are expected to spend per step (summed over
// workers) at a slice's speed and noise: the compute actions (F, B, I, W and
// STEP) of simulate_iteration on `topology` with the slice's relative_speed,
// times the mean of the slice's noise factors (a noisy draw's expected value;
// 1 without noise).
Result<Seconds> expected_compute_per_step(const Plan& plan, const Profile& profile, const Topology& topology,
                                          const LoadedSlice& slice);

// The speed a run had, from its compute alone: `step_compute` holds each
// worker's compute time per step (in step order); a step's compute is its
// workers' sum; after the first step (as step_times_after_first), its
// q-quantile X against `expected`, the compute a step takes at `speed`
// (expected_compute_per_step), gives speed x expected / X. On a machine whose
// speed changes from second to second (a shared one), the run's steps met
// other speeds than any slice before it; the q-quantile of their wall times
// is the wall time at the q-quantile of their compute, since a step is slower
// the slower its compute. An error when a worker has no steps or `expected`
// is not positive.
Result<double> run_speed(const std::vector<std::vector<Seconds>>& step_compute, Seconds expected, double speed,
                         double q);

// The prediction of a run from the speed each of its workers had in each of
// its steps (a shared machine's cores change speed from second to second,
// one at a time): worker w's compute per step on `topology` (the compute
// actions of simulate_iteration, times the mean of the device's compute noise)
// is held against step_compute[w][k], its measured compute in step k, and for
// each step after the first (as step_times_after_first) one simulation of the
// iteration runs with those factors as SimOptions::worker_slowdown, with the
// topology's noise drawn with seed k + 1 (deterministic without noise), and
// with `action_overhead`, when given, each worker's own time before each of its
// actions (the executor's: SimOptions::worker_action_overhead). Returns the
// q-quantile of those makespans, without the step barrier. An error when
// step_compute does not hold one list per worker or a list is empty, or
// action_overhead is neither empty nor one time >= 0 per worker.
Result<Seconds> predict_run(const Plan& plan, const Profile& profile, const Topology& topology,
                            const std::vector<std::vector<Seconds>>& step_compute, double q,
                            const std::vector<Seconds>& action_overhead = {});

struct StepTimes {
  Seconds at_quantile;  // the q-quantile
  Seconds median;
  Seconds min;
  Seconds max;
};
// Quantiles of `walls` (one wall time per step, in step order) after the
// first; a single step is kept. `walls` must not be empty.
StepTimes step_times_after_first(std::vector<Seconds> walls, double q);

// Steps to run: at least `min_steps`, and 1 + ceil(run_time / estimate) (the
// first step is not measured) so the measured ones take about `run_time`.
int steps_to_run(int min_steps, Seconds run_time, Seconds estimate);

// plan.batches rounded up to a multiple of pipedream_period(plan) (the
// lcm of the stages' replicas): pipedream's executor runs every replica of a
// stage the same number of rounds.
int whole_pipedream_rounds(const Plan& plan);

}  // namespace baton
