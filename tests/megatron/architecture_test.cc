// A GPT beyond GPT-3's architecture (sim/megatron.h): Megatron-core's flags for
// the decoders trained today (an MLP of its own width, SwiGLU, grouped-query
// attention, no biases, an untied output layer, rotary positions, RMSNorm,
// FlashAttention) in the parameter count, the model FLOPs, the activation
// memory, a block's time and the plan file's arguments.
//
// Parameter counts of the released checkpoints: Llama 2 7B and 70B (Touvron et
// al., "Llama 2: Open Foundation and Fine-Tuned Chat Models", 2023, Table 1
// and section 2.2: 4096 / 8192 hidden, 32 / 80 layers, 32 / 64 heads, GQA
// with 8 key-value heads for 70B, SwiGLU, RMSNorm, rotary positions, a 32,000
// token vocabulary) and Llama 3 8B (Llama Team, "The Llama 3 Herd of Models",
// 2024, Table 3: 32 layers, 4096 hidden, FFN 14,336, 32 heads, 8 key-value
// heads, a 128,000-token vocabulary, 128,256 entries in the release).
#include <cmath>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

const GptModel kLlama2_7B = testing::llama(32, 4096, 32, 32, 11008, 32000);
const GptModel kLlama2_70B = testing::llama(80, 8192, 64, 8, 28672, 32000);
const GptModel kLlama3_8B = testing::llama(32, 4096, 32, 8, 14336, 128256);
const GptModel k22B{48, 6144, 64, 2048, 51200};  // Korthikanti et al., Table 3

// Per block: attention h (h + 2 h G / a) + h^2, SwiGLU MLP 3 h f, two RMSNorms
// of h; the word embedding and the untied output layer V h each, the final
// RMSNorm h.
double llama_parameters(double L, double h, double a, double G, double f, double V) {
  return L * (h * (h + 2 * h * G / a) + h * h + 3 * h * f + 2 * h) + 2 * V * h + h;
}

TEST_CASE("megatron architecture: the parameters of Llama 2 7B and 70B and Llama 3 8B", "[megatron][architecture]") {
  CHECK(gpt_parameters(kLlama2_7B, 1) == llama_parameters(32, 4096, 32, 32, 11008, 32000));
  CHECK(gpt_parameters(kLlama2_7B, 1) == 6738415616.0);
  CHECK(gpt_parameters(kLlama2_70B, 1) == llama_parameters(80, 8192, 64, 8, 28672, 32000));
  CHECK(gpt_parameters(kLlama2_70B, 1) == 68976648192.0);
  CHECK(gpt_parameters(kLlama3_8B, 1) == llama_parameters(32, 4096, 32, 8, 14336, 128256));
  CHECK(gpt_parameters(kLlama3_8B, 1) == 8030261248.0);
  // At t 8 Megatron pads 32,000 to a multiple of 1024: 32,768 rows, twice.
  CHECK(gpt_parameters(kLlama2_70B, 8) - gpt_parameters(kLlama2_70B, 1) == 2.0 * 768 * 8192);
}

TEST_CASE("megatron architecture: GPT's defaults keep GPT's count", "[megatron][architecture]") {
  const double h = 6144;
  CHECK_FALSE(k22B.beyond_gpt());
  CHECK(k22B.ffn() == 4 * 6144);
  CHECK(k22B.kv_hidden() == 6144);
  CHECK(gpt_block_linear_parameters(k22B) == 12 * h * h);
  CHECK(gpt_block_parameters(k22B) == 12 * h * h + 13 * h);
  // Each flag alone, against the count it changes.
  GptModel m = k22B;
  m.ffn_hidden = 16384;  // MLP weights 2 h f, biases f + h
  CHECK(gpt_block_parameters(m) == 4 * h * h + 2 * h * 16384 + (4 * h + 16384 + h) + 4 * h);
  m = k22B;
  m.rope = true;  // no position table
  CHECK(gpt_parameters(k22B, 1) - gpt_parameters(m, 1) == 2048 * h);
  m = k22B;
  m.tied_output = false;  // a second V h
  CHECK(gpt_parameters(m, 1) - gpt_parameters(k22B, 1) == 51200 * h);
  m = k22B;
  m.linear_bias = false;  // the biases of QKV (3h), projection (h), MLP (4h + h)
  CHECK(gpt_block_parameters(k22B) - gpt_block_parameters(m) == 9 * h);
  m = k22B;
  m.rms_norm = true;  // two norms lose their bias
  CHECK(gpt_block_parameters(k22B) - gpt_block_parameters(m) == 2 * h);
}

