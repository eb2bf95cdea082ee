#include "tools/megatron_plan.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "planner/megatron_overlaps.h"
#include "planner/megatron_search.h"
#include "sim/megatron_arguments.h"
#include "tools/check_gpt.h"
#include "tools/cli_support.h"
#include "tools/megatron_report.h"
#include "tools/megatron_training_flags.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

// A line for the Zero Bubble authors' fork of Megatron-LM (older than
// Megatron-core's --attention-backend), not for Megatron-LM itself.
bool fork_line(const MegatronLayout& l) { return l.zero_bubble > 0 || l.v_schedule == VSchedule::kZbV; }

std::string megatron_flags_of(const GptModel& model, const MegatronLayout& l) {
  std::string text = fmt::format(
      "--num-layers {} --hidden-size {} --num-attention-heads {} --seq-length {} --global-batch-size {} "
      "--micro-batch-size {} --tensor-model-parallel-size {} --pipeline-model-parallel-size {}",
      model.layers, model.hidden, model.heads, model.sequence, l.global_batch, l.micro_batch, l.tensor, l.pipeline);
  // Megatron takes the vocabulary from its tokenizer (GPT-2's BPE: 50,257);
  // --vocab-size says another one (its NullTokenizer's flag), and simulate
  // reads it back.
  if (model.vocab != 50257) text += fmt::format(" --vocab-size {}", model.vocab);
  text += architecture_flags(model);
  // Megatron-core's default attention backend (auto) runs FlashAttention or
  // cuDNN's fused attention; the plan timed Megatron's unfused core.
  if (!model.flash_attention && !fork_line(l)) text += " --attention-backend unfused";
  if (l.context > 1) text += fmt::format(" --context-parallel-size {}", l.context);
  if (l.context > 1 && l.context_comm != ContextComm::kP2P)
    text += fmt::format(" --cp-comm-type {}", context_comm_name(l.context_comm));
  if (l.expert_parallel > 1) text += fmt::format(" --expert-model-parallel-size {}", l.expert_parallel);
  if (l.expert_tensor_parallel() != l.tensor)
    text += fmt::format(" --expert-tensor-parallel-size {}", l.expert_tensor_parallel());
  if (model.moe()) text += fmt::format(" --moe-token-dispatcher-type {}", moe_dispatcher_name(l.moe_dispatcher));
  if (model.moe() && l.moe_dispatcher == MoeDispatcher::kFlex) text += " --moe-flex-dispatcher-backend deepep";
  if (l.layers_per_virtual_stage > 0)
    text += fmt::format(" --num-layers-per-virtual-pipeline-stage {}", l.layers_per_virtual_stage);
  if (l.recompute != Recompute::kNone) text += fmt::format(" --recompute-granularity {}", recompute_name(l.recompute));
  // Megatron-core asks full recomputation for its method and layers.
  if (l.recompute == Recompute::kFull)
    text += fmt::format(" --recompute-method {} --recompute-num-layers {}", l.recompute_block ? "block" : "uniform",
                        l.recompute_layers);
  if (l.sequence_parallel) text += " --sequence-parallel";
  if (l.distributed_optimizer) text += " --use-distributed-optimizer";
  if (l.overlap_grad_reduce) text += " --overlap-grad-reduce";
  if (l.overlap_param_gather) text += " --overlap-param-gather";
  if (l.tp_comm_overlap) text += " --tp-comm-overlap";
  if (l.grad_reduce_in_bf16) text += " --grad-reduce-in-bf16";
  if (l.moe_shared_expert_overlap) text += " --moe-shared-expert-overlap";
  if (l.overlap_moe_ep_comm) text += " --overlap-moe-expert-parallel-comm";
  if (l.delay_wgrad_compute) text += " --delay-wgrad-compute";
  if (l.first_stage_layers > 0) text += fmt::format(" --decoder-first-pipeline-num-layers {}", l.first_stage_layers);
  if (l.last_stage_layers > 0) text += fmt::format(" --decoder-last-pipeline-num-layers {}", l.last_stage_layers);
  if (l.embedding_in_split) text += " --account-for-embedding-in-pipeline-split";
  if (l.loss_in_split) text += " --account-for-loss-in-pipeline-split";
  if (l.zero_bubble > 0)
    text += fmt::format(" --enable-zero-bubble --zero-bubble-max-pending-backward {}", l.zero_bubble * l.pipeline);
  if (l.v_schedule == VSchedule::kZbV) text += " --zero-bubble-v-schedule";
  if (l.v_schedule == VSchedule::kDualPipeV) text += " --dualpipev";  // baton's: no Megatron-LM flag runs it
  text += l.bf16 ? " --bf16" : " --fp16";
  return text;
}

