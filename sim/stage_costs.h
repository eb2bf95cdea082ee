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
