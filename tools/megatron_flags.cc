#include "tools/megatron_flags.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "tools/cli_support.h"
#include "tools/megatron_training_flags.h"

namespace baton::cli {

namespace {
const std::string kGroup = "Megatron GPT (instead of --profile; Megatron-LM's own flag names)";
}  // namespace

// The flags whose 0 field means "not given" (MegatronArgs) refuse an explicit 0.
void add_megatron_flags(CLI::App& cmd, MegatronArgs& args) {
  const std::string& group = kGroup;
  cmd.add_option("--num-layers", args.model.layers, "transformer layers L")->group(group);
  cmd.add_option("--hidden-size", args.model.hidden, "hidden size h")->group(group);
  cmd.add_option("--num-attention-heads", args.model.heads, "attention heads a")->group(group);
  cmd.add_option("--seq-length", args.model.sequence, "sequence length s")->group(group);
  cmd.add_option("--vocab-size", args.model.vocab, "vocabulary before padding (default 50257, GPT-2's)")->group(group);
  cmd.add_option("--micro-batch-size", args.micro_batch, "sequences per microbatch b (default 1)")->group(group);
  cmd.add_option("--global-batch-size", args.global_batch, "sequences per iteration B")->group(group);
  cmd.add_option("--tensor-model-parallel-size", args.tensor, "tensor parallel t (default 1)")->group(group);
  cmd.add_option("--pipeline-model-parallel-size", args.pipeline, "pipeline parallel p (default 1)")->group(group);
  cmd.add_option("--data-parallel-size", args.data, "data parallel d (default: the topology's GPUs / (t p c))")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--context-parallel-size", args.context,
                 "context parallel c (default 1): each sequence split over c ranks (2c chunks, s divisible by 2c), "
                 "their attention joined as --cp-comm-type says; needs FlashAttention's core (--use-flash-attn or "
                 "--attention-backend flash|fused|auto)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--cp-comm-type", args.cp_comm_type,
                 "with --context-parallel-size: p2p (the default: keys and values round a ring, overlapped with "
                 "each step's attention), all_gather (gathered before the attention; Transformer Engine's spelling, "
                 "allgather taken too) or a2a (all-to-alls trading the sequence split for a split of the heads); "
                 "a2a+p2p is refused")
      ->check(CLI::IsMember({"p2p", "a2a", "all_gather", "allgather", "a2a+p2p"}))
      ->group(group);
  cmd.add_option("--expert-model-parallel-size", args.expert_parallel,
                 "expert parallel ep (default 1): with --num-experts, the experts split over ep of the d c ranks "
                 "that share a pipeline rank's weights (ep dividing E and d c), tokens sent to their experts and "
                 "back by all-to-alls")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--expert-tensor-parallel-size", args.expert_tensor,
                 "expert tensor parallel etp (default t): with --num-experts, each expert's weights split over etp "
                 "GPUs as the dense layers' over t; the experts' grid (etp x ep x expert data parallel) is laid "
                 "over the t c d GPUs of a pipeline rank, so etp 1 with t 8 and ep 8 keeps the all-to-alls inside "
                 "the tensor-parallel group")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--moe-token-dispatcher-type", args.moe_dispatcher,
                 "with --num-experts, how tokens reach their experts: allgather (Megatron-core's default: every "
                 "token of the etp x ep GPUs of an expert group gathered onto each, the outputs reduce-scattered "
                 "back), alltoall (each token's k copies sent to their experts' ranks and back by all-to-alls "
                 "among the ep ranks) or flex (DeepEP's kernels: each token once to each GPU and each other server "
                 "holding one of its experts). plan tries allgather and alltoall unless this pins one")
      ->check(CLI::IsMember({"allgather", "alltoall", "flex"}))
      ->group(group);
  cmd.add_option("--moe-flex-dispatcher-backend", args.flex_backend,
                 "with --moe-token-dispatcher-type flex: deepep (Megatron-core's default, the one baton models); "
                 "hybridep and ncclep are refused")
      ->check(CLI::IsMember({"deepep", "hybridep", "ncclep"}))
      ->group(group);
  cmd.add_flag("--moe-enable-deepep", args.enable_deepep,
               "Megatron-core 0.12-0.14's spelling of --moe-flex-dispatcher-backend deepep (with "
               "--moe-token-dispatcher-type flex)")
      ->group(group);
  cmd.add_flag(
         "--moe-shared-expert-overlap", args.shared_expert_overlap,
         "with a shared expert (--moe-shared-expert-intermediate-size) and --moe-token-dispatcher-type "
         "alltoall or flex: the shared expert runs on a stream of its own beside the dispatch's and the combine's "
         "all-to-alls, which are exposed only where they outlast it (plan puts it on the layouts it applies "
         "to)")
      ->group(group);
  cmd.add_flag("--overlap-moe-expert-parallel-comm", args.overlap_moe_ep_comm,
               "with experts over ep >= 2 ranks, --moe-token-dispatcher-type alltoall or flex, and interleaved 1F1B "
               "or no pipeline: each steady-state forward runs with the backward after it as one unit (with p 1 "
               "the backward of the microbatch before), each pass's all-to-alls hidden behind the other's compute "
               "(Megatron-core's batch-level overlap; plan puts it on the layouts it applies to)")
      ->group(group);
  cmd.add_flag("--delay-wgrad-compute", args.delay_wgrad,
               "with --overlap-moe-expert-parallel-comm: in each pair the experts' weight gradients run after their "
               "input gradients, beside the dispatch's backward all-to-all, which so starts earlier (Megatron-core's "
               "delayed weight gradients; plan puts it on the layouts with the overlap)")
      ->group(group);
  cmd.add_option("--num-layers-per-virtual-pipeline-stage", args.layers_per_virtual_stage,
                 "interleaved 1F1B with L / (p x this) chunks per GPU")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--recompute-granularity", args.recompute,
                 "full | selective (default: no recomputation; `none` says so, and pins it for plan)")
      ->check(CLI::IsMember({"full", "selective", "none"}))
      ->group(group);
  cmd.add_option("--recompute-method", args.recompute_method,
                 "with full recomputation (Megatron-core asks for it): uniform, every block recomputed, the input "
                 "of each group of --recompute-num-layers kept; block, only the first --recompute-num-layers blocks "
                 "of each stage (chunk) recomputed, the others keep every activation")
      ->check(CLI::IsMember({"uniform", "block"}))
      ->group(group);
  cmd.add_option("--recompute-num-layers", args.recompute_layers,
                 "uniform: blocks recomputed together; block: blocks recomputed per stage (chunk) (default 1)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_flag("--sequence-parallel", args.sequence_parallel,
               "split LayerNorms and dropouts over t (with t 1 off, as Megatron turns it off)")
      ->group(group);
  cmd.add_flag("--fp16", args.fp16, "fp16 with fp32 master weights (the default)")->group(group);
  cmd.add_flag("--bf16", args.bf16, "bf16 with fp32 master weights; gradients reduced in fp32")->group(group);
  cmd.add_flag("--use-distributed-optimizer", args.distributed_optimizer,
               "shard the fp32 master weights and Adam moments across the data-parallel ranks")
      ->group(group);
  cmd.add_option("--decoder-first-pipeline-num-layers", args.first_stage_layers,
                 "blocks of the first pipeline stage (default: an even share; the other stages share the rest)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--decoder-last-pipeline-num-layers", args.last_stage_layers,
                 "blocks of the last pipeline stage (default: an even share)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--pipeline-model-parallel-layout", args.pipeline_layout,
                 "every chunk's layers, as Megatron-core 0.13 on reads it: E (embedding), t (block), m (multi-token "
                 "prediction depth), L (loss), stages cut by |, x*n and (...)*n repeat; p v stages in model order, "
                 "chunk k on pipeline rank k mod p, e.g. \"Et*3|(tt|)*29,m|L\" for DeepSeek-V3 on p 16 with two "
                 "chunks each (1F1B or interleaved 1F1B; for simulate)")
      ->group(group);
  cmd.add_flag("--account-for-embedding-in-pipeline-split", args.embedding_in_split,
               "count the embedding as a layer when splitting into stages (and chunks): the first holds a block fewer")
      ->group(group);
  cmd.add_flag("--account-for-loss-in-pipeline-split", args.loss_in_split,
               "count the output layer and loss as a layer likewise: the last stage (chunk) holds a block fewer")
      ->group(group);
  cmd.add_flag("--enable-zero-bubble", args.zero_bubble,
               "the zero-bubble schedules (Qi et al., ICLR 2024; the flags of their Megatron-LM fork): ZB-H1, or "
               "ZB-H2 with --zero-bubble-max-pending-backward 2p; for plan, --enable-zero-bubble=false pins 1F1B")
      ->group(group);
  cmd.add_option("--zero-bubble-max-pending-backward", args.zero_bubble_pending,
                 "p (ZB-H1, the default) or 2p (ZB-H2): microbatches held before their W passes run")
      ->check(at_least(1))
      ->group(group);
  cmd.add_flag("--zero-bubble-heuristic", args.zero_bubble_heuristic,
               "with --enable-zero-bubble: the Zero Bubble authors' greedy scheduler on the stages' times (their "
               "ZB-1p / ZB-2p without the ILP refinement) in place of baton's handcrafted ZB-H1 / ZB-H2")
      ->group(group);
  cmd.add_flag("--zero-bubble-v-schedule", args.zero_bubble_v,
               "ZB-V, the Zero Bubble authors' V schedule (their fork's flag; implies --enable-zero-bubble): two "
               "chunks of L / (2p) blocks per GPU, down the ranks and back, the backward split into I and W")
      ->group(group);
  cmd.add_flag("--dualpipev", args.dualpipev,
               "DeepSeek's DualPipeV (baton's flag: Megatron-LM has none): the same V of two chunks per GPU in "
               "DualPipeV's order, its forward-and-backward pairs run one after the other")
      ->group(group);
  cmd.add_flag("--overlap-grad-reduce", args.overlap_grad_reduce,
               "overlap the data-parallel gradient reduction with the backward pass")
      ->group(group);
  cmd.add_flag("--overlap-param-gather", args.overlap_param_gather,
               "with --use-distributed-optimizer and --overlap-grad-reduce: the all-gather of the updated weights "
               "runs beside the next iteration's first forward pass instead of after the optimizer step")
      ->group(group);
  cmd.add_flag("--grad-reduce-in-bf16", args.grad_reduce_in_bf16,
               "with --bf16: gradients accumulated and reduced in bf16, 2 bytes, not fp32 (half the buffers' memory "
               "and the data-parallel bytes); with --fp16 they are 2 bytes anyway")
      ->group(group);
  cmd.add_flag("--tp-comm-overlap", args.tp_comm_overlap,
               "with --sequence-parallel: each tensor-parallel all-gather and reduce-scatter of a block's linears "
               "pipelined with their GEMMs in t chunks (Transformer Engine's userbuffers), so only what outlasts "
               "the GEMMs, and one chunk, is exposed (in the backward never more than without the flag); the "
               "experts' collectives stay exposed")
      ->group(group);
  add_architecture_flags(cmd, args, group);
  add_training_flags(cmd, args.not_modelled);
}

