// What the baton search (planner/baton_search.h) reads in its innermost
// loops: a profile's per-range sums, O(1) to read, and the device and replica
// counts it tries.
// Thread safety: pure functions; the tables are immutable once built.
#pragma once

#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/topology.h"

namespace baton {

// Per-range quantities of the profile, O(1) to read.
struct RangeTables {
  // Seconds / relative speed. A stage's pass is one call (sim/stage_costs.h:
  // one_call): with a call cost, forward and backward apart (each never below
  // zero); without, their sum (the same figure, summed as it always was, so
  // that ties between splits break as they did).
  std::vector<double> compute_prefix;  // forward + backward
  std::vector<double> forward_prefix;
  std::vector<double> backward_prefix;
  double forward_call = 0.0;
  double backward_call = 0.0;
  // Every layer's passes at least a call's cost: a stage's one-call time
  // never falls as it takes more layers.
  bool latency_grows = true;
  // Bytes in floating point, as the search weighs them (exact to 2^53; a
  // profile of absurd sizes cannot overflow a sum).
  std::vector<double> params_prefix;
  std::vector<std::vector<double>> out;    // out[i][j]: bytes stage [i, j) sends on
  std::vector<std::vector<double>> stash;  // stash[i][j]: bytes per in-flight microbatch
};

// The tables of `profile` on a device of `speed` (times divided by it).
RangeTables range_tables(const Profile& profile, double speed);

// The replica counts a stage may have: 1 for a straight pipeline; every count
// up to 32 devices; above, powers of two and multiples of a server. Under pipedream
// only counts of the form 2^a or 3 x 2^a (times the server size, or not) are
// tried, so that R = lcm of a plan's counts stays at most 3 x 2^a_max x (the
// server size's odd part), within kMaxSteadyStatePeriod (sim/simulator.h) for any cluster baton
// ships; "multiples of a server" such as 5, 7 or 11 servers would give plans
// whose R the simulator does not measure (e.g. 96, 136 and 160 replicas: R = 8160).
std::vector<int> replica_counts(const Topology& topology, bool straight, Schedule schedule);

// The device counts D the search runs: every one up to 16 devices (or, for a
// straight pipeline, up to one per layer), above that the whole cluster and
// its halvings.
std::vector<int> device_counts(const Topology& topology, bool straight, int layers);

}  // namespace baton
