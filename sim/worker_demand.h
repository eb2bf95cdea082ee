// What one worker's action list asks of its device, counted from the Program
// alone (no costs, no times): how many forwards, backwards and all-reduces it
// runs and which combinations of weight versions and in-flight microbatches it
// holds at once. The planner's search reads a schedule's work and memory from
// here instead of restating the schedule as formulas: whatever a generator
// emits, this counts.
//
// Memory follows MemoryTracker's accounting, replayed in the worker's program
// order (which is the order the simulator runs it in): a forward takes the live
// weight version and holds one microbatch's stash, the action that ends the
// microbatch (ends_microbatch: B, or W) releases both, STEP makes a new live
// version. Vertical sync (stage 0's version for every stage) is not replayed:
// it changes which versions are held, not how many microbatches are.
//
// Peak bytes for given stage sizes: the accounting is
//   params x versions + params (gradients) + params x optimizer factor + stash x in_flight,
// linear in (versions, in_flight), so its maximum over the run is reached at a
// point of the frontier of pairs no other pair dominates; `memory` keeps that
// frontier (a handful of points), and `peak_bytes` takes the maximum over it.
// Thread safety: plain values and pure functions.
#pragma once

#include <vector>

#include "sim/program.h"
#include "sim/units.h"

namespace baton {

struct MemoryPoint {
  int versions = 1;   // weight versions held, the live one included
  int in_flight = 0;  // microbatches whose stash is held
  bool operator==(const MemoryPoint&) const = default;
};

struct WorkerDemand {
  int forwards = 0;
  int backwards = 0;      // B, a whole backward
  int input_passes = 0;   // I, the input-gradient half of a split backward
  int weight_passes = 0;  // W, its weight-gradient half
  int allreduces = 0;
  int steps = 0;
  std::vector<MemoryPoint> memory;  // the frontier described above

  // Peak bytes of a worker holding `params` and `stash` bytes per microbatch.
  Bytes peak_bytes(Bytes params, Bytes stash, double optimizer_factor) const;
  int peak_in_flight() const;
  int peak_versions() const;
};

// Precondition: 0 <= worker < program.num_workers().
// With `stage` >= 0 only that stage's actions are counted (a worker that runs
// several chunks); the memory frontier is the whole worker's either way.
WorkerDemand worker_demand(const Program& program, int worker, int stage = -1);

}  // namespace baton
