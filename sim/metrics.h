// Metrics: the figures a simulation (or a measured run) reports.
//
// Definitions:
// - iteration: for flush schedules (1f1b, gpipe, dp) one minibatch of
//   `microbatches` microbatches from first action to last; for pipedream the
//   steady-state time per minibatch (see simulator.h for the window).
// - throughput_samples_per_s = samples per iteration / iteration_time_s.
// - bubble_fraction of a worker = 1 - busy time / window length, where busy
//   time is the compute (F, B, I, W, STEP) the worker ran inside the window;
//   the overall figure is 1 - sum(busy) / (workers x window).
// - memory, per worker, peak over the run of: weights x versions held,
//   gradients, optimizer state, stashed activations (see docs/SIMULATOR.md);
//   per device, peak over the run of the sum of what its workers hold at one
//   instant: several workers on one device (`@` placement) share its memory,
//   and whether a plan fits is decided per device. The device's peak lies
//   between the largest of its workers' peaks and their sum.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/units.h"

namespace baton {

struct WorkerMetrics {
  int worker = 0;
  int stage = 0;
  int device = 0;
  Seconds busy;  // compute time inside the measurement window
  double bubble_fraction = 0.0;
  Bytes peak_memory;                // peak of the sum below, at one instant
  Bytes weight_bytes;               // one copy of the stage's parameters
  int weight_versions = 0;          // peak number of weight versions held at once
  Bytes peak_stashed_weight_bytes;  // (versions - 1) x weights, at peak
  Bytes gradient_bytes;
  Bytes optimizer_bytes;
  Bytes peak_activation_bytes;
  int peak_inflight_microbatches = 0;
};

// One device that runs at least one worker.
struct DeviceMetrics {
  // The device; with a shared_compute topology the first device of the unit
  // whose streams share one physical device's memory (Topology::memory_device).
  int device = 0;
  std::vector<int> workers;  // the workers placed on it, increasing
  Bytes peak_memory;         // peak of the workers' sum, at one instant
};

struct Metrics {
  Seconds iteration_time;
  double throughput_samples_per_s = 0.0;
  double bubble_fraction = 0.0;
  Seconds makespan;      // first action to last, whole simulation
  Seconds window_start;  // the measurement window
  Seconds window_end;
  int64_t actions = 0;
  int64_t actions_skipped = 0;  // of `actions`, jumped over as repeats (SimOptions::skip_repeats)
  double wall_seconds = 0.0;    // the simulator's own run time (stderr only: the JSON is the same every run)
  std::vector<WorkerMetrics> workers;
  std::vector<DeviceMetrics> devices;  // by device id, those with workers only
};

nlohmann::json metrics_to_json(const Metrics& metrics);

}  // namespace baton