// The emitted line runs as printed only where its flags exist: a zero-bubble
// schedule needs the Zero Bubble authors' fork of Megatron-LM, and DualPipeV
// has no Megatron-LM flag at all. Said on stderr, with how to pin it away;
// and without FlashAttention, which attention the line runs.
void note_unstock_flags(const GptModel& model, const MegatronLayout& l) {
  if (!model.flash_attention)
    std::fprintf(stderr,
                 "baton: note: the plan times Megatron's unfused attention core, as the model flags say (no "
                 "--use-flash-attn); %s; give --use-flash-attn to plan for FlashAttention\n",
                 fork_line(l) ? "the Zero Bubble fork predates --attention-backend, so the line cannot pin it: "
                                "check that the fork's transformer implementation runs the unfused core"
                              : "the line pins it (--attention-backend unfused), where Megatron-core's default "
                                "would run FlashAttention or cuDNN's fused attention");
  if (l.v_schedule == VSchedule::kDualPipeV)
    std::fputs(
        "baton: note: --dualpipev is baton's own flag: no Megatron-LM runs DualPipeV (DeepSeek's DualPipe code "
        "runs it outside Megatron); --dualpipev=false keeps the search off the V schedules, and "
        "--enable-zero-bubble=false off the Zero Bubble fork's\n",
        stderr);
  else if (fork_line(l))
    std::fputs(
        "baton: note: --enable-zero-bubble, --zero-bubble-max-pending-backward and --zero-bubble-v-schedule are "
        "flags of the Zero Bubble authors' fork of Megatron-LM (sail-sg/zero-bubble-pipeline-parallelism), not of "
        "Megatron-LM itself; --enable-zero-bubble=false --zero-bubble-v-schedule=false keeps the search to 1F1B "
        "and its interleaving\n",
        stderr);
}

void write_megatron_plan(const std::string& path, const GptModel& model, const MegatronLayout& layout,
                         const Topology& topology, const MegatronPrediction& prediction) {
  Plan plan = prediction.plan;
  plan.model = fmt::format("GPT {:.1f}B", gpt_parameters(model, 1) / 1e9);
  plan.made_for = plan_topology_of(topology);
  plan.megatron = megatron_arguments(model, layout);
  plan.prediction = {{"iteration_time_s", prediction.iteration_time.value},
                     {"throughput_samples_per_s", prediction.throughput_samples_per_s},
                     {"model_tflops_per_gpu", prediction.model_tflops_per_gpu},
                     {"peak_memory_bytes", prediction.memory.peak().value}};
  write_file_atomic(path, plan_to_json(plan).dump(2) + "\n");
}

// The relative change of `option` over the chosen layout's time.
double overlap_change(const OverlapOption& option, const MegatronPrediction& prediction) {
  return option.iteration_time / prediction.iteration_time - 1.0;
}

