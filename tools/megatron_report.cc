#include "tools/megatron_report.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/megatron_arguments.h"
#include "sim/megatron_profile.h"
#include "tools/megatron_flags.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

// Whether Megatron's softmax runs fused: in FlashAttention's kernel, or the
// masked-softmax kernel where the scores' shape allows it and
// --no-masked-softmax-fusion is not given.
bool fused_softmax_runs(const GptModel& model, const MegatronLayout& layout) {
  return model.flash_attention ||
         (model.softmax_fusion &&
          fused_softmax_available(layout.micro_batch, model.heads / layout.tensor, model.sequence));
}

struct Part {
  const char* name;
  const char* key;
  Seconds time;
};

// The context-parallel exchange only where there is one (c > 1), the MoE
// dispatcher's collectives likewise (ep > 1, or any time charged: the
// allgather dispatcher's over etp GPUs with ep = 1).
std::vector<Part> parts(const MegatronBreakdown& b, const MegatronLayout& layout) {
  std::vector<Part> all = {{"compute (GEMMs, memory-bound kernels)", "compute", b.compute},
                           {"tensor-parallel collectives (exposed)", "tensor_parallel_comm", b.tensor_comm}};
  if (layout.context > 1)
    all.push_back({"context-parallel exchange (exposed)", "context_parallel_comm", b.context_comm});
  if (layout.expert_parallel > 1 || b.expert_comm.value > 0.0)
    all.push_back({layout.moe_dispatcher == MoeDispatcher::kAllToAll ? "expert-parallel all-to-alls (dispatch, combine)"
                   : layout.moe_dispatcher == MoeDispatcher::kFlex
                       ? "expert-parallel DeepEP dispatch, combine"
                       : "expert all-gathers, reduce-scatters (dispatch, combine)",
                   "expert_parallel_comm", b.expert_comm});
  const std::vector<Part> rest = {
      {"recomputation", "recompute", b.recompute},
      {"host dispatch and loop (GPU waiting for the host)", "host_dispatch", b.host},
      {"pipeline bubble and transfer waits", "pipeline_bubble", b.bubble},
      {"gradient all-reduces (data-parallel, tied embedding)", "data_parallel_allreduce", b.data_allreduce},
      {"optimizer step", "optimizer", b.optimizer}};
  all.insert(all.end(), rest.begin(), rest.end());
  return all;
}

// Full recomputation's method, where it is not every block alone.
std::string recompute_detail(const GptModel& model, const MegatronLayout& layout) {
  if (layout.recompute_block)
    return fmt::format(" (the first {} blocks of each {})", layout.recompute_layers,
                       layout.virtual_stages(model) > 1 ? "chunk" : "stage");
  if (layout.recompute_layers > 1) return fmt::format(" ({} blocks a checkpoint)", layout.recompute_layers);
  return "";
}

