// Multi-latent attention (sim/megatron.h's GptModel::mla; Megatron-core's
// --multi-latent-attention --q-lora-rank --kv-lora-rank --qk-head-dim
// --qk-pos-emb-head-dim --v-head-dim, multi_latent_attention.py): DeepSeek's
// parameter counts against their papers, Megatron-core's FLOPs formula, the
// attention core's head widths, the linears' shapes on a tensor-parallel
// rank, the latents' collectives, the weights a rank holds whole, the kept
// activations, the refusals and the plan file's arguments.
#include <cmath>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_block.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

using megatron_detail::attention_linears;
using megatron_detail::shape_of;

using testing::DeepSeek;
using testing::deepseek;
using testing::kV2;
using testing::kV2Lite;
using testing::kV3;

// A layer's parameters from the architecture: the attention (down, up and
// output projections, the latents' norms), the block's two RMSNorms, and the
// MLP (E experts, the shared ones, the router; or the dense one).
double expected_parameters(const DeepSeek& d, bool active) {
  const double h = d.hidden, a = d.heads, ql = d.q_lora, kvl = 512, dn = 128, dr = 64, dv = 128;
  const double attention = (ql > 0 ? h * ql + ql * a * (dn + dr) : h * a * (dn + dr)) + h * (kvl + dr) +
                           kvl * a * (dn + dv) + a * dv * h + (ql + kvl) + 2 * h;
  const double experts = active ? d.topk : d.experts;
  const double moe = attention + experts * 3 * h * d.expert_ffn + 3 * h * d.shared + h * d.experts;
  const double dense = attention + 3 * h * d.ffn;
  return d.dense * dense + (d.layers - d.dense) * moe + 2.0 * d.vocab * h + h;
}

TEST_CASE("mla: DeepSeek-V3, V2 and V2-Lite have the parameters their papers state", "[megatron][mla]") {
  struct Case {
    DeepSeek model;
    double total, active;  // the papers' figures, billions
    double digits;         // the total's precision there
  };
  // DeepSeek-V3 report, abstract: 671B total, 37B activated per token;
  // DeepSeek-V2 paper, abstract: 236B and 21B; its appendix B: V2-Lite 15.7B
  // and 2.4B.
  for (const Case& c : {Case{kV3, 671, 37, 1}, Case{kV2, 236, 21, 1}, Case{kV2Lite, 15.7, 2.4, 0.1}}) {
    CAPTURE(c.model.layers);
    const GptModel m = deepseek(c.model);
    const double total = gpt_parameters(m, 1), active = gpt_active_parameters(m, 1);
    CHECK(total == expected_parameters(c.model, false));
    CHECK(active == expected_parameters(c.model, true));
    CHECK(std::round(total / 1e9 / c.digits) * c.digits == Approx(c.total));
    // The papers' activated counts leave the input embedding out (V3: 37.55B
    // with it, 36.63B without; V2 20.85B; V2-Lite 2.45B for the stated 2.4B):
    // within 2.5% of theirs.
    const double embedding = static_cast<double>(c.model.vocab) * static_cast<double>(c.model.hidden);
    CHECK((active - embedding) / 1e9 == Approx(c.active).epsilon(0.025));
  }
}

TEST_CASE("mla: model FLOPs are Megatron-core's count for multi-latent attention", "[megatron][mla]") {
  // training.py, num_floating_point_operations (core 0.12): per layer and
  // token 3 x 2 x (q_term + kv_lora (h + a (dn + dv) + 1) + h dr + a dv h +
  // s a (dn + dr) / 2 + s a dv / 2), q_term = q_lora (h + a (dn + dr) + 1);
  // the MLP's 3 x 2 x 3 h f (SwiGLU) for the k experts and the shared ones
  // (or the dense MLP), and the logits' 6 h V.
  const GptModel m = deepseek(kV3);
  MegatronLayout l = megatron_layout(1, 16, 16, 1, 1024);
  const double B = 1024, s = 4096, h = 7168, a = 128, ql = 1536, kvl = 512, dn = 128, dr = 64, dv = 128, V = 129280;
  const double q_term = ql * (h + a * (dn + dr) + 1);
  const double attention =
      q_term + kvl * (h + a * (dn + dv) + 1) + h * dr + a * dv * h + s * a * (dn + dr) / 2 + s * a * dv / 2;
  const double moe_mlp = 8 * 3 * h * 2048 + 3 * h * 2048, dense_mlp = 3 * h * 18432;
  const double expected = 6 * B * s * (61 * attention + 58 * moe_mlp + 3 * dense_mlp) + 6 * B * s * h * V;
  CHECK(megatron_model_flops(m, l) == Approx(expected).epsilon(1e-12));
  // Full recomputation runs every forward twice: four passes, not three.
  l.recompute = Recompute::kFull;
  CHECK(megatron_model_flops(m, l) ==
        Approx(expected + 2 * B * s * (61 * attention + 58 * moe_mlp + 3 * dense_mlp)).epsilon(1e-12));
}