namespace {
// --cp-comm-type's value; UsageError for the hierarchical a2a+p2p.
ContextComm context_comm_of(const std::string& name) {
  const std::optional<ContextComm> comm = parse_context_comm(name);
  if (!comm)
    throw UsageError("--cp-comm-type " + name + ": baton models p2p, all_gather and a2a, not the hierarchical a2a+p2p");
  return *comm;
}

// --moe-token-dispatcher-type's value (the flag's check took only the
// names); the flex backend's flags only with flex, and only DeepEP's.
std::optional<MoeDispatcher> moe_dispatcher_of(const MegatronArgs& args) {
  const bool flex = args.moe_dispatcher == "flex";
  if ((args.enable_deepep || !args.flex_backend.empty()) && !flex)
    throw UsageError(fmt::format("{} applies to --moe-token-dispatcher-type flex, as in Megatron",
                                 args.enable_deepep ? "--moe-enable-deepep" : "--moe-flex-dispatcher-backend"));
  if (!args.flex_backend.empty() && args.flex_backend != "deepep")
    throw UsageError("--moe-flex-dispatcher-backend " + args.flex_backend +
                     ": baton models DeepEP's kernels (deepep), not " + args.flex_backend);
  if (args.moe_dispatcher.empty()) return std::nullopt;
  return parse_moe_dispatcher(args.moe_dispatcher);
}
}  // namespace

