#include "tools/check_gpt.h"

#include <limits>
#include <utility>

#include <fmt/format.h>

#include "sim/megatron_arguments.h"
#include "tools/cli_support.h"

namespace baton::cli {

namespace {

using json_fields::FieldPath;

// Counts an int holds: a larger one is refused, not wrapped.
constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

void read_pinned(const nlohmann::json& pinned, const FieldPath& at, MegatronAxes& axes) {
  take(json_fields::check_object(pinned, at));
  take(json_fields::check_known_keys(pinned, at,
                                     {"tensor_model_parallel_size",
                                      "pipeline_model_parallel_size",
                                      "micro_batch_size",
                                      "num_layers_per_virtual_pipeline_stage",
                                      "recompute_granularity",
                                      "sequence_parallel",
                                      "use_distributed_optimizer",
                                      "zero_bubble",
                                      "v_schedule",
                                      "data_parallel_size",
                                      "context_parallel_size",
                                      "expert_model_parallel_size",
                                      "expert_tensor_parallel_size",
                                      "moe_token_dispatcher_type",
                                      "gpus",
                                      "overlap_grad_reduce",
                                      "overlap_param_gather",
                                      "tp_comm_overlap",
                                      "moe_shared_expert_overlap",
                                      "overlap_moe_expert_parallel_comm",
                                      "delay_wgrad_compute",
                                      "grad_reduce_in_bf16"}));
  const auto integer = [&](const char* name, int least, std::optional<int>& into) {
    if (pinned.contains(name))
      into = static_cast<int>(take(json_fields::read_integer(pinned, at, name, least, kMaxInt)));
  };
  integer("tensor_model_parallel_size", 1, axes.tensor);
  integer("pipeline_model_parallel_size", 1, axes.pipeline);
  integer("micro_batch_size", 1, axes.micro_batch);
  integer("num_layers_per_virtual_pipeline_stage", 0, axes.layers_per_virtual_stage);
  integer("data_parallel_size", 1, axes.data);
  integer("context_parallel_size", 1, axes.context);
  integer("expert_model_parallel_size", 1, axes.expert_parallel);
  integer("expert_tensor_parallel_size", 1, axes.expert_tensor);
  integer("gpus", 1, axes.gpus);
  if (pinned.contains("recompute_granularity")) {
    const std::string r = take(json_fields::read_string(pinned, at, "recompute_granularity"));
    axes.recompute = parse_recompute(r);
    if (!axes.recompute)
      throw UsageError(at.field("recompute_granularity").error("must be none, selective or full", r).message);
  }
  if (pinned.contains("zero_bubble")) {
    const std::string zb = take(json_fields::read_string(pinned, at, "zero_bubble"));
    axes.zero_bubble = parse_zero_bubble(zb);
    if (!axes.zero_bubble) throw UsageError(at.field("zero_bubble").error("must be 1f1b, zb-h1 or zb-h2", zb).message);
  }
  if (pinned.contains("v_schedule")) {
    const std::string v = take(json_fields::read_string(pinned, at, "v_schedule"));
    axes.v_schedule = parse_v_schedule(v);
    if (!axes.v_schedule) throw UsageError(at.field("v_schedule").error("must be none, zbv or dualpipev", v).message);
  }
  if (pinned.contains("moe_token_dispatcher_type")) {
    const std::string d = take(json_fields::read_string(pinned, at, "moe_token_dispatcher_type"));
    axes.moe_dispatcher = parse_moe_dispatcher(d);
    if (!axes.moe_dispatcher)
      throw UsageError(at.field("moe_token_dispatcher_type").error("must be allgather, alltoall or flex", d).message);
  }
  for (const char* name : {"sequence_parallel", "use_distributed_optimizer"}) {
    if (!pinned.contains(name)) continue;
    if (!pinned[name].is_boolean())
      throw UsageError(at.field(name).error("must be true or false", pinned[name]).message);
    (std::string_view(name) == "sequence_parallel" ? axes.sequence_parallel : axes.distributed_optimizer) =
        pinned[name].get<bool>();
  }
  // The overlaps asked for, as plan's flags ask (MegatronAxes: each on the layouts it applies to).
  const std::pair<const char*, bool*> overlaps[] = {{"overlap_grad_reduce", &axes.overlap_grad_reduce},
                                                    {"overlap_param_gather", &axes.overlap_param_gather},
                                                    {"tp_comm_overlap", &axes.tp_comm_overlap},
                                                    {"moe_shared_expert_overlap", &axes.shared_expert_overlap},
                                                    {"overlap_moe_expert_parallel_comm", &axes.overlap_moe_ep_comm},
                                                    {"delay_wgrad_compute", &axes.delay_wgrad_compute},
                                                    {"grad_reduce_in_bf16", &axes.grad_reduce_in_bf16}};
  for (const auto& [name, into] : overlaps) {
    if (!pinned.contains(name)) continue;
    if (!pinned[name].is_boolean())
      throw UsageError(at.field(name).error("must be true or false", pinned[name]).message);
    *into = pinned[name].get<bool>();
  }
  if (axes.overlap_param_gather && !axes.overlap_grad_reduce)
    throw UsageError(
        at.field("overlap_param_gather").error("needs overlap_grad_reduce true, as Megatron asks").message);
  if (axes.delay_wgrad_compute && !axes.overlap_moe_ep_comm)
    throw UsageError(
        at.field("delay_wgrad_compute").error("needs overlap_moe_expert_parallel_comm true, as Megatron asks").message);
}

}  // namespace

GptCheck read_gpt_check(const nlohmann::json& gpt, const FieldPath& at) {
  take(json_fields::check_object(gpt, at));
  // The architecture's keys are read_gpt_architecture's.
  take(json_fields::check_known_keys(without_gpt_architecture(gpt), at,
                                     {"num_layers", "hidden_size", "num_attention_heads", "seq_length", "vocab_size",
                                      "global_batch_size", "bf16", "pinned"}));
  GptCheck check;
  check.model.layers = take(json_fields::read_integer(gpt, at, "num_layers", 1));
  check.model.hidden = take(json_fields::read_integer(gpt, at, "hidden_size", 1));
  check.model.heads = take(json_fields::read_integer(gpt, at, "num_attention_heads", 1));
  check.model.sequence = take(json_fields::read_integer(gpt, at, "seq_length", 1));
  check.model.vocab = take(json_fields::read_integer_or(gpt, at, "vocab_size", 1, 50257));
  take(read_gpt_architecture(gpt, at, check.model));
  check.global_batch = static_cast<int>(take(json_fields::read_integer(gpt, at, "global_batch_size", 1, kMaxInt)));
  if (gpt.contains("bf16")) {
    if (!gpt["bf16"].is_boolean())
      throw UsageError(at.field("bf16").error("must be true or false", gpt["bf16"]).message);
    check.bf16 = gpt["bf16"].get<bool>();
  }
  if (gpt.contains("pinned")) read_pinned(gpt["pinned"], at.field("pinned"), check.pinned);
  return check;
}

std::string short_layout(const GptModel& model, const MegatronLayout& l) {
  std::string split;
  if (l.first_stage_layers > 0 || l.last_stage_layers > 0 || l.embedding_in_split || l.loss_in_split) {
    const std::vector<int> blocks = l.stage_layers(model);
    split = blocks.size() > 2 ? fmt::format(" layers {}/{}/{}", blocks.front(), blocks[1], blocks.back())
                              : fmt::format(" layers {}/{}", blocks.front(), blocks.back());
  }
  return fmt::format(
      "t {} p {}{} d {}{} b {}{}{} recompute {}{}{}", l.tensor, l.pipeline,
      l.context > 1
          ? fmt::format(" c {}{}", l.context,
                        l.context_comm == ContextComm::kP2P ? "" : std::string(" ") + context_comm_name(l.context_comm))
          : "",
      l.data,
      fmt::format("{}{}{}", l.expert_parallel > 1 ? fmt::format(" ep {}", l.expert_parallel) : "",
                  l.expert_tensor_parallel() != l.tensor ? fmt::format(" etp {}", l.expert_tensor_parallel()) : "",
                  model.moe() ? fmt::format(" {}{}{}", moe_dispatcher_name(l.moe_dispatcher),
                                            l.overlap_moe_ep_comm
                                                ? (l.delay_wgrad_compute ? "+ep-overlap+delay-wgrad" : "+ep-overlap")
                                                : "",
                                            l.moe_shared_expert_overlap ? "+shared-overlap" : "")
                              : ""),
      l.micro_batch, split,
      l.v_schedule != VSchedule::kNone ? std::string(" ") + v_schedule_name(l.v_schedule)
      : l.layers_per_virtual_stage > 0 ? fmt::format(" v {}", l.virtual_stages(model))
      : l.zero_bubble > 0              ? std::string(" ") + zero_bubble_name(l.zero_bubble)
                                       : "",
      recompute_name(l.recompute), l.sequence_parallel ? " sp" : "", l.distributed_optimizer ? " dist-opt" : "");
}

Result<GptCheckResult> plan_gpt_check(const GptCheck& check, const Topology& topology) {
  auto found = search_megatron_layouts(check.model, check.global_batch, check.bf16, check.pinned, topology, 1);
  if (!found) return found.error();
  const MegatronCandidate& best = found->best.front();
  return GptCheckResult{best.iteration_time.value, short_layout(check.model, best.layout)};
}

}  // namespace baton::cli
