// An overlapped pair run piece by piece (sim/stage_costs.h's paired_time): the
// two streams of Megatron-core's batch-level overlap (and DeepSeek's DualPipe
// pairs), timelines worked out by hand below; the profile's expert keys that
// feed them.
#include <string>
#include <vector>

#include "tests/catch_compat.h"

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/stage_costs.h"

using namespace baton;

namespace {

Seconds ms(double v) { return Seconds::from_ms(v); }

// A stage of one MoE layer: forward = rest + experts + 2 all-to-alls, and
// backward = 2 all-to-alls + the experts' input and weight gradients + rest.
struct Piece {
  double forward_rest, experts_forward, forward_a2a;
  double backward_a2a, experts_input, experts_weight, backward_rest, backward_input_rest;
};

StageCost stage_of(const std::vector<Piece>& layers, bool delayed) {
  StageCost cost;
  cost.expert_weight_delayed = delayed;
  for (const Piece& p : layers) {
    cost.pieces.push_back(PairPieces{ms(p.forward_rest), ms(p.experts_forward), ms(p.forward_a2a), ms(p.backward_a2a),
                                     ms(p.experts_input), ms(p.experts_weight), ms(p.backward_rest),
                                     ms(p.backward_input_rest)});
    cost.forward += ms(p.forward_rest + p.experts_forward + 2 * p.forward_a2a);
    cost.backward += ms(2 * p.backward_a2a + p.experts_input + p.experts_weight + p.backward_rest);
    cost.backward_input += ms(2 * p.backward_a2a + p.experts_input + p.backward_input_rest);
    cost.forward_overlap += ms(2 * p.forward_a2a);
    cost.backward_overlap += ms(2 * p.backward_a2a);
  }
  return cost;
}

// Forward: rest 0.5, experts 0.2, all-to-alls 0.3 each. Backward:
// all-to-alls 0.6 each, experts' input gradients 0.3, weight gradients 0.5,
// rest 0.5 (0.3 for I).
const Piece kLayer{0.5, 0.2, 0.3, 0.6, 0.3, 0.5, 0.5, 0.3};

}  // namespace

TEST_CASE("pair pieces: the dispatch backward waits for the weight gradients unless they are delayed", "[sim][pairs]") {
  // Not delayed (ms):
  //   comm:    combine B [0, 0.6]  dispatch F [0.6, 0.9]  dispatch B [1.4, 2.0]  combine F [2.0, 2.3]
  //   compute: pre-dispatch F [0, 0.5]  experts' input grads [0.6, 0.9]  weight grads [0.9, 1.4]
  //            experts F [1.4, 1.6]  rest of B [2.0, 2.5]
  // The rest of B waits for the dispatch backward: 2.5 ms.
  const StageCost plain = stage_of({kLayer}, false);
  CHECK(paired_time(plain, plain, false).ms() == Approx(2.5));
  // Delayed: the dispatch backward right after the input gradients [0.9,
  // 1.5], the weight gradients beside it [0.9, 1.4]; experts F [1.4, 1.6],
  // combine F [1.6, 1.9], rest of B [1.6, 2.1]: 2.1 ms, the 2.0 ms of compute
  // and the 0.1 ms the first combine backward outlasts the pre-dispatch
  // forward.
  const StageCost delayed = stage_of({kLayer}, true);
  CHECK(paired_time(delayed, delayed, false).ms() == Approx(2.1));
  // The backward's input half (I: no weight gradients, rest 0.3): combine B
  // [0, 0.6], experts' input grads [0.6, 0.9], dispatch B [0.9, 1.5], experts F
  // [0.9, 1.1], combine F [1.5, 1.8], rest of I [1.5, 1.8]: 1.8 ms, delayed
  // or not.
  CHECK(paired_time(plain, plain, true).ms() == Approx(1.8));
  CHECK(paired_time(delayed, delayed, true).ms() == Approx(1.8));
}

TEST_CASE("pair pieces: free communication is the compute's sum, no compute the communication's", "[sim][pairs]") {
  // Three forward layers beside two backward layers, unequal on purpose: the
  // third forward layer runs alone.
  const Piece no_comm{0.5, 0.2, 0.0, 0.0, 0.3, 0.5, 0.5, 0.3};
  const StageCost f = stage_of({no_comm, no_comm, no_comm}, false), b = stage_of({no_comm, no_comm}, false);
  CHECK(paired_time(f, b, false).ms() == Approx(3 * 0.7 + 2 * 1.3));
  // Only all-to-alls: one stream, in order, each after the one before.
  const Piece only_comm{0.0, 0.0, 0.25, 0.5, 0.0, 0.0, 0.0, 0.0};
  const StageCost cf = stage_of({only_comm, only_comm}, false);
  CHECK(paired_time(cf, cf, false).ms() == Approx(2 * (2 * 0.25 + 2 * 0.5)));
}

