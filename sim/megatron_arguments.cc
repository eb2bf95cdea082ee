// A Megatron model and layout as Megatron's arguments (sim/megatron_arguments.h's
// megatron_arguments and megatron_from_arguments): the plan file's "megatron"
// object, written and read back strictly.
#include "sim/megatron_arguments.h"

#include <iterator>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "sim/json_fields.h"

namespace baton {

nlohmann::json megatron_arguments(const GptModel& model, const MegatronLayout& layout) {
  nlohmann::json arguments = {{"num_layers", model.layers},
                              {"hidden_size", model.hidden},
                              {"num_attention_heads", model.heads},
                              {"seq_length", model.sequence},
                              {"vocab_size", model.vocab},
                              {"tensor_model_parallel_size", layout.tensor},
                              {"pipeline_model_parallel_size", layout.pipeline},
                              {"data_parallel_size", layout.data},
                              {"micro_batch_size", layout.micro_batch},
                              {"global_batch_size", layout.global_batch},
                              {"num_layers_per_virtual_pipeline_stage", layout.layers_per_virtual_stage},
                              {"recompute_granularity", recompute_name(layout.recompute)},
                              {"sequence_parallel", layout.sequence_parallel},
                              {"bf16", layout.bf16},
                              {"use_distributed_optimizer", layout.distributed_optimizer},
                              {"overlap_grad_reduce", layout.overlap_grad_reduce},
                              {"enable_zero_bubble", layout.zero_bubble > 0},
                              {"zero_bubble_max_pending_backward", layout.zero_bubble * layout.pipeline},
                              {"decoder_first_pipeline_num_layers", layout.first_stage_layers},
                              {"decoder_last_pipeline_num_layers", layout.last_stage_layers},
                              {"account_for_embedding_in_pipeline_split", layout.embedding_in_split},
                              {"account_for_loss_in_pipeline_split", layout.loss_in_split},
                              {"zero_bubble_heuristic", layout.zero_bubble_heuristic},
                              {"zero_bubble_v_schedule", layout.v_schedule == VSchedule::kZbV},
                              {"dualpipev", layout.v_schedule == VSchedule::kDualPipeV}};
  if (layout.recompute_layers != 1 || layout.recompute_block) {
    arguments["recompute_method"] = layout.recompute_block ? "block" : "uniform";
    arguments["recompute_num_layers"] = layout.recompute_layers;
  }
  if (layout.overlap_param_gather) arguments["overlap_param_gather"] = true;
  if (layout.tp_comm_overlap) arguments["tp_comm_overlap"] = true;
  if (layout.grad_reduce_in_bf16) arguments["grad_reduce_in_bf16"] = true;
  if (layout.moe_shared_expert_overlap) arguments["moe_shared_expert_overlap"] = true;
  if (layout.overlap_moe_ep_comm) arguments["overlap_moe_expert_parallel_comm"] = true;
  if (layout.delay_wgrad_compute) arguments["delay_wgrad_compute"] = true;
  if (!layout.pipeline_layout.empty()) arguments["pipeline_model_parallel_layout"] = layout.pipeline_layout;
  if (layout.context > 1) arguments["context_parallel_size"] = layout.context;
  if (layout.context > 1 && layout.context_comm != ContextComm::kP2P)
    arguments["cp_comm_type"] = context_comm_name(layout.context_comm);
  if (layout.expert_parallel > 1) arguments["expert_model_parallel_size"] = layout.expert_parallel;
  if (layout.expert_tensor_parallel() != layout.tensor)
    arguments["expert_tensor_parallel_size"] = layout.expert_tensor_parallel();
  if (model.moe()) arguments["moe_token_dispatcher_type"] = moe_dispatcher_name(layout.moe_dispatcher);
  if (!model.beyond_gpt()) return arguments;
  arguments["ffn_hidden_size"] = model.ffn();
  arguments["swiglu"] = model.swiglu;
  arguments["group_query_attention"] = model.query_groups > 0;
  arguments["num_query_groups"] = model.groups();
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
  if (model.cross_entropy_fusion) arguments["cross_entropy_loss_fusion"] = true;
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
  if (!model.moe()) return arguments;
  arguments["num_experts"] = model.experts;
  arguments["moe_router_topk"] = model.router_topk;
  if (model.router_groups > 0) arguments["moe_router_num_groups"] = model.router_groups;
  if (model.router_group_topk > 0) arguments["moe_router_group_topk"] = model.router_group_topk;
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
  return arguments;
}

namespace {

// `name`'s text read by `parse` (a name to std::optional<T>); an error
// saying it must be one of `choices` otherwise.
template <typename Parse>
auto read_named(const nlohmann::json& arguments, const json_fields::FieldPath& at, const char* name, Parse parse,
                const char* choices) -> Result<typename std::invoke_result_t<Parse, std::string_view>::value_type> {
  auto text = json_fields::read_string(arguments, at, name);
  if (!text) return text.error();
  const auto value = parse(*text);
  if (!value) return at.field(name).error(fmt::format("must be {}", choices), *text);
  return *value;
}

Result<bool> read_flag(const nlohmann::json& object, const json_fields::FieldPath& at, const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) return at.field(name).error("is missing");
  if (!it->is_boolean()) return at.field(name).error("must be true or false", *it);
  return it->get<bool>();
}

// The model's and the layout's numbers.
Status read_sizes(const nlohmann::json& arguments, const json_fields::FieldPath& at, MegatronSpec& spec) {
  std::vector<int64_t> numbers;
  for (const char* name : {"num_layers", "hidden_size", "num_attention_heads", "seq_length", "vocab_size",
                           "tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size",
                           "micro_batch_size", "global_batch_size", "num_layers_per_virtual_pipeline_stage",
                           "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"}) {
    const bool may_be_zero = std::string_view(name) == "num_layers_per_virtual_pipeline_stage" ||
                             std::string_view(name).rfind("decoder_", 0) == 0;
    auto value = json_fields::read_integer(arguments, at, name, may_be_zero ? 0 : 1);
    if (!value) return value.error();
    if (*value > (int64_t{1} << 30)) return at.field(name).error("is too large", *value);
    numbers.push_back(*value);
  }
  spec.model = GptModel{numbers[0], numbers[1], numbers[2], numbers[3], numbers[4]};
  MegatronLayout& l = spec.layout;
  l.tensor = static_cast<int>(numbers[5]);
  l.pipeline = static_cast<int>(numbers[6]);
  l.data = static_cast<int>(numbers[7]);
  l.micro_batch = static_cast<int>(numbers[8]);
  l.global_batch = static_cast<int>(numbers[9]);
  l.layers_per_virtual_stage = static_cast<int>(numbers[10]);
  l.first_stage_layers = static_cast<int>(numbers[11]);
  l.last_stage_layers = static_cast<int>(numbers[12]);
  return ok_status();
}

// Recomputation, the flags and the zero-bubble schedule.
Status read_choices(const nlohmann::json& arguments, const json_fields::FieldPath& at, MegatronLayout& l) {
  auto recompute = read_named(arguments, at, "recompute_granularity", parse_recompute, "none, selective or full");
  if (!recompute) return recompute.error();
  l.recompute = *recompute;
  if (arguments.contains("recompute_method")) {
    auto method = json_fields::read_string(arguments, at, "recompute_method");
    if (!method) return method.error();
    if (*method != "uniform" && *method != "block")
      return at.field("recompute_method").error("must be uniform or block", *method);
    l.recompute_block = *method == "block";
  }
  if (arguments.contains("recompute_num_layers")) {
    auto n = json_fields::read_integer(arguments, at, "recompute_num_layers", 1);
    if (!n) return n.error();
    if (*n > (int64_t{1} << 20)) return at.field("recompute_num_layers").error("is too large", *n);
    l.recompute_layers = static_cast<int>(*n);
  }
  if (arguments.contains("context_parallel_size")) {
    auto c = json_fields::read_integer(arguments, at, "context_parallel_size", 1);
    if (!c) return c.error();
    if (*c > kMaxGptContext) return at.field("context_parallel_size").error("is too large", *c);
    l.context = static_cast<int>(*c);
  }
  if (arguments.contains("pipeline_model_parallel_layout")) {
    auto text = json_fields::read_string(arguments, at, "pipeline_model_parallel_layout");
    if (!text) return text.error();
    auto chunks = parse_pipeline_layout(*text);
    if (!chunks) return at.field("pipeline_model_parallel_layout").error(chunks.error().message);
    l.pipeline_layout = *text;
    l.layout_chunks = *chunks;
  }
  if (arguments.contains("cp_comm_type")) {
    auto comm = read_named(arguments, at, "cp_comm_type", parse_context_comm, "p2p, all_gather or a2a");
    if (!comm) return comm.error();
    l.context_comm = *comm;
  }
  if (arguments.contains("moe_token_dispatcher_type")) {
    auto dispatcher =
        read_named(arguments, at, "moe_token_dispatcher_type", parse_moe_dispatcher, "allgather, alltoall or flex");
    if (!dispatcher) return dispatcher.error();
    l.moe_dispatcher = *dispatcher;
  }
  if (arguments.contains("expert_model_parallel_size")) {
    auto ep = json_fields::read_integer(arguments, at, "expert_model_parallel_size", 1);
    if (!ep) return ep.error();
    if (*ep > (int64_t{1} << 20)) return at.field("expert_model_parallel_size").error("is too large", *ep);
    l.expert_parallel = static_cast<int>(*ep);
  }
  if (arguments.contains("expert_tensor_parallel_size") && !arguments["expert_tensor_parallel_size"].is_null()) {
    auto etp = json_fields::read_integer(arguments, at, "expert_tensor_parallel_size", 1);
    if (!etp) return etp.error();
    if (*etp > (int64_t{1} << 20)) return at.field("expert_tensor_parallel_size").error("is too large", *etp);
    l.expert_tensor = static_cast<int>(*etp);
  }
  bool zero_bubble = false;
  bool* flags[] = {&l.sequence_parallel, &l.bf16, &l.distributed_optimizer, &l.overlap_grad_reduce, &zero_bubble};
  const char* names[] = {"sequence_parallel", "bf16", "use_distributed_optimizer", "overlap_grad_reduce",
                         "enable_zero_bubble"};
  for (int i = 0; i < 5; ++i) {
    auto flag = read_flag(arguments, at, names[i]);
    if (!flag) return flag.error();
    *flags[i] = *flag;
  }
  // Optional: plans written before baton knew them leave them out.
  bool zbv = false, dualpipev = false;
  bool* accounts[] = {&l.embedding_in_split,
                      &l.loss_in_split,
                      &l.zero_bubble_heuristic,
                      &zbv,
                      &dualpipev,
                      &l.overlap_param_gather,
                      &l.tp_comm_overlap,
                      &l.moe_shared_expert_overlap,
                      &l.overlap_moe_ep_comm,
                      &l.delay_wgrad_compute,
                      &l.grad_reduce_in_bf16};
  const char* account_names[] = {"account_for_embedding_in_pipeline_split",
                                 "account_for_loss_in_pipeline_split",
                                 "zero_bubble_heuristic",
                                 "zero_bubble_v_schedule",
                                 "dualpipev",
                                 "overlap_param_gather",
                                 "tp_comm_overlap",
                                 "moe_shared_expert_overlap",
                                 "overlap_moe_expert_parallel_comm",
                                 "delay_wgrad_compute",
                                 "grad_reduce_in_bf16"};
  for (int i = 0; i < 11; ++i) {
    if (!arguments.contains(account_names[i])) continue;
    auto flag = read_flag(arguments, at, account_names[i]);
    if (!flag) return flag.error();
    *accounts[i] = *flag;
  }
  if (zbv && dualpipev) return at.field("dualpipev").error("and zero_bubble_v_schedule are both true: give one");
  l.v_schedule = zbv ? VSchedule::kZbV : dualpipev ? VSchedule::kDualPipeV : VSchedule::kNone;
  auto pending = json_fields::read_integer(arguments, at, "zero_bubble_max_pending_backward", 0);
  if (!pending) return pending.error();
  if (zero_bubble) {
    const std::optional<int> schedule = zero_bubble_of_pending(*pending, l.pipeline);
    if (!schedule)
      return at.field("zero_bubble_max_pending_backward")
          .error(fmt::format("must be p = {} (ZB-H1) or 2p = {} (ZB-H2)", l.pipeline, 2 * l.pipeline), *pending);
    l.zero_bubble = *schedule;
  }
  return ok_status();
}

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
                {"mtp_num_layers", &model.mtp_layers}};
  for (const auto& count : counts) {
    if (!arguments.contains(count.name) || arguments[count.name].is_null()) continue;  // null: Megatron's None
    auto value = json_fields::read_integer(arguments, at, count.name, 1);
    if (!value) return value.error();
    if (*value > (int64_t{1} << 30)) return at.field(count.name).error("is too large", *value);
    *count.value = *value;
  }
  if (model.moe_ffn_hidden == model.ffn()) model.moe_ffn_hidden = 0;  // the default, as the flags leave it
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
  return read_fp8(arguments, at, model);
}

