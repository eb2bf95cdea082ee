#include "planner/baton_choose.h"

#include <tuple>

namespace baton {

int estimate_tier(const PlanEstimate& estimate) { return estimate.rated ? 0 : 2; }

std::optional<RatedPlan> choose_plan(const std::vector<Plan>& candidates, const Profile& profile,
                                     const Topology& topology, Optimizer optimizer) {
  std::optional<RatedPlan> best;
  const auto key = [](const RatedPlan& rated) {
    const double samples = rated.estimate.samples_per_iteration;
    const double per_sample = samples > 0 ? rated.estimate.iteration_time.value / samples : 0.0;
    return std::make_tuple(estimate_tier(rated.estimate), per_sample);
  };
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
    RatedPlan rated{candidates[i], estimate_plan(profile, topology, candidates[i], optimizer), i};
    if (!best || key(rated) < key(*best)) best = std::move(rated);
  }
  return best;
}

}  // namespace baton