// V2-Lite's dense first block alone, on 4 layers, for the block's times.
GptModel small_latent() {
  GptModel m = deepseek(kV2Lite).dense_blocks();
  m.layers = 4;
  m.sequence = 2048;
  m.flash_attention = true;
  return m;
}

TEST_CASE("mla: the attention core runs on heads dn + dr wide for the scores and dv for the values",
          "[megatron][mla]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  MegatronLayout l = megatron_layout(2, 1, 1, 1, 8);
  l.sequence_parallel = true;
  l.recompute = Recompute::kSelective;  // recomputes the core alone
  const MegatronLayerTime block =
      make_megatron_profile(small_latent(), l, gpu, [](double) { return Seconds(0.0); }).times[1];
  // FlashAttention over the causal half: b a / t = 8 products of s x s x 192
  // and s x 128 x s.
  const double s = 2048, count = 16 / 2;
  const Seconds core = (gpu.gemm(s, s, 128 + 64, count) + gpu.gemm(s, 128, s, count)) * 0.5;
  CHECK(block.recompute.value == Approx(core.value).epsilon(1e-12));
}

TEST_CASE("mla: the linears on a tensor-parallel rank: whole down projections on the rank's tokens",
          "[megatron][mla]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const double T = 2048, h = 2048, a = 16, t = 2, kvl = 512, dn = 128, dr = 64, dv = 128;
  MegatronLayout l = megatron_layout(2, 1, 1, 1, 8);
  l.sequence_parallel = true;
  GptModel m = small_latent();  // no query latent: the queries from h
  const auto linears = attention_linears(gpu, shape_of(m, l));
  // Forward: the queries [T x h] x [h x a (dn + dr) / t], the keys' and
  // values' down projection on the T / t tokens of the sequence-parallel
  // shard, their up projection on the gathered latent, and the output.
  const Seconds forward = gpu.gemm(T, a * (dn + dr) / t, h) + gpu.gemm(T, a * (dn + dv) / t, kvl) +
                          gpu.gemm(T / t, kvl + dr, h) + gpu.gemm(T, h, a * dv / t);
  CHECK(linears.forward.value == Approx(forward.value).epsilon(1e-12));
  const Seconds weight = gpu.gemm(a * (dn + dr) / t, h, T) + gpu.gemm(a * (dn + dv) / t, kvl, T) +
                         gpu.gemm(kvl + dr, h, T / t) + gpu.gemm(h, a * dv / t, T);
  CHECK(linears.weight.value == Approx(weight.value).epsilon(1e-12));
  // With a query latent of 1536: its down projection on the shard, its up
  // projection on the gathered latent.
  m.q_lora_rank = 1536;
  const auto with_latent = attention_linears(gpu, shape_of(m, l));
  const Seconds queries = gpu.gemm(T / t, 1536, h) + gpu.gemm(T, a * (dn + dr) / t, 1536);
  CHECK((with_latent.forward - linears.forward).value ==
        Approx((queries - gpu.gemm(T, a * (dn + dr) / t, h)).value).epsilon(1e-9));
  // Megatron's attention for comparison: QKV [T x h] x [h x 3 h / t] and the
  // projection [T x h / t] x [h / t x h].
  GptModel standard = m;
  standard.mla = false;
  standard.q_lora_rank = 0;
  const auto plain = attention_linears(gpu, shape_of(standard, l));
  CHECK(plain.forward.value == Approx((gpu.gemm(T, 3 * h / t, h) + gpu.gemm(T, h, h / t)).value).epsilon(1e-12));
}

TEST_CASE("mla: the latents are gathered where the input is, the output reduce-scattered", "[megatron][mla]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  MegatronLayout l = megatron_layout(2, 1, 1, 1, 8);
  l.sequence_parallel = true;
  const CollectiveTime slow = [](double bytes) { return Seconds(bytes / 1e9); };  // 1 GB/s
  GptModel m = small_latent();
  m.q_lora_rank = 1536;
  const MegatronLayerTime block = make_megatron_profile(m, l, gpu, slow).times[1];
  const double T = 2048, h = 2048;
  // Half an all-reduce of the gathered latents (q_lora + kv_lora + dr) and of
  // the output (h), then the MLP's T h.
  const double attention = 0.5 * (T * (1536 + 512 + 64) * 2 + T * h * 2) / 1e9;
  CHECK(block.forward_comm.value == Approx(attention + T * h * 2 / 1e9).epsilon(1e-12));
}