TEST_CASE("megatron architecture: model FLOPs as Megatron-core counts them", "[megatron][architecture]") {
  // Megatron-core's num_floating_point_operations (training.py):
  // 12 B s L h^2 ((1 + G / a + s / h) + (f / h) x 3/2 gated + V / (2 L h)),
  // no recomputation counted.
  const double B = 512, s = 4096, L = 32, h = 4096, a = 32, G = 8, f = 14336, V = 128256;
  const MegatronLayout none = megatron_layout(1, 1, 8, 1, 512);
  const double megatron_core = 12 * B * s * L * h * h * ((1 + G / a + s / h) + f / h * 1.5 + V / (2 * L * h));
  CHECK(megatron_model_flops(kLlama3_8B, none) == Approx(megatron_core).epsilon(1e-12));
  // Full recomputation counts the forward once more (Narayanan et al. 2021,
  // eq. 3): a third of the blocks' three passes, the logits not.
  MegatronLayout full = none;
  full.recompute = Recompute::kFull;
  const double blocks = 12 * B * s * L * h * h * ((1 + G / a + s / h) + f / h * 1.5);
  CHECK(megatron_model_flops(kLlama3_8B, full) == Approx(megatron_core + blocks / 3).epsilon(1e-12));
}

TEST_CASE("megatron architecture: activation memory per block, Korthikanti's terms per tensor",
          "[megatron][architecture][memory]") {
  // s b h units: 10 kept whole (norm inputs 4, QKV and MLP inputs 2 each, two
  // dropout masks), over t the queries 2, keys and values 2 G / a each, the
  // projection's input 2, SwiGLU's input 4 f / h and output 2 f / h, and the
  // scores 5 a s / h, or FlashAttention's fp32 statistics 4 a / h.
  const double s = 4096, b = 2, h = 8192, a = 64, G = 8, f = 28672, t = 8;
  const double sbh = s * b * h;
  MegatronLayout l = megatron_layout(8, 1, 1, 2, 2);
  GptModel m = kLlama2_70B;
  const double split = 2 + 4 * G / a + 2 + 6 * f / h;
  CHECK(megatron_layer_activation_bytes(m, l) == Approx(sbh * (10 + split / t + 5 * a * s / (h * t))));
  m.flash_attention = true;
  CHECK(megatron_layer_activation_bytes(m, l) == Approx(sbh * (10 + split / t + 4 * a / (h * t))));
  l.sequence_parallel = true;
  CHECK(megatron_layer_activation_bytes(m, l) == Approx(sbh * ((10 + split) / t + 4 * a / (h * t))));
  // Selective recomputation keeps FlashAttention's statistics (nothing of s x s to drop).
  l.recompute = Recompute::kSelective;
  CHECK(megatron_layer_activation_bytes(m, l) == Approx(sbh * ((10 + split) / t + 4 * a / (h * t))));
  l.recompute = Recompute::kFull;
  CHECK(megatron_layer_activation_bytes(m, l) == Approx(2 * sbh / t));
}

struct BlockPair {
  MegatronLayerTime plain, changed;
};

BlockPair blocks(const GptModel& plain, const GptModel& changed, const MegatronLayout& l) {
  const Topology topology = testing::shipped_topology("a100_vtrain.json");
  auto a = megatron_profile_on(plain, l, topology);
  auto b = megatron_profile_on(changed, l, topology);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  return {a->times[1], b->times[1]};
}

TEST_CASE("megatron architecture: grouped-query attention narrows the QKV GEMMs and SwiGLU widens the MLP's",
          "[megatron][architecture]") {
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const MegatronLayout l = megatron_layout(8, 1, 1, 2, 2);
  const double T = 2 * 2048, h = 6144, t = 8;
  GptModel grouped = k22B;
  grouped.query_groups = 8;  // keys and values 8 x 96 = 768 wide: QKV 6144 + 2 x 768
  BlockPair p = blocks(k22B, grouped, l);
  const double qkv = (h + 2 * 768) / t;
  // Forward: the QKV GEMM; backward: its input and its weight gradient.
  CHECK((p.plain.forward_compute - p.changed.forward_compute).value ==
        Approx((gpu.gemm(T, 3 * h / t, h) - gpu.gemm(T, qkv, h)).value).epsilon(1e-9));
  CHECK((p.plain.weight_gradient - p.changed.weight_gradient).value ==
        Approx((gpu.gemm(3 * h / t, h, T) - gpu.gemm(qkv, h, T)).value).epsilon(1e-9));
  CHECK(p.plain.parameters - p.changed.parameters == Approx((2 * h * (h - 768) + 2 * (h - 768)) / t));

  GptModel gated = k22B;
  gated.swiglu = true;  // up projection 2 x 4h wide; SiLU x gate moves 3 T f / t values where GeLU moves 2
  p = blocks(k22B, gated, l);
  const double f = 4 * h;
  CHECK((p.changed.forward_compute - p.plain.forward_compute).value ==
        Approx((gpu.gemm(T, 2 * f / t, h) - gpu.gemm(T, f / t, h) + gpu.memory_bound(3 * T * f / t * 2) -
                gpu.memory_bound(2 * T * f / t * 2))
                   .value)
            .epsilon(1e-9));
  CHECK((p.changed.weight_gradient - p.plain.weight_gradient).value ==
        Approx((gpu.gemm(2 * f / t, h, T) - gpu.gemm(f / t, h, T)).value).epsilon(1e-9));
}

