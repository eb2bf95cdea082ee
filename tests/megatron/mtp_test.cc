// Multi-token prediction (sim/megatron.h's GptModel::mtp_layers; Megatron-
// core's --mtp-num-layers, multi_token_prediction.py, core 0.12 on): each
// depth's parameters (a block of the last block's kind, eh_proj, three
// norms), Megatron's FLOPs count, the depths' place on the last pipeline
// stage, their time (the block's, the lookup's, the output layer's and
// eh_proj's), the memory the last stage keeps for them, and the refusals.
#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_block.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

using testing::deepseek;
using testing::kV3;

// A small Llama-style decoder: 8 layers of h 2048, 16 heads in 4 groups,
// SwiGLU 5632, vocabulary 32000, sequence 2048; D depths.
GptModel small_dense(int64_t depths) {
  GptModel m = testing::llama(8, 2048, 16, 4, 5632, 32000);
  m.sequence = 2048;
  m.mtp_layers = depths;
  return m;
}

GptModel v3_with(int64_t depths) {
  GptModel m = deepseek(kV3);
  m.mtp_layers = depths;
  return m;
}

// DeepSeek-V3's multi-latent attention's weights per block (the latents'
// norms among them), as tests/megatron/latent_attention_test.cc counts them.
constexpr double kH = 7168, kHeads = 128, kQl = 1536, kKvl = 512, kDn = 128, kDr = 64, kDv = 128;
constexpr double kV3Attention = kH * kQl + kQl * kHeads * (kDn + kDr) + kH * (kKvl + kDr) +
                                kKvl * kHeads * (kDn + kDv) + kHeads * kDv * kH + (kQl + kKvl);

TEST_CASE("mtp: a DeepSeek-V3 depth holds a MoE block, eh_proj and three RMSNorms", "[megatron][mtp]") {
  // The last of V3's blocks is a MoE block: 256 experts of width 2048
  // (SwiGLU), a shared one, the router, the block's two RMSNorms.
  const double moe_block = kV3Attention + 256 * 3 * kH * 2048 + 3 * kH * 2048 + kH * 256 + 2 * kH;
  const double depth = moe_block + 2 * kH * kH + 3 * kH;
  CHECK(gpt_mtp_parameters(v3_with(1)) == Approx(depth).epsilon(1e-12));
  CHECK(gpt_parameters(v3_with(2), 1) - gpt_parameters(v3_with(0), 1) == Approx(2 * depth).epsilon(1e-12));
  // About 11.6B a depth; a token passes 8 of the 256 experts.
  CHECK(depth / 1e9 == Approx(11.61).epsilon(0.001));
  CHECK(gpt_active_parameters(v3_with(1), 1) - gpt_active_parameters(v3_with(0), 1) ==
        Approx(depth - 248 * 3 * kH * 2048).epsilon(1e-12));
  // A model whose last block is dense gets a dense depth: h (h + 2 h G / a)
  // + h^2 + 3 h f, two norms.
  const double h = 2048, kv = 2048.0 / 16 * 4, f = 5632;
  CHECK(gpt_mtp_parameters(small_dense(1)) ==
        Approx(h * (h + 2 * kv) + h * h + 3 * h * f + 2 * h + 2 * h * h + 3 * h).epsilon(1e-12));
  CHECK(gpt_mtp_parameters(small_dense(0)) == 0.0);
}

TEST_CASE("mtp: model FLOPs are Megatron's count with the depths", "[megatron][mtp]") {
  // training.py, num_floating_point_operations (core 0.12 on): each depth
  // one layer more of the last layer's kind, 3 x 2 x (3 h + 2 h^2) a token
  // for its norms and eh_proj, and a logit layer more: 6 h V (1 + D).
  MegatronLayout l = megatron_layout(1, 16, 16, 1, 1024);
  const double B = 1024, s = 4096, V = 129280;
  const double core = s * kHeads * (kDn + kDr) / 2 + s * kHeads * kDv / 2;
  const double attention = kQl * (kH + kHeads * (kDn + kDr) + 1) + kKvl * (kH + kHeads * (kDn + kDv) + 1) + kH * kDr +
                           kHeads * kDv * kH + core;
  const double moe_mlp = 8 * 3 * kH * 2048 + 3 * kH * 2048;
  const double depths = 2;
  const double more = 6 * B * s * depths * (attention + moe_mlp + 3 * kH + 2 * kH * kH) + 6 * B * s * kH * V * depths;
  CHECK(megatron_model_flops(v3_with(2), l) - megatron_model_flops(v3_with(0), l) == Approx(more).epsilon(1e-9));
}

