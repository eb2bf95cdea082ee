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

namespace {

// The pieces of the layers of `range` (StageCost::pieces), or none when a
// layer with an overlap does not say what its all-to-alls run beside, or the
// profile prices a stage below its layers' sum (Profile::call_cost).
std::vector<PairPieces> pair_pieces(const Profile& profile, LayerRange range, double speed) {
  if (profile.call_cost != CallCost{}) return {};
  std::vector<PairPieces> out;
  out.reserve(static_cast<size_t>(range.end - range.begin));
  for (int i = range.begin; i < range.end; ++i) {
    const Layer& layer = profile.layers[i];
    const Layer::ExpertWork work = layer.experts.value_or(Layer::ExpertWork{});
    if (!layer.experts && (layer.forward_overlap.value > 0.0 || layer.backward_overlap.value > 0.0)) return {};
    const Seconds input = layer.backward_input.value_or(layer.backward * 0.5);
    PairPieces p;
    p.forward_all_to_all = layer.forward_overlap * 0.5 / speed;
    p.experts_forward = work.forward / speed;
    p.forward_rest = max(Seconds(0.0), layer.forward / speed - p.experts_forward - p.forward_all_to_all * 2.0);
    p.backward_all_to_all = layer.backward_overlap * 0.5 / speed;
    p.experts_input = work.backward_input / speed;
    p.experts_weight = work.backward_weight / speed;
    const Seconds around = p.backward_all_to_all * 2.0 + p.experts_input;
    p.backward_rest = max(Seconds(0.0), layer.backward / speed - around - p.experts_weight);
    p.backward_input_rest = max(Seconds(0.0), input / speed - around);
    p.layer = layer.experts.has_value();
    out.push_back(p);
  }
  return out;
}

// The two streams of an overlapped pair (paired_time), layer by layer.
class PairStreams {
 public:
  explicit PairStreams(bool delayed) : delayed_(delayed) {}
  // The i-th layers of the two passes (either may be absent).
  void step(const PairPieces* f, const PairPieces* b, bool input_only) {
    Seconds combined, experts_input_done, dispatched, dispatched_back;
    if (b) {
      combined = comm(b_ready_, b->backward_all_to_all);
    }
    Seconds pre_dispatch_done;
    if (f) pre_dispatch_done = compute(f_ready_, f->forward_rest);
    if (b) {
      experts_input_done = compute(combined, b->experts_input);
      // Without the delay the weight gradients run in the same backward call,
      // before the dispatch's backward may start.
      const Seconds weight = input_only ? Seconds(0.0) : b->experts_weight;
      if (!delayed_) experts_input_done = compute(experts_input_done, weight);
      if (f) dispatched = comm(pre_dispatch_done, f->forward_all_to_all);
      if (delayed_) compute(experts_input_done, weight);
      dispatched_back = comm(experts_input_done, b->backward_all_to_all);
    } else if (f) {
      dispatched = comm(pre_dispatch_done, f->forward_all_to_all);
    }
    if (f) {
      const Seconds experts_done = compute(dispatched, f->experts_forward);
      f_ready_ = comm(experts_done, f->forward_all_to_all);
    }
    if (b) b_ready_ = compute(dispatched_back, input_only ? b->backward_input_rest : b->backward_rest);
  }
  Seconds end() const { return max(compute_free_, comm_free_); }

 private:
  // Runs `work` on a stream once `after` and the stream are both done; no
  // work is no kernel, which neither waits for the stream nor holds it (a
  // dense block has no all-to-alls, the embedding no experts).
  Seconds run(Seconds& free, Seconds after, Seconds work) {
    if (work.value <= 0.0) return after;
    free = max(free, after) + work;
    return free;
  }
  Seconds compute(Seconds after, Seconds work) { return run(compute_free_, after, work); }
  Seconds comm(Seconds after, Seconds work) { return run(comm_free_, after, work); }

  bool delayed_;
  Seconds compute_free_, comm_free_, f_ready_, b_ready_;
};

}  // namespace