std::string layout_line(const GptModel& model, const MegatronLayout& layout) {
  std::string text = fmt::format(
      "t {} x p {}{} x d {}{} = {} GPUs, micro-batch {}, {} microbatches per data-parallel rank, {}", layout.tensor,
      layout.pipeline,
      layout.context > 1 ? fmt::format(" x c {} ({})", layout.context, context_comm_name(layout.context_comm)) : "",
      layout.data,
      !model.moe() ? ""
      : layout.expert_tensor_parallel() != layout.tensor
          ? fmt::format(" (expert parallel {}, expert tensor parallel {}, {} dispatcher)", layout.expert_parallel,
                        layout.expert_tensor_parallel(), moe_dispatcher_name(layout.moe_dispatcher))
          : fmt::format(" (expert parallel {}, {} dispatcher)", layout.expert_parallel,
                        moe_dispatcher_name(layout.moe_dispatcher)),
      layout.gpus(), layout.micro_batch, layout.microbatches(),
      layout.v_schedule == VSchedule::kZbV
          ? fmt::format("ZB-V (zero bubble, 2 chunks of {} blocks per GPU in a V)", layout.stage_layers(model)[1])
      : layout.v_schedule == VSchedule::kDualPipeV
          ? fmt::format("DualPipeV (2 chunks of {} blocks per GPU in a V)", layout.stage_layers(model)[1])
      : layout.layers_per_virtual_stage > 0
          ? fmt::format("interleaved 1F1B with {} chunks of {} layer{}", layout.virtual_stages(model),
                        layout.layers_per_virtual_stage, layout.layers_per_virtual_stage == 1 ? "" : "s")
      : !layout.layout_chunks.empty()
          ? fmt::format("{} (--pipeline-model-parallel-layout: {})",
                        layout.virtual_stages(model) > 1
                            ? fmt::format("interleaved 1F1B with {} chunks per GPU", layout.virtual_stages(model))
                            : std::string("1F1B"),
                        fmt::join(layout.layout_chunks, "|"))
      : layout.zero_bubble > 0 && layout.zero_bubble_heuristic
          ? fmt::format("ZB-{}p (zero bubble, the authors' greedy scheduler)", layout.zero_bubble)
      : layout.zero_bubble == 1 ? std::string("ZB-H1 (zero bubble)")
      : layout.zero_bubble == 2 ? std::string("ZB-H2 (zero bubble)")
                                : std::string("1F1B"));
  if (layout.first_stage_layers > 0 || layout.last_stage_layers > 0 || layout.embedding_in_split ||
      layout.loss_in_split)
    text += fmt::format(", blocks per {} {}", layout.virtual_stages(model) > 1 ? "chunk" : "stage",
                        fmt::join(layout.stage_layers(model), "/"));
  text += fmt::format(", recompute {}{}{}{}, {}{}{}{}{}", recompute_name(layout.recompute),
                      recompute_detail(model, layout), layout.sequence_parallel ? ", sequence parallel" : "",
                      layout.tp_comm_overlap ? " with its collectives overlapped" : "", layout.bf16 ? "bf16" : "fp16",
                      layout.distributed_optimizer ? ", distributed optimizer" : "",
                      layout.overlap_grad_reduce ? ", gradient reduction overlapped" : "",
                      layout.grad_reduce_in_bf16 && layout.bf16 ? ", gradients reduced in bf16" : "",
                      layout.overlap_param_gather ? ", weight all-gather overlapped" : "");
  if (layout.moe_shared_expert_overlap) text += ", shared expert beside the all-to-alls";
  if (layout.overlap_moe_ep_comm)
    text += layout.delay_wgrad_compute
                ? ", steady-state forwards and backwards paired (all-to-alls overlapped, experts' weight gradients "
                  "delayed)"
                : ", steady-state forwards and backwards paired (all-to-alls overlapped)";
  return text;
}

}  // namespace