TEST_CASE("mtp: the depths follow the blocks on the last pipeline stage, before the loss", "[megatron][mtp]") {
  const GptModel m = small_dense(2);
  const MegatronLayout l = megatron_layout(1, 4, 1, 1, 8);
  const Plan plan = megatron_plan(m, l);
  REQUIRE(plan.num_stages() == 4);
  // Profile layers: the embedding (0), 8 blocks, mtp.0, mtp.1, the head (11).
  CHECK(plan.stages[3].layers.begin == 7);
  CHECK(plan.stages[3].layers.end == 8 + 2 + 2);
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const MegatronProfile profile = make_megatron_profile(m, l, gpu, [](double) { return Seconds(0.0); });
  REQUIRE(profile.profile.layers.size() == 12);
  CHECK(profile.profile.layers[9].name == "mtp.0");
  CHECK(profile.profile.layers[10].name == "mtp.1");
  CHECK(profile.profile.layers[11].name == "head");
  // Each hands on the main hidden state and the depths' so far: 2 and 3 s b h.
  const double sbh = 2048 * 2048 * 2;
  CHECK(profile.profile.layers[9].output_bytes.value == 2 * sbh);
  CHECK(profile.profile.layers[10].output_bytes.value == 3 * sbh);
}

TEST_CASE("mtp: a depth's time is its block's, a lookup's and eh_proj's, its loss the model's output layer's",
          "[megatron][mtp]") {
  MegatronLayout l = megatron_layout(2, 2, 1, 1, 8);
  l.sequence_parallel = true;
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  // A linear collective, 1 GB/s: its time is its bytes.
  const CollectiveTime linear = [](double bytes) { return Seconds(bytes / 1e9); };
  const MegatronProfile profile = make_megatron_profile(small_dense(1), l, gpu, linear);
  const MegatronProfile plain = make_megatron_profile(small_dense(0), l, gpu, linear);
  const MegatronLayerTime& embedding = profile.times[0];
  const MegatronLayerTime& block = profile.times[8];
  const MegatronLayerTime& depth = profile.times[9];
  const MegatronLayerTime& head = profile.times[10];
  const MegatronLayerTime& plain_head = plain.times[9];
  const double T = 2048, h = 2048, t = 2, rows = T / t * h * 2, V = 32000;
  // enorm, hnorm and the concatenation: 4 passes over a norm's input
  // forward, 5 backward; eh_proj [T x 2h] x [2h x h / t].
  const Seconds proj = gpu.gemm(T, h / t, 2 * h);
  CHECK(depth.forward_compute.value ==
        Approx((block.forward_compute + embedding.forward_compute + gpu.memory_bound(8 * rows) + proj).value)
            .epsilon(1e-12));
  // eh_proj's input gathered (2 T h values) and its output gathered (T h),
  // each half an all-reduce; the backward's input gradient reduce-scattered.
  CHECK(depth.forward_comm.value ==
        Approx((block.forward_comm + embedding.forward_comm).value + 0.5 * T * h * 2 / 1e9 + 0.5 * 2 * T * h * 2 / 1e9)
            .epsilon(1e-12));
  CHECK(depth.backward_comm.value ==
        Approx((block.backward_comm + embedding.backward_comm).value + 0.5 * 2 * T * h * 2 / 1e9).epsilon(1e-12));
  const Seconds proj_weight = gpu.gemm(h / t, 2 * h, T);
  CHECK(depth.weight_gradient.value ==
        Approx((block.weight_gradient + embedding.weight_gradient + proj_weight).value).epsilon(1e-12));
  CHECK(depth.backward_compute.value == Approx((block.backward_compute + embedding.backward_compute +
                                                gpu.memory_bound(10 * rows) + gpu.gemm(T, 2 * h, h / t) + proj_weight)
                                                   .value)
                                            .epsilon(1e-12));
  // The depth's final norm, output layer [T x h] x [h x V / t] and cross
  // entropy (six fp32 passes: cast 2 + 4 bytes a logit, max 4, subtract 8,
  // exp 8, sum 4, divide 8) run with the model's, where the loss is.
  const double logits = T * V / t;
  Seconds loss;
  for (const double bytes : {6.0, 4.0, 8.0, 8.0, 4.0, 8.0}) loss += gpu.memory_bound(bytes * logits);
  CHECK(head.forward_compute.value ==
        Approx((plain_head.forward_compute + gpu.memory_bound(2 * rows) + gpu.gemm(T, V / t, h) + loss).value)
            .epsilon(1e-12));
  CHECK(head.weight_gradient.value ==
        Approx((plain_head.weight_gradient + gpu.gemm(V / t, h, T)).value).epsilon(1e-12));
  CHECK(head.parameters == plain_head.parameters);
  // Without full recomputation nothing is run again.
  CHECK(depth.recompute.value == block.recompute.value);
  // Full recomputation: eh_proj's forward and its collectives again with
  // the block's.
  l.recompute = Recompute::kFull;
  const MegatronProfile full = make_megatron_profile(small_dense(1), l, gpu, linear);
  CHECK(full.times[9].recompute.value ==
        Approx((full.times[8].recompute + proj).value + 0.5 * T * h * 2 / 1e9 + 0.5 * 2 * T * h * 2 / 1e9)
            .epsilon(1e-12));
}

