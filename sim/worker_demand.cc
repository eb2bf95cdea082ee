#include "sim/worker_demand.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "sim/memory_tracker.h"

namespace baton {

namespace {

// Adds `point` to the frontier unless a point there dominates it; drops the
// points it dominates.
void add_to_frontier(std::vector<MemoryPoint>& frontier, MemoryPoint point) {
  for (const MemoryPoint& p : frontier)
    if (p.versions >= point.versions && p.in_flight >= point.in_flight) return;
  std::erase_if(frontier,
                [&](const MemoryPoint& p) { return p.versions <= point.versions && p.in_flight <= point.in_flight; });
  frontier.push_back(point);
}

}  // namespace

Bytes WorkerDemand::peak_bytes(Bytes params, Bytes stash, double optimizer_factor) const {
  const Bytes fixed = params + Bytes::rounded(static_cast<double>(params.value) * optimizer_factor);
  Bytes peak = params + fixed;  // one version, nothing in flight
  for (const MemoryPoint& p : memory) peak = max(peak, params * p.versions + fixed + stash * p.in_flight);
  return peak;
}

int WorkerDemand::peak_in_flight() const {
  int peak = 0;
  for (const MemoryPoint& p : memory) peak = std::max(peak, p.in_flight);
  return peak;
}

int WorkerDemand::peak_versions() const {
  int peak = 1;
  for (const MemoryPoint& p : memory) peak = std::max(peak, p.versions);
  return peak;
}

WorkerDemand worker_demand(const Program& program, int worker, int stage) {
  WorkerDemand demand;
  MemoryTracker tracker(Bytes(0), Bytes(0), 0.0);
  std::unordered_map<int64_t, int> version_of;  // stage * M + microbatch -> the version its forward used
  add_to_frontier(demand.memory, MemoryPoint{tracker.versions_held(), tracker.inflight()});
  const int64_t m = std::max(program.batches, 1);
  for (const Action& action : program.actions[static_cast<size_t>(worker)]) {
    if (stage < 0 || action.stage == stage) {
      switch (action.kind) {
        case ActionKind::kForward: ++demand.forwards; break;
        case ActionKind::kBackward: ++demand.backwards; break;
        case ActionKind::kBackwardInput: ++demand.input_passes; break;
        case ActionKind::kBackwardWeight: ++demand.weight_passes; break;
        case ActionKind::kAllReduce: ++demand.allreduces; break;
        case ActionKind::kStep: ++demand.steps; break;
        default: break;
      }
    }
    // Memory: the whole worker, every chunk (a chunk's microbatch is (stage, k)).
    const int64_t key = action.stage * m + action.batch();
    if (action.kind == ActionKind::kForward) {
      version_of[key] = tracker.live_version();
      tracker.forward(tracker.live_version());
    } else if (action.kind == ActionKind::kStep) {
      tracker.step();
    }
    if (ends_microbatch(action.kind)) {
      const auto used = version_of.find(key);
      tracker.backward(used == version_of.end() ? tracker.live_version() : used->second);
    }
    add_to_frontier(demand.memory, MemoryPoint{tracker.versions_held(), tracker.inflight()});
  }
  return demand;
}

}  // namespace baton