TEST_CASE("megatron architecture: FlashAttention takes the causal half of the two products and no scores pass",
          "[megatron][architecture]") {
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  // b a / t = 16: Megatron's fused softmax takes the plain block's scores.
  const MegatronLayout l = megatron_layout(8, 1, 1, 2, 2);
  GptModel flash = k22B;
  flash.flash_attention = true;
  const BlockPair p = blocks(k22B, flash, l);
  const double s = 2048, d = 96, count = 2.0 * 64 / 8;
  const Seconds products = gpu.gemm(s, s, d, count) + gpu.gemm(s, d, s, count);
  const Seconds megatron = products + gpu.memory_bound(count * s * s * 2 * 3);  // scores, softmax, dropout
  const Seconds flash_core = products * 0.5;
  CHECK((p.plain.forward_compute - p.changed.forward_compute).value ==
        Approx((megatron - flash_core).value).epsilon(1e-9));
  // The backward: twice Megatron's core against 2.5 times FlashAttention's forward.
  CHECK((p.plain.backward_compute - p.changed.backward_compute).value ==
        Approx((megatron * 2.0 - flash_core * 2.5).value).epsilon(1e-9));
  CHECK(p.changed.weight_gradient.value == Approx(p.plain.weight_gradient.value).epsilon(1e-12));
}

TEST_CASE("megatron architecture: an untied output layer is the head's own, with no embedding all-reduce",
          "[megatron][architecture]") {
  const Topology topology = testing::shipped_topology("a100_vtrain.json");
  GptModel untied = k22B;
  untied.tied_output = false;
  const double h = 6144, v = 51200.0 / 8;
  for (const int p : {1, 2}) {
    CAPTURE(p);
    const MegatronLayout l = megatron_layout(8, p, 1, 1, 8);
    const auto profile = megatron_profile_on(untied, l, topology);
    REQUIRE(profile.ok());
    CHECK(profile->times.back().parameters == 2 * h + v * h);  // the final LayerNorm and the output layer
    CHECK(profile->times.back().embedding_allreduce.value == 0.0);
    CHECK(profile->times.front().embedding_allreduce.value == 0.0);
  }
  // Tied at p 2, the head's copy is kept equal to the embedding by an all-reduce.
  const auto tied = megatron_profile_on(k22B, megatron_layout(8, 2, 1, 1, 8), topology);
  REQUIRE(tied.ok());
  CHECK(tied->times.back().embedding_allreduce.value > 0.0);
}

TEST_CASE("megatron architecture: the plan file's arguments carry the architecture, and GPT's leave it out",
          "[megatron][architecture]") {
  MegatronLayout l = megatron_layout(8, 4, 1, 1, 64);
  GptModel m = kLlama2_70B;
  m.flash_attention = true;
  const nlohmann::json arguments = megatron_arguments(m, l);
  CHECK(arguments["ffn_hidden_size"] == 28672);
  CHECK(arguments["num_query_groups"] == 8);
  CHECK(arguments["group_query_attention"] == true);
  CHECK(arguments["normalization"] == "RMSNorm");
  CHECK(arguments["position_embedding_type"] == "rope");
  const auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(megatron_arguments(back->model, back->layout) == arguments);
  CHECK(gpt_parameters(back->model, 8) == gpt_parameters(m, 8));
  CHECK_FALSE(megatron_arguments(k22B, l).contains("swiglu"));

  nlohmann::json bad = arguments;
  bad["normalization"] = "BatchNorm";
  auto refused = megatron_from_arguments(bad, "plan.json: megatron");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("normalization") != std::string::npos);
  bad = arguments;
  bad["group_query_attention"] = false;
  refused = megatron_from_arguments(bad, "plan.json: megatron");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("num_query_groups") != std::string::npos);
}

TEST_CASE("megatron architecture: query groups must divide the heads and split over t", "[megatron][architecture]") {
  GptModel m = kLlama2_70B;
  CHECK(check_megatron_layout(m, megatron_layout(8, 1, 1, 1, 1), 64).ok());
  const auto over = check_megatron_layout(m, megatron_layout(16, 1, 1, 1, 1), 64);  // 8 groups on 16 ranks
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().message.find("--num-query-groups 8 is not divisible by --tensor-model-parallel-size 16") !=
        std::string::npos);
  m.query_groups = 5;
  const auto uneven = check_megatron_layout(m, megatron_layout(1, 1, 1, 1, 1), 64);
  REQUIRE_FALSE(uneven.ok());
  CHECK(uneven.error().message.find("--num-query-groups 5 does not divide --num-attention-heads 64") !=
        std::string::npos);
}

}  // namespace
}  // namespace baton