Seconds paired_time(const StageCost& forward, const StageCost& backward, bool input_only) {
  // Each pass in its own order (the backward's layers last to first), cut
  // into what comes before its first block, the blocks (which pair index by
  // index), and what comes after its last.
  struct Order {
    const std::vector<PairPieces>* pieces;
    bool reversed;
    size_t first = 0, end = 0;  // the paired middle
    size_t size() const { return pieces->size(); }
    const PairPieces* at(size_t i) const { return &(*pieces)[reversed ? size() - 1 - i : i]; }
  };
  const auto order = [](const std::vector<PairPieces>& pieces, bool reversed) {
    Order o{&pieces, reversed};
    while (o.first < o.size() && !o.at(o.first)->layer) ++o.first;
    o.end = o.size();
    while (o.end > o.first && !o.at(o.end - 1)->layer) --o.end;
    return o;
  };
  const Order f = order(forward.pieces, false), b = order(backward.pieces, true);
  PairStreams streams(backward.expert_weight_delayed);
  // Megatron-core's chunk plan: the backward's post-process (the loss) and
  // the forward's pre-process (the embedding) before the layers, the
  // forward's post-process and the backward's pre-process after.
  for (size_t i = 0; i < b.first; ++i) streams.step(nullptr, b.at(i), input_only);
  for (size_t i = 0; i < f.first; ++i) streams.step(f.at(i), nullptr, input_only);
  for (size_t i = 0; i < std::max(f.end - f.first, b.end - b.first); ++i)
    streams.step(f.first + i < f.end ? f.at(f.first + i) : nullptr, b.first + i < b.end ? b.at(b.first + i) : nullptr,
                 input_only);
  for (size_t i = f.end; i < f.size(); ++i) streams.step(f.at(i), nullptr, input_only);
  for (size_t i = b.end; i < b.size(); ++i) streams.step(nullptr, b.at(i), input_only);
  return streams.end();
}

PairHidden pair_hidden(const StageCost& first_cost, ActionKind first, const StageCost& second_cost, ActionKind second) {
  const PassCost a = pass_cost(first_cost, first), b = pass_cost(second_cost, second);
  const bool backward_second = second == ActionKind::kBackward || second == ActionKind::kBackwardInput;
  const bool backward_first = first == ActionKind::kBackward || first == ActionKind::kBackwardInput;
  const bool forward_backward =
      (first == ActionKind::kForward && backward_second) || (second == ActionKind::kForward && backward_first);
  const Seconds overlaps = a.overlap + b.overlap;
  if (overlaps.value <= 0.0) return {};
  if (!forward_backward || first_cost.pieces.empty() || second_cost.pieces.empty())
    return pair_hidden(a.time, a.overlap, b.time, b.overlap);
  const bool forward_is_first = first == ActionKind::kForward;
  const ActionKind backward_kind = forward_is_first ? second : first;
  const Seconds together = forward_is_first
                               ? paired_time(first_cost, second_cost, backward_kind == ActionKind::kBackwardInput)
                               : paired_time(second_cost, first_cost, backward_kind == ActionKind::kBackwardInput);
  const Seconds hidden = max(Seconds(0.0), min(overlaps, a.time + b.time - together));
  return {hidden * (a.overlap / overlaps), hidden * (b.overlap / overlaps)};
}

std::vector<StageCost> stage_costs(const Profile& profile, const Plan& plan, const Topology& topology) {
  std::vector<StageCost> costs;
  costs.reserve(plan.stages.size());
  const double speed = topology.device.relative_speed;
  for (const StagePlan& stage : plan.stages) {
    costs.push_back(stage_cost(profile, stage.layers, speed));
    if (!plan.has_pairs()) continue;
    costs.back().pieces = pair_pieces(profile, stage.layers, speed);
    costs.back().expert_weight_delayed = plan.schedule == Schedule::kDualPipeV || plan.delay_wgrad_compute;
  }
  return costs;
}

}  // namespace baton