MegatronAxes pinned_megatron_axes(const MegatronArgs& flags, const CLI::App& cmd) {
  MegatronAxes axes;
  auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  if (given("--tensor-model-parallel-size")) axes.tensor = flags.tensor;
  if (given("--pipeline-model-parallel-size")) axes.pipeline = flags.pipeline;
  if (given("--micro-batch-size")) axes.micro_batch = flags.micro_batch;
  if (given("--num-layers-per-virtual-pipeline-stage")) axes.layers_per_virtual_stage = flags.layers_per_virtual_stage;
  if (given("--recompute-granularity")) axes.recompute = parse_recompute(flags.recompute);
  if (flags.recompute_layers > 1 || flags.recompute_method == "block")
    throw UsageError(
        "plan: the search recomputes every block, one by one (--recompute-method uniform --recompute-num-layers 1); "
        "other methods and layers are for simulate");
  if (given("--sequence-parallel")) axes.sequence_parallel = true;
  if (given("--use-distributed-optimizer")) axes.distributed_optimizer = true;
  axes.overlap_grad_reduce = flags.overlap_grad_reduce;
  axes.overlap_param_gather = flags.overlap_param_gather;
  axes.tp_comm_overlap = flags.tp_comm_overlap;
  axes.grad_reduce_in_bf16 = flags.grad_reduce_in_bf16;
  axes.shared_expert_overlap = flags.shared_expert_overlap;
  axes.overlap_moe_ep_comm = flags.overlap_moe_ep_comm;
  axes.delay_wgrad_compute = flags.delay_wgrad;
  if (flags.delay_wgrad && !flags.overlap_moe_ep_comm) throw UsageError(kDelayWgradNeedsEpOverlap);
  if (flags.overlap_moe_ep_comm && flags.shared_expert_overlap)
    throw UsageError("--overlap-moe-expert-parallel-comm does not go with --moe-shared-expert-overlap, as in Megatron");
  if (flags.overlap_param_gather && !flags.overlap_grad_reduce) throw UsageError(kOverlapParamGatherNeedsGradReduce);
  if (given("--decoder-first-pipeline-num-layers") || given("--decoder-last-pipeline-num-layers"))
    axes.stage_layers = std::make_pair(flags.first_stage_layers, flags.last_stage_layers);
  if (given("--enable-zero-bubble")) {
    // The pending limit tells ZB-H1 (p) from ZB-H2 (2p) only against a pinned p.
    if (flags.zero_bubble_pending != 0 && !given("--pipeline-model-parallel-size"))
      throw UsageError(
          "plan: --zero-bubble-max-pending-backward is p or 2p: pin --pipeline-model-parallel-size with it");
    const int pending = flags.zero_bubble_pending == 0 ? flags.pipeline : flags.zero_bubble_pending;
    axes.zero_bubble = flags.zero_bubble ? zero_bubble_of_pending(pending, flags.pipeline).value_or(1) : 0;
  }
  if (given("--zero-bubble-heuristic"))
    throw UsageError("plan: the search runs baton's ZB-H1 and ZB-H2; --zero-bubble-heuristic is for simulate");
  if (given("--pipeline-model-parallel-layout"))
    throw UsageError(
        "plan: the search chooses the split (--decoder-first/last-pipeline-num-layers, interleaving); "
        "--pipeline-model-parallel-layout is for simulate");
  if (flags.zero_bubble_v && flags.dualpipev)
    throw UsageError("plan: give one of --zero-bubble-v-schedule and --dualpipev");
  // A V flag given true pins its V; given only as =false, no V. ZB-V implies
  // the fork's --enable-zero-bubble.
  if (flags.zero_bubble_v || flags.dualpipev)
    axes.v_schedule = flags.zero_bubble_v ? VSchedule::kZbV : VSchedule::kDualPipeV;
  else if (given("--zero-bubble-v-schedule") || given("--dualpipev"))
    axes.v_schedule = VSchedule::kNone;
  if (axes.v_schedule == VSchedule::kZbV && flags.zero_bubble && flags.zero_bubble_pending == 0)
    axes.zero_bubble.reset();
  if (given("--account-for-embedding-in-pipeline-split") || given("--account-for-loss-in-pipeline-split"))
    throw UsageError(
        "plan: the search chooses the first and last stages' blocks itself (one or two fewer included); "
        "--account-for-embedding/loss-in-pipeline-split are for simulate");
  if (given("--data-parallel-size")) axes.data = flags.data;  // >= 1: the flag's check refuses less
  if (given("--context-parallel-size")) axes.context = flags.context;
  if (given("--expert-model-parallel-size")) axes.expert_parallel = flags.expert_parallel;
  if (given("--expert-tensor-parallel-size")) axes.expert_tensor = flags.expert_tensor;
  if (!flags.cp_comm_type.empty()) axes.context_comm = context_comm_of(flags.cp_comm_type);
  axes.moe_dispatcher = moe_dispatcher_of(flags);
  return axes;
}