TEST_CASE("pair pieces: enough compute beside them hides every all-to-all", "[sim][pairs]") {
  // Forward: rest 1.0, experts 0.8, all-to-alls 0.1; backward: all-to-alls
  // 0.15, experts 0.6 + 0.5, rest 1.2. Pre-dispatch F [0, 1.0], experts'
  // input grads [1.0, 1.6], weight grads [1.6, 2.1], experts F [2.1, 2.9],
  // rest of B [2.9, 4.1]; each all-to-all fits beside: 4.1 ms, the compute.
  const StageCost roomy = stage_of({{1.0, 0.8, 0.1, 0.15, 0.6, 0.5, 1.2, 0.9}}, false);
  CHECK(paired_time(roomy, roomy, false).ms() == Approx(4.1));
  // Over two layers the second forward layer's pre-dispatch work waits for
  // the first's combine, and the second backward layer's combine for the
  // first's rest: the compute stream never waits, 8.2 ms.
  const StageCost two =
      stage_of({{1.0, 0.8, 0.1, 0.15, 0.6, 0.5, 1.2, 0.9}, {1.0, 0.8, 0.1, 0.15, 0.6, 0.5, 1.2, 0.9}}, false);
  CHECK(paired_time(two, two, false).ms() == Approx(8.2));
}

TEST_CASE("pair pieces: blocks pair with blocks, the embedding runs before them, a dense block beside one",
          "[sim][pairs]") {
  // Forward: the embedding (1.0 ms of compute, not a block), then a MoE
  // block (kLayer). Backward: a dense block (1.0 ms forward, 1.5 ms
  // backward, no experts) last, a MoE block before it, so the dense block's
  // backward comes first.
  StageCost f = stage_of({kLayer}, true);
  PairPieces embedding{ms(1.0), {}, {}, {}, {}, {}, ms(0.4), ms(0.4)};
  embedding.layer = false;
  f.pieces.insert(f.pieces.begin(), embedding);
  StageCost b = stage_of({kLayer}, true);
  b.pieces.push_back(PairPieces{ms(1.0), {}, {}, {}, {}, {}, ms(1.5), ms(1.0)});
  // The embedding [0, 1.0]; then the MoE forward beside the dense block's
  // backward, which Megatron runs whole as the rest of B, after the
  // experts' forward: pre-dispatch F [1.0, 1.5], dispatch [1.5, 1.8] (the
  // compute stream waits), experts F [1.8, 2.0], combine F [2.0, 2.3] beside
  // the dense backward [2.0, 3.5]; then the MoE backward alone: combine B
  // [3.5, 4.1], experts' input grads [4.1, 4.4], dispatch B [4.4, 5.0] beside
  // the weight grads [4.4, 4.9], rest [5.0, 5.5]. 5.5 ms: F + B (2.3 + 4.0
  // ms) less the combine F and 0.5 of the dispatch B, hidden.
  CHECK(paired_time(f, b, false).ms() == Approx(5.5));
}

TEST_CASE("pair pieces: pair_hidden shares F + B less the pair between the two overlaps", "[sim][pairs]") {
  const StageCost plain = stage_of({kLayer}, false);
  // F 1.3 ms (0.6 overlap), B 2.5 ms (1.2 overlap), the pair 2.5 ms: 1.3 ms
  // hidden, a third of it the forward's.
  const PairHidden hidden = pair_hidden(plain, ActionKind::kForward, plain, ActionKind::kBackward);
  CHECK(hidden.first.ms() == Approx(1.3 / 3));
  CHECK(hidden.second.ms() == Approx(1.3 * 2 / 3));
  // The backward first: the same pair.
  const PairHidden reversed = pair_hidden(plain, ActionKind::kBackward, plain, ActionKind::kForward);
  CHECK(reversed.first.ms() == Approx(1.3 * 2 / 3));
  CHECK(reversed.second.ms() == Approx(1.3 / 3));
  // Without pieces on either stage, the passes' totals alone (the first's
  // overlap 0.6 behind B's 1.3 of compute, the second's 1.2 behind F's 0.7).
  StageCost bare = plain;
  bare.pieces.clear();
  const PairHidden totals = pair_hidden(bare, ActionKind::kForward, plain, ActionKind::kBackward);
  CHECK(totals.first.ms() == Approx(0.6));
  CHECK(totals.second.ms() == Approx(0.7));
}

