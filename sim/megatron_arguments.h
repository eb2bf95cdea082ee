// A Megatron model and layout as Megatron's arguments: the plan file's
// "megatron" object (sim/plan.h), written and read back strictly
// (sim/megatron_arguments.cc), and the architecture's keys the planner's
// regression cases share. Thread safety: pure functions.
#pragma once

#include <array>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/megatron.h"
#include "sim/result.h"

namespace baton {

namespace json_fields {
class FieldPath;
}  // namespace json_fields

// A model and its layout as Megatron's arguments (a plan file's "megatron",
// sim/plan.h): {"num_layers", "hidden_size", "num_attention_heads",
// "seq_length", "vocab_size", "tensor_model_parallel_size",
// "pipeline_model_parallel_size", "data_parallel_size", "micro_batch_size",
// "global_batch_size", "num_layers_per_virtual_pipeline_stage" (0: not
// interleaved), "recompute_granularity" ("none", "selective", "full"),
// "sequence_parallel", "bf16", "use_distributed_optimizer",
// "overlap_grad_reduce", "enable_zero_bubble",
// "zero_bubble_max_pending_backward" (p for ZB-H1, 2p for ZB-H2, 0 without),
// "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"
// (0: an even share), "account_for_embedding_in_pipeline_split",
// "account_for_loss_in_pipeline_split", "zero_bubble_heuristic",
// "zero_bubble_v_schedule", "dualpipev", "recompute_method" ("uniform",
// "block"), "recompute_num_layers"}, every key required (the two account
// flags, the heuristic and the two V schedules may be left out: false; the
// recompute method and its layers are written only when not uniform 1, and
// read as uniform and 1 when absent), "context_parallel_size" and
// "cp_comm_type" (written only when c is above 1 and for a type other than
// p2p; read as 1 and p2p when absent), "overlap_param_gather" and
// "tp_comm_overlap" and "grad_reduce_in_bf16" (written when true; absent:
// false) and no other.
// The architecture's keys of that object, written only for a model beyond
// GPT-3's and each optional (GPT's value): "ffn_hidden_size", "swiglu",
// "group_query_attention", "num_query_groups" (the heads without grouped-query
// attention), "kv_channels" (written when not h / a; read at h / a as its
// default, and with multi-latent attention ignored, as Megatron does),
// "disable_bias_linear", "untie_embeddings_and_output_weights",
// "position_embedding_type" ("learned_absolute", "rope"), "normalization"
// ("LayerNorm", "RMSNorm"), "use_flash_attn", "attention_dropout" and
// "hidden_dropout" (written when not 0.1, Megatron's default),
// "max_position_embeddings" (written when given; absent: the sequence),
// "make_vocab_size_divisible_by" (written when not 128),
// "masked_softmax_fusion", "apply_rope_fusion", "bias_activation_fusion" and
// "bias_dropout_fusion" (each written when false; absent: true; the second
// taken as true without rotary positions, the third without SwiGLU),
// "cross_entropy_loss_fusion" and "fp16_lm_cross_entropy" (each written when
// true; absent: false), "cross_entropy_fusion_impl" ("te", written when
// set: Transformer Engine's fused cross entropy with the fusion; "native" or
// absent: Megatron-core's), and with experts
// "num_experts", "moe_router_topk", "moe_ffn_hidden_size",
// "moe_grouped_gemm", "moe_shared_expert_intermediate_size" and
// "moe_layer_freq" (an integer, or an array of 0s and 1s, one per layer)
// (each optional: no experts, 2, the MLP's width, false, no shared expert, 1;
// the last two written only when they are not), "moe_router_num_groups"
// and "moe_router_group_topk" (written when given; null or absent: none),
// "moe_router_dtype" ("fp32", written when set; null or absent: the
// input's dtype; "fp64" is refused),
// "qk_layernorm" (written when true) and with multi-latent attention
// "multi_latent_attention",
// "q_lora_rank" (null: none), "kv_lora_rank", "qk_head_dim",
// "qk_pos_emb_head_dim", "v_head_dim" (each optional: Megatron's defaults);
// with experts and a capacity factor "moe_expert_capacity_factor" (null or
// absent: dropless) and "moe_pad_expert_input_to_capacity"; "mtp_num_layers"
// (written when above 0; null or absent: none); "fp8" (--fp8-format's
// value, written with FP8; null or absent: none) and "fp8_recipe" (written
// with it; absent: delayed), "fp8_param_gather" (written when true), and
// "first_last_layers_bf16" with "num_layers_at_start_in_bf16" and
// "num_layers_at_end_in_bf16" (written when it is true; absent: false, 1, 1);
// the layout's "expert_model_parallel_size" is written only above 1 (read as
// 1 when absent), "expert_tensor_parallel_size" only when it is not t (read
// as t when absent or null, Megatron's default), "moe_token_dispatcher_type"
// ("allgather", "alltoall") with experts (read as allgather when absent,
// Megatron-core's default), "moe_shared_expert_overlap" and
// "overlap_moe_expert_parallel_comm" (written when true; absent: false).
// clang-format off
inline constexpr std::array<const char*, 46> kGptArchitectureKeys = {
    "ffn_hidden_size", "swiglu", "group_query_attention", "num_query_groups", "disable_bias_linear",
    "untie_embeddings_and_output_weights", "position_embedding_type", "normalization", "use_flash_attn",
    "num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_grouped_gemm",
    "moe_shared_expert_intermediate_size", "moe_layer_freq", "qk_layernorm", "multi_latent_attention",
    "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
    "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity", "mtp_num_layers", "fp8", "fp8_recipe",
    "fp8_param_gather", "first_last_layers_bf16", "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16",
    "moe_router_num_groups", "moe_router_group_topk", "attention_dropout", "hidden_dropout",
    "max_position_embeddings", "make_vocab_size_divisible_by", "masked_softmax_fusion", "cross_entropy_loss_fusion",
    "fp16_lm_cross_entropy", "apply_rope_fusion", "bias_activation_fusion", "bias_dropout_fusion", "kv_channels",
    "moe_router_dtype", "cross_entropy_fusion_impl"};
// clang-format on
// `object` without those keys (for a strict check of the others' names), and
// those keys of it read into `model` (planner regression cases share them).
nlohmann::json without_gpt_architecture(const nlohmann::json& object);
Status read_gpt_architecture(const nlohmann::json& object, const json_fields::FieldPath& at, GptModel& model);

struct MegatronSpec {
  GptModel model;
  MegatronLayout layout;
};
nlohmann::json megatron_arguments(const GptModel& model, const MegatronLayout& layout);
// `where` names the object in errors ("plan.json: megatron").
Result<MegatronSpec> megatron_from_arguments(const nlohmann::json& arguments, const std::string& where);

}  // namespace baton
