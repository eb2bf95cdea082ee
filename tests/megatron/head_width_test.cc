// A head width other than h / a (Megatron's --kv-channels d; GptModel's
// kv_channels): the queries a d wide, the keys and values G d, the output
// projection's input a d. Qwen3's MoE models run it (Qwen3-30B-A3B: h 2048,
// 32 heads of 128, 4 key-value groups). The parameters, Megatron's FLOPs
// count, the kept activations, the linears' shapes on a tensor-parallel rank,
// the checks and the plan file's arguments.
#include <cmath>

#include "tests/catch_compat.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_block.h"
#include "sim/megatron_profile.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

using megatron_detail::attention_linears;
using megatron_detail::shape_of;

// Qwen3-30B-A3B (its config.json on the Hugging Face hub: 48 layers, hidden
// 2048, 32 heads, 4 key-value heads, head_dim 128, 128 experts of 768, 8
// routed a token, vocabulary 151936, untied embeddings, q/k norms), at
// sequence 4096, with `head` the head width (0: h / a, 64).
GptModel qwen3_30b_a3b(int64_t head = 128) {
  GptModel m = llama_style(48, 2048, 32, 4, 6144, 151936, 4096);
  m.kv_channels = head;
  m.qk_layernorm = true;
  m.experts = 128;
  m.router_topk = 8;
  m.moe_ffn_hidden = 768;
  m.grouped_gemm = true;
  m.flash_attention = true;
  return m;
}

TEST_CASE("head width: Qwen3-30B-A3B has the parameters its model card states", "[megatron]") {
  const GptModel m = qwen3_30b_a3b();
  const double L = 48, h = 2048, a = 32, G = 4, d = 128, E = 128, k = 8, F = 768, V = 151936;
  // A block: QKV h (a d + 2 G d), the projection a d h, the query's and the
  // key's RMSNorm (d each), two RMSNorms (h each), the router h E and E
  // SwiGLU experts 3 h F; the word embedding and the output layer V h each,
  // the final RMSNorm h.
  const double attention = h * (a * d + 2 * G * d) + a * d * h;
  CHECK(gpt_attention_weights(m) == attention);
  const double block = attention + 2 * d + 2 * h + h * E + E * 3 * h * F;
  CHECK(gpt_parameters(m, 1) == L * block + 2 * V * h + h);
  CHECK(gpt_active_parameters(m, 1) == L * (block - (E - k) * 3 * h * F) + 2 * V * h + h);
  // The model card: "Number of Parameters: 30.5B in total and 3.3B
  // activated" (3.35B here: within 2%).
  CHECK(std::round(gpt_parameters(m, 1) / 1e8) / 10 == Approx(30.5));
  CHECK(gpt_active_parameters(m, 1) / 1e9 == Approx(3.3).epsilon(0.02));
}

TEST_CASE("head width: --kv-channels at h / a is the default model, to the bit", "[megatron]") {
  GptModel plain = llama_style(4, 4096, 32, 8, 14336, 128256, 4096);
  plain.flash_attention = true;
  GptModel stated = plain;
  stated.kv_channels = 4096 / 32;
  CHECK(stated.query_width() == plain.hidden);
  CHECK(stated.kv_hidden() == plain.kv_hidden());
  MegatronLayout layout = megatron_layout(2, 1, 1, 1, 8);
  layout.sequence_parallel = true;
  CHECK(gpt_parameters(stated, 2) == gpt_parameters(plain, 2));
  CHECK(megatron_model_flops(stated, layout) == megatron_model_flops(plain, layout));
  CHECK(megatron_layer_activation_bytes(stated, layout) == megatron_layer_activation_bytes(plain, layout));
  const GpuModel gpu = gpu_model("H100-SXM5-80GB").value();
  const CollectiveTime link = [](double bytes) { return Seconds(bytes / 300e9); };
  const MegatronLayerTime a = make_megatron_profile(stated, layout, gpu, link).times.at(1);
  const MegatronLayerTime b = make_megatron_profile(plain, layout, gpu, link).times.at(1);
  CHECK(a.forward_compute.value == b.forward_compute.value);
  CHECK(a.backward_compute.value == b.backward_compute.value);
  CHECK(a.forward_comm.value == b.forward_comm.value);
}

TEST_CASE("head width: Megatron's FLOPs count takes the queries a d wide", "[megatron]") {
  // training.py, num_floating_point_operations: query_projection_size = kv_channels x heads; per
  // layer and token 3 x 2 x (h (q + 2 G d) + q h) for the linears and, in
  // the count baton follows, 3 x 4 s q for the attention's two products.
  const GptModel wide = qwen3_30b_a3b(128), narrow = qwen3_30b_a3b(0);  // d 128 and h / a = 64
  CHECK(narrow.query_width() == 2048);
  CHECK(wide.query_width() == 4096);
  const MegatronLayout layout = megatron_layout(1, 1, 8, 1, 512);
  const double B = 512, s = 4096, L = 48, h = 2048, a = 32, G = 4;
  const auto attention = [&](double d) { return h * (a * d + 2 * G * d) + a * d * h; };
  const double linears = 3 * 2 * (attention(128) - attention(64));
  const double core = 3 * 4 * s * a * (128 - 64);
  CHECK(megatron_model_flops(wide, layout) - megatron_model_flops(narrow, layout) ==
        Approx(B * s * L * (linears + core)).epsilon(1e-12));
}