MegatronRun megatron_flags_unchecked(const MegatronArgs& args) {
  const struct {
    int64_t value;
    const char* flag;
  } required[] = {{args.model.layers, "--num-layers"},
                  {args.model.hidden, "--hidden-size"},
                  {args.model.heads, "--num-attention-heads"},
                  {args.model.sequence, "--seq-length"},
                  {args.global_batch, "--global-batch-size"}};
  for (const auto& r : required)
    if (r.value <= 0) throw UsageError(fmt::format("a GPT model needs {} (a positive number)", r.flag));
  if (args.fp16 && args.bf16) throw UsageError("give one of --fp16 and --bf16");
  if (args.query_groups > 0 && !args.group_query_attention)
    throw UsageError("--num-query-groups goes with --group-query-attention");
  MegatronRun run;
  run.model = args.model;
  if (args.group_query_attention) run.model.query_groups = args.query_groups > 0 ? args.query_groups : 1;
  run.model.linear_bias = !args.disable_bias_linear;
  run.model.tied_output = !args.untie_embeddings;
  // Megatron's legacy --use-rotary-position-embeddings sets rope whatever
  // --position-embedding-type says; without rotary positions it turns the
  // rope fusion off, there being nothing to fuse (baton: true, no effect).
  run.model.rope = args.position_embedding == "rope" || args.use_rotary;
  if (!run.model.rope) run.model.rope_fusion = true;
  // Megatron's bias_activation_fusion: --no-bias-swiglu-fusion's with
  // SwiGLU, --no-bias-gelu-fusion's with GeLU, which it turns off itself
  // without biases (one GeLU kernel either way: kept as fused).
  run.model.activation_fusion =
      run.model.swiglu ? !args.no_swiglu_fusion : !(args.no_gelu_fusion && !args.disable_bias_linear);
  run.model.kv_channels = run.model.kept_kv_channels(args.kv_channels);
  if (args.no_position_embedding && !run.model.rope)
    throw UsageError(
        "--no-position-embedding goes with --position-embedding-type rope (Megatron refuses it otherwise: "
        "deprecated, use --position-embedding-type)");
  // Megatron-LM's training refuses te with the fusion only: without
  // --cross-entropy-loss-fusion the implementation is never used.
  if (args.cross_entropy_impl == "te" && args.model.cross_entropy_fusion)
    throw UsageError(
        "--cross-entropy-fusion-impl te with --cross-entropy-loss-fusion: Megatron-LM's training refuses "
        "Transformer Engine's fused cross entropy (disabled for stability); use --cross-entropy-fusion-impl "
        "native, or leave out --cross-entropy-loss-fusion");
  if (args.router_dtype == "fp64")
    throw UsageError(
        "--moe-router-dtype fp64: the router's GEMMs in fp64 are not modelled (fp32 is; leave the flag out for the "
        "input's dtype)");
  run.model.fp32_router = args.router_dtype == "fp32";
  run.model.rms_norm = args.normalization == "RMSNorm";
  if (!args.moe_layer_freq.empty()) take(parse_moe_layer_freq(args.moe_layer_freq, run.model));
  if (!args.fp8_format.empty()) run.model.fp8 = parse_fp8_format(args.fp8_format).value_or(Fp8Format::kNone);
  if (args.first_last_bf16) {
    run.model.bf16_first_blocks = args.bf16_at_start < 0 ? 1 : args.bf16_at_start;
    run.model.bf16_last_blocks = args.bf16_at_end < 0 ? 1 : args.bf16_at_end;
  } else if (args.bf16_at_start >= 0 || args.bf16_at_end >= 0) {
    throw UsageError("--num-layers-at-start-in-bf16 and --num-layers-at-end-in-bf16 go with --first-last-layers-bf16");
  }
  if (!args.fp8_recipe.empty()) run.model.fp8_recipe = parse_fp8_recipe(args.fp8_recipe).value_or(Fp8Recipe::kDelayed);
  if (!args.attention_backend.empty()) {
    const bool flash =
        args.attention_backend == "flash" || args.attention_backend == "fused" || args.attention_backend == "auto";
    if (args.model.flash_attention && !flash)
      throw UsageError("--use-flash-attn and --attention-backend " + args.attention_backend + " disagree: give one");
    run.model.flash_attention = flash;
  }
  MegatronLayout& layout = run.layout;
  layout.tensor = args.tensor;
  layout.pipeline = args.pipeline;
  layout.micro_batch = args.micro_batch;
  layout.global_batch = args.global_batch;
  layout.layers_per_virtual_stage = args.layers_per_virtual_stage;
  layout.recompute = parse_recompute(args.recompute).value_or(Recompute::kNone);  // "": no recomputation
  if (!args.recompute_method.empty() || args.recompute_layers > 0) {
    if (layout.recompute != Recompute::kFull)
      throw UsageError("--recompute-method and --recompute-num-layers go with --recompute-granularity full");
    layout.recompute_block = args.recompute_method == "block";
    layout.recompute_layers = std::max(1, args.recompute_layers);
  }
  layout.sequence_parallel = args.sequence_parallel;
  layout.bf16 = args.bf16;
  layout.distributed_optimizer = args.distributed_optimizer;
  layout.overlap_grad_reduce = args.overlap_grad_reduce;
  layout.overlap_param_gather = args.overlap_param_gather;
  layout.tp_comm_overlap = args.tp_comm_overlap;
  layout.grad_reduce_in_bf16 = args.grad_reduce_in_bf16;
  layout.moe_shared_expert_overlap = args.shared_expert_overlap;
  layout.overlap_moe_ep_comm = args.overlap_moe_ep_comm;
  layout.delay_wgrad_compute = args.delay_wgrad;
  layout.data = args.data;
  layout.context = args.context;
  layout.expert_parallel = args.expert_parallel;
  layout.expert_tensor = args.expert_tensor;
  if (!args.cp_comm_type.empty()) layout.context_comm = context_comm_of(args.cp_comm_type);
  if (const auto dispatcher = moe_dispatcher_of(args)) layout.moe_dispatcher = *dispatcher;
  layout.first_stage_layers = args.first_stage_layers;
  layout.last_stage_layers = args.last_stage_layers;
  layout.embedding_in_split = args.embedding_in_split;
  layout.loss_in_split = args.loss_in_split;
  if (!args.pipeline_layout.empty()) {
    Result<std::vector<std::string>> chunks = parse_pipeline_layout(args.pipeline_layout);
    if (!chunks) throw UsageError(chunks.error().message);
    layout.pipeline_layout = args.pipeline_layout;
    layout.layout_chunks = std::move(*chunks);
  }
  if (args.zero_bubble_v && args.dualpipev) throw UsageError("give one of --zero-bubble-v-schedule and --dualpipev");
  layout.v_schedule = args.zero_bubble_v ? VSchedule::kZbV : args.dualpipev ? VSchedule::kDualPipeV : VSchedule::kNone;
  if (layout.v_schedule != VSchedule::kNone) {
    const char* flag = args.zero_bubble_v ? "--zero-bubble-v-schedule" : "--dualpipev";
    if (args.zero_bubble_pending != 0 || args.zero_bubble_heuristic)
      throw UsageError(
          fmt::format("{} is a schedule of its own: drop --zero-bubble-max-pending-backward and "
                      "--zero-bubble-heuristic",
                      flag));
    if (args.zero_bubble && args.dualpipev)
      throw UsageError("--dualpipev is not a zero-bubble schedule: drop --enable-zero-bubble");
    return run;  // --enable-zero-bubble with ZB-V: implied, as in the fork
  }
  if (!args.zero_bubble && args.zero_bubble_pending != 0)
    throw UsageError("--zero-bubble-max-pending-backward goes with --enable-zero-bubble");
  if (!args.zero_bubble && args.zero_bubble_heuristic)
    throw UsageError("--zero-bubble-heuristic goes with --enable-zero-bubble");
  layout.zero_bubble_heuristic = args.zero_bubble_heuristic;
  if (args.zero_bubble) {
    const int p = std::max(args.pipeline, 1), pending = args.zero_bubble_pending == 0 ? p : args.zero_bubble_pending;
    const std::optional<int> schedule = zero_bubble_of_pending(pending, p);
    if (!schedule)
      throw UsageError(fmt::format(
          "--zero-bubble-max-pending-backward {} with --pipeline-model-parallel-size {}: baton runs ZB-H1 (p = {}) "
          "and ZB-H2 (2p = {}), the handcrafted schedules; other limits need the fork's automatic scheduler",
          pending, p, p, 2 * p));
    layout.zero_bubble = *schedule;
  }
  return run;
}

