// The attention's weights (sim/megatron.h): Megatron's self-attention (QKV
// and the output projection) or Megatron-core's multi-latent attention
// (multi_latent_attention.py: the down projections to the latents, whole on
// each tensor-parallel rank from core 0.14 on, the column-parallel up
// projections and the row-parallel output projection), and the checks of
// multi-latent attention's flags.
#include "sim/megatron.h"

#include <fmt/format.h>

namespace baton {

double gpt_attention_weights(const GptModel& model) {
  const double h = static_cast<double>(model.hidden);
  if (!model.mla) {
    const double q = static_cast<double>(model.query_width());
    return h * (q + 2.0 * static_cast<double>(model.kv_hidden())) + q * h;
  }
  const double a = static_cast<double>(model.heads);
  const double q_lora = static_cast<double>(model.q_lora_rank), kv_lora = static_cast<double>(model.kv_lora_rank);
  const double qk = static_cast<double>(model.qk_head_dim + model.qk_pos_head_dim);
  const double v = static_cast<double>(model.v_head_dim), pos = static_cast<double>(model.qk_pos_head_dim);
  const double queries = q_lora > 0.0 ? h * q_lora + q_lora * a * qk : h * a * qk;
  const double keys_values = h * (kv_lora + pos) + kv_lora * a * (static_cast<double>(model.qk_head_dim) + v);
  return queries + keys_values + a * v * h;
}

double gpt_attention_biases_and_norms(const GptModel& model) {
  const double h = static_cast<double>(model.hidden);
  const double norm = model.rms_norm ? 1.0 : 2.0;  // weights (and biases) per normalized value
  if (!model.mla) {
    const double q = static_cast<double>(model.query_width());
    const double biases = model.linear_bias ? q + 2.0 * static_cast<double>(model.kv_hidden()) + h : 0.0;
    // --qk-layernorm: one norm over a head's query and one over its key.
    const double head = static_cast<double>(model.head_dim());
    return biases + (model.qk_layernorm ? 2.0 * head * norm : 0.0);
  }
  const double latents = static_cast<double>(model.q_lora_rank + model.kv_lora_rank);
  return (model.linear_bias ? h : 0.0) + (model.qk_layernorm ? latents * norm : 0.0);
}

double gpt_block_unsplit_parameters(const GptModel& model) {
  if (!model.mla) return 0.0;
  const double h = static_cast<double>(model.hidden);
  return h * static_cast<double>(model.q_lora_rank + model.kv_lora_rank + model.qk_pos_head_dim);
}

Status check_latent_attention(const GptModel& model, const MegatronLayout& layout) {
  const struct {
    int64_t value, default_value;
    const char* flag;
  } sizes[] = {{model.q_lora_rank, 0, "--q-lora-rank"},
               {model.kv_lora_rank, 32, "--kv-lora-rank"},
               {model.qk_head_dim, 128, "--qk-head-dim"},
               {model.qk_pos_head_dim, 64, "--qk-pos-emb-head-dim"},
               {model.v_head_dim, 128, "--v-head-dim"}};
  for (const auto& size : sizes) {
    if (!model.mla && size.value != size.default_value)
      return Error{fmt::format("{} needs --multi-latent-attention", size.flag)};
    const int64_t least = size.default_value == 0 ? 0 : 1;  // --q-lora-rank 0: no query latent
    if (size.value < least) return Error{fmt::format("{} must be at least 1, got {}", size.flag, size.value)};
    if (size.value > kMaxGptHidden)
      return Error{fmt::format("{} must be at most {}, got {}", size.flag, kMaxGptHidden, size.value)};
  }
  if (!model.mla) return ok_status();
  if (model.query_groups > 0 && model.query_groups != model.heads)
    return Error{
        fmt::format("--multi-latent-attention gives every head its own keys and values (from the latent): "
                    "--num-query-groups {} is refused, as Megatron's FLOPs count refuses it",
                    model.query_groups)};
  if (layout.context > 1)
    return Error{
        fmt::format("--context-parallel-size {} with --multi-latent-attention is not modelled", layout.context)};
  return ok_status();
}

}  // namespace baton
