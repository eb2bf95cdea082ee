// The architecture's keys of Megatron's arguments (sim/megatron_arguments.h's
// kGptArchitectureKeys), written for a model beyond GPT-3's and read back
// strictly: the decoders trained today, experts, multi-latent attention,
// multi-token prediction, FP8 and the loss's and softmax's fusions.
#include "sim/megatron_arguments.h"

#include <iterator>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "sim/json_fields.h"
#include "sim/megatron_arguments_detail.h"

namespace baton {

namespace megatron_arguments_detail {

void write_gpt_architecture(const GptModel& model, nlohmann::json& arguments) {
  arguments["ffn_hidden_size"] = model.ffn();
  arguments["swiglu"] = model.swiglu;
  arguments["group_query_attention"] = model.query_groups > 0;
  arguments["num_query_groups"] = model.groups();
  if (model.kv_channels > 0) arguments["kv_channels"] = model.kv_channels;
  arguments["disable_bias_linear"] = !model.linear_bias;
  arguments["untie_embeddings_and_output_weights"] = !model.tied_output;
  arguments["position_embedding_type"] = model.rope ? "rope" : "learned_absolute";
  arguments["normalization"] = model.rms_norm ? "RMSNorm" : "LayerNorm";
  arguments["use_flash_attn"] = model.flash_attention;
  if (model.attention_dropout != 0.1) arguments["attention_dropout"] = model.attention_dropout;
  if (model.hidden_dropout != 0.1) arguments["hidden_dropout"] = model.hidden_dropout;
  if (model.max_positions > 0) arguments["max_position_embeddings"] = model.max_positions;
  if (model.vocab_divisor != 128) arguments["make_vocab_size_divisible_by"] = model.vocab_divisor;
  if (!model.softmax_fusion) arguments["masked_softmax_fusion"] = false;
  if (!model.rope_fusion) arguments["apply_rope_fusion"] = false;
  if (!model.activation_fusion) arguments["bias_activation_fusion"] = false;
  if (!model.bias_dropout_fusion) arguments["bias_dropout_fusion"] = false;
  if (model.cross_entropy_fusion) arguments["cross_entropy_loss_fusion"] = true;
  if (model.te_cross_entropy) arguments["cross_entropy_fusion_impl"] = "te";
  if (model.half_loss) arguments["fp16_lm_cross_entropy"] = true;
  if (model.qk_layernorm) arguments["qk_layernorm"] = true;
  if (model.mla) {
    arguments["multi_latent_attention"] = true;
    arguments["q_lora_rank"] = model.q_lora_rank > 0 ? nlohmann::json(model.q_lora_rank) : nlohmann::json();
    arguments["kv_lora_rank"] = model.kv_lora_rank;
    arguments["qk_head_dim"] = model.qk_head_dim;
    arguments["qk_pos_emb_head_dim"] = model.qk_pos_head_dim;
    arguments["v_head_dim"] = model.v_head_dim;
  }
  if (model.mtp_layers > 0) arguments["mtp_num_layers"] = model.mtp_layers;
  if (model.uses_fp8()) {
    arguments["fp8"] = fp8_format_name(model.fp8);
    arguments["fp8_recipe"] = fp8_recipe_name(model.fp8_recipe);
    if (model.fp8_param_gather) arguments["fp8_param_gather"] = true;
    if (model.bf16_end_blocks()) {
      arguments["first_last_layers_bf16"] = true;
      arguments["num_layers_at_start_in_bf16"] = model.bf16_first_blocks;
      arguments["num_layers_at_end_in_bf16"] = model.bf16_last_blocks;
    }
  }
  if (!model.moe()) return;
  arguments["num_experts"] = model.experts;
  arguments["moe_router_topk"] = model.router_topk;
  if (model.router_groups > 0) arguments["moe_router_num_groups"] = model.router_groups;
  if (model.router_group_topk > 0) arguments["moe_router_group_topk"] = model.router_group_topk;
  if (model.fp32_router) arguments["moe_router_dtype"] = "fp32";
  arguments["moe_ffn_hidden_size"] = model.expert_ffn();
  arguments["moe_grouped_gemm"] = model.grouped_gemm;
  if (model.shared_expert_ffn > 0) arguments["moe_shared_expert_intermediate_size"] = model.shared_expert_ffn;
  if (model.capacity_factor > 0.0) {
    arguments["moe_expert_capacity_factor"] = model.capacity_factor;
    arguments["moe_pad_expert_input_to_capacity"] = model.pad_to_capacity;
  }
  if (!model.moe_layer_pattern.empty())
    arguments["moe_layer_freq"] = std::vector<int>(model.moe_layer_pattern.begin(), model.moe_layer_pattern.end());
  else if (model.moe_layer_freq != 1)
    arguments["moe_layer_freq"] = model.moe_layer_freq;
}

}  // namespace megatron_arguments_detail

namespace {

using megatron_arguments_detail::read_flag;
using megatron_arguments_detail::read_named;

// "fp8" (Megatron's argument behind --fp8-format: "e4m3", "hybrid", null or
// absent for none) and "fp8_recipe" (absent: delayed).
Status read_fp8(const nlohmann::json& arguments, const json_fields::FieldPath& at, GptModel& model) {
  if (arguments.contains("fp8") && !arguments["fp8"].is_null()) {
    const auto fp8 = [](std::string_view name) {  // "none" is spelled null here
      return name == "none" ? std::nullopt : parse_fp8_format(name);
    };
    auto format = read_named(arguments, at, "fp8", fp8, "e4m3, hybrid or null");
    if (!format) return format.error();
    model.fp8 = *format;
  }
  bool first_last = false;
  for (const auto& [name, flag] :
       {std::pair{"fp8_param_gather", &model.fp8_param_gather}, std::pair{"first_last_layers_bf16", &first_last}}) {
    if (!arguments.contains(name)) continue;
    auto value = read_flag(arguments, at, name);
    if (!value) return value.error();
    *flag = *value;
  }
  for (const auto& [name, count] : {std::pair{"num_layers_at_start_in_bf16", &model.bf16_first_blocks},
                                    std::pair{"num_layers_at_end_in_bf16", &model.bf16_last_blocks}}) {
    *count = first_last ? 1 : 0;
    if (!arguments.contains(name)) continue;
    if (!first_last) return at.field(name).error("needs first_last_layers_bf16 true");
    auto value = json_fields::read_integer(arguments, at, name, 0);
    if (!value) return value.error();
    if (*value > kMaxGptLayers) return at.field(name).error("is too large", *value);
    *count = *value;
  }
  if (arguments.contains("fp8_recipe")) {
    auto recipe =
        read_named(arguments, at, "fp8_recipe", parse_fp8_recipe, "delayed, tensorwise, blockwise, mxfp8 or custom");
    if (!recipe) return recipe.error();
    model.fp8_recipe = *recipe;
  }
  return ok_status();
}

}  // namespace

nlohmann::json without_gpt_architecture(const nlohmann::json& object) {
  nlohmann::json rest = object;
  for (const char* key : kGptArchitectureKeys) rest.erase(key);
  return rest;
}

Status read_gpt_architecture(const nlohmann::json& arguments, const json_fields::FieldPath& at, GptModel& model) {
  if (arguments.contains("ffn_hidden_size")) {
    auto ffn = json_fields::read_integer(arguments, at, "ffn_hidden_size", 1);
    if (!ffn) return ffn.error();
    if (*ffn > (int64_t{1} << 30)) return at.field("ffn_hidden_size").error("is too large", *ffn);
    model.ffn_hidden = *ffn == 4 * model.hidden ? 0 : *ffn;
  }
  bool grouped = false, no_bias = false, untied = false;
  bool* flags[] = {&model.swiglu,
                   &grouped,
                   &no_bias,
                   &untied,
                   &model.flash_attention,
                   &model.grouped_gemm,
                   &model.mla,
                   &model.qk_layernorm,
                   &model.pad_to_capacity,
                   &model.softmax_fusion,
                   &model.rope_fusion,
                   &model.activation_fusion,
                   &model.bias_dropout_fusion,
                   &model.cross_entropy_fusion,
                   &model.half_loss};
  const char* names[] = {"swiglu",
                         "group_query_attention",
                         "disable_bias_linear",
                         "untie_embeddings_and_output_weights",
                         "use_flash_attn",
                         "moe_grouped_gemm",
                         "multi_latent_attention",
                         "qk_layernorm",
                         "moe_pad_expert_input_to_capacity",
                         "masked_softmax_fusion",
                         "apply_rope_fusion",
                         "bias_activation_fusion",
                         "bias_dropout_fusion",
                         "cross_entropy_loss_fusion",
                         "fp16_lm_cross_entropy"};
  for (size_t i = 0; i < std::size(names); ++i) {
    if (!arguments.contains(names[i])) continue;
    auto flag = read_flag(arguments, at, names[i]);
    if (!flag) return flag.error();
    *flags[i] = *flag;
  }
  model.linear_bias = !no_bias;
  model.tied_output = !untied;
  if (arguments.contains("num_query_groups")) {
    auto groups = json_fields::read_integer(arguments, at, "num_query_groups", 1);
    if (!groups) return groups.error();
    if (*groups > (int64_t{1} << 30)) return at.field("num_query_groups").error("is too large", *groups);
    if (grouped)
      model.query_groups = *groups;
    else if (*groups != model.heads)
      return at.field("num_query_groups").error("needs group_query_attention true (else it is the heads)", *groups);
  } else if (grouped) {
    return at.field("num_query_groups").error("is missing (group_query_attention is true)");
  }
  // Mixture of experts and multi-latent attention: the sizes, each at least 1 (check_megatron_layout
  // checks them against each other).
  const struct {
    const char* name;
    int64_t* value;
  } counts[] = {{"num_experts", &model.experts},
                {"moe_router_topk", &model.router_topk},
                {"max_position_embeddings", &model.max_positions},
                {"make_vocab_size_divisible_by", &model.vocab_divisor},
                {"moe_router_num_groups", &model.router_groups},
                {"moe_router_group_topk", &model.router_group_topk},
                {"moe_ffn_hidden_size", &model.moe_ffn_hidden},
                {"moe_shared_expert_intermediate_size", &model.shared_expert_ffn},
                {"q_lora_rank", &model.q_lora_rank},
                {"kv_lora_rank", &model.kv_lora_rank},
                {"qk_head_dim", &model.qk_head_dim},
                {"qk_pos_emb_head_dim", &model.qk_pos_head_dim},
                {"v_head_dim", &model.v_head_dim},
                {"kv_channels", &model.kv_channels},
                {"mtp_num_layers", &model.mtp_layers}};
  for (const auto& count : counts) {
    if (!arguments.contains(count.name) || arguments[count.name].is_null()) continue;  // null: Megatron's None
    auto value = json_fields::read_integer(arguments, at, count.name, 1);
    if (!value) return value.error();
    if (*value > (int64_t{1} << 30)) return at.field(count.name).error("is too large", *value);
    *count.value = *value;
  }
  if (model.moe_ffn_hidden == model.ffn()) model.moe_ffn_hidden = 0;  // the default, as the flags leave it
  model.kv_channels = model.kept_kv_channels(model.kv_channels);      // as the flags leave it
  for (const auto& [name, p] :
       {std::pair{"attention_dropout", &model.attention_dropout}, std::pair{"hidden_dropout", &model.hidden_dropout}}) {
    if (!arguments.contains(name)) continue;
    const nlohmann::json& value = arguments[name];
    if (!value.is_number() || !(value.get<double>() >= 0.0 && value.get<double>() < 1.0))
      return at.field(name).error("must be a number at least 0 and below 1", value);
    *p = value.get<double>();
  }
  if (arguments.contains("moe_expert_capacity_factor") && !arguments["moe_expert_capacity_factor"].is_null()) {
    const nlohmann::json& factor = arguments["moe_expert_capacity_factor"];  // null: dropless
    if (!factor.is_number() || factor.get<double>() <= 0.0)
      return at.field("moe_expert_capacity_factor").error("must be a number greater than 0 (or null)", factor);
    model.capacity_factor = factor.get<double>();
  }
  if (arguments.contains("moe_layer_freq")) {
    const nlohmann::json& freq = arguments["moe_layer_freq"];
    if (freq.is_array()) {
      if (freq.size() > static_cast<size_t>(kMaxGptLayers))
        return at.field("moe_layer_freq").error("has more entries than any model has layers");
      model.moe_layer_pattern.clear();
      for (const nlohmann::json& entry : freq) {
        if (!entry.is_number_integer() || (entry != 0 && entry != 1))
          return at.field("moe_layer_freq").error("must be an integer or an array of 0s and 1s", freq);
        model.moe_layer_pattern.push_back(static_cast<uint8_t>(entry.get<int>()));
      }
      model.moe_layer_freq = 0;
    } else {
      auto value = json_fields::read_integer(arguments, at, "moe_layer_freq", 1);
      if (!value) return value.error();
      if (*value > kMaxGptLayers) return at.field("moe_layer_freq").error("is too large", *value);
      model.moe_layer_freq = *value;
    }
  }
  const struct {
    const char* name;
    const char* plain;
    const char* other;
    bool* value;
  } choices[] = {{"position_embedding_type", "learned_absolute", "rope", &model.rope},
                 {"normalization", "LayerNorm", "RMSNorm", &model.rms_norm}};
  for (const auto& c : choices) {
    if (!arguments.contains(c.name)) continue;
    auto text = json_fields::read_string(arguments, at, c.name);
    if (!text) return text.error();
    if (*text != c.plain && *text != c.other)
      return at.field(c.name).error(fmt::format("must be {} or {}", c.plain, c.other), *text);
    *c.value = *text == c.other;
  }
  if (arguments.contains("cross_entropy_fusion_impl")) {
    const auto impl = [](std::string_view name) {
      return name == "te" || name == "native" ? std::optional<bool>(name == "te") : std::nullopt;
    };
    auto te = read_named(arguments, at, "cross_entropy_fusion_impl", impl, "native or te");
    if (!te) return te.error();
    model.te_cross_entropy = *te && model.cross_entropy_fusion;  // unused without the fusion, as the flags leave it
  }
  if (arguments.contains("moe_router_dtype") && !arguments["moe_router_dtype"].is_null()) {
    const auto fp32 = [](std::string_view name) { return name == "fp32" ? std::optional<bool>(true) : std::nullopt; };
    auto dtype = read_named(arguments, at, "moe_router_dtype", fp32, "fp32 or null (fp64 is not modelled)");
    if (!dtype) return dtype.error();
    model.fp32_router = *dtype;
  }
  if (!model.rope) model.rope_fusion = true;                                // Megatron turns it off: nothing to fuse
  if (!model.swiglu && !model.linear_bias) model.activation_fusion = true;  // one GeLU kernel either way
  return read_fp8(arguments, at, model);
}

}  // namespace baton
