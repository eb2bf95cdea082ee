// A Megatron model and layout as Megatron's arguments (sim/megatron_arguments.h's
// megatron_arguments and megatron_from_arguments): the plan file's "megatron"
// object, written and read back strictly. The architecture's keys are
// sim/megatron_architecture_arguments.cc's.
#include "sim/megatron_arguments.h"

#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "sim/json_fields.h"
#include "sim/megatron_arguments_detail.h"

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
  if (model.beyond_gpt()) megatron_arguments_detail::write_gpt_architecture(model, arguments);
  return arguments;
}

namespace {

using megatron_arguments_detail::read_flag;
using megatron_arguments_detail::read_named;

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

}  // namespace

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