Result<MegatronSpec> megatron_from_arguments(const nlohmann::json& arguments, const std::string& where) {
  const json_fields::FieldPath at(where);
  if (auto ok = json_fields::check_object(arguments, at); !ok) return ok.error();
  // The architecture's keys are read_gpt_architecture's.
  if (auto ok = json_fields::check_known_keys(without_gpt_architecture(arguments), at,
                                              {"num_layers",
                                               "hidden_size",
                                               "num_attention_heads",
                                               "seq_length",
                                               "vocab_size",
                                               "tensor_model_parallel_size",
                                               "pipeline_model_parallel_size",
                                               "data_parallel_size",
                                               "micro_batch_size",
                                               "global_batch_size",
                                               "num_layers_per_virtual_pipeline_stage",
                                               "recompute_granularity",
                                               "recompute_method",
                                               "recompute_num_layers",
                                               "sequence_parallel",
                                               "bf16",
                                               "use_distributed_optimizer",
                                               "overlap_grad_reduce",
                                               "overlap_param_gather",
                                               "tp_comm_overlap",
                                               "grad_reduce_in_bf16",
                                               "enable_zero_bubble",
                                               "zero_bubble_max_pending_backward",
                                               "decoder_first_pipeline_num_layers",
                                               "decoder_last_pipeline_num_layers",
                                               "account_for_embedding_in_pipeline_split",
                                               "account_for_loss_in_pipeline_split",
                                               "zero_bubble_heuristic",
                                               "zero_bubble_v_schedule",
                                               "dualpipev",
                                               "context_parallel_size",
                                               "cp_comm_type",
                                               "pipeline_model_parallel_layout",
                                               "expert_model_parallel_size",
                                               "expert_tensor_parallel_size",
                                               "moe_token_dispatcher_type",
                                               "moe_shared_expert_overlap",
                                               "overlap_moe_expert_parallel_comm",
                                               "delay_wgrad_compute"});
      !ok)
    return ok.error();
  MegatronSpec spec;
  if (auto ok = read_sizes(arguments, at, spec); !ok) return ok.error();
  if (auto ok = read_choices(arguments, at, spec.layout); !ok) return ok.error();
  if (auto ok = read_gpt_architecture(arguments, at, spec.model); !ok) return ok.error();
  return spec;
}

}  // namespace baton