TEST_CASE("mtp: the last stage holds the depths' weights and the word embedding's copy", "[megatron][mtp][memory]") {
  // Untied (Llama's): with p > 1 the last stage looks the shifted tokens up
  // in a copy of the word embedding, kept equal to the first stage's.
  const GptModel with = small_dense(1), without = small_dense(0);
  const MegatronLayout l = megatron_layout(1, 2, 1, 1, 8);
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const CollectiveTime linear = [](double bytes) { return Seconds(bytes / 1e9); };
  auto last_rank = [&](const GptModel& m) {
    const MegatronProfile profile = make_megatron_profile(m, l, gpu, linear, linear);
    return megatron_rank_work(profile, megatron_plan(m, l), 1);
  };
  const double V = 32000, h = 2048;
  CHECK(last_rank(with).parameters - last_rank(without).parameters ==
        Approx(gpt_mtp_parameters(with) + V * h).epsilon(1e-12));
  // The copy's gradient all-reduce between the two stages: V h fp16
  // gradients (megatron_layout trains in fp16), on the last stage as on the first.
  CHECK(last_rank(without).embedding_allreduce.value == 0.0);
  CHECK(last_rank(with).embedding_allreduce.value == Approx(V * h * 2 / 1e9).epsilon(1e-12));
  const MegatronProfile first = make_megatron_profile(with, l, gpu, linear, linear);
  CHECK(megatron_rank_work(first, megatron_plan(with, l), 0).embedding_allreduce.value ==
        Approx(V * h * 2 / 1e9).epsilon(1e-12));
  // On one stage there is one embedding: nothing to copy.
  const MegatronLayout one = megatron_layout(1, 1, 1, 1, 8);
  const MegatronProfile alone = make_megatron_profile(with, one, gpu, linear, linear);
  CHECK(megatron_rank_work(alone, megatron_plan(with, one), 0).parameters ==
        Approx(gpt_parameters(with, 1)).epsilon(1e-12));
}

TEST_CASE("mtp: the last stage keeps a depth's block, eh_proj's and the norms' inputs and its logits",
          "[megatron][mtp][memory]") {
  // 1F1B on 2 stages: the last runs each microbatch's forward and backward
  // back to back, one microbatch in flight.
  const MegatronLayout l = megatron_layout(1, 2, 1, 1, 8);
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  auto last_activations = [&](const GptModel& m) {
    const Result<MegatronPrediction> p = predict_megatron(m, l, topology, false);
    REQUIRE(p.ok());
    REQUIRE(p->memory.ranks[1].inflight_microbatches == 1);
    return static_cast<double>(p->memory.ranks[1].activations.value);
  };
  const double s = 2048, h = 2048, V = 32000;
  // eh_proj's input (2h a token) and the two norms' (h each), bf16; the
  // depth's logits as the output layer's (fp32, and their gradient).
  const double extra = s * h * 2 * 4 + s * V * 4 * 2;
  CHECK(last_activations(small_dense(1)) - last_activations(small_dense(0)) ==
        Approx(megatron_layer_activation_bytes(small_dense(1), l) + extra).epsilon(1e-6));
}

TEST_CASE("mtp: the flags Megatron would refuse are refused, naming them", "[megatron][mtp][bad-input]") {
  MegatronLayout l = megatron_layout(1, 1, 1, 1, 8);
  GptModel m = small_dense(65);
  Status status = check_megatron_layout(m, l, 8);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message == "--mtp-num-layers must be between 1 and 64, got 65");
  m.mtp_layers = 1;
  l.recompute = Recompute::kFull;
  l.recompute_layers = 2;
  status = check_megatron_layout(m, l, 8);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message ==
        "--mtp-num-layers with --recompute-num-layers 2: Megatron-core recomputes each multi-token prediction depth "
        "alone and asserts --recompute-num-layers 1 with --recompute-method uniform");
  l.recompute_layers = 1;
  CHECK(check_megatron_layout(m, l, 8).ok());
}

TEST_CASE("mtp: the plan file's arguments carry the depths", "[megatron][mtp]") {
  const GptModel m = small_dense(2);
  const MegatronLayout l = megatron_layout(1, 2, 1, 1, 8);
  const nlohmann::json arguments = megatron_arguments(m, l);
  CHECK(arguments.at("mtp_num_layers") == 2);
  const Result<MegatronSpec> back = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(back->model.mtp_layers == 2);
  CHECK_FALSE(megatron_arguments(small_dense(0), l).contains("mtp_num_layers"));
}

}  // namespace
}  // namespace baton
