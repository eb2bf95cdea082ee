// Which candidate plan the planner takes: the search (planner/baton_search.h)
// proposes a few, the cost model (planner/baton_model.h) rates each, and this
// picks one. The CLI and the agreement tests use the same rule.
//
// Rule: the fastest by estimated time per sample among the candidates whose
// estimate the model can vouch for, in tiers, best tier first:
//   0  modelled, and the links' serving order reached a fixed point
//      (PlanEstimate::link_order_settled): the estimate is the period of a
//      steady state the simulator can run;
//   1  modelled, but the serving order did not settle (the estimate is one of
//      the orders the run may fall into);
//   2  not modelled (PlanEstimate::modelled false: period beyond
//      kMaxEventGraphPeriod, or a deadlock): the estimate is a bound only.
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

// How far the model vouches for an estimate (the tiers above; lower is better).
int estimate_tier(const PlanEstimate& estimate);

// Rates every candidate and returns the chosen one; nullopt when there is none.
// Precondition: every candidate passes check_plan (devices assigned).
std::optional<RatedPlan> choose_plan(const std::vector<Plan>& candidates, const Profile& profile,
                                     const Topology& topology, Optimizer optimizer);

}  // namespace baton