std::string megatron_text(const GptModel& model, const MegatronLayout& layout, const Topology& topology,
                          const MegatronPrediction& p) {
  std::string out = fmt::format(
      "GPT: {} layers, hidden {}, {} heads, sequence {}, vocabulary {} (padded {}): {:.2f}B parameters{}{}\n",
      model.layers, model.hidden, model.heads, model.sequence, model.vocab, padded_vocab(model, layout.tensor),
      gpt_parameters(model, layout.tensor) / 1e9,
      model.moe() ? fmt::format(" ({:.2f}B active per token)", gpt_active_parameters(model, layout.tensor) / 1e9)
                  : std::string(),
      model.mtp_layers > 0
          ? fmt::format(", {:.2f}B of them in {} multi-token prediction depth{}", gpt_mtp_parameters(model) / 1e9,
                        model.mtp_layers, model.mtp_layers == 1 ? "" : "s")
          : std::string());
  if (model.beyond_gpt()) out += fmt::format("architecture beyond GPT-3's:{}\n", architecture_flags(model));
  out += fmt::format("on {} ({}): {}\n\n", topology.name, topology.device.name, layout_line(model, layout));
  out += fmt::format(
      "iteration        {}\nthroughput       {:.2f} samples/s ({:.0f} tokens/s)\nmodel FLOPs      {:.1f} TFLOP/s per "
      "GPU\n\n",
      human_seconds(p.iteration_time), p.throughput_samples_per_s,
      p.throughput_samples_per_s * static_cast<double>(model.sequence), p.model_tflops_per_gpu);
  out += fmt::format("where the time goes (pipeline rank {}, the busiest, per iteration):\n", p.breakdown.rank);
  const std::vector<Part> time_parts = parts(p.breakdown, layout);
  size_t name_width = 0;
  for (const Part& part : time_parts) name_width = std::max(name_width, std::string_view(part.name).size());
  for (const Part& part : time_parts)
    out += fmt::format("  {:<{}} {:>12}  {:5.1f}%\n", part.name, name_width, human_seconds(part.time),
                       100.0 * part.time.value / p.iteration_time.value);
  const int64_t heads_per_rank = model.heads / layout.tensor;
  if (model.softmax_fusion && !fused_softmax_runs(model, layout))
    out += fmt::format(
        "note: Megatron's fused softmax does not take these scores (micro-batch {} x {} heads per rank = {}, sequence "
        "{};\n      it needs a multiple of 4, and 16 < s <= 16384 with s a multiple of 4): the softmax runs unfused "
        "in fp32,\n      five kernels each way, and is counted so above\n",
        layout.micro_batch, heads_per_rank, layout.micro_batch * heads_per_rank, model.sequence);
  out += fmt::format("\nmemory per GPU (capacity {}):\n", human_bytes(p.memory.capacity));
  // With chunks (interleaved, a V) the count is of chunk passes: a forward of
  // one chunk for one microbatch, held until its backward.
  const bool chunked = layout.virtual_stages(model) > 1;
  const auto in_flight = [chunked](int64_t n) {
    return chunked ? fmt::format("({} chunk pass{} in flight)", n, n == 1 ? "" : "es")
                   : fmt::format("({} microbatch{} in flight)", n, n == 1 ? "" : "es");
  };
  size_t in_flight_width = 0;
  for (const MegatronRankMemory& r : p.memory.ranks)
    in_flight_width = std::max(in_flight_width, in_flight(r.inflight_microbatches).size());
  for (const MegatronRankMemory& r : p.memory.ranks)
    out += fmt::format(
        "  pipeline rank {:>3}: weights, gradients, optimizer {:>10} + activations {:>10} {:<{}} = {:>10}  {}\n",
        r.rank, human_bytes(r.weights_and_optimizer), human_bytes(r.activations), in_flight(r.inflight_microbatches),
        in_flight_width, human_bytes(r.peak), r.peak <= p.memory.capacity ? "fits" : "DOES NOT FIT");
  if (!p.memory.fits()) {
    out += "the layout does not fit; the time above is what it would take with enough memory.\n";
    if (p.fit_hints.empty())
      out +=
          "no single change among more t, p, context or expert parallelism, recomputation, the distributed "
          "optimizer or sequence parallelism makes it fit\n";
    for (const std::string& hint : p.fit_hints) out += fmt::format("  would fit with {}\n", hint);
  }
  out += fmt::format("\nsimulated {} actions{} in {}\n", p.simulation.metrics.actions,
                     p.simulation.one_replica
                         ? fmt::format(" (one data-parallel replica: the {} replicas run alike)", layout.replicas())
                         : std::string(),
                     human_seconds(Seconds(p.simulation.metrics.wall_seconds)));
  return out;
}

