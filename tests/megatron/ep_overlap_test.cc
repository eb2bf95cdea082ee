// --overlap-moe-expert-parallel-comm (MegatronLayout::overlap_moe_ep_comm,
// Megatron-core's batch-level overlap): interleaved 1F1B with one forward
// more in the warm-up and each steady-state forward paired with the backward
// after it (Plan::paired_steady_state), each pass's all-to-alls hidden
// behind the other's compute; refused where Megatron refuses it.
#include <string>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

// A small Mixtral-like model, 8 layers over p 2 in 4 chunks of one layer,
// its 8 experts over ep 8 with the alltoall dispatcher, 16 microbatches.
MegatronLayout overlapped(bool on) {
  MegatronLayout l = megatron_layout(1, 2, 8, 1, 128);
  l.bf16 = true;
  l.layers_per_virtual_stage = 1;
  l.expert_parallel = 8;
  l.moe_dispatcher = MoeDispatcher::kAllToAll;
  l.overlap_moe_ep_comm = on;
  return l;
}

std::string refusal(const GptModel& m, const MegatronLayout& l) {
  const Status status = check_megatron_layout(m, l, 64);
  return status.ok() ? "(accepted)" : status.error().message;
}

TEST_CASE("ep overlap: the pairs hide the all-to-alls, and only the plan's pairing differs", "[megatron][moe]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(8, 8, 2);
  REQUIRE(check_megatron_layout(m, overlapped(true), 64).ok());
  const auto plain = predict_megatron(m, overlapped(false), topology, false);
  const auto paired = predict_megatron(m, overlapped(true), topology, false);
  REQUIRE(plain.ok());
  REQUIRE(paired.ok());
  CHECK_FALSE(plain->plan.paired_steady_state);
  CHECK(paired->plan.paired_steady_state);
  CHECK(paired->plan.schedule == Schedule::kInterleaved1F1B);
  // The same work; the all-to-alls exposed less, and the iteration shorter.
  CHECK(paired->breakdown.compute == plain->breakdown.compute);
  REQUIRE(plain->breakdown.expert_comm.value > 0.0);
  CHECK(paired->breakdown.expert_comm < plain->breakdown.expert_comm);
  CHECK(paired->iteration_time < plain->iteration_time);
  // The layout's Megatron arguments carry it, and read back.
  const nlohmann::json arguments = megatron_arguments(m, overlapped(true));
  CHECK(arguments["overlap_moe_expert_parallel_comm"] == true);
  const auto back = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.overlap_moe_ep_comm);
  CHECK_FALSE(megatron_arguments(m, overlapped(false)).contains("overlap_moe_expert_parallel_comm"));
}

TEST_CASE("ep overlap: refused where Megatron refuses it, and off interleaving, naming the flag",
          "[megatron][moe][bad-input]") {
  const GptModel m = testing::small_moe(8, 8, 2);
  MegatronLayout one = overlapped(true);
  one.expert_parallel = 1;
  CHECK(refusal(m, one) == "--overlap-moe-expert-parallel-comm needs --expert-model-parallel-size of at least 2");
  MegatronLayout gathered = overlapped(true);
  gathered.moe_dispatcher = MoeDispatcher::kAllGather;
  CHECK(refusal(m, gathered) ==
        "--overlap-moe-expert-parallel-comm needs --moe-token-dispatcher-type alltoall, as Megatron does");
  MegatronLayout full = overlapped(true);
  full.recompute = Recompute::kFull;
  CHECK(refusal(m, full) ==
        "--overlap-moe-expert-parallel-comm does not go with --recompute-granularity full, as in Megatron");
  GptModel shared = m;
  shared.shared_expert_ffn = 2048;
  MegatronLayout both = overlapped(true);
  both.moe_shared_expert_overlap = true;
  CHECK(refusal(shared, both) ==
        "--overlap-moe-expert-parallel-comm does not go with --moe-shared-expert-overlap, as in Megatron");
  MegatronLayout straight = overlapped(true);
  straight.layers_per_virtual_stage = 0;
  CHECK_THAT(refusal(m, straight), Catch::Contains("baton models it on interleaved 1F1B"));
  MegatronLayout v = overlapped(true);
  v.layers_per_virtual_stage = 0;
  v.v_schedule = VSchedule::kDualPipeV;
  CHECK_THAT(refusal(m, v), Catch::Contains("baton models it on interleaved 1F1B"));
  GptModel two_depths = m;
  two_depths.mtp_layers = 2;
  CHECK(refusal(two_depths, overlapped(true)) ==
        "--overlap-moe-expert-parallel-comm takes at most one --mtp-num-layers, as Megatron does");
}