MegatronRun megatron_run(const MegatronArgs& args, const Topology& topology) {
  MegatronRun run = megatron_flags_unchecked(args);
  MegatronLayout& layout = run.layout;
  // Megatron turns sequence parallelism off without tensor parallelism (a
  // warning; its Mixtral example gives both), and so does baton, with a note.
  if (layout.sequence_parallel && layout.tensor == 1) {
    layout.sequence_parallel = false;
    std::fputs(
        "baton: note: --sequence-parallel with --tensor-model-parallel-size 1 is off, as Megatron turns it off\n",
        stderr);
  }
  if (layout.data == 0) {
    const int per_replica = std::max(1, args.tensor) * std::max(1, args.pipeline) * std::max(1, args.context);
    layout.data = std::max(1, topology.num_devices() / per_replica);
  }
  take(check_megatron_layout(run.model, layout, topology.num_devices()));
  return run;
}

std::vector<std::string> given_megatron_flags(const CLI::App& cmd) {
  std::vector<std::string> given;
  for (const CLI::Option* option : cmd.get_options())
    if ((option->get_group() == kGroup || option->get_group() == kTrainingFlagsGroup) && option->count() > 0)
      given.push_back(option->get_name());
  if (lone_profile(cmd)) given.push_back("--profile");
  return given;
}

void refuse_megatron_flags(const CLI::App& cmd, std::string_view command, std::string_view instead) {
  if (lone_profile(cmd))
    throw UsageError(fmt::format(
        "{}: --profile needs a layer profile's path (alone it is Megatron's profiler switch, which goes with a GPT "
        "model given by Megatron's flags: --num-layers, --hidden-size, --num-attention-heads, --seq-length)",
        command));
  const std::vector<std::string> given = given_megatron_flags(cmd);
  if (given.empty()) return;
  throw UsageError(fmt::format(
      "{}: {} with a GPT model given by Megatron's flags (--num-layers, --hidden-size, --num-attention-heads, "
      "--seq-length), not with {}{}",
      command, flags_go(given), instead,
      std::find(given.begin(), given.end(), "--micro-batch-size") != given.end()
          ? " (here the samples per microbatch are --microbatch-size)"
          : ""));
}

}  // namespace baton::cli
