#include "sim/megatron_block.h"

#include <algorithm>
#include <vector>

namespace baton::megatron_detail {

BlockShape shape_of(const GptModel& model, const MegatronLayout& layout) {
  BlockShape x{};
  x.b = layout.micro_batch;
  x.s = static_cast<double>(layout.local_sequence(model));
  x.c = std::max(1, layout.context);
  x.comm = layout.context_comm;
  x.h = static_cast<double>(model.hidden);
  x.a = static_cast<double>(model.heads);
  x.t = layout.tensor;
  x.tokens = x.b * x.s;
  x.local_tokens = layout.sequence_parallel ? x.tokens / x.t : x.tokens;
  x.q = static_cast<double>(model.query_width());
  x.kv = static_cast<double>(model.kv_hidden());
  x.f = static_cast<double>(model.moe() ? model.expert_ffn() : model.ffn());
  x.gated = model.swiglu;
  x.activation_fusion = model.activation_fusion;
  x.linear_bias = model.linear_bias;
  x.hidden_dropout = model.hidden_dropout > 0.0;
  x.bias_dropout_fusion = model.bias_dropout_fusion;
  x.up = x.gated ? 2.0 * x.f : x.f;
  x.flash = model.flash_attention;
  x.softmax_fusion = model.softmax_fusion;
  x.loss_fusion = model.cross_entropy_fusion;
  x.te_loss = model.te_loss();
  x.half_loss = model.half_loss;
  x.rope = model.rope;
  x.rope_fusion = model.rope_fusion;
  x.block_parameters = gpt_block_parameters(model);
  x.moe = model.moe();
  x.experts = static_cast<double>(model.experts);
  x.topk = model.expert_copies();
  x.fp32_router = model.fp32_router;
  x.ep = std::max(1, layout.expert_parallel);
  x.dispatcher = layout.moe_dispatcher;
  x.shared_overlap = layout.moe_shared_expert_overlap && x.moe && model.shared_expert_ffn > 0;
  x.grouped = model.grouped_gemm;
  x.mlp_gemms = x.moe ? x.experts / x.ep : 1.0;
  x.mlp_t = x.moe ? layout.expert_tensor_parallel() : x.t;
  x.mlp_m = x.moe ? x.tokens * x.topk * x.ep * x.mlp_t / (x.t * x.experts) : x.tokens;
  x.expert_parameters = gpt_block_expert_parameters(model);
  x.shared = x.moe ? static_cast<double>(model.shared_expert_ffn) : 0.0;
  x.mla = model.mla;
  x.qk_norm = model.qk_layernorm;
  x.head_qk =
      x.mla ? static_cast<double>(model.qk_head_dim + model.qk_pos_head_dim) : static_cast<double>(model.head_dim());
  x.head_v = x.mla ? static_cast<double>(model.v_head_dim) : static_cast<double>(model.head_dim());
  x.q_lora = x.mla ? static_cast<double>(model.q_lora_rank) : 0.0;
  x.kv_lora = x.mla ? static_cast<double>(model.kv_lora_rank) : 0.0;
  x.pos = x.mla ? static_cast<double>(model.qk_pos_head_dim) : 0.0;
  x.unsplit = gpt_block_unsplit_parameters(model);
  x.linear_bytes = model.uses_fp8() ? 1 : 2;
  x.fp8_current = model.uses_fp8() && model.fp8_recipe == Fp8Recipe::kTensorwise;
  x.fp8_param_gather = model.uses_fp8() && model.fp8_param_gather;
  x.tp_overlap = layout.tp_comm_overlap && layout.tensor > 1;
  return x;
}

Seconds linear_gemm(const GpuModel& gpu, const BlockShape& x, double m, double n, double k, double count) {
  return gpu.gemm(m, n, k, count, x.linear_bytes);
}

Seconds mlp_gemm(const GpuModel& gpu, const BlockShape& x, double m, double n, double k) {
  if (x.mlp_gemms <= 1.0 || x.grouped) return linear_gemm(gpu, x, m, n, k, x.mlp_gemms);
  return linear_gemm(gpu, x, m, n, k) * x.mlp_gemms;
}

int fp8_quantize_kernels(const BlockShape& x) {
  if (x.linear_bytes != 1) return 0;
  return x.fp8_current ? 2 : 1;
}

Seconds fp8_quantize(const GpuModel& gpu, const BlockShape& x, double values) {
  if (x.linear_bytes != 1) return Seconds(0.0);
  // Read 2 bytes, write the value and its transpose; tensorwise reads first for the maximum.
  const Seconds cast = gpu.memory_bound(values * 4.0);
  return x.fp8_current ? cast + gpu.memory_bound(values * kHalf) : cast;
}

Seconds fp8_weight_cast(const GpuModel& gpu, const BlockShape& x, double weights) {
  if (x.linear_bytes != 1 || weights <= 0.0) return Seconds(0.0);
  return gpu.memory_bound(weights * (x.fp8_param_gather ? 2.0 : 4.0));
}

Fp8Casts fp8_casts(const GpuModel& gpu, const BlockShape& x) {
  Fp8Casts casts;
  if (x.linear_bytes != 1) return casts;
  const double T = x.tokens, own = x.local_tokens, h = x.h, t = x.t;
  std::vector<double> forward, backward;  // values per quantized tensor
  if (x.mla) {
    // With --qk-layernorm and delayed scaling the latents' norms write the up
    // projections' inputs in FP8 (Megatron-core's TELayerNormColumnParallelLinear).
    const bool fused = x.qk_norm && !x.fp8_current;
    forward = {own * h, T * x.a * x.head_v / t};   // kv down, projection
    if (!fused) forward.push_back(T * x.kv_lora);  // kv up
    backward = {own * (x.kv_lora + x.pos), T * x.a * (x.head_qk - x.pos + x.head_v) / t, own * h};
    if (x.q_lora > 0.0) {  // q down and q up
      forward.push_back(own * h);
      if (!fused) forward.push_back(T * x.q_lora);
      backward.insert(backward.end(), {own * x.q_lora, T * x.a * x.head_qk / t});
    } else {  // the queries straight from h
      forward.push_back(own * h);
      backward.push_back(T * x.a * x.head_qk / t);
    }
  } else {
    // The QKV's input comes quantized out of its norm with delayed scaling.
    forward = {T * x.q / t};
    if (x.fp8_current) forward.push_back(own * h);
    backward = {T * (x.q + 2.0 * x.kv) / t, own * h};
  }
  if (!x.moe) {
    forward.push_back(T * x.f / t);
    if (x.fp8_current) forward.push_back(own * h);  // the first MLP GEMM's, likewise
    backward.insert(backward.end(), {T * x.up / t, own * h});
  } else {
    // The experts' GEMMs: one cast per kernel (per expert, or grouped).
    const double kernels = x.grouped ? 1.0 : x.mlp_gemms, per = x.mlp_m * x.mlp_gemms / kernels;
    for (int i = 0; i < static_cast<int>(kernels); ++i) {
      forward.insert(forward.end(), {per * h, per * x.f / x.mlp_t});
      backward.insert(backward.end(), {per * x.up / x.mlp_t, per * h});
    }
    if (x.shared > 0.0) {
      const double up = (x.gated ? 2.0 : 1.0) * x.shared;
      forward.insert(forward.end(), {own * h, T * x.shared / t});
      backward.insert(backward.end(), {T * up / t, own * h});
    }
  }
  for (const double values : forward) casts.forward += fp8_quantize(gpu, x, values);
  for (const double values : backward) casts.backward += fp8_quantize(gpu, x, values);
  casts.forward_kernels = static_cast<int>(forward.size()) * fp8_quantize_kernels(x);
  casts.backward_kernels = static_cast<int>(backward.size()) * fp8_quantize_kernels(x);
  return casts;
}

Seconds tp_exchange(const BlockShape& x, const CollectiveTime& tp_allreduce, double values) {
  const Seconds bf16 = tp_allreduce(values * kHalf);
  if (x.linear_bytes != 1 || x.local_tokens >= x.tokens) return bf16;
  return (bf16 + tp_allreduce(values * static_cast<double>(x.linear_bytes))) * 0.5;
}

Seconds overlapped_exposure(const BlockShape& x, Seconds comm, Seconds gemm) {
  return max(Seconds(0.0), comm - gemm) + min(comm, gemm) / x.t;
}

AttentionLinears attention_linears(const GpuModel& gpu, const BlockShape& x) {
  const double T = x.tokens, h = x.h, t = x.t;
  if (!x.mla) {
    const double qkv_width = (x.q + 2.0 * x.kv) / t, projected = x.q / t;
    const Seconds qkv_w = linear_gemm(gpu, x, qkv_width, h, T);
    return {linear_gemm(gpu, x, T, qkv_width, h) + linear_gemm(gpu, x, T, h, projected),
            linear_gemm(gpu, x, T, h, qkv_width) + linear_gemm(gpu, x, T, projected, h),
            qkv_w + linear_gemm(gpu, x, h, projected, T), qkv_w};
  }
  const double own = x.local_tokens, kv_latent = x.kv_lora + x.pos;
  const double queries = x.a * x.head_qk / t, keys_values = x.a * (x.head_qk - x.pos + x.head_v) / t;
  const double values = x.a * x.head_v / t;
  AttentionLinears linears;
  // Up: the queries (from their latent, or from h) and the keys and values.
  const double q_in = x.q_lora > 0.0 ? x.q_lora : h;
  linears.first_weight = linear_gemm(gpu, x, queries, q_in, T) + linear_gemm(gpu, x, keys_values, x.kv_lora, T);
  linears.forward = linear_gemm(gpu, x, T, queries, q_in) + linear_gemm(gpu, x, T, keys_values, x.kv_lora);
  linears.input = linear_gemm(gpu, x, T, q_in, queries) + linear_gemm(gpu, x, T, x.kv_lora, keys_values);
  // Down, whole, on the rank's own tokens.
  linears.forward += linear_gemm(gpu, x, own, kv_latent, h);
  linears.input += linear_gemm(gpu, x, own, h, kv_latent);
  Seconds weight = linears.first_weight + linear_gemm(gpu, x, kv_latent, h, own);
  if (x.q_lora > 0.0) {
    linears.forward += linear_gemm(gpu, x, own, x.q_lora, h);
    linears.input += linear_gemm(gpu, x, own, h, x.q_lora);
    weight += linear_gemm(gpu, x, x.q_lora, h, own);
  }
  // The output projection.
  linears.forward += linear_gemm(gpu, x, T, h, values);
  linears.input += linear_gemm(gpu, x, T, values, h);
  linears.weight = weight + linear_gemm(gpu, x, h, values, T);
  return linears;
}

Seconds attention_collectives(const BlockShape& x, const CollectiveTime& tp_allreduce) {
  if (x.t <= 1.0) return Seconds(0.0);
  if (!x.mla) return tp_exchange(x, tp_allreduce, x.tokens * x.h);
  const Seconds output = tp_allreduce(x.tokens * x.h * kHalf);
  const double gathered = (x.q_lora > 0.0 ? x.q_lora : x.h) + x.kv_lora + x.pos;
  return (output + tp_allreduce(x.tokens * gathered * kHalf)) * 0.5;
}

}  // namespace baton::megatron_detail