std::string overlaps_text(const std::vector<OverlapOption>& overlaps, const MegatronPrediction& prediction) {
  if (overlaps.empty()) return "";
  size_t width = 0;
  for (const OverlapOption& o : overlaps) width = std::max(width, o.flags.size());
  std::string out =
      "\noverlaps not asked for (the chosen layout with each; plan with the flags to search the layouts with "
      "them):\n";
  for (const OverlapOption& o : overlaps)
    out +=
        fmt::format("  {:<{}} {:>12}  {:+6.2f}%  peak {}{}\n", o.flags, width, human_seconds(o.iteration_time),
                    100.0 * overlap_change(o, prediction), human_bytes(o.peak_memory), o.fits ? "" : "  does not fit");
  return out;
}

// With --emit the flags alone reach stdout: the overlaps that would make the
// chosen layout faster, and fit, said on stderr.
void note_overlaps(const std::vector<OverlapOption>& overlaps, const MegatronPrediction& prediction) {
  std::string faster;
  for (const OverlapOption& o : overlaps)
    if (o.fits && o.iteration_time < prediction.iteration_time)
      faster += fmt::format("{}{} ({}, {:+.2f}%)", faster.empty() ? "" : "; ", o.flags, human_seconds(o.iteration_time),
                            100.0 * overlap_change(o, prediction));
  if (!faster.empty())
    std::fprintf(stderr,
                 "baton: note: not asked for, and faster on this layout: %s; plan with them to search the layouts "
                 "with them\n",
                 faster.c_str());
}

std::string families_text(const MegatronSearchResult& found) {
  std::string out;
  for (const MegatronFamily& f : found.families) {
    const std::string name =
        f.pipeline > 0 ? fmt::format("t {} p {}", f.tensor, f.pipeline) : fmt::format("t {} (any p)", f.tensor);
    out += fmt::format(
        "  {:<14} {}\n", name,
        f.simulated > 0 ? fmt::format("{} ({} simulated of {})", human_seconds(f.best_time), f.simulated, f.enumerated)
                        : f.reason);
  }
  return out;
}

nlohmann::json plan_json(const GptModel& model, const MegatronLayout& chosen, const Topology& topology,
                         const MegatronPrediction& prediction, const MegatronSearchResult& found,
                         const std::vector<OverlapOption>& overlaps) {
  nlohmann::json document = megatron_json(model, chosen, topology, prediction);
  nlohmann::json options = nlohmann::json::array();
  for (const OverlapOption& o : overlaps)
    options.push_back({{"flags", o.flags},
                       {"iteration_time_s", o.iteration_time.value},
                       {"relative_change", overlap_change(o, prediction)},
                       {"peak_memory_bytes", o.peak_memory.value},
                       {"fits", o.fits}});
  document["overlaps_not_asked"] = options;
  nlohmann::json runners = nlohmann::json::array();
  for (const MegatronCandidate& c : found.best)
    runners.push_back({{"layout", short_layout(model, c.layout)},
                       {"iteration_time_s", c.iteration_time.value},
                       {"model_tflops_per_gpu", c.model_tflops_per_gpu},
                       {"peak_memory_bytes", c.peak_memory.value}});
  document["candidates"] = runners;
  nlohmann::json families = nlohmann::json::array();
  for (const MegatronFamily& f : found.families)
    families.push_back(
        {{"tensor_model_parallel_size", f.tensor},
         {"pipeline_model_parallel_size", f.pipeline > 0 ? nlohmann::json(f.pipeline) : nlohmann::json()},
         {"enumerated", f.enumerated},
         {"not_fitting", f.not_fitting},
         {"pruned_by_bound", f.pruned},
         {"simulated", f.simulated},
         {"best_iteration_time_s", f.simulated > 0 ? nlohmann::json(f.best_time.value) : nlohmann::json()},
         {"why_not_simulated", f.reason}});
  document["families"] = families;
  document["search"] = {{"enumerated", found.enumerated},
                        {"not_fitting", found.not_fitting},
                        {"pruned_by_bound", found.pruned},
                        {"simulated", found.simulated}};  // the search's time: in the text only
  return document;
}