TEST_CASE("pair pieces: stage_costs gives pieces to the plans with pairs, from the layers' expert work",
          "[sim][pairs]") {
  Profile profile = make_uniform_profile(4, ms(2.0), ms(4.0), Bytes(0), Bytes(0));
  for (Layer& layer : profile.layers) {
    layer.backward_input = ms(2.5);
    layer.backward_weight = ms(1.5);
    layer.forward_overlap = ms(0.4);
    layer.backward_overlap = ms(0.6);
    layer.experts = Layer::ExpertWork{ms(0.8), ms(0.9), ms(1.0)};
  }
  Plan plan;
  plan.schedule = Schedule::kDualPipeV;
  plan.virtual_stages = 2;
  plan.batches = 4;
  for (int s = 0; s < 4; ++s) plan.stages.push_back(StagePlan{LayerRange{s, s + 1}, 1, {}});
  const Topology topology = make_flat_topology(4, 100.0, Seconds(0.0));
  const std::vector<StageCost> costs = stage_costs(profile, plan, topology);
  REQUIRE(costs[0].pieces.size() == 1);
  const PairPieces& p = costs[0].pieces[0];
  CHECK(costs[0].expert_weight_delayed);  // DualPipeV splits the weight gradients off
  CHECK(p.forward_all_to_all.ms() == Approx(0.2));
  CHECK(p.experts_forward.ms() == Approx(0.8));
  CHECK(p.forward_rest.ms() == Approx(2.0 - 0.8 - 0.4));
  CHECK(p.backward_all_to_all.ms() == Approx(0.3));
  CHECK(p.experts_input.ms() == Approx(0.9));
  CHECK(p.experts_weight.ms() == Approx(1.0));
  CHECK(p.backward_rest.ms() == Approx(4.0 - 0.6 - 0.9 - 1.0));
  CHECK(p.backward_input_rest.ms() == Approx(2.5 - 0.6 - 0.9));
  // A layer with an overlap that does not say what runs beside it: the
  // stage pairs by the totals.
  profile.layers[1].experts.reset();
  CHECK(stage_costs(profile, plan, topology)[1].pieces.empty());
  // A plan without pairs needs none.
  plan.schedule = Schedule::kOneFOneB;
  plan.virtual_stages = 1;
  CHECK(stage_costs(profile, plan, topology)[0].pieces.empty());
}

TEST_CASE("pair pieces: the profile's expert keys, all three or none, within the passes", "[sim][pairs][profile]") {
  Profile profile = make_uniform_profile(1, ms(2.0), ms(4.0), Bytes(0), Bytes(0));
  profile.layers[0].forward_overlap = ms(0.4);
  profile.layers[0].backward_overlap = ms(0.6);
  profile.layers[0].experts = Layer::ExpertWork{ms(0.8), ms(0.9), ms(1.0)};
  const nlohmann::json written = profile_to_json(profile);
  const auto read = profile_from_json(written, "p.json");
  REQUIRE(read.ok());
  REQUIRE(read->layers[0].experts.has_value());
  CHECK(read->layers[0].experts->forward.ms() == Approx(0.8));
  CHECK(read->layers[0].experts->backward_input.ms() == Approx(0.9));
  CHECK(read->layers[0].experts->backward_weight.ms() == Approx(1.0));
  nlohmann::json partial = written;
  partial["layers"][0].erase("expert_backward_weight_ms");
  const auto two = profile_from_json(partial, "p.json");
  REQUIRE_FALSE(two.ok());
  CHECK(two.error().message.find("or none") != std::string::npos);
  nlohmann::json over = written;
  over["layers"][0]["expert_forward_ms"] = 1.7;  // with the 0.4 ms overlap, more than the 2 ms forward
  const auto too_much = profile_from_json(over, "p.json");
  REQUIRE_FALSE(too_much.ok());
  CHECK(too_much.error().message.find("expert_forward_ms") != std::string::npos);
}
