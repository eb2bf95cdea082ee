#include "sim/megatron.h"

#include <algorithm>
#include <initializer_list>
#include <tuple>

#include <fmt/format.h>

#include "sim/plan.h"

namespace baton {

int MegatronLayout::virtual_stages(const GptModel& model) const {
  if (!layout_chunks.empty()) return std::max(1, static_cast<int>(layout_chunks.size()) / std::max(1, pipeline));
  if (v_schedule != VSchedule::kNone) return 2;
  if (layers_per_virtual_stage <= 0) return 1;
  return static_cast<int>(split_layers(model) / (static_cast<int64_t>(pipeline) * layers_per_virtual_stage));
}

std::vector<int> MegatronLayout::stage_layers(const GptModel& model) const {
  if (!layout_chunks.empty()) {
    std::vector<int> layers;
    for (const std::string& chunk : layout_chunks)
      layers.push_back(static_cast<int>(std::count(chunk.begin(), chunk.end(), 't')));
    return layers;
  }
  const int stages = pipeline * virtual_stages(model);
  if (first_stage_layers == 0 && last_stage_layers == 0) {
    std::vector<int> layers(static_cast<size_t>(stages), static_cast<int>(split_layers(model) / stages));
    if (embedding_in_split) layers.front() -= 1;
    if (loss_in_split) layers.back() -= 1;
    return layers;
  }
  const int others = pipeline - (first_stage_layers > 0) - (last_stage_layers > 0);
  const int64_t rest = model.layers - first_stage_layers - last_stage_layers;
  const int share = others > 0 ? static_cast<int>(rest / others) : 0;
  std::vector<int> layers(static_cast<size_t>(pipeline), share);
  if (first_stage_layers > 0) layers.front() = first_stage_layers;
  if (last_stage_layers > 0) layers.back() = last_stage_layers;
  return layers;
}

int MegatronLayout::mtp_stage(const GptModel& model) const {
  for (size_t k = 0; k < layout_chunks.size(); ++k)
    if (layout_chunks[k].find('m') != std::string::npos) return static_cast<int>(k);
  return pipeline * virtual_stages(model) - 1;
}

int MegatronLayout::stage_rank(int stage) const {
  if (v_schedule != VSchedule::kNone && stage >= pipeline) return 2 * pipeline - 1 - stage;
  return stage % pipeline;
}

GptModel llama_style(int64_t layers, int64_t hidden, int64_t heads, int64_t groups, int64_t ffn, int64_t vocab,
                     int64_t sequence) {
  GptModel m{layers, hidden, heads, sequence, vocab};
  m.ffn_hidden = ffn;
  m.query_groups = groups == heads ? 0 : groups;
  m.swiglu = true;
  m.linear_bias = false;
  m.tied_output = false;
  m.rope = true;
  m.rms_norm = true;
  return m;
}

MegatronLayout megatron_layout(int t, int p, int d, int b, int global) {
  MegatronLayout l;
  l.tensor = t;
  l.pipeline = p;
  l.data = d;
  l.micro_batch = b;
  l.global_batch = global;
  return l;
}

int64_t padded_vocab(const GptModel& model, int tensor) {
  const int64_t multiple = model.vocab_divisor * static_cast<int64_t>(tensor);
  return (model.vocab + multiple - 1) / multiple * multiple;
}

namespace {

// The architecture flags beyond GPT's (GptModel).
Status check_architecture(const GptModel& model, const MegatronLayout& layout) {
  for (const auto& [flag, p] :
       {std::pair{"--attention-dropout", model.attention_dropout}, std::pair{"--hidden-dropout", model.hidden_dropout}})
    if (!(p >= 0.0 && p < 1.0))  // NaN too
      return Error{fmt::format("{} must be at least 0 and below 1, got {}", flag, p)};
  if (model.max_positions < 0) return Error{"--max-position-embeddings must be at least 1"};
  if (model.max_positions > kMaxGptSequence)
    return Error{
        fmt::format("--max-position-embeddings must be at most {}, got {}", kMaxGptSequence, model.max_positions)};
  if (model.max_positions > 0 && model.max_positions < model.sequence)
    return Error{fmt::format("--max-position-embeddings {} must be at least --seq-length {}, as Megatron requires",
                             model.max_positions, model.sequence)};
  if (model.vocab_divisor < 1 || model.vocab_divisor > kMaxGptVocab)
    return Error{fmt::format("--make-vocab-size-divisible-by must be between 1 and {}, got {}", kMaxGptVocab,
                             model.vocab_divisor)};
  if (model.ffn_hidden < 0) return Error{"--ffn-hidden-size must be at least 1"};
  if (model.ffn_hidden > kMaxGptHidden * 8)
    return Error{fmt::format("--ffn-hidden-size must be at most {}, got {}", kMaxGptHidden * 8, model.ffn_hidden)};
  if (model.query_groups < 0) return Error{"--num-query-groups must be at least 1"};
  if (model.query_groups > 0 && model.heads % model.query_groups != 0)
    return Error{
        fmt::format("--num-query-groups {} does not divide --num-attention-heads {}", model.query_groups, model.heads)};
  if (model.groups() % layout.tensor != 0)
    return Error{
        fmt::format("--num-query-groups {} is not divisible by --tensor-model-parallel-size {} (each rank "
                    "holds whole groups of keys and values)",
                    model.groups(), layout.tensor)};
  if (model.half_loss && layout.bf16)
    return Error{"--fp16-lm-cross-entropy needs --fp16 (Megatron: lm cross entropy in fp16 only in fp16 mode)"};
  if (!model.rope_fusion && model.mla)
    return Error{
        "--no-rope-fusion with --multi-latent-attention: the latents' unfused rotary positions are not modelled"};
  return ok_status();
}

// --context-parallel-size: the sequence in 2c equal chunks, and Transformer
// Engine's attention (Megatron's own attention has no context parallelism).
Status check_context(const GptModel& model, const MegatronLayout& layout) {
  const int c = layout.context;
  if (c < 1) return Error{"--context-parallel-size must be at least 1"};
  if (c == 1) return ok_status();
  if (c > kMaxGptContext)
    return Error{fmt::format("--context-parallel-size must be at most {}, got {}", kMaxGptContext, c)};
  if (model.sequence % (2 * c) != 0)
    return Error{fmt::format(
        "--seq-length {} is not divisible by 2 x --context-parallel-size {}: Megatron cuts each sequence into 2c "
        "equal chunks",
        model.sequence, c)};
  if (!model.flash_attention)
    return Error{fmt::format(
        "--context-parallel-size {} runs the attention in Transformer Engine's context-parallel attention: give "
        "--use-flash-attn (or --attention-backend flash, fused or auto); Megatron's own attention has no context "
        "parallelism",
        c)};
  // a2a gives each rank whole heads (and whole key-value groups) of the full sequence.
  if (layout.context_comm == ContextComm::kAllToAll &&
      ((model.heads / layout.tensor) % c != 0 || (model.groups() / layout.tensor) % c != 0))
    return Error{fmt::format(
        "--cp-comm-type a2a splits each rank's heads over the c ranks: --num-attention-heads {} and the {} key-value "
        "groups, over --tensor-model-parallel-size {}, must be divisible by --context-parallel-size {}",
        model.heads, model.groups(), layout.tensor, c)};
  return ok_status();
}

// The most --mtp-num-layers check_mtp takes (DeepSeek-V3 trains one).
constexpr int64_t kMaxMtpLayers = 64;

// --mtp-num-layers: Megatron-core recomputes each depth alone (uniform, one
// layer) and none with the block method.
Status check_mtp(const GptModel& model, const MegatronLayout& layout) {
  if (model.mtp_layers < 0 || model.mtp_layers > kMaxMtpLayers)
    return Error{fmt::format("--mtp-num-layers must be between 1 and {}, got {}", kMaxMtpLayers, model.mtp_layers)};
  if (model.mtp_layers > 0 && layout.recompute == Recompute::kFull && !layout.recompute_block &&
      layout.recompute_layers != 1)
    return Error{fmt::format(
        "--mtp-num-layers with --recompute-num-layers {}: Megatron-core recomputes each multi-token prediction "
        "depth alone and asserts --recompute-num-layers 1 with --recompute-method uniform",
        layout.recompute_layers)};
  return ok_status();
}

// --recompute-num-layers: whole groups of N blocks in every chunk.
Status check_recompute_layers(const GptModel& model, const MegatronLayout& layout) {
  const int n = layout.recompute_layers;
  if (n < 1) return Error{"--recompute-num-layers must be at least 1"};
  if (n == 1 && !layout.recompute_block) return ok_status();
  if (layout.recompute != Recompute::kFull)
    return Error{fmt::format("--recompute-{} goes with --recompute-granularity full",
                             layout.recompute_block ? "method block" : "num-layers")};
  if (layout.recompute_block) {
    const int64_t per_rank = layout.split_layers(model) / layout.pipeline;
    if (n > per_rank)
      return Error{
          fmt::format("--recompute-num-layers {} with --recompute-method block must be at most the {} "
                      "layers of a pipeline rank",
                      n, per_rank)};
    if (layout.splits_backward())
      return Error{
          "--recompute-method block is not modelled with the zero-bubble and V schedules (their I and W "
          "passes): use uniform"};
    return ok_status();
  }
  for (const int blocks : layout.stage_layers(model))
    if (blocks % n != 0)
      return Error{fmt::format(
          "--recompute-num-layers {} does not divide the {} blocks of a pipeline stage (chunk): baton counts the "
          "memory of whole groups (Megatron would checkpoint a smaller last group)",
          n, blocks)};
  return ok_status();
}

// The split of the blocks among the pipeline stages, even or uneven.
Status check_stage_layers(const GptModel& model, const MegatronLayout& layout) {
  const int first = layout.first_stage_layers, last = layout.last_stage_layers;
  if (first < 0 || last < 0)
    return Error{"--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers must be at least 1"};
  const bool accounted = layout.embedding_in_split || layout.loss_in_split;
  if (accounted && (first > 0 || last > 0))
    return Error{
        "--account-for-embedding/loss-in-pipeline-split and --decoder-first/last-pipeline-num-layers both set the "
        "first and last stages' blocks: give one of them"};
  if (accounted) {
    const char* flag = layout.embedding_in_split ? "--account-for-embedding-in-pipeline-split"
                                                 : "--account-for-loss-in-pipeline-split";
    if (layout.pipeline < 2) return Error{fmt::format("{} needs --pipeline-model-parallel-size of at least 2", flag)};
    if (layout.split_layers(model) % layout.pipeline == 0) return ok_status();
    return Error{fmt::format(
        "--num-layers {} with {} counts {} layers, not divisible by --pipeline-model-parallel-size {}", model.layers,
        layout.embedding_in_split && layout.loss_in_split
            ? "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split"
            : flag,
        layout.split_layers(model), layout.pipeline)};
  }
  if (first == 0 && last == 0) {
    if (model.layers % layout.pipeline == 0) return ok_status();
    return Error{
        fmt::format("--num-layers {} is not divisible by --pipeline-model-parallel-size {} (an uneven split: "
                    "--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers)",
                    model.layers, layout.pipeline)};
  }
  if (layout.pipeline < 2)
    return Error{"--decoder-first/last-pipeline-num-layers need --pipeline-model-parallel-size of at least 2"};
  if (layout.layers_per_virtual_stage > 0)
    return Error{"--decoder-first/last-pipeline-num-layers: baton splits interleaved chunks evenly only"};
  const int others = layout.pipeline - (first > 0) - (last > 0);
  const int64_t rest = model.layers - first - last;
  if (others == 0 ? rest != 0 : rest < others || rest % others != 0)
    return Error{fmt::format(
        "--decoder-first-pipeline-num-layers {} and --decoder-last-pipeline-num-layers {} leave {} of the {} layers "
        "to the other {} pipeline stages: not a whole, equal number each",
        first, last, rest, model.layers, others)};
  return ok_status();
}

// A V-shaped schedule: two chunks per GPU, alone among the schedule flags.
// Called after the batch check: the microbatches per rank are a whole number.
Status check_v_schedule(const GptModel& model, const MegatronLayout& layout) {
  if (layout.v_schedule == VSchedule::kNone) return ok_status();
  const char* flag = layout.v_schedule == VSchedule::kZbV ? "--zero-bubble-v-schedule" : "--dualpipev";
  if (layout.pipeline < 2) return Error{fmt::format("{} needs --pipeline-model-parallel-size of at least 2", flag)};
  if (layout.layers_per_virtual_stage > 0)
    return Error{
        fmt::format("{} runs two chunks per GPU of its own: drop --num-layers-per-virtual-pipeline-stage", flag)};
  if (layout.zero_bubble > 0 || layout.zero_bubble_heuristic)
    return Error{fmt::format("{} is a schedule of its own: drop --enable-zero-bubble and its options", flag)};
  if (layout.first_stage_layers > 0 || layout.last_stage_layers > 0)
    return Error{fmt::format("{} splits the layers evenly: drop --decoder-first/last-pipeline-num-layers", flag)};
  const int64_t chunks = 2 * static_cast<int64_t>(layout.pipeline);
  if (layout.split_layers(model) % chunks != 0)
    return Error{
        fmt::format("{}: --num-layers {}{} is not divisible by 2 x --pipeline-model-parallel-size {} = {} "
                    "chunks",
                    flag, model.layers,
                    layout.split_layers(model) != model.layers
                        ? fmt::format(" ({} counted with the embedding or loss)", layout.split_layers(model))
                        : std::string(),
                    layout.pipeline, chunks)};
  if (layout.microbatches() < chunks)
    return Error{
        fmt::format("{}: --global-batch-size {} gives {} microbatches per data-parallel rank; the V needs at "
                    "least 2 x --pipeline-model-parallel-size = {} to fill it",
                    flag, layout.global_batch, layout.microbatches(), chunks)};
  const int64_t blocks = layout.split_layers(model) / chunks;
  if ((layout.embedding_in_split || layout.loss_in_split) && blocks < 2)
    return Error{
        fmt::format("{}: chunks of {} layer leave the first or last chunk no transformer block", flag, blocks)};
  return ok_status();
}

}  // namespace

Status check_megatron_layout(const GptModel& model, const MegatronLayout& layout, int devices) {
  auto bad = [](std::string message) { return Status(Error{std::move(message)}); };
  if (model.layers < 1) return bad("--num-layers must be at least 1");
  if (model.hidden < 1) return bad("--hidden-size must be at least 1");
  if (model.heads < 1) return bad("--num-attention-heads must be at least 1");
  if (model.sequence < 1) return bad("--seq-length must be at least 1");
  if (model.vocab < 1) return bad("--vocab-size must be at least 1");
  // The bounds (sim/megatron.h): GPT-3 has 96 layers and hidden 12288.
  for (const auto& [value, most, flag] :
       {std::tuple{model.layers, kMaxGptLayers, "--num-layers"},
        std::tuple{model.hidden, kMaxGptHidden, "--hidden-size"},
        std::tuple{model.sequence, kMaxGptSequence, "--seq-length"},
        std::tuple{model.vocab, kMaxGptVocab, "--vocab-size"},
        std::tuple{int64_t{layout.micro_batch}, kMaxGptMicroBatch, "--micro-batch-size"}})
    if (value > most) return bad(fmt::format("{} must be at most {}, got {}", flag, most, value));
  // Megatron asks h / a only of a head width it derives (no --kv-channels).
  if (model.kv_channels == 0 && model.hidden % model.heads != 0)
    return bad(fmt::format("--hidden-size {} is not divisible by --num-attention-heads {}", model.hidden, model.heads));
  if (model.kv_channels < 0) return bad("--kv-channels must be at least 1");
  if (model.kv_channels > kMaxGptHidden)
    return bad(fmt::format("--kv-channels must be at most {}, got {}", kMaxGptHidden, model.kv_channels));
  if (layout.tensor < 1) return bad("--tensor-model-parallel-size must be at least 1");
  if (layout.pipeline < 1) return bad("--pipeline-model-parallel-size must be at least 1");
  if (layout.data < 1) return bad("--data-parallel-size must be at least 1");
  if (auto ok = check_context(model, layout); !ok) return ok;
  if (layout.micro_batch < 1) return bad("--micro-batch-size must be at least 1");
  if (layout.global_batch < 1) return bad("--global-batch-size must be at least 1");
  if (model.heads % layout.tensor != 0)
    return bad(fmt::format("--num-attention-heads {} is not divisible by --tensor-model-parallel-size {}", model.heads,
                           layout.tensor));
  if (auto ok = check_architecture(model, layout); !ok) return ok;
  if (auto ok = check_latent_attention(model, layout); !ok) return ok;
  if (auto ok = check_experts(model, layout); !ok) return ok;
  if (auto ok = check_mtp(model, layout); !ok) return ok;
  if (auto ok = check_fp8(model, layout); !ok) return ok;
  if (auto ok = check_pipeline_layout(model, layout); !ok) return ok;
  if (layout.layout_chunks.empty())
    if (auto ok = check_stage_layers(model, layout); !ok) return ok;
  if (auto ok = check_recompute_layers(model, layout); !ok) return ok;
  if (layout.layers_per_virtual_stage < 0) return bad("--num-layers-per-virtual-pipeline-stage must be at least 1");
  if (layout.layers_per_virtual_stage > 0) {
    const int64_t per_stage = layout.split_layers(model) / layout.pipeline;
    if (layout.pipeline < 2)
      return bad("--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size of at least 2");
    if (per_stage % layout.layers_per_virtual_stage != 0 || per_stage == layout.layers_per_virtual_stage)
      return bad(fmt::format(
          "--num-layers-per-virtual-pipeline-stage {} must divide the {} layers of each pipeline stage into at least "
          "two chunks",
          layout.layers_per_virtual_stage, per_stage));
  }
  const int per_rank = layout.global_batch / layout.data;
  if (layout.global_batch % layout.data != 0 || per_rank % layout.micro_batch != 0)
    return bad(fmt::format(
        "--micro-batch-size {} x --data-parallel-size {} does not divide --global-batch-size {}: each data-parallel "
        "rank needs a whole number of microbatches",
        layout.micro_batch, layout.data, layout.global_batch));
  const int64_t chunks = static_cast<int64_t>(layout.pipeline) * std::max(1, layout.virtual_stages(model));
  if (static_cast<int64_t>(layout.microbatches()) * chunks > kMaxMicrobatchStages)
    return bad(fmt::format(
        "--global-batch-size {} gives {} microbatches per data-parallel rank through {} pipeline chunks: more than the "
        "{} microbatch-stage pairs baton simulates (about 1 GiB); a smaller --global-batch-size shows the same "
        "steady state",
        layout.global_batch, layout.microbatches(), chunks, kMaxMicrobatchStages));
  if (layout.v_schedule == VSchedule::kNone && layout.virtual_stages(model) > 1 &&
      layout.microbatches() % layout.pipeline != 0)
    return bad(
        fmt::format("--global-batch-size {} gives {} microbatches per data-parallel rank, not a multiple of "
                    "--pipeline-model-parallel-size {} as interleaved 1F1B needs",
                    layout.global_batch, layout.microbatches(), layout.pipeline));
  if (layout.sequence_parallel && layout.tensor < 2)
    return bad("--sequence-parallel needs --tensor-model-parallel-size of at least 2");
  if (layout.tp_comm_overlap && !layout.sequence_parallel)
    return bad(
        "--tp-comm-overlap needs --sequence-parallel, as Megatron does (it overlaps the all-gathers and "
        "reduce-scatters of sequence parallelism)");
  if (layout.delay_wgrad_compute && !layout.overlap_moe_ep_comm) return bad(kDelayWgradNeedsEpOverlap);
  if (layout.overlap_moe_ep_comm) {
    const char* flag = "--overlap-moe-expert-parallel-comm";
    if (layout.expert_parallel < 2)
      return bad(fmt::format("{} needs --expert-model-parallel-size of at least 2", flag));
    if (!sends_to_expert_ranks(layout.moe_dispatcher))
      return bad(fmt::format("{} needs --moe-token-dispatcher-type alltoall or flex, as Megatron does", flag));
    if (layout.recompute == Recompute::kFull)
      return bad(fmt::format("{} does not go with --recompute-granularity full, as in Megatron", flag));
    if (layout.moe_shared_expert_overlap)
      return bad(fmt::format("{} does not go with --moe-shared-expert-overlap, as in Megatron", flag));
    if (model.mtp_layers > 1) return bad(fmt::format("{} takes at most one --mtp-num-layers, as Megatron does", flag));
    if (layout.v_schedule != VSchedule::kNone || layout.zero_bubble > 0 ||
        (layout.pipeline > 1 && layout.virtual_stages(model) < 2))
      return bad(
          fmt::format("{}: baton models it on interleaved 1F1B (--num-layers-per-virtual-pipeline-stage, which "
                      "Megatron asks for when --pipeline-model-parallel-size is over 1) and without a pipeline",
                      flag));
  }
  if (layout.moe_shared_expert_overlap && model.shared_expert_ffn <= 0)
    return bad("--moe-shared-expert-overlap needs a shared expert (--moe-shared-expert-intermediate-size)");
  if (layout.moe_shared_expert_overlap && !sends_to_expert_ranks(layout.moe_dispatcher))
    return bad(
        "--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall or flex, as Megatron does (it runs "
        "the shared expert beside the all-to-alls)");
  if (model.moe() && layout.moe_dispatcher == MoeDispatcher::kFlex) {
    if (layout.expert_tensor_parallel() * std::max(1, layout.expert_parallel) < 2)
      return bad(
          "--moe-token-dispatcher-type flex needs --expert-model-parallel-size x --expert-tensor-parallel-size of "
          "at least 2, as Megatron's DeepEP dispatcher does");
    if (model.pad_to_capacity) return bad(kFlexRefusesPadding);
  }
  if (layout.overlap_param_gather && !layout.distributed_optimizer)
    return bad(
        "--overlap-param-gather needs --use-distributed-optimizer, as Megatron does (it overlaps the "
        "optimizer's all-gather of the weights)");
  if (layout.overlap_param_gather && !layout.overlap_grad_reduce) return bad(kOverlapParamGatherNeedsGradReduce);
  if (layout.zero_bubble < 0 || layout.zero_bubble > 2)
    return bad("--zero-bubble-max-pending-backward must be p (ZB-H1) or 2p (ZB-H2)");
  if (layout.zero_bubble_heuristic && layout.zero_bubble == 0)
    return bad("--zero-bubble-heuristic goes with --enable-zero-bubble (and --zero-bubble-max-pending-backward)");
  if (layout.zero_bubble > 0 && layout.pipeline < 2)
    return bad("--enable-zero-bubble needs --pipeline-model-parallel-size of at least 2");
  if (layout.zero_bubble > 0 && layout.layers_per_virtual_stage > 0)
    return bad(
        "--enable-zero-bubble runs one chunk per GPU: drop --num-layers-per-virtual-pipeline-stage (or zero bubble)");
  if (auto ok = check_v_schedule(model, layout); !ok) return ok;
  if (layout.gpus() > devices)
    return bad(
        fmt::format("the layout needs {} GPUs (--tensor-model-parallel-size {} x --pipeline-model-parallel-size {} x "
                    "--data-parallel-size {}{}) and the topology has {}",
                    layout.gpus(), layout.tensor, layout.pipeline, layout.data,
                    layout.context > 1 ? fmt::format(" x --context-parallel-size {}", layout.context) : "", devices));
  return ok_status();
}

}  // namespace baton