TEST_CASE("mla: a rank holds the down projections whole, the rest split over t", "[megatron][mla]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  GptModel m = small_latent();
  m.q_lora_rank = 1536;
  const double h = 2048, whole = h * 1536 + h * (512 + 64);
  REQUIRE(gpt_block_unsplit_parameters(m) == whole);
  for (const int t : {1, 2, 4}) {
    CAPTURE(t);
    MegatronLayout l = megatron_layout(t, 1, 1, 1, 8);
    l.sequence_parallel = t > 1;
    const MegatronLayerTime block = make_megatron_profile(m, l, gpu, [](double) { return Seconds(0.0); }).times[1];
    CHECK(block.parameters == Approx((gpt_block_parameters(m) - whole) / t + whole).epsilon(1e-15));
  }
}

TEST_CASE("mla: a block keeps the heads' queries, keys and values, and the latents", "[megatron][mla][memory]") {
  GptModel m = small_latent();
  m.q_lora_rank = 1536;
  const double s = 2048, b = 1, h = 2048, a = 16, t = 2, f = 10944;
  const double ql = 1536, kvl = 512, dn = 128, dr = 64, dv = 128;
  MegatronLayout l = megatron_layout(2, 1, 1, 1, 8);
  l.sequence_parallel = true;
  // Split over t: queries and keys 2 a (dn + dr) / h each, values and the
  // projection's input 2 a dv / h each, SwiGLU's 6 f / h; sharded with
  // sequence parallelism: Megatron's 10 (norms' inputs, the linears' inputs,
  // dropout masks) and the latents with their normalized copies; and
  // FlashAttention's softmax statistics, 4 a / (h t).
  const double split = (4 * a * (dn + dr) + 4 * a * dv) / h + 6 * f / h;
  const double shard = 10 + (2 * (ql + kvl + dr) + 2 * (ql + kvl)) / h;
  CHECK(megatron_layer_activation_bytes(m, l) ==
        Approx(s * b * h * ((shard + split) / t + 4 * a / (h * t))).epsilon(1e-12));
}

TEST_CASE("mla: the flags Megatron would not run are refused, naming them", "[megatron][mla][bad-input]") {
  const auto error = [](const GptModel& m, const MegatronLayout& l) {
    const Status status = check_megatron_layout(m, l, 64);
    REQUIRE_FALSE(status.ok());
    return status.error().message;
  };
  MegatronLayout l = megatron_layout(1, 1, 1, 1, 8);
  GptModel plain = small_latent();
  plain.mla = false;
  plain.q_lora_rank = 1536;
  CHECK(error(plain, l) == "--q-lora-rank needs --multi-latent-attention");
  GptModel grouped = small_latent();
  grouped.query_groups = 4;
  CHECK(error(grouped, l).find("--num-query-groups 4 is refused") != std::string::npos);
  GptModel zero = small_latent();
  zero.v_head_dim = 0;
  CHECK(error(zero, l) == "--v-head-dim must be at least 1, got 0");
  MegatronLayout context = l;
  context.context = 2;
  context.data = 1;
  CHECK(error(small_latent(), context) == "--context-parallel-size 2 with --multi-latent-attention is not modelled");
}

TEST_CASE("mla: the plan file carries the latent attention's sizes and reads them back", "[megatron][mla]") {
  GptModel m = small_latent();
  m.q_lora_rank = 1536;
  const MegatronLayout l = megatron_layout(1, 1, 1, 1, 8);
  const nlohmann::json arguments = megatron_arguments(m, l);
  CHECK(arguments.at("multi_latent_attention") == true);
  CHECK(arguments.at("q_lora_rank") == 1536);
  CHECK(arguments.at("kv_lora_rank") == 512);
  CHECK(arguments.at("qk_layernorm") == true);
  const auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  INFO((back.ok() ? std::string() : back.error().message));
  REQUIRE(back.ok());
  CHECK(back->model.mla);
  CHECK(back->model.q_lora_rank == 1536);
  CHECK(gpt_parameters(back->model, 1) == gpt_parameters(m, 1));
  // No query latent: null, as Megatron's None.
  m.q_lora_rank = 0;
  const nlohmann::json none = megatron_arguments(m, l);
  CHECK(none.at("q_lora_rank").is_null());
  const auto read_none = megatron_from_arguments(none, "plan.json: megatron");
  REQUIRE(read_none.ok());
  CHECK(read_none->model.q_lora_rank == 0);
}

}  // namespace
}  // namespace baton
