// StageCosts: what one microbatch costs on each stage, derived once from a
// Profile, a Plan and a Topology; the simulator's only view of the model.
//
// Sizes (per microbatch unless said otherwise):
//   forward, backward          = sums over the stage's layers / device relative_speed
//   step                       = sum of the layers' optimizer times / relative_speed: what a
//                                STEP costs on the compute stream
//   backward_input/_weight     = sums of the profiled split; where a layer has no
//                                split, half of its backward each (stated guess)
//   activation_out             = bytes crossing the cut after the stage (sent forward;
//                                the gradient sent back across that cut has the same size)
//   stash                      = input bytes + outputs of the stage's layers, kept from
//                                a microbatch's forward to its backward
//   params                     = the stage's parameters (one weight version)
#pragma once

#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/program.h"
#include "sim/topology.h"
#include "sim/units.h"

namespace baton {

// One layer's pieces in an overlapped pair: the forward runs its
// pre-dispatch work (the attention, the router), the dispatch's all-to-all,
// the experts, the combine's all-to-all; the backward the combine's
// all-to-all backward, the experts' input gradients, their weight gradients,
// the dispatch's backward, the rest (the attention's, and for B its weight
// gradients). Each all-to-all is half of its pass's overlap. A layer without
// experts is its pre-dispatch work alone; `layer`: one the pair schedule
// pairs with the other pass's (a block: the profile says its experts' work,
// zero for a dense block), not a pre- or post-process such as the embedding.
struct PairPieces {
  Seconds forward_rest, experts_forward, forward_all_to_all;
  Seconds backward_all_to_all, experts_input, experts_weight;
  Seconds backward_rest;        // B: the backward less the above
  Seconds backward_input_rest;  // I: the input half less the above but the weights'
  bool layer = true;
};

struct StageCost {
  Seconds forward;
  Seconds backward;
  Seconds backward_input;
  Seconds backward_weight;
  Seconds step;
  // The communication inside a forward, and inside a backward (B or I), that
  // an overlapped pair hides behind the other pass's compute (the layers'
  // forward_overlap and backward_overlap, sim/profile.h).
  Seconds forward_overlap;
  Seconds backward_overlap;
  Bytes activation_out;
  Bytes stash;
  Bytes params;
  int layers = 0;  // how many layers the stage runs (noisy simulations draw per layer)
  // The part of a forward, and of a backward (B, I or W), the host spends
  // issuing it: the layers' host_forward (host_backward) over their forward
  // (backward) (sim/profile.h), at most 1; 1 when the profile has no host
  // times. On a device whose streams compute at once (Level::shared_speedup)
  // its workers' actions share the host's issuing by these (topology.h).
  double host_forward_share = 1.0;
  double host_backward_share = 1.0;
  // For a plan with overlapped pairs (DualPipeV's, Plan::paired_steady_state)
  // whose stage layers all say what their all-to-alls run beside (the
  // experts' work, Layer::experts, or no overlap at all): each layer's pieces
  // in model order, which pair_hidden runs as the pair's two streams do
  // (below). Empty: the pair hides by the passes' totals alone.
  std::vector<PairPieces> pieces;
  // The experts' weight gradients run after their input gradients and beside
  // the dispatch's backward all-to-all (Megatron-core's
  // --delay-wgrad-compute, Plan::delay_wgrad_compute; DualPipeV splits them
  // so), not before it.
  bool expert_weight_delayed = false;
};

std::vector<StageCost> stage_costs(const Profile& profile, const Plan& plan, const Topology& topology);

// An action's time on its stage and the communication inside it that an
// overlapped pair may hide: F's forward_overlap, B's and I's
// backward_overlap, none for W and the step (nothing for the others).
struct PassCost {
  Seconds time, overlap;
};
inline PassCost pass_cost(const StageCost& cost, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return {cost.forward, cost.forward_overlap};
    case ActionKind::kBackward: return {cost.backward, cost.backward_overlap};
    case ActionKind::kBackwardInput: return {cost.backward_input, cost.backward_overlap};
    case ActionKind::kBackwardWeight: return {cost.backward_weight, Seconds(0.0)};
    case ActionKind::kStep: return {cost.step, Seconds(0.0)};
    default: return {};
  }
}

// What an overlapped pair (sim/program.h) hides of each pass's overlappable
// communication: the first's overlap up to the second's compute beside it
// (its time less its own overlap), and the second's likewise; the pair takes
// first + second less both.
struct PairHidden {
  Seconds first, second;
};
PairHidden pair_hidden(Seconds first, Seconds first_overlap, Seconds second, Seconds second_overlap);

// The time of an overlapped pair of a forward on `forward` and a backward on
// `backward` (B, or I when `input_only`), both with pieces, as Megatron-core's
// batch-level overlap runs it (TransformerLayerSchedulePlan.run; DeepSeek's
// DualPipe arranges a pair's pieces the same way): the i-th layer of the
// forward beside the i-th of the backward (its layers last to first), on a
// compute stream and a communication stream, each in order:
//   communication: combine backward | dispatch forward, dispatch backward | combine forward
//   compute:       pre-dispatch F   | experts' input grads, [weight grads,] experts F | rest of B
// the experts' backward after the combine's backward, the dispatch's after
// the pre-dispatch forward, the dispatch's backward after the experts' input
// gradients (and their weight gradients, unless delayed), the experts'
// forward after the dispatch, the combine after the experts, the rest of
// the backward after the dispatch's backward; a layer's pre-dispatch work
// after the combine of the forward layer before it, its combine backward
// after the rest of the backward layer before it. The blocks pair from the
// first to the last (PairPieces::layer; what comes before and after, such as
// the embedding and the loss, runs alone, as Megatron-core's pre- and
// post-process do); a block without its partner runs alone, its
// all-to-alls exposed.
Seconds paired_time(const StageCost& forward, const StageCost& backward, bool input_only);

// What the pair of `first` (on `first_cost`) and `second` hides of each
// one's overlap: with the pieces of both stages, F + B less paired_time,
// shared between the two in proportion to their overlaps; otherwise by the
// totals, as above.
PairHidden pair_hidden(const StageCost& first_cost, ActionKind first, const StageCost& second_cost, ActionKind second);

// One stage's costs: the layers of `range` on a device of `relative_speed`.
StageCost stage_cost(const Profile& profile, LayerRange range, double relative_speed);

// A pass over `layers` layers called once, where the profile timed one call
// per layer (Profile::call_cost): the layers' sum less the layers - 1 calls it
// saves, never below zero. The search (planner/baton_search.cc) and the
// simulator both price a stage by it.
constexpr Seconds one_call(Seconds layers_sum, int layers, Seconds per_call) {
  return max(Seconds(0.0), layers_sum - per_call * double(layers - 1));
}

}  // namespace baton
