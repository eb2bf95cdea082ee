// Megatron layouts on the zero-bubble schedules (MegatronLayout::zero_bubble):
// ZB-H1 and ZB-H2 run the profile's I and W halves, shorten the 1F1B bubble,
// hold what they are documented to hold, and are refused where they cannot run.
#include <vector>

#include "tests/catch_compat.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/simulator.h"
#include "tests/megatron/megatron_test_support.h"

namespace baton {
namespace {

using testing::megatron_layout;
using testing::shipped_topology;

const GptModel kModel{24, 2048, 16, 2048, 50257};

// The layout predicted on 1F1B, ZB-H1 and ZB-H2, in that order.
std::vector<MegatronPrediction> on_each_schedule(MegatronLayout layout, const Topology& topology) {
  std::vector<MegatronPrediction> out;
  for (int zero_bubble : {0, 1, 2}) {
    layout.zero_bubble = zero_bubble;
    auto predicted = predict_megatron(kModel, layout, topology, false);
    REQUIRE(predicted.ok());
    out.push_back(std::move(*predicted));
  }
  return out;
}

TEST_CASE("zero bubble: ZB-H1 and ZB-H2 shorten 1F1B's iteration, same work", "[megatron][zero-bubble]") {
  const Topology topology = shipped_topology("a100_vtrain.json");
  // t 2, p 4, d 1, 8 microbatches: a bubble of (p - 1) / m of the work to shorten.
  const auto each = on_each_schedule(megatron_layout(2, 4, 1, 1, 8), topology);
  const MegatronPrediction *plain = &each[0], *h1 = &each[1], *h2 = &each[2];
  CHECK(h1->plan.schedule == Schedule::kZbH1);
  CHECK(h2->plan.schedule == Schedule::kZbH2);
  CHECK(h1->iteration_time < plain->iteration_time);
  CHECK(h2->iteration_time <= h1->iteration_time);
  // The compute is the same; only the bubble changes.
  CHECK(h1->breakdown.compute.value == Approx(plain->breakdown.compute.value).epsilon(1e-12));
  CHECK(h1->breakdown.bubble < plain->breakdown.bubble);
}

TEST_CASE("zero bubble: ZB-H1 keeps 1F1B's peak on the first rank, ZB-H2 holds 2p - 1 microbatches",
          "[megatron][zero-bubble]") {
  const Topology topology = shipped_topology("a100_vtrain.json");
  MegatronLayout layout = megatron_layout(2, 4, 1, 1, 16);
  layout.recompute = Recompute::kSelective;
  const auto each = on_each_schedule(layout, topology);
  const MegatronPrediction *plain = &each[0], *h1 = &each[1], *h2 = &each[2];
  layout.zero_bubble = 2;
  // Rank 0 holds p = 4 microbatches' blocks at its peak in both (Qi et al.:
  // ZB-H1 keeps 1F1B's peak activation memory).
  CHECK(plain->memory.ranks[0].inflight_microbatches == 4);
  CHECK(h1->memory.ranks[0].activations == plain->memory.ranks[0].activations);
  // ZB-H2: 2p - 1 = 7 microbatches in flight on the first rank (until their W).
  CHECK(h2->memory.ranks[0].inflight_microbatches == 7);
  CHECK(h2->memory.ranks[0].activations > h1->memory.ranks[0].activations);
  // What a block keeps between I and W over a selective block: (8 + 24/t) / (10 + 24/t) at t 2.
  CHECK(weight_pass_share(kModel, layout) == Approx((8.0 + 12.0) / (10.0 + 12.0)));
  layout.sequence_parallel = true;
  CHECK(weight_pass_share(kModel, layout) == Approx(32.0 / 34.0));
  layout.zero_bubble = 0;
  CHECK(weight_pass_share(kModel, layout) == 0.0);
}

TEST_CASE("zero bubble: refused with interleaving or one pipeline stage, naming the flags",
          "[megatron][zero-bubble][bad-input]") {
  MegatronLayout layout = megatron_layout(2, 4, 1, 1, 8);
  layout.zero_bubble = 1;
  layout.layers_per_virtual_stage = 3;
  const auto interleaved = check_megatron_layout(kModel, layout, 64);
  REQUIRE_FALSE(interleaved.ok());
  CHECK(interleaved.error().message.find("--enable-zero-bubble runs one chunk per GPU") != std::string::npos);
  layout = megatron_layout(2, 1, 1, 1, 8);
  layout.zero_bubble = 2;
  const auto single = check_megatron_layout(kModel, layout, 64);
  REQUIRE_FALSE(single.ok());
  CHECK(single.error().message.find("--enable-zero-bubble needs --pipeline-model-parallel-size") != std::string::npos);
}

TEST_CASE("zero bubble: a plan file's Megatron arguments keep the schedule as the fork's flags",
          "[megatron][zero-bubble]") {
  MegatronLayout layout = megatron_layout(2, 4, 1, 1, 8);
  layout.zero_bubble = 2;
  const nlohmann::json arguments = megatron_arguments(kModel, layout);
  CHECK(arguments["enable_zero_bubble"] == true);
  CHECK(arguments["zero_bubble_max_pending_backward"] == 8);  // 2p
  const auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.zero_bubble == 2);
  nlohmann::json odd = arguments;
  odd["zero_bubble_max_pending_backward"] = 6;
  const auto refused = megatron_from_arguments(odd, "plan.json: megatron");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("must be p = 4 (ZB-H1) or 2p = 8 (ZB-H2)") != std::string::npos);
}

}  // namespace
}  // namespace baton