TEST_CASE("head width: a block keeps its queries, keys and values and the projection's input at their widths",
          "[megatron]") {
  // Without recomputation or sequence parallelism a block keeps, split over
  // t, the queries (2 bytes a value, a d a token), keys and values (2 each, G
  // d) and the projection's input (2, a d): widening d from 64 to 128 adds s
  // b (4 a + 4 G) 64 / t bytes.
  const GptModel wide = qwen3_30b_a3b(128), narrow = qwen3_30b_a3b(0);
  MegatronLayout layout = megatron_layout(2, 1, 4, 2, 512);
  const double s = 4096, b = 2, a = 32, G = 4, t = 2;
  CHECK(megatron_layer_activation_bytes(wide, layout) - megatron_layer_activation_bytes(narrow, layout) ==
        Approx(s * b * (4 * a + 4 * G) * 64 / t).epsilon(1e-12));
  // Full recomputation keeps the block's input alone, whatever d.
  layout.recompute = Recompute::kFull;
  CHECK(megatron_layer_activation_bytes(wide, layout) == megatron_layer_activation_bytes(narrow, layout));
}

TEST_CASE("head width: the attention's GEMMs on a rank are a d and G d wide", "[megatron]") {
  // On one of t ranks: QKV [T x h] x [h x (a d + 2 G d) / t], the projection
  // [T x a d / t] x [a d / t x h]; the backward's input gradients the
  // transposes, its weight gradients [(a + 2 G) d / t x T] x [T x h] and [h x
  // T] x [T x a d / t].
  const GptModel m = qwen3_30b_a3b();
  MegatronLayout layout = megatron_layout(4, 1, 2, 2, 512);
  layout.sequence_parallel = true;
  const GpuModel gpu = gpu_model("H100-SXM5-80GB").value();
  const auto x = shape_of(m, layout);
  const double T = 2 * 4096, h = 2048, qkv = (32 + 2 * 4) * 128 / 4.0, q = 32 * 128 / 4.0;
  CHECK(x.q == 4096);
  CHECK(x.kv == 512);
  CHECK(x.head_qk == 128);
  CHECK(x.head_v == 128);
  const auto linears = attention_linears(gpu, x);
  CHECK(linears.forward.value == (gpu.gemm(T, qkv, h) + gpu.gemm(T, h, q)).value);
  CHECK(linears.input.value == (gpu.gemm(T, h, qkv) + gpu.gemm(T, q, h)).value);
  CHECK(linears.first_weight.value == gpu.gemm(qkv, h, T).value);
  CHECK(linears.weight.value == (gpu.gemm(qkv, h, T) + gpu.gemm(h, q, T)).value);
}

TEST_CASE("head width: h need not divide among the heads when --kv-channels is given", "[megatron][bad-input]") {
  // Megatron asks hidden_size % num_attention_heads == 0 only when it
  // derives kv_channels itself (arguments.py).
  GptModel m = llama_style(2, 1000, 16, 16, 2048, 32000, 1024);
  const MegatronLayout layout = megatron_layout(1, 1, 1, 1, 8);
  const Status refused = check_megatron_layout(m, layout, 8);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message == "--hidden-size 1000 is not divisible by --num-attention-heads 16");
  m.kv_channels = 128;
  CHECK(check_megatron_layout(m, layout, 8).ok());
  CHECK(gpt_attention_weights(m) == 1000.0 * (16 * 128 + 2 * 16 * 128) + 16 * 128 * 1000.0);
  m.kv_channels = kMaxGptHidden + 1;
  const Status large = check_megatron_layout(m, layout, 8);
  REQUIRE_FALSE(large.ok());
  CHECK(large.error().message == "--kv-channels must be at most 262144, got 262145");
}

TEST_CASE("head width: the plan file keeps kv_channels, and reads h / a as the default", "[megatron]") {
  const GptModel m = qwen3_30b_a3b();
  MegatronLayout layout = megatron_layout(1, 2, 8, 2, 512);
  layout.expert_parallel = 8;
  const nlohmann::json written = megatron_arguments(m, layout);
  CHECK(written.at("kv_channels") == 128);
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->model.kv_channels == 128);
  CHECK(gpt_parameters(back->model, 1) == gpt_parameters(m, 1));
  // Megatron writes kv_channels always; at h / a it is the default.
  nlohmann::json plain = megatron_arguments(qwen3_30b_a3b(0), layout);
  CHECK_FALSE(plain.contains("kv_channels"));
  plain["kv_channels"] = 64;
  const auto read = megatron_from_arguments(plain, "plan.megatron");
  REQUIRE(read.ok());
  CHECK(read->model.kv_channels == 0);
  plain["kv_channels"] = 0;
  const auto zero = megatron_from_arguments(plain, "plan.megatron");
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message.find("kv_channels") != std::string::npos);
}

}  // namespace
}  // namespace baton
