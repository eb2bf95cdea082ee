// Internal to the simulator: what the event loop hands to the metrics pass.
#pragma once

#include <utility>
#include <vector>

#include "sim/memory_tracker.h"
#include "sim/simulator.h"

namespace baton {

struct RawRun {
  std::vector<Seconds> busy;                                                // compute per worker over the whole run
  std::vector<std::vector<std::pair<Seconds, Seconds>>> compute_intervals;  // per worker
  std::vector<Seconds> stage0_completion;  // end of each microbatch's backward on stage 0
  Seconds makespan;
  int64_t skipped = 0;                // actions jumped over as repeats (engine_repeats.cc)
  std::vector<Span> spans;            // unsorted; only with record_trace
  std::vector<MemoryTracker> memory;  // per worker
  // Per device: the peak over the run of the sum of what its workers hold at
  // one instant (MemoryTracker::held, summed as the actions run), indexed by
  // Topology::memory_device (streams of one shared device count on its first).
  std::vector<Bytes> device_peak_memory;
  std::vector<int> memory_device;  // per worker: Topology::memory_device of its device
};

Result<RawRun> run_engine(const Program& program, const std::vector<StageCost>& costs, const Topology& topology,
                          const SimOptions& options);

}  // namespace baton