nlohmann::json megatron_json(const GptModel& model, const MegatronLayout& layout, const Topology& topology,
                             const MegatronPrediction& p) {
  nlohmann::json breakdown = nlohmann::json::object();
  for (const Part& part : parts(p.breakdown, layout)) breakdown[part.key] = part.time.value;
  breakdown["rank"] = p.breakdown.rank;
  nlohmann::json memory = nlohmann::json::array();
  for (const MegatronRankMemory& r : p.memory.ranks)
    memory.push_back({{"pipeline_rank", r.rank},
                      {"weights_gradients_optimizer_bytes", r.weights_and_optimizer.value},
                      {"activation_bytes", r.activations.value},
                      {"peak_bytes", r.peak.value},
                      {"inflight_microbatches", r.inflight_microbatches},
                      {"fits", r.peak <= p.memory.capacity}});
  nlohmann::json out = {
      {"model",
       {{"num_layers", model.layers},
        {"hidden_size", model.hidden},
        {"num_attention_heads", model.heads},
        {"seq_length", model.sequence},
        {"vocab_size", model.vocab},
        {"padded_vocab_size", padded_vocab(model, layout.tensor)},
        {"parameters", gpt_parameters(model, layout.tensor)},
        {"active_parameters", gpt_active_parameters(model, layout.tensor)}}},
      {"layout",
       {{"tensor_model_parallel_size", layout.tensor},
        {"pipeline_model_parallel_size", layout.pipeline},
        {"data_parallel_size", layout.data},
        {"context_parallel_size", layout.context},
        {"cp_comm_type",
         layout.context > 1 ? nlohmann::json(context_comm_name(layout.context_comm)) : nlohmann::json()},
        {"expert_model_parallel_size", layout.expert_parallel},
        {"expert_tensor_parallel_size", layout.expert_tensor_parallel()},
        {"moe_token_dispatcher_type",
         model.moe() ? nlohmann::json(moe_dispatcher_name(layout.moe_dispatcher)) : nlohmann::json()},
        {"moe_shared_expert_overlap", layout.moe_shared_expert_overlap},
        {"overlap_moe_expert_parallel_comm", layout.overlap_moe_ep_comm},
        {"delay_wgrad_compute", layout.delay_wgrad_compute},
        {"micro_batch_size", layout.micro_batch},
        {"global_batch_size", layout.global_batch},
        {"num_layers_per_virtual_pipeline_stage",
         layout.layers_per_virtual_stage > 0 ? nlohmann::json(layout.layers_per_virtual_stage) : nlohmann::json()},
        {"recompute_granularity",
         layout.recompute == Recompute::kNone ? nlohmann::json() : nlohmann::json(recompute_name(layout.recompute))},
        {"recompute_method", layout.recompute != Recompute::kFull ? nlohmann::json()
                             : layout.recompute_block             ? nlohmann::json("block")
                                                                  : nlohmann::json("uniform")},
        {"recompute_num_layers",
         layout.recompute == Recompute::kFull ? nlohmann::json(layout.recompute_layers) : nlohmann::json()},
        {"sequence_parallel", layout.sequence_parallel},
        {"bf16", layout.bf16},
        {"fp16", !layout.bf16},
        {"use_distributed_optimizer", layout.distributed_optimizer},
        {"overlap_grad_reduce", layout.overlap_grad_reduce},
        {"overlap_param_gather", layout.overlap_param_gather},
        {"tp_comm_overlap", layout.tp_comm_overlap},
        {"grad_reduce_in_bf16", layout.grad_reduce_in_bf16},
        {"enable_zero_bubble", layout.zero_bubble > 0},
        {"zero_bubble_heuristic", layout.zero_bubble_heuristic},
        {"zero_bubble_max_pending_backward",
         layout.zero_bubble > 0 ? nlohmann::json(layout.zero_bubble * layout.pipeline) : nlohmann::json()},
        {"decoder_first_pipeline_num_layers",
         layout.first_stage_layers > 0 ? nlohmann::json(layout.first_stage_layers) : nlohmann::json()},
        {"pipeline_model_parallel_layout",
         layout.pipeline_layout.empty() ? nlohmann::json() : nlohmann::json(layout.pipeline_layout)},
        {"decoder_last_pipeline_num_layers",
         layout.last_stage_layers > 0 ? nlohmann::json(layout.last_stage_layers) : nlohmann::json()},
        {"account_for_embedding_in_pipeline_split", layout.embedding_in_split},
        {"account_for_loss_in_pipeline_split", layout.loss_in_split},
        {"zero_bubble_v_schedule", layout.v_schedule == VSchedule::kZbV},
        {"dualpipev", layout.v_schedule == VSchedule::kDualPipeV}}},
      {"schedule", std::string(schedule_name(p.plan.schedule))},
      {"topology", topology.name},
      {"device", topology.device.name},
      {"gpus", layout.gpus()},
      {"microbatches_per_data_parallel_rank", layout.microbatches()},
      {"fused_softmax", fused_softmax_runs(model, layout)},
      {"iteration_time_s", p.iteration_time.value},
      {"throughput_samples_per_s", p.throughput_samples_per_s},
      {"model_tflops_per_gpu", p.model_tflops_per_gpu},
      {"breakdown_s", breakdown},
      {"memory", memory},
      {"memory_capacity_bytes", p.memory.capacity.value},
      {"fits", p.memory.fits()},
      {"fit_hints", p.fit_hints},
      {"actions", p.simulation.metrics.actions},
      {"actions_skipped", p.simulation.metrics.actions_skipped},
      {"simulated_replicas", p.simulation.one_replica ? 1 : layout.replicas()}};
  if (model.beyond_gpt()) {
    const nlohmann::json arguments = megatron_arguments(model, layout);
    for (const char* key : kGptArchitectureKeys)  // the experts' keys only with experts
      if (arguments.contains(key)) out["model"][key] = arguments.at(key);
  }
  return out;
}

}  // namespace baton::cli
