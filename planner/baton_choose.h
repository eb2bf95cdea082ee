// Which candidate plan the planner takes: the search (planner/baton_search.h)
// proposes a few, the cost model (planner/baton_model.h) rates each, and this
// picks one. The CLI and the agreement tests use the same rule.
//
// Rule: the fastest by rated time per sample among the candidates that run;
// a candidate whose Program deadlocks (PlanEstimate::rated false) comes last.
// A steady state that was not seen to repeat (PlanEstimate::exact false) is
// rated by its slope and competes like the others: on the shipped data that
// slope is within 0.1% of the steady state, and ranking it lower would pass
// over the fastest plan (PipeDream's clusters with shared 10 Gb/s links).
// Ties go to the earlier candidate (the search's own ranking).
// Thread safety: pure.
#pragma once

#include <optional>
#include <vector>

#include "planner/baton_model.h"
#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton {

struct RatedPlan {
  Plan plan;
  PlanEstimate estimate;
  int index = 0;  // position among the candidates
};

// 0 for a rated estimate, 2 for a deadlock (lower is better).
int estimate_tier(const PlanEstimate& estimate);

// Rates every candidate and returns the chosen one; nullopt when there is none.
// Precondition: every candidate passes check_plan (devices assigned).
std::optional<RatedPlan> choose_plan(const std::vector<Plan>& candidates, const Profile& profile,
                                     const Topology& topology, Optimizer optimizer);

}  // namespace baton
