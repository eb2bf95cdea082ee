// Candidates for the schedules that run several chunks per device
// (interleaved-1f1b, zbv, dualpipev). The search (planner/baton_search.h)
// gives every worker one contiguous layer range, which a chunked schedule
// does not: its worker runs v ranges far apart in the model. So these
// candidates are enumerated, and the caller rates each by simulating its
// Program (planner/baton_choose.h), as for the search's candidates:
// - p ranks x r replicas of the whole pipeline on the first d devices
//   (d = p r <= D, 2 <= p, p v <= layers), devices assigned as sim/plan.h
//   does; every d the microbatch count allows (interleaved-1f1b: M a
//   multiple of d; zbv and dualpipev: M >= 2 d), from all D devices down, so
//   a cluster with more devices than the schedule can feed still gets a
//   layout (candidates come in non-increasing d: a caller may stop once the
//   work per microbatch over d cannot beat its best);
// - v chunks per device: 2 for zbv and dualpipev, 2, 3 and 4 for
//   interleaved-1f1b (or the given v);
// - the layers split into p v contiguous chunks three ways, each a candidate
//   (once where they agree): the split that minimises the largest chunk's
//   forward + backward time (an exact linear partition, ties to the earliest
//   cut), which keeps the fill short; from it, rank_balanced_split's, which
//   evens out each rank's sum over its v chunks, the steady state's time per
//   microbatch (with uneven layers the two differ: a rank can hold two large
//   chunks and another two small ones); and rank_balanced_split's with the
//   links between the ranks' first devices (ChunkLinks), which also moves
//   cuts off layers whose activations are large where the link is slow;
// - the microbatch count given, skipped where the schedule refuses it
//   (sim/plan.h: check_chunks).
// Cost: the splits once per (p, v): O(p v x layers^2) each, and each
// rank-balanced refinement O(moves x p v x p log p); plans for every (p, r)
// with p r <= min(D, M).
// Thread safety: pure.
#pragma once

#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/topology.h"

namespace baton {

// The most workers (p r) a chunked schedule runs on at `microbatches` per
// iteration: interleaved-1f1b M (M a multiple of p r), zbv and dualpipev
// M / 2 (M >= 2 p r).
int most_chunked_workers(Schedule schedule, int microbatches);

// `virtual_stages` 0: every v the schedule allows (see above).
std::vector<Plan> chunked_candidates(const Profile& profile, const Topology& topology, Schedule schedule,
                                     int microbatches, int virtual_stages = 0);

// The split of layers [0, L) into `chunks` contiguous ranges that minimises
// the largest range's sum of `work` (work[i] >= 0); nullopt-like empty result
// when chunks > L.
std::vector<LayerRange> balanced_split(const std::vector<double>& work, int chunks);

// Rank r's load: the sum of `work` over the chunks c with rank_of[c] = r.
// rank_balanced_split starts from `start` (contiguous chunks covering the
// layers) and moves one cut by one layer at a time while that makes the
// ranks' loads, sorted largest first, lexicographically smaller (the largest
// load first, then the next, ...), every chunk keeping at least one layer;
// it stops at a split no single move improves (a local optimum: the largest
// load is never above start's). rank_of: a rank in [0, ranks) per chunk.
//
// With `links`, the loads compared also hold each link's: the cut between
// chunks c and c + 1 on different ranks sends links->seconds_per_byte[c] x
// links->out[i][j] per microbatch each way (chunk c = [i, j); out as
// RangeTables::out) on the link of its two ranks, links->link[c] (-1: the
// same rank, nothing sent); a link's load is the sum over its cuts. A rank's
// compute and a link's transfers each bound the steady state's time per
// microbatch, so the split evens out both.
struct ChunkLinks {
  std::vector<int> link;                 // per cut c (chunks c, c + 1): a link index, or -1
  std::vector<double> seconds_per_byte;  // per cut c
  const std::vector<std::vector<double>>* out = nullptr;
  int links = 0;
};
std::vector<LayerRange> rank_balanced_split(const std::vector<double>& work, std::vector<LayerRange> start,
                                            const std::vector<int>& rank_of, int ranks,
                                            const ChunkLinks* links = nullptr);

}  // namespace baton
