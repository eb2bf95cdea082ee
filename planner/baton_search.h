// The search behind `baton plan --cost-model baton`: a dynamic program over
// contiguous layer ranges, replica counts and device positions.
//
// Stages are placed on consecutive devices in order (stage 0 on the lowest
// ids), as `assign_devices` does, so a stage's devices, and with them its
// all-reduce and the links its transfers cross, are known from its position.
// The program runs from the last layer backwards so that each stage knows how
// many workers follow it (what its schedule's generator makes of that: its
// warm-up, hence its weight versions and stashed activations, read from a
// generated Program by planner/stage_demand.h):
//   best[j][u][r'] = smallest bottleneck of a split of layers [j, L) over the
//                    last u devices of the D used, whose first stage has r' replicas
//   best[i][u + r][r] = min over j, r' of max( best[j][u][r'],
//                          period(stage [i, j) with r replicas at D - u - r),
//                          cut(j, its devices, the next stage's devices) )
// subject to the stage fitting in memory. `period` is the stage's device time
// per microbatch (planner/stage_demand.h), each pass of the stage one call as
// the simulator prices it (sim/stage_costs.h: one_call), and `cut` the busiest link's wire
// time per microbatch across the cut; the search returns a few candidates
// (different device counts D and first-stage replications), which the caller
// rates by simulating them (planner/baton_model.h).
// A flush schedule (1F1B, GPipe, the zero-bubble ones) also pays its fill and
// drain, which the smallest bottleneck ignores (a deep pipeline of many
// stages can tie a shallow one on the bottleneck and lose by its fill). For
// those the same program runs again with another objective: under a ceiling
// C on every stage's steady part, M x period - latency (its busiest worker's
// time per iteration beyond the time one microbatch spends in it), and on M
// x every cut's time, the least sum of latencies through the stages and cuts
// (forward and backward of one microbatch on one replica, its activation and
// gradient over one rail), for 13 ceilings between where no split's steady
// part can lie and past where none can win. Each split found is valued at
// max steady part + sum of latencies (for p equal stages of period t,
// (M + p - 1) t), and the best of them join the candidates. No stage there
// has more replicas than microbatches (the rest would idle), and a device
// count D is skipped once M x S_min / D (S_min: the whole model's latency),
// a bound under every split's estimate on D devices, reaches the best found.
// Cost: O(L^2 x N x R^2) per device count D (at most 14 times that for a flush schedule), with R the replica counts
// tried (every count up to 32 devices; above, powers of two and multiples of a server, under a steady-state schedule
// only those of the form 2^a or 3 x 2^a so that the period lcm_s r_s stays within what the simulator measures:
// kMaxSteadyStatePeriod).
// Thread safety: pure.
#pragma once

#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton {

struct SearchOptions {
  Schedule schedule = Schedule::kPipeDream;
  int microbatches = 1;  // flush schedules: per iteration
  int microbatch_size = 1;
  bool straight = false;  // one replica per stage
  Bytes memory_limit;     // per device
  Optimizer optimizer = Optimizer::kAdam;
  int max_candidates = 8;
};

struct SearchResult {
  // Best first by the search's bottleneck, then (flush schedules) the best
  // by the fill estimate that are not among those.
  std::vector<Plan> candidates;
  // When no candidate fits: the smallest per-device memory some split needs.
  Bytes smallest_feasible_memory;
};

SearchResult search_plans(const Profile& profile, const Topology& topology, const SearchOptions& options);

}  // namespace baton
