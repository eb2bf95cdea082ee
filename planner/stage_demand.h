// What one stage of a candidate asks of its devices under a schedule, read
// from the schedule's own generator (sim/schedules.h) and counted by
// sim/worker_demand.h, for the search (planner/baton_search.h), which has no
// placed plan yet, only a stage's replica count r and the number of workers
// from it to the end of the pipeline (`downstream`, r included).
//
// The generators see a stage through plan-wide quantities only: its replica
// count, the workers after it, the microbatch count (sim/schedules.h:
// warmup_forwards) and, for the zero-bubble schedules, the workers before it
// (sees_upstream). So the table generates, for each (r, downstream, upstream)
// the search asks about, the Program of a stand-in: one stage holding the
// `upstream` workers (none when 0, and upstream counts only where the
// schedule sees it), the stage with r replicas, and one stage holding the
// downstream - r workers (none when downstream == r), with the plan's microbatch count (flush schedules) or,
// for a steady state, r x (2 ceil(downstream / r) + 4) minibatches: each
// replica then runs a warm-up over `downstream` workers and at least as many
// microbatches again in step, which is when the weight versions a stashing
// schedule holds pile up to their peak; so the counts per minibatch and the
// memory peaks are the steady state's. It counts the actions of the stage's first worker, the one
// with the most microbatches (k mod r: replica 0 first).
// Per microbatch of that run, a stage with forward + backward time `compute`
// and all-reduce time `allreduce` needs
//   (compute x forwards + allreduce x all-reduces) / microbatches
// of device time, and WorkerDemand::peak_bytes of memory.
// Cost: one small Program per distinct (r, downstream), memoized.
// Thread safety: none (memoizes); one per search.
#pragma once

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/plan.h"
#include "sim/worker_demand.h"

namespace baton {

// Peak bytes as max over the frontier of params x params_factor + stash x
// stash_factor (sim/worker_demand.h's accounting, the optimizer factor folded in).
struct MemoryCoefficients {
  double params_factor = 0.0;  // versions + 1 (gradients) + optimizer factor
  double stash_factor = 0.0;   // microbatches in flight
};

struct StageDemand {
  WorkerDemand worker;
  int microbatches = 1;                    // of the stand-in's run, the divisor above
  std::vector<MemoryCoefficients> memory;  // one per frontier point

  double peak_bytes(double params, double stash) const {
    double peak = 0.0;
    for (const MemoryCoefficients& c : memory) peak = std::max(peak, params * c.params_factor + stash * c.stash_factor);
    return peak;
  }

  double forwards_per_microbatch() const { return double(worker.forwards) / microbatches; }
  double allreduces_per_microbatch() const { return double(worker.allreduces) / microbatches; }
};

class StageDemands {
 public:
  StageDemands(Schedule schedule, int microbatches, double optimizer_factor)
      : schedule_(schedule), microbatches_(microbatches), optimizer_factor_(optimizer_factor) {}

  // Precondition: 1 <= replicas <= downstream, upstream >= 0.
  const StageDemand& of(int replicas, int downstream, int upstream = 0);

 private:
  Schedule schedule_;
  int microbatches_;
  double optimizer_factor_;
  std::map<std::tuple<int, int, int>, StageDemand> memo_;
};

}  // namespace baton