TEST_CASE("ep overlap: --delay-wgrad-compute lets the dispatch backward start before the experts' weight gradients",
          "[megatron][moe]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(8, 8, 2);
  MegatronLayout delayed = overlapped(true);
  delayed.delay_wgrad_compute = true;
  const auto paired = predict_megatron(m, overlapped(true), topology, false);
  const auto late = predict_megatron(m, delayed, topology, false);
  REQUIRE(paired.ok());
  REQUIRE(late.ok());
  CHECK_FALSE(paired->plan.delay_wgrad_compute);
  CHECK(late->plan.delay_wgrad_compute);
  // The same work, never more of the all-to-alls exposed.
  CHECK(late->breakdown.compute == paired->breakdown.compute);
  CHECK(late->breakdown.expert_comm <= paired->breakdown.expert_comm);
  CHECK(late->iteration_time <= paired->iteration_time);
  // Each MoE block says what its all-to-alls run beside: the experts' work,
  // within its passes (Layer::experts); the pairs run it piece by piece.
  const auto profile = megatron_profile_on(m, delayed, topology);
  REQUIRE(profile.ok());
  int with_experts = 0;
  for (const Layer& layer : profile->profile.layers) {
    if (!layer.experts) continue;
    ++with_experts;
    CHECK(layer.experts->forward.value > 0.0);
    CHECK(layer.experts->forward + layer.forward_overlap <= layer.forward);
    CHECK(layer.experts->backward_weight <= *layer.backward_weight);
    CHECK(layer.experts->backward_input + layer.experts->backward_weight + layer.backward_overlap <= layer.backward);
  }
  CHECK(with_experts == 8);
  // The embedding and the output layer carry none (they run before and
  // after a pair's blocks); a dense block of a MoE model carries zero work
  // (a block all the same, beside the other pass's).
  CHECK_FALSE(profile->profile.layers.front().experts.has_value());
  CHECK_FALSE(profile->profile.layers.back().experts.has_value());
  GptModel mixed = m;
  mixed.moe_layer_pattern = {0, 1, 1, 1, 1, 1, 1, 1};
  const auto mixed_profile = megatron_profile_on(mixed, delayed, topology);
  REQUIRE(mixed_profile.ok());
  const Layer& dense = mixed_profile->profile.layers.at(1);  // block.0, after the embedding
  REQUIRE(dense.experts.has_value());
  CHECK(dense.experts->forward.value == 0.0);
  CHECK(dense.experts->backward_input.value == 0.0);
  CHECK(dense.experts->backward_weight.value == 0.0);
  CHECK(dense.forward_overlap.value == 0.0);
  CHECK(mixed_profile->profile.layers.at(2).experts->forward.value > 0.0);
  // Megatron's arguments carry it, and read back; without the overlap it is refused.
  const nlohmann::json arguments = megatron_arguments(m, delayed);
  CHECK(arguments["delay_wgrad_compute"] == true);
  const auto back = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.delay_wgrad_compute);
  MegatronLayout alone = overlapped(false);
  alone.delay_wgrad_compute = true;
  CHECK(refusal(m, alone) == "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm, as Megatron does");
  // A block recomputed whole runs its forward's all-to-alls again in its
  // backward: no pieces, the pair weighs it by its totals.
  MegatronLayout full = overlapped(false);
  full.recompute = Recompute::kFull;
  const auto recomputed = megatron_profile_on(m, full, topology);
  REQUIRE(recomputed.ok());
  for (const Layer& layer : recomputed->profile.layers) CHECK_FALSE(layer.experts.has_value());
}

}  // namespace
}  // namespace baton
