#include "sim/stage_costs.h"

namespace baton {

namespace {

StageCost cost_of_range(const Profile& profile, LayerRange range, double speed) {
  StageCost cost;
  for (int i = range.begin; i < range.end; ++i) {
    const Layer& layer = profile.layers[i];
    cost.forward += layer.forward / speed;
    cost.backward += layer.backward / speed;
    cost.backward_input += layer.backward_input.value_or(layer.backward * 0.5) / speed;
    cost.backward_weight += layer.backward_weight.value_or(layer.backward * 0.5) / speed;
    cost.step += layer.optimizer / speed;
  }
  // One call per pass for the stage where the profile timed one per layer
  // (Profile::call_cost): n - 1 calls fewer, I and W each one call of the
  // backward's split.
  const double fewer = range.end - range.begin - 1;
  const CallCost& call = profile.call_cost;
  const auto less = [&](Seconds& time, Seconds per_call) { time = max(Seconds(0.0), time - per_call * fewer / speed); };
  less(cost.forward, call.forward);
  less(cost.backward, call.backward);
  less(cost.backward_input, call.backward * 0.5);
  less(cost.backward_weight, call.backward * 0.5);
  less(cost.step, call.optimizer);
  cost.activation_out = output_bytes(profile, range);
  cost.stash = stashed_activation_bytes(profile, range);
  cost.params = param_bytes(profile, range);
  cost.layers = range.end - range.begin;
  return cost;
}

}  // namespace

std::vector<StageCost> stage_costs(const Profile& profile, const Plan& plan, const Topology& topology) {
  std::vector<StageCost> costs;
  costs.reserve(plan.stages.size());
  for (const StagePlan& stage : plan.stages)
    costs.push_back(cost_of_range(profile, stage.layers, topology.device.relative_speed));
  return costs;
}

}  // namespace baton
