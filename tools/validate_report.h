// The figures and the report of `baton validate` (tools/cmd_validate.cc): one
// case per schedule, rendered as the summary table, report.md and report.json.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/topology.h"
#include "sim/trace.h"
#include "tools/compare_report.h"
#include "tools/machine_load.h"

namespace baton::cli {

// One schedule: its plan, what was predicted and what its run measured.
struct ValidationCase {
  Schedule schedule = Schedule::kOneFOneB;
  Plan plan;
  Seconds predicted;        // the --quantile of the noisy simulations (deterministic without noise)
  Seconds predicted_plain;  // the deterministic simulation
  Seconds step_barrier;     // in both: the executor's step barrier (executor_step_barrier)
  // The run's steps replayed at the speeds its workers had in each
  // (predict_run, plus the step barrier) against the slice's speed, where
  // one was measured (then it is `predicted`), else against the topology's
  // (a GPU's run, or one on a given topology: the profile's speed over the
  // run's); 0 where the run recorded no compute per step.
  Seconds predicted_at_run_speeds;
  // The deterministic simulation's speed: with a slice the run's own
  // (run_speed: its steps' compute at the --quantile against the slice's
  // expectation; the prediction itself replays each step, predict_run),
  // else the topology's.
  double relative_speed = 1.0;
  double slice_speed = 0.0;  // its slice's speed; 0 where no slice was measured
  // Each worker's compute per step in the run (predict_run).
  std::vector<std::vector<Seconds>> step_compute;
  // Each worker's executor overhead per action in the run (its loop's time
  // neither computing nor waiting, over its actions), recorded for the
  // report, not predicted (SimOptions::worker_action_overhead can).
  std::vector<Seconds> action_overhead;
  // The run's compute per step over its slice's expectation
  // (expected_compute_per_step); 0 where no slice was measured.
  double run_compute = 0.0;
  int attempts = 1;      // slice-and-run attempts made; the last is the one kept
  Trace measured_trace;  // the run's last step
  Seconds measured;      // the --quantile of steps 1..K-1
  Seconds measured_median;
  int steps = 0;  // run
  Seconds measured_min;
  Seconds measured_max;
  TraceComparison comparison;  // predicted trace against the last step's
  double error() const { return (measured - predicted) / predicted; }
  double error_at_run_speeds() const { return (measured - predicted_at_run_speeds) / predicted_at_run_speeds; }
};

// The options of `baton validate` (tools/cmd_validate.cc); the report says
// how its figures were made from them.
struct ValidateArgs {
  std::string model;
  std::string backend = "gloo";
  std::string device = "cpu";  // else: the threads backend's --nproc workers on that GPU
  int nproc = 2;
  std::string schedules = "pipedream,1f1b,gpipe,dp";
  std::string stages;
  int microbatch_size = 32;
  bool microbatch_size_given = false;  // --microbatch-size on the command line
  int microbatches = 8;
  int steps = 30;
  double run_seconds = 3.0;
  double profile_seconds = 3.0;
  double quantile = 0.5;
  double gap_us = 300.0;
  double tolerance = 0.10;
  int attempts = 3;
  double drift = 0.03;
  std::string out = "out/validate";
  std::string profile;
  std::string topology;
  int threads = 1;
  double timeout_s = 30.0;
};

// Noisy simulations per prediction: the quantiles of 200 iterations move by
// about 0.1% between seeds.
constexpr int kNoiseSamples = 200;

// The summary table: one row per case, with the header first.
std::vector<std::vector<std::string>> validation_summary_rows(const std::vector<ValidationCase>& cases,
                                                              double tolerance);

// report.md: the method, the machine's load before the first measurement
// (tools/machine_load.h; nullopt: /proc/stat unreadable), the summary, the
// calibration and the device, the profile, and per case its comparison tables
// and both Gantt charts.
std::string validation_markdown(const ValidateArgs& args, const Profile& profile, const Topology& topology,
                                const nlohmann::json& calibration, const std::vector<ValidationCase>& cases,
                                const std::optional<MachineLoad>& load);

// report.json: the summary figures in seconds, and the load ("machine_load":
// busy_cpus, cpus, window_s; null where it was not sampled).
nlohmann::json validation_json(const std::vector<ValidationCase>& cases, double tolerance, double q,
                               const std::optional<MachineLoad>& load);

}  // namespace baton::cli
