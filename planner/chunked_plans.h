// Candidates for the schedules that run several chunks per device
// (interleaved-1f1b, zbv, dualpipev). The search (planner/baton_search.h)
// gives every worker one contiguous layer range, which a chunked schedule
// does not: its worker runs v ranges far apart in the model. So these
// candidates are enumerated, and the caller rates each by simulating its
// Program (planner/baton_choose.h), as for the search's candidates:
// - p ranks x r replicas of the whole pipeline on all D devices (p r = D,
//   2 <= p, p v <= layers), devices assigned as sim/plan.h does;
// - v chunks per device: 2 for zbv and dualpipev, 2, 3 and 4 for
//   interleaved-1f1b (or the given v);
// - the layers split into p v contiguous chunks of balanced work: the split
//   that minimises the largest chunk's forward + backward time (an exact
//   linear partition, ties to the earliest cut);
// - the microbatch count given, skipped where the schedule refuses it
//   (sim/plan.h: check_chunks).
// Cost: O(divisors(D) x v x p v x layers^2) for the splits.
// Thread safety: pure.
#pragma once

#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/topology.h"

namespace baton {

// `virtual_stages` 0: every v the schedule allows (see above).
std::vector<Plan> chunked_candidates(const Profile& profile, const Topology& topology, Schedule schedule,
                                     int microbatches, int virtual_stages = 0);

// The split of layers [0, L) into `chunks` contiguous ranges that minimises
// the largest range's sum of `work` (work[i] >= 0); nullopt-like empty result
// when chunks > L.
std::vector<LayerRange> balanced_split(const std::vector<double>& work, int chunks);

}  // namespace baton