std::string plan_text(const GptModel& model, const MegatronLayout& chosen, const Topology& topology,
                      const MegatronPrediction& prediction, const MegatronSearchResult& found,
                      const std::vector<OverlapOption>& overlaps) {
  std::string out = fmt::format(
      "searched {} layouts in {:.2f} s: {} do not fit the {:.3g} GiB, {} cannot beat the best by their lower "
      "bound, {} simulated\n\nbest layouts (simulated):\n",
      found.enumerated, found.wall_seconds, found.not_fitting, topology.device.memory.gib(), found.pruned,
      found.simulated);
  std::vector<std::string> labels;
  size_t width = 0;
  for (const MegatronCandidate& c : found.best) {
    labels.push_back(short_layout(model, c.layout));
    width = std::max(width, labels.back().size());
  }
  for (size_t i = 0; i < found.best.size(); ++i) {
    const MegatronCandidate& c = found.best[i];
    out += fmt::format("  {:<{}} {:>12}  {:6.1f} TFLOP/s per GPU  peak {}\n", labels[i], width,
                       human_seconds(c.iteration_time), c.model_tflops_per_gpu, human_bytes(c.peak_memory));
  }
  out += "\ntensor x pipeline families (the fastest simulated, or why none was):\n" + families_text(found);
  out += "\nchosen:\n" + megatron_text(model, chosen, topology, prediction);
  out += "\nas Megatron-LM flags:\n  " + megatron_flags_of(model, chosen) + "\n";
  out += overlaps_text(overlaps, prediction);
  return out;
}

// The topology as the search sees it: --memory-limit-gib in place of its GPUs' memory.
Topology with_memory_limit(Topology topology, double memory_limit_gib) {
  if (memory_limit_gib > 0) topology.device.memory = Bytes::from_gib(memory_limit_gib);
  return topology;
}

}  // namespace

std::string torchrun_line(const Topology& topology, int gpus, const std::string& program) {
  const int per_server = std::min(gpus, topology.levels.front().size);
  const int full = gpus / per_server;
  const int rest = gpus % per_server;
  const int servers = full + (rest > 0 ? 1 : 0);
  // A partly used last server runs fewer processes: torchrun ranks each node's
  // processes after the sum of the nodes before it (its elastic agent's rank
  // assignment), so the world is t x p x d and rank order is the simulated
  // placement's, whole servers first.
  const std::string per_node =
      rest == 0 ? std::to_string(per_server) : fmt::format("$((NODE_RANK < {} ? {} : {}))", full, per_server, rest);
  const std::string rendezvous =
      servers > 1 ? " --node-rank=$NODE_RANK --master-addr=$MASTER_ADDR --master-port=${MASTER_PORT:-29500}" : "";
  return fmt::format("torchrun --nnodes={} --nproc-per-node={}{} {}", servers, per_node, rendezvous, program);
}

