// --overlap-moe-expert-parallel-comm (MegatronLayout::overlap_moe_ep_comm,
// Megatron-core's batch-level overlap): interleaved 1F1B with one forward
// more in the warm-up and each steady-state forward paired with the backward
// after it (Plan::paired_steady_state), each pass's all-to-alls hidden
// behind the other's compute; without a pipeline, Megatron-core's
// no-pipelining pairs; refused where Megatron refuses it.
#include <string>
#include <vector>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

// t 1, p stages of `layers_per_chunk` blocks a chunk (0: no chunks), d 8,
// micro-batch 1, bf16, the 8 experts over ep 8 with the alltoall dispatcher,
// the batch-level overlap `on` or not.
MegatronLayout alltoall_layout(int p, int layers_per_chunk, int global, bool on) {
  MegatronLayout l = megatron_layout(1, p, 8, 1, global);
  l.bf16 = true;
  l.layers_per_virtual_stage = layers_per_chunk;
  l.expert_parallel = 8;
  l.moe_dispatcher = MoeDispatcher::kAllToAll;
  l.overlap_moe_ep_comm = on;
  return l;
}

// A small Mixtral-like model, 8 layers over p 2 in 4 chunks of one layer,
// 16 microbatches.
MegatronLayout overlapped(bool on) { return alltoall_layout(2, 1, 128, on); }

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

TEST_CASE("ep overlap without a pipeline: F0, then each forward paired with the backward before it",
          "[megatron][moe]") {
  // Megatron-core's combined_1f1b_schedule_for_no_pipelining (p = 1): phase 0
  // runs microbatch 0's forward alone, phase i its backward i - 1 beside
  // forward i, phase m the last backward alone.
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(8, 8, 2);
  const auto layout = [](bool on) { return alltoall_layout(1, 0, 64, on); };  // 8 microbatches per replica
  REQUIRE(check_megatron_layout(m, layout(true), 64).ok());
  const auto plain = predict_megatron(m, layout(false), topology, false);
  const auto paired = predict_megatron(m, layout(true), topology, false);
  REQUIRE(plain.ok());
  REQUIRE(paired.ok());
  CHECK(paired->plan.schedule == Schedule::kOneFOneB);
  CHECK(paired->plan.paired_steady_state);
  CHECK_FALSE(plain->plan.paired_steady_state);
  // The same work; two microbatches' activations held at once instead of one.
  CHECK(paired->breakdown.compute == plain->breakdown.compute);
  CHECK(plain->memory.ranks.at(0).inflight_microbatches == 1);
  CHECK(paired->memory.ranks.at(0).inflight_microbatches == 2);
  CHECK(paired->memory.ranks.at(0).activations > plain->memory.ranks.at(0).activations);
  // The all-to-alls exposed less, but never less than one microbatch's: the
  // first forward's and the last backward's run unpaired.
  const double microbatches = 8.0;
  REQUIRE(plain->breakdown.expert_comm.value > 0.0);
  CHECK(paired->breakdown.expert_comm < plain->breakdown.expert_comm);
  CHECK(paired->breakdown.expert_comm.value >= plain->breakdown.expert_comm.value / microbatches * (1.0 - 1e-9));
  CHECK(paired->iteration_time < plain->iteration_time);
  CHECK(paired->iteration_time.value >=
        plain->iteration_time.value - plain->breakdown.expert_comm.value * (microbatches - 1.0) / microbatches);
  // The schedule with pipeline stages but no interleaving stays refused.
  MegatronLayout straight = layout(true);
  straight.pipeline = 2;
  straight.data = 4;
  straight.expert_parallel = 4;
  CHECK_THAT(refusal(m, straight), Catch::Contains("baton models it on interleaved 1F1B"));
}

TEST_CASE("ep overlap: a pair holds one forward block more than before it, not both chunks whole", "[megatron][moe]") {
  // Megatron's TransformerModelChunkSchedulePlan.run runs forward block i
  // beside backward block n - 1 - i, each backward block freeing its
  // activations as it ends. p 2, v 2 (chunks of n = 2 blocks), 4
  // microbatches: rank 0 runs F0 F1 (chunk 0) F0 F1 (chunk 1) F2 (chunk 0),
  // 5 n = 10 blocks held, then its pairs, each at worst 10 + 1 (pass by pass
  // it would be 6 n = 12); rank 1 warms up 3 forwards, 3 n + 1 = 7 (not 8).
  const GptModel m = testing::small_moe(8, 8, 2);
  MegatronLayout l = alltoall_layout(2, 2, 32, true);
  REQUIRE(check_megatron_layout(m, l, 64).ok());
  const Plan paired = megatron_plan(m, l);
  REQUIRE(paired.paired_steady_state);
  REQUIRE(paired.virtual_stages == 2);
  const std::vector<HeldPeak> held = held_peaks(paired);
  REQUIRE(held.size() == 2);
  CHECK(held[0].block_microbatches == 11.0);
  CHECK(held[1].block_microbatches == 7.0);
  // Both microbatches of a pair count in flight: the warm-up's and the pair's forward.
  CHECK(held[0].microbatches == 6);
  CHECK(held[1].microbatches == 4);
  // Without the pairs, Megatron's warm-up of 2 (p - d - 1) + (v - 1) p forwards:
  // 4 n and 2 n held, one forward more at the first 1F1B step.
  l.overlap_moe_ep_comm = false;
  const std::vector<HeldPeak> plain = held_peaks(megatron_plan(m, l));
  CHECK(plain[0].block_microbatches == 10.0);
  CHECK(plain[1].block_microbatches == 6.0);
  // Without a pipeline: the 8 blocks of one microbatch, one more in a pair.
  CHECK(held_peaks(megatron_plan(m, alltoall_layout(1, 0, 64, true))).at(0).block_microbatches == 9.0);
  CHECK(held_peaks(megatron_plan(m, alltoall_layout(1, 0, 64, false))).at(0).block_microbatches == 8.0);
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
        "--overlap-moe-expert-parallel-comm needs --moe-token-dispatcher-type alltoall or flex, as Megatron does");
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
