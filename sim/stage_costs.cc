#include "sim/stage_costs.h"

#include <algorithm>

namespace baton {

StageCost stage_cost(const Profile& profile, LayerRange range, double speed) {
  StageCost cost;
  Seconds host_forward;
  Seconds host_backward;
  bool host_times = true;
  for (int i = range.begin; i < range.end; ++i) {
    const Layer& layer = profile.layers[i];
    host_forward += layer.host_forward.value_or(Seconds(0.0));
    host_backward += layer.host_backward.value_or(Seconds(0.0));
    host_times = host_times && layer.host_forward.has_value() && layer.host_backward.has_value();
    cost.forward += layer.forward / speed;
    cost.backward += layer.backward / speed;
    cost.backward_input += layer.backward_input.value_or(layer.backward * 0.5) / speed;
    cost.backward_weight += layer.backward_weight.value_or(layer.backward * 0.5) / speed;
    cost.step += layer.optimizer / speed;
    cost.forward_overlap += layer.forward_overlap / speed;
    cost.backward_overlap += layer.backward_overlap / speed;
  }
  // One call per pass for the stage where the profile timed one per layer
  // (Profile::call_cost): n - 1 calls fewer. I and W share what the backward
  // saves in proportion to their times, so that I + W stays B (a W of a few
  // microseconds cannot give up half of the calls).
  const int n = range.end - range.begin;
  const CallCost& call = profile.call_cost;
  const Seconds forward_sum = cost.forward;
  const Seconds backward_sum = cost.backward;
  cost.forward = one_call(cost.forward, n, call.forward / speed);
  cost.backward = one_call(cost.backward, n, call.backward / speed);
  cost.step = one_call(cost.step, n, call.optimizer / speed);
  if (const Seconds split = cost.backward_input + cost.backward_weight; split.value > 0) {
    const Seconds saved = backward_sum - cost.backward;
    cost.backward_input = max(Seconds(0.0), cost.backward_input - saved * (cost.backward_input / split));
    cost.backward_weight = max(Seconds(0.0), cost.backward_weight - saved * (cost.backward_weight / split));
  }
  cost.activation_out = output_bytes(profile, range);
  cost.stash = stashed_activation_bytes(profile, range);
  cost.params = param_bytes(profile, range);
  cost.layers = n;
  // Shares of the profile's own times: relative_speed scales a stage's host
  // and device time alike (the sums above are divided by it, hence x speed).
  if (host_times && forward_sum.value > 0.0)
    cost.host_forward_share = std::min(1.0, host_forward.value / (forward_sum.value * speed));
  if (host_times && backward_sum.value > 0.0)
    cost.host_backward_share = std::min(1.0, host_backward.value / (backward_sum.value * speed));
  return cost;
}

PairHidden pair_hidden(Seconds first, Seconds first_overlap, Seconds second, Seconds second_overlap) {
  const Seconds a = min(first_overlap, first), b = min(second_overlap, second);
  return {max(Seconds(0.0), min(a, second - b)), max(Seconds(0.0), min(b, first - a))};
}

std::vector<StageCost> stage_costs(const Profile& profile, const Plan& plan, const Topology& topology) {
  std::vector<StageCost> costs;
  costs.reserve(plan.stages.size());
  for (const StagePlan& stage : plan.stages)
    costs.push_back(stage_cost(profile, stage.layers, topology.device.relative_speed));
  return costs;
}

}  // namespace baton
