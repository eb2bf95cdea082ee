// Recorded runs of the executor predicted again: the folders `baton validate`
// writes (OUT/profile.json and topology.json, then OUT/<schedule>/plan.json
// and run.json per schedule) read back and each schedule predicted by the
// current simulator as validate predicts it, against the run's measured
// iteration (the median of its step wall times after the first): where
// report.json gives the schedule a slice's speed (the CPU's validate) and the
// run recorded its workers' compute per step, the run replayed step by step
// at that speed (sim/validation_figures.h: predict_run, plus the step
// barrier); otherwise predict_iteration's median of noisy simulations.
// So a change of the model can be held against measurements made on a machine
// that is no longer there (data/measured/ keeps the H100's).
//
// call_cost_of_run: a profile's per-call cost (sim/profile.h) measured from a
// run of one worker holding the whole model, as `profile measure --whole-pass`
// measures it from its own passes: per_call_cost with the run's mean forward,
// mean backward and its optimizer step (the trace of one step) as the whole
// passes, never below zero.
// Errors name the file. Thread safety: pure functions (they read files).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/units.h"

namespace baton {

struct ReplayedRun {
  std::string set;  // the validate folder's name
  Plan plan;
  Seconds measured;   // median step wall time after the first
  Seconds predicted;  // median of the noisy simulations

  // (measured - predicted) / predicted, in percent, validate's sign.
  double error_pct() const { return (measured / predicted - 1.0) * 100.0; }
};

struct ReplayOptions {
  int noise_samples = 200;  // validate's
  // Step-by-step replays also give each worker's actions its executor
  // overhead per action in the run (SimOptions::worker_action_overhead),
  // which validate does not (bench/RESULTS.md, "The executor's own time per
  // action").
  bool executor_overhead = false;
  // Runs validate measured no slice for (a GPU's, or one on a given
  // topology) replayed step by step too, at the speeds their workers had
  // against the topology's speed (validate's predicted_at_run_speeds_s),
  // where the run recorded its compute per step; else predicted as
  // validate predicts them (the noisy simulations).
  bool at_run_speeds = false;
  // Where present for "<model>-<microbatch size>", the profile's call_cost is
  // replaced by it before predicting.
  std::map<std::string, CallCost> call_costs;
  // Where present for "<model>-<microbatch size>" and the topology's level 0
  // is shared_compute, its shared_speedup is replaced by it before predicting.
  std::map<std::string, double> shared_speedups;
};

// Every schedule of every validate folder under `root` (folders of `root` that
// hold a profile.json), in name order.
Result<std::vector<ReplayedRun>> replay_validations(const std::filesystem::path& root, const ReplayOptions& options);

// The GPU's throughput with its streams saturated, per "<model>-<microbatch
// size>": of the profiles of the validate folders under `root` that measured
// shared_streams, the speedup of the one with the most streams (the largest
// where several have as many). Empty where none measured it.
Result<std::map<std::string, double>> saturated_speedups(const std::filesystem::path& root);

// The call cost of `profile`'s model from the Chrome trace of one step of one
// worker running all its layers as one stage.
Result<CallCost> call_cost_of_run(const Profile& profile, const std::filesystem::path& trace);

struct ReplaySummary {
  int runs = 0;
  double mean_abs_error_pct = 0.0;
  double mean_error_pct = 0.0;  // signed: > 0 where runs are slower than predicted
  int within_5 = 0;
  int within_10 = 0;
  double lowest_pct = 0.0;
  double highest_pct = 0.0;
};
ReplaySummary summarize(const std::vector<ReplayedRun>& runs);

}  // namespace baton