int run_megatron_plan(const MegatronArgs& flags, const MegatronPlanArgs& args, const CLI::App& cmd) {
  const Topology topology = with_memory_limit(load_topology_file(args.topology), args.memory_limit_gib);
  // The model flags and any pinned layout flag are checked as simulate checks
  // them, on one data-parallel rank (the search chooses d).
  MegatronArgs checked = flags;
  // The fewest data-parallel ranks for which a pinned expert grid (etp ep,
  // etp = t unless pinned) divides a pipeline rank's t c d GPUs.
  const int64_t expert_grid = int64_t{std::max(1, flags.expert_parallel)} *
                              (flags.expert_tensor > 0 ? flags.expert_tensor : std::max(1, flags.tensor));
  const int64_t held = int64_t{std::max(1, flags.tensor)} * std::max(1, flags.context);
  checked.data = static_cast<int>(std::max<int64_t>(1, expert_grid / std::gcd(expert_grid, held)));
  checked.zero_bubble = false;  // a pin for the search (pinned_megatron_axes), which chooses p
  checked.zero_bubble_pending = 0;
  checked.zero_bubble_v = checked.dualpipev = false;           // likewise
  checked.first_stage_layers = checked.last_stage_layers = 0;  // likewise: the split follows p
  checked.embedding_in_split = checked.loss_in_split = false;  // refused below (pinned_megatron_axes)
  // Applied by the search to the layouts with the distributed optimizer and
  // with sequence parallelism (MegatronAxes), which it chooses.
  checked.overlap_param_gather = checked.tp_comm_overlap = false;
  // A pinned --sequence-parallel keeps the search to t > 1 (MegatronAxes);
  // checked on t 1 it is off, as Megatron turns it off there.
  checked.sequence_parallel = flags.sequence_parallel && flags.tensor > 1;
  // --moe-shared-expert-overlap goes on the layouts with the alltoall
  // dispatcher: checked on one (unless the dispatcher is pinned), which
  // refuses it for a model without a shared expert.
  if (flags.shared_expert_overlap && flags.moe_dispatcher.empty()) checked.moe_dispatcher = "alltoall";
  // A pinned flex dispatcher needs etp ep >= 2, which the search chooses
  // when not pinned: checked as alltoall then, its one other refusal here.
  if (flags.moe_dispatcher == "flex" && expert_grid < 2) {
    if (flags.model.pad_to_capacity) throw UsageError(kFlexRefusesPadding);
    checked.moe_dispatcher = "alltoall";
  }
  // --overlap-moe-expert-parallel-comm likewise goes on the layouts it
  // applies to (interleaved, ep >= 2, alltoall), which the search chooses.
  checked.overlap_moe_ep_comm = checked.delay_wgrad = false;
  const MegatronRun model_only = megatron_run(checked, topology);
  const GptModel& model = model_only.model;
  MegatronAxes axes = pinned_megatron_axes(flags, cmd);
  if (args.gpus > 0) axes.gpus = args.gpus;
  const std::string gpus = args.gpus > 0 ? fmt::format("{} of its {} GPUs", args.gpus, topology.num_devices())
                           : axes.data ? fmt::format("d {} on at most its {} GPUs", *axes.data, topology.num_devices())
                                       : fmt::format("{} GPUs", topology.num_devices());
  std::fprintf(stderr, "baton: planning a %.1fB-parameter GPT on %s (%s)...\n", gpt_parameters(model, 1) / 1e9,
               topology.name.c_str(), gpus.c_str());
  note_not_modelled("plan", flags.not_modelled);
  const MegatronSearchResult found =
      take(search_megatron_layouts(model, flags.global_batch, flags.bf16, axes, topology, args.keep));
  const MegatronLayout& chosen = found.best.front().layout;
  const MegatronPrediction prediction = take(predict_megatron(model, chosen, topology, false));
  if (!args.output.empty()) write_megatron_plan(args.output, model, chosen, topology, prediction);
  const std::vector<OverlapOption> overlaps = take(overlaps_not_asked(model, chosen, topology));
  if (!args.emit.empty()) {
    note_unstock_flags(model, chosen);
    note_overlaps(overlaps, prediction);
  }
  // The launch line keeps Megatron's training flags given (--lr, --data-path ...) as they were.
  std::string launch = megatron_flags_of(model, chosen);
  for (const std::string& flag : flags.not_modelled) launch += " " + flag;
  if (args.emit == "megatron") {
    std::fputs((launch + "\n").c_str(), stdout);
    return 0;
  }
  if (args.emit == "torchrun") {
    const std::string line = torchrun_line(topology, chosen.gpus(), "pretrain_gpt.py " + launch);
    std::fputs((line + "\n").c_str(), stdout);
    return 0;
  }
  const std::string out = args.json ? plan_json(model, chosen, topology, prediction, found, overlaps).dump(2) + "\n"
                                    : plan_text(model, chosen, topology, prediction, found, overlaps);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace baton::cli
