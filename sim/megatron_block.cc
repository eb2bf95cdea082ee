#include "sim/megatron_block.h"

#include <algorithm>

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
  x.kv = static_cast<double>(model.kv_hidden());
  x.f = static_cast<double>(model.moe() ? model.expert_ffn() : model.ffn());
  x.gated = model.swiglu;
  x.up = x.gated ? 2.0 * x.f : x.f;
  x.flash = model.flash_attention;
  x.rope = model.rope;
  x.block_parameters = gpt_block_parameters(model);
  x.moe = model.moe();
  x.experts = static_cast<double>(model.experts);
  x.topk = model.expert_copies();
  x.ep = std::max(1, layout.expert_parallel);
  x.grouped = model.grouped_gemm;
  x.mlp_gemms = x.moe ? x.experts / x.ep : 1.0;
  x.mlp_t = x.moe ? layout.expert_tensor_parallel() : x.t;
  x.mlp_m = x.moe ? x.tokens * x.topk * x.ep * x.mlp_t / (x.t * x.experts) : x.tokens;
  x.expert_parameters = gpt_block_expert_parameters(model);
  x.shared = x.moe ? static_cast<double>(model.shared_expert_ffn) : 0.0;
  x.mla = model.mla;
  x.qk_norm = model.qk_layernorm;
  x.head_qk = x.mla ? static_cast<double>(model.qk_head_dim + model.qk_pos_head_dim) : x.h / x.a;
  x.head_v = x.mla ? static_cast<double>(model.v_head_dim) : x.h / x.a;
  x.q_lora = x.mla ? static_cast<double>(model.q_lora_rank) : 0.0;
  x.kv_lora = x.mla ? static_cast<double>(model.kv_lora_rank) : 0.0;
  x.pos = x.mla ? static_cast<double>(model.qk_pos_head_dim) : 0.0;
  x.unsplit = gpt_block_unsplit_parameters(model);
  return x;
}

Seconds mlp_gemm(const GpuModel& gpu, const BlockShape& x, double m, double n, double k) {
  if (x.mlp_gemms <= 1.0 || x.grouped) return gpu.gemm(m, n, k, x.mlp_gemms);
  return gpu.gemm(m, n, k) * x.mlp_gemms;
}

AttentionLinears attention_linears(const GpuModel& gpu, const BlockShape& x) {
  const double T = x.tokens, h = x.h, t = x.t;
  if (!x.mla) {
    const double qkv_width = (h + 2.0 * x.kv) / t;
    const Seconds qkv_w = gpu.gemm(qkv_width, h, T);
    return {gpu.gemm(T, qkv_width, h) + gpu.gemm(T, h, h / t), gpu.gemm(T, h, qkv_width) + gpu.gemm(T, h / t, h),
            qkv_w + gpu.gemm(h, h / t, T), qkv_w};
  }
  const double own = x.local_tokens, kv_latent = x.kv_lora + x.pos;
  const double queries = x.a * x.head_qk / t, keys_values = x.a * (x.head_qk - x.pos + x.head_v) / t;
  const double values = x.a * x.head_v / t;
  AttentionLinears linears;
  // Up: the queries (from their latent, or from h) and the keys and values.
  const double q_in = x.q_lora > 0.0 ? x.q_lora : h;
  linears.first_weight = gpu.gemm(queries, q_in, T) + gpu.gemm(keys_values, x.kv_lora, T);
  linears.forward = gpu.gemm(T, queries, q_in) + gpu.gemm(T, keys_values, x.kv_lora);
  linears.input = gpu.gemm(T, q_in, queries) + gpu.gemm(T, x.kv_lora, keys_values);
  // Down, whole, on the rank's own tokens.
  linears.forward += gpu.gemm(own, kv_latent, h);
  linears.input += gpu.gemm(own, h, kv_latent);
  Seconds weight = linears.first_weight + gpu.gemm(kv_latent, h, own);
  if (x.q_lora > 0.0) {
    linears.forward += gpu.gemm(own, x.q_lora, h);
    linears.input += gpu.gemm(own, h, x.q_lora);
    weight += gpu.gemm(x.q_lora, h, own);
  }
  // The output projection.
  linears.forward += gpu.gemm(T, h, values);
  linears.input += gpu.gemm(T, values, h);
  linears.weight = weight + gpu.gemm(h, values, T);
  return linears;
}

Seconds attention_collectives(const BlockShape& x, const CollectiveTime& tp_allreduce) {
  if (x.t <= 1.0) return Seconds(0.0);
  const Seconds output = tp_allreduce(x.tokens * x.h * kHalf);
  if (!x.mla) return output;
  const double gathered = (x.q_lora > 0.0 ? x.q_lora : x.h) + x.kv_lora + x.pos;
  return (output + tp_allreduce(x.tokens * gathered * kHalf)) * 0.5;
}

}  // namespace baton::megatron_detail
