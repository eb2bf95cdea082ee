// What-if sweeps: simulate a profile over a grid of cluster and schedule
// variations (used by `baton sweep`).
//
// The grid is the cartesian product of the axes and the schedules. Axes:
//   bandwidth_gbps.L / latency_us.L   level L of the topology (index or level name)
//   servers                           size of the outermost level
//   devices_per_server                size of the innermost level
//   memory_gib                        device memory (decides `fits`)
//   microbatches                      microbatches per iteration (flush schedules)
// Each point gets a plan by the chosen split strategy, is simulated (no trace),
// and reports throughput, iteration time, bubble fraction and peak memory:
//   kPlan      the baton planner per point (the default): each point is judged
//              by its best split, as `baton plan` would choose it there;
//   kBalanced  S compute-balanced stages with the devices shared evenly: a few
//              hundred times faster (bench/RESULTS.md), but one fixed shape for
//              every cluster, so a point's figure can be far below what the
//              cluster can do;
//   kFixed     the same given stages at every point.
// dp always runs one stage on every device. Points are independent and run on
// `threads` threads; results come back in grid order, whatever the thread
// count. The chart of a sweep is drawn from its table (planner/sweep_chart.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "planner/sweep_grid.h"
#include "planner/sweep_table.h"
#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton {

struct SweepAxis {
  std::string name;
  std::vector<double> values;
};

enum class SplitStrategy { kFixed, kBalanced, kPlan };

struct SweepSpec {
  std::vector<SweepAxis> axes;
  std::vector<Schedule> schedules = {Schedule::kPipeDream};
  int microbatches = 64;
  SplitStrategy split = SplitStrategy::kPlan;
  std::vector<StagePlan> fixed_stages;  // kFixed
  int balanced_stages = 4;              // kBalanced (capped at the devices and layers)
  Optimizer optimizer = Optimizer::kAdam;
  int threads = 1;
  Shard shard;  // the slice of the grid to compute (planner/sweep_grid.h)
};

struct SweepPoint {
  size_t point = 0;                 // the point's number in the grid
  std::vector<double> axis_values;  // one per axis
  Schedule schedule = Schedule::kPipeDream;
  int devices = 0;
  std::string stages;  // "0-13x15,13-39x1", or empty on error
  int num_stages = 0;  // of `stages` (--split balanced:S runs fewer where the point has fewer devices)
  double throughput_samples_per_s = 0.0;
  double iteration_time_s = 0.0;
  double bubble_fraction = 0.0;
  Bytes peak_memory;
  bool fits = false;
  std::string error;  // why this point has no figures
};

// Checks an axis name; returns an Error naming the accepted names.
Status check_axis(const SweepAxis& axis, const Topology& topology);
// What an axis may set beside the topology: the point's microbatch count and
// interleaved-1f1b's chunks per device (0: the planner tries 2, 3 and 4).
struct PointKnobs {
  int microbatches = 1;
  int virtual_stages = 0;
};
// Applies one axis value to a point's topology, microbatch count, memory or
// chunks per device (virtual_stages: interleaved-1f1b only; the other
// schedules' points ignore it).
Status apply_axis(const std::string& name, double value, Topology& topology, PointKnobs& knobs);

// A compute-balanced split of the whole profile into `stages` stages over `devices` devices.
Plan balanced_plan(const Profile& profile, int devices, int stages, Schedule schedule, int microbatches);

// The grid's size: the product of the axes' sizes and the schedules. Point i
// has schedule i mod S and the axes' values of i / S, the last axis fastest.
size_t sweep_size(const SweepSpec& spec);
// The points of the spec's shard, in point order. `progress(done, total)` is
// called from the calling thread about ten times a second.
Result<std::vector<SweepPoint>> run_sweep(const Profile& profile, const Topology& topology, const SweepSpec& spec,
                                          const std::function<void(size_t, size_t)>& progress);

// The points as a sweep table (planner/sweep_table.h): after the axes,
// schedule, split (how the points were split: `split`), devices, stages,
// throughput_samples_per_s, iteration_time_s, bubble_fraction,
// peak_memory_bytes, fits, error.
SweepTable profile_sweep_table(const std::vector<SweepPoint>& points, const SweepSpec& spec, const std::string& model,
                               const Topology& topology, const std::string& split);

}  // namespace baton
