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
  x.topk = x.moe ? static_cast<double>(model.router_topk) : 1.0;
  x.ep = std::max(1, layout.expert_parallel);
  x.grouped = model.grouped_gemm;
  x.mlp_gemms = x.moe ? x.experts / x.ep : 1.0;
  x.mlp_t = x.moe ? layout.expert_tensor_parallel() : x.t;
  x.mlp_m = x.moe ? x.tokens * x.topk * x.ep * x.mlp_t / (x.t * x.experts) : x.tokens;
  x.expert_parameters = gpt_block_expert_parameters(model);
  x.shared = x.moe ? static_cast<double>(model.shared_expert_ffn) : 0.0;
  return x;
}

Seconds mlp_gemm(const GpuModel& gpu, const BlockShape& x, double m, double n, double k) {
  if (x.mlp_gemms <= 1.0 || x.grouped) return gpu.gemm(m, n, k, x.mlp_gemms);
  return gpu.gemm(m, n, k) * x.mlp_gemms;
}

}  // namespace baton::megatron_detail
