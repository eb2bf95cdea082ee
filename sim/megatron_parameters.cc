// Megatron's parameter count and model FLOPs (sim/megatron.h, "Formulas
// used by every caller"): a block's linear weights, biases and norms, the
// experts' share, the whole model's count and what a token passes through,
// and the FLOPs of one iteration.
#include "sim/megatron.h"

#include <algorithm>

namespace baton {

namespace {

// One MLP's weights and biases: dense of width f, or one expert of width F.
double mlp_weights(const GptModel& model, double width) {
  return (model.swiglu ? 3.0 : 2.0) * static_cast<double>(model.hidden) * width;
}
double mlp_biases(const GptModel& model, double width) {
  return model.linear_bias ? (model.swiglu ? 2.0 : 1.0) * width + static_cast<double>(model.hidden) : 0.0;
}

}  // namespace

double gpt_block_linear_parameters(const GptModel& model) {
  if (!model.moe()) return gpt_attention_weights(model) + mlp_weights(model, static_cast<double>(model.ffn()));
  const double e = static_cast<double>(model.experts);
  return gpt_attention_weights(model) + e * mlp_weights(model, static_cast<double>(model.expert_ffn())) +
         mlp_weights(model, static_cast<double>(model.shared_expert_ffn)) + static_cast<double>(model.hidden) * e;
}

double gpt_block_active_linear_parameters(const GptModel& model) {
  if (!model.moe()) return gpt_block_linear_parameters(model);
  return gpt_attention_weights(model) +
         static_cast<double>(model.router_topk) * mlp_weights(model, static_cast<double>(model.expert_ffn())) +
         mlp_weights(model, static_cast<double>(model.shared_expert_ffn));
}

double gpt_block_expert_parameters(const GptModel& model) {
  if (!model.moe()) return 0.0;
  const double width = static_cast<double>(model.expert_ffn());
  return static_cast<double>(model.experts) * (mlp_weights(model, width) + mlp_biases(model, width));
}

double gpt_block_parameters(const GptModel& model) {
  const double h = static_cast<double>(model.hidden);
  const double shared = static_cast<double>(model.shared_expert_ffn);
  const double mlp_bias =
      model.moe() ? static_cast<double>(model.experts) * mlp_biases(model, static_cast<double>(model.expert_ffn())) +
                        (shared > 0.0 ? mlp_biases(model, shared) : 0.0)
                  : mlp_biases(model, static_cast<double>(model.ffn()));
  const double norms = 2.0 * (model.rms_norm ? h : 2.0 * h);
  return gpt_block_linear_parameters(model) + gpt_attention_biases_and_norms(model) + mlp_bias + norms;
}

double gpt_parameters(const GptModel& model, int tensor) {
  const double h = static_cast<double>(model.hidden);
  const double vocab = static_cast<double>(padded_vocab(model, tensor)) * h;
  const double positions = static_cast<double>(model.position_rows()) * h;
  const double final_norm = model.rms_norm ? h : 2.0 * h;
  const double moe = static_cast<double>(model.moe_blocks());
  const double blocks = moe * gpt_block_parameters(model) +
                        (static_cast<double>(model.layers) - moe) * gpt_block_parameters(model.dense_blocks());
  return blocks + vocab * (model.tied_output ? 1.0 : 2.0) + positions + final_norm + gpt_mtp_parameters(model);
}

double gpt_mtp_parameters(const GptModel& model) {
  const double h = static_cast<double>(model.hidden);
  const double norm = model.rms_norm ? h : 2.0 * h;  // enorm, hnorm and the final norm
  return static_cast<double>(model.mtp_layers) * (gpt_block_parameters(model.mtp_block()) + 2.0 * h * h + 3.0 * norm);
}

double gpt_active_parameters(const GptModel& model, int tensor) {
  if (!model.moe()) return gpt_parameters(model, tensor);
  const double unused = static_cast<double>(model.experts - model.router_topk) / static_cast<double>(model.experts);
  const double moe = static_cast<double>(model.moe_blocks() + (model.mtp_moe() ? model.mtp_layers : 0));
  return gpt_parameters(model, tensor) - moe * gpt_block_expert_parameters(model) * unused;
}

// Per sample and layer the forward is 2 P_lin s + 4 s^2 a d FLOPs (a d = h
// unless --kv-channels says otherwise; GPT: 24 s h^2 (1 + s / 6h)), the
// backward twice that, and full recomputation one forward more: k = 3 or 4
// passes. The logit layer (2 s h V forward) is never recomputed, so its term
// is 6 B s h V either way: 96 B s L h^2 V / (16 L h) in Megatron's form.
// Multi-token prediction (Megatron's
// num_floating_point_operations, core 0.12 on): each of the D depths one
// block more of the last block's kind, 2 (3 h + 2 h^2) FLOPs a token and
// pass for its norms and eh_proj, and one logit layer more.
double megatron_model_flops(const GptModel& model, const MegatronLayout& layout) {
  const double k = layout.recompute == Recompute::kFull ? 4.0 : 3.0;
  const double b = static_cast<double>(layout.global_batch);
  const double s = static_cast<double>(model.sequence);
  const double depths = static_cast<double>(model.mtp_layers);
  const double l = static_cast<double>(model.layers) + depths;
  const double h = static_cast<double>(model.hidden);
  const double v = static_cast<double>(padded_vocab(model, layout.tensor));
  const double moe = static_cast<double>(model.moe_blocks()) + (model.mtp_moe() ? depths : 0.0);
  const double linear = moe * gpt_block_active_linear_parameters(model) +
                        (l - moe) * gpt_block_linear_parameters(model.dense_blocks()) +
                        depths * (3.0 * h + 2.0 * h * h);
  if (model.mla) {
    // Megatron-core's count for multi-latent attention (training.py,
    // num_floating_point_operations, core 0.12): the latents' norm weights
    // among the linears, and the products over the causal half, s a (dn + dr)
    // / 2 and s a dv / 2 multiply-adds a token.
    const double norms = static_cast<double>(model.q_lora_rank + model.kv_lora_rank);
    const double core = s * static_cast<double>(model.heads) *
                        static_cast<double>(model.qk_head_dim + model.qk_pos_head_dim + model.v_head_dim);
    return k * b * s * (2.0 * (linear + l * norms) + l * core) + 6.0 * b * s * h * v * (1.0 + depths);
  }
  const double q = static_cast<double>(model.query_width());
  return k * b * s * (2.0 * linear + l * 4.0 * s * q) + 6.0 * b * s * h * v * (1.0 + depths);
}

}  // namespace baton
