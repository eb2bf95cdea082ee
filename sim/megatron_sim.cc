#include "sim/megatron_sim.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/gpu_model.h"
#include "sim/schedules.h"

namespace baton {

namespace {

// The attention's share of a block's kept bytes, in units of s b h:
// `split` over t, `shard` split over t with sequence parallelism only.
struct AttentionTerms {
  double split = 0.0, shard = 0.0;
};

// Bytes of a linear's input kept for its backward: 1 with FP8 (its FP8
// copy, sim/megatron_fp8.h), 2 otherwise.
double linear_input_bytes(const GptModel& model) { return model.uses_fp8() ? 1.0 : 2.0; }

// What the attention keeps for its backward (block_activation_bytes):
// Megatron's queries (2), keys and values (2 each x G / a) and the
// projection's input (2), split (with --kv-channels d the queries and the
// projection's input a d / h of that, keys and values G d / h);
// multi-latent attention's queries and keys (2 a (dn + dr) / h each), values
// and the projection's input (2 a dv / h each),
// split, and the up projections' inputs, the latents (2 (q_lora + kv_lora +
// dr) / h; their normalized copies too with --qk-layernorm), sharded.
AttentionTerms attention_kept(const GptModel& model) {
  const double h = static_cast<double>(model.hidden);
  const double lin = linear_input_bytes(model);
  if (!model.mla) {
    const double q = static_cast<double>(model.query_width());
    return {((2.0 + lin) * q + 4.0 * static_cast<double>(model.kv_hidden())) / h, 0.0};
  }
  const double a = static_cast<double>(model.heads);
  const double qk = static_cast<double>(model.qk_head_dim + model.qk_pos_head_dim);
  const double v = static_cast<double>(model.v_head_dim);
  const double latents = static_cast<double>(model.q_lora_rank + model.kv_lora_rank);
  // The latents as the up projections' inputs (lin), normalized copies of 2-byte ones with --qk-layernorm.
  return {(4.0 * a * qk + (2.0 + lin) * a * v) / h,
          (2.0 * static_cast<double>(model.qk_pos_head_dim) + (model.qk_layernorm ? 2.0 + lin : lin) * latents) / h};
}

// What the attention's weight GEMMs keep from I to W (weight_pass_bytes):
// Megatron's QKV output gradients (2 (q + 2 kv) / h) and the projection's
// input (2 q / h), split (q = a d, h by default); multi-latent attention's
// up projections' output gradients (2 a (dn + dr) / h, 2 a (dn + dv) / h)
// and the projection's input
// (2 a dv / h), split, and the latents (the up projections' inputs) and their
// gradients (the down projections' outputs), sharded.
AttentionTerms attention_weight_pass(const GptModel& model) {
  const double h = static_cast<double>(model.hidden);
  if (!model.mla) {
    const double q = static_cast<double>(model.query_width());
    return {(2.0 * (q + 2.0 * static_cast<double>(model.kv_hidden())) + 2.0 * q) / h, 0.0};
  }
  const double a = static_cast<double>(model.heads);
  const double dn = static_cast<double>(model.qk_head_dim), dr = static_cast<double>(model.qk_pos_head_dim);
  const double v = static_cast<double>(model.v_head_dim);
  const double latents = static_cast<double>(model.q_lora_rank + model.kv_lora_rank);
  return {2.0 * a * (dn + dr + dn + v + v) / h, (2.0 * latents + 2.0 * (latents + dr)) / h};
}

// Activation bytes of one block and microbatch on one rank (megatron_sim.h),
// in units of s b h bytes: kept whole without sequence parallelism the
// LayerNorms' inputs (4), the QKV and MLP inputs (2 each) and the two dropout
// masks (1 each; none with --hidden-dropout 0), 10 in all; split over t the
// queries (2), keys and values (2 each x G / a), the projection's input (2)
// and the MLP's activation's input and output (2 f / h each, SwiGLU's input
// twice that): 24 for GPT; and the attention's 5 a s / h (softmax output,
// dropout mask and output; 2 a s / h, the softmax's output alone, with
// --attention-dropout 0), or with FlashAttention its softmax statistics
// alone (4 a / h, fp32).
double block_activation_bytes(const GptModel& model, const MegatronLayout& layout) {
  const double s = static_cast<double>(layout.local_sequence(model));
  const double h = static_cast<double>(model.hidden);
  const double a = static_cast<double>(model.heads);
  const double f = static_cast<double>(model.moe() ? model.expert_ffn() : model.ffn());
  const double t = layout.tensor;
  const double sbh = s * layout.micro_batch * h;
  // Without dropout the scores keep the softmax's output alone (2 of the 5).
  const double scores = model.attention_dropout > 0.0 ? 5.0 : 2.0;
  const double attention = model.flash_attention ? 4.0 * a / (h * t) : scores * a * s / (h * t);
  // With experts: k copies of each token through experts of width F, whose
  // input (the tokens gathered over etp: k etp / t of the block's; k, whole,
  // with etp = t) is kept, and the router's probabilities (fp32, E per token
  // of the shard); a shared expert of width S keeps what a dense MLP of that
  // width keeps.
  const double k = model.expert_copies();  // k, dropless
  const double shared = model.moe() ? static_cast<double>(model.shared_expert_ffn) : 0.0;
  const AttentionTerms kept = attention_kept(model);
  // The activation's input, and its output (the second GEMM's input, lin).
  const double lin = linear_input_bytes(model);
  // SwiGLU's input is 2f wide; unfused (--no-bias-swiglu-fusion) SiLU's
  // output is kept too, for the product's backward.
  const double activation_input = model.swiglu ? (model.activation_fusion ? 4.0 : 6.0) : 2.0;
  const double split = kept.split + (activation_input + lin) * (k * f + shared) / h;  // GPT: 24
  const double gathered = layout.expert_tensor_parallel() / t;
  const double experts = model.moe() ? lin * k * gathered + 4.0 * static_cast<double>(model.experts) / (h * t) : 0.0;
  // The norms' inputs (4), the dropout masks (2, none without dropout), the
  // QKV's input and the MLP's (lin; the router's input with experts, 2).
  const double masks = model.hidden_dropout > 0.0 ? 2.0 : 0.0;
  const double whole = 4.0 + masks + lin + (model.moe() ? 2.0 : lin) + kept.shard;
  const double rest = (layout.sequence_parallel ? (whole + split) / t : whole + split / t) + experts;
  switch (layout.recompute) {
    case Recompute::kNone: return sbh * (rest + attention);
    case Recompute::kSelective: return sbh * (rest + (model.flash_attention ? attention : 0.0));
    // The input of each group of N blocks: 2 s b h (/ t) per N blocks (the
    // block method: a recomputed block's own input).
    case Recompute::kFull:
      return sbh * (layout.sequence_parallel ? 2.0 / t : 2.0) / (layout.recompute_block ? 1 : layout.recompute_layers);
  }
  return 0.0;
}

// What a block keeps between its I and its W pass (zero-bubble schedules):
// its weight GEMMs' inputs (QKV 2, projection 2 / t, MLP in 2, MLP out 2 f / h
// / t of s b h) and output gradients (2 (h + 2 h G / a) / h / t, 2, 2 x the up
// projection's width / h / t, 2): GPT's (8 + 24 / t) s b h, 32 / t s b h with
// sequence parallelism.
double weight_pass_bytes(const GptModel& model, const MegatronLayout& layout) {
  const double h = static_cast<double>(model.hidden);
  const double sbh = static_cast<double>(layout.local_sequence(model)) * layout.micro_batch * h;
  const double f = static_cast<double>(model.moe() ? model.expert_ffn() : model.ffn());
  const double up = model.swiglu ? 2.0 * f : f;
  const double t = layout.tensor;
  // With experts the MLP's four terms are k copies' (the inputs kept whole).
  const double k = model.expert_copies();  // k, dropless
  // A shared expert of width S: a dense MLP's four terms of that width.
  const double shared = model.moe() ? static_cast<double>(model.shared_expert_ffn) : 0.0;
  const double shared_up = model.swiglu ? 2.0 * shared : shared;
  const AttentionTerms kept = attention_weight_pass(model);
  const double split = kept.split + k * (2.0 * up / h + 2.0 * f / h) +
                       (shared > 0.0 ? 2.0 * shared_up / h + 2.0 * shared / h : 0.0);  // GPT: 24
  // The MLP's input and its output's gradient (4 of the 8): the experts'
  // k copies' instead, gathered over etp (whole with etp = t; and the shared
  // expert's own, as a dense MLP's).
  const double whole = (model.moe() ? (shared > 0.0 ? 8.0 : 4.0) : 8.0) + kept.shard;
  const double experts = model.moe() ? 4.0 * k * layout.expert_tensor_parallel() / t : 0.0;
  // With FP8 every one of them is kept as an FP8 operand: half the bytes.
  return sbh * ((layout.sequence_parallel ? (whole + split) / t : whole + split / t) + experts) *
         linear_input_bytes(model) / 2.0;
}

double working_set_bytes(const GptModel& model, const MegatronLayout& layout) {
  MegatronLayout none = layout;
  none.recompute = Recompute::kNone;
  // A group of N blocks recomputed together holds all N blocks' activations.
  const int together = layout.recompute_block ? 1 : layout.recompute_layers;
  return layout.recompute == Recompute::kFull ? block_activation_bytes(model, none) * together : 0.0;
}

}  // namespace

MegatronRankWork megatron_rank_work(const MegatronProfile& profile, const Plan& plan, int rank) {
  MegatronRankWork work;
  for (int s : stages_of_rank(plan, rank)) {
    for (int layer = plan.stages[s].layers.begin; layer < plan.stages[s].layers.end; ++layer) {
      const MegatronLayerTime& t = profile.times[layer];
      const Layer& costed = profile.profile.layers[layer];
      work.compute += t.forward_compute + t.backward_compute;
      work.tensor_comm += t.forward_comm + t.backward_comm;
      work.context_comm += t.context_forward + t.context_backward;
      work.expert_comm += t.expert_forward + t.expert_backward;
      work.recompute += t.recompute;
      work.expert_recompute += t.expert_recompute;
      work.host += t.host_wait;
      work.forward += costed.forward;
      work.backward += costed.backward;
      work.reduced_bytes += t.reduced_bytes;
      work.gathered_bytes += t.gathered_bytes;
      work.optimizer += costed.optimizer - t.embedding_allreduce;
      work.embedding_allreduce += t.embedding_allreduce;
      work.gradients = work.gradients + costed.param_bytes;
      work.parameters += t.parameters;
      work.expert_parameters += t.expert_parameters;
      work.fp8_parameters += t.fp8_parameters;
    }
  }
  return work;
}

double megatron_layer_activation_bytes(const GptModel& model, const MegatronLayout& layout) {
  return block_activation_bytes(model, layout);
}

Plan megatron_plan(const GptModel& model, const MegatronLayout& layout) {
  Plan plan;
  plan.model = fmt::format("gpt L{} h{}", model.layers, model.hidden);
  const int v = layout.virtual_stages(model);
  plan.schedule = layout.v_schedule == VSchedule::kZbV         ? Schedule::kZbV
                  : layout.v_schedule == VSchedule::kDualPipeV ? Schedule::kDualPipeV
                  : v > 1                                      ? Schedule::kInterleaved1F1B
                  : layout.zero_bubble == 1                    ? Schedule::kZbH1
                  : layout.zero_bubble == 2                    ? Schedule::kZbH2
                                                               : Schedule::kOneFOneB;
  plan.virtual_stages = v;
  plan.paired_steady_state =
      layout.overlap_moe_ep_comm &&
      (plan.schedule == Schedule::kInterleaved1F1B || (plan.schedule == Schedule::kOneFOneB && layout.pipeline == 1));
  plan.delay_wgrad_compute = plan.paired_steady_state && layout.delay_wgrad_compute;
  plan.microbatch_size = layout.micro_batch;
  // Microbatch k runs on replica k mod (d c): each of the d c replicas (the
  // c context-parallel ranks of a data-parallel rank run its microbatches
  // alike, on s / c tokens each) runs m microbatches.
  plan.batches = layout.microbatches() * layout.replicas();
  const std::vector<int> blocks = layout.stage_layers(model);
  const int stages = static_cast<int>(blocks.size());
  // Profile layer 0 is the embedding, 1 to L the blocks, then the D
  // multi-token prediction depths (the chunk's that mtp_stage names) and the
  // output layer (the last chunk's).
  const int mtp_stage = layout.mtp_stage(model);
  int begin = 1;
  for (int s = 0; s < stages; ++s) {
    StagePlan stage;
    const int end = begin + blocks[s] + (s == mtp_stage ? static_cast<int>(model.mtp_layers) : 0);
    stage.layers = LayerRange{s == 0 ? 0 : begin, end + (s == stages - 1 ? 1 : 0)};
    begin = end;
    stage.replicas = layout.replicas();
    plan.stages.push_back(stage);
  }
  // The schedule's own placement of its chunks (Plan::rank_of: rank s mod p
  // interleaved, down the ranks and back in a V), once every stage is there.
  for (int s = 0; s < stages; ++s) {
    const int rank = plan.rank_of(s);
    for (int j = 0; j < layout.replicas(); ++j) plan.stages[s].devices.push_back(rank * layout.replicas() + j);
  }
  return plan;
}

Bytes MegatronMemory::peak() const {
  Bytes most;
  for (const MegatronRankMemory& r : ranks) most = max(most, r.peak);
  return most;
}

bool MegatronMemory::fits() const {
  return std::all_of(ranks.begin(), ranks.end(), [&](const MegatronRankMemory& r) { return r.peak <= capacity; });
}

double weight_pass_share(const GptModel& model, const MegatronLayout& layout) {
  return layout.splits_backward() ? weight_pass_bytes(model, layout) / block_activation_bytes(model, layout) : 0.0;
}

std::vector<HeldPeak> held_peaks(const Plan& plan, double weight_share, const std::vector<double>& stage_blocks) {
  return held_peaks(plan, generate_replica0_program(plan), weight_share, stage_blocks);  // compute actions suffice
}

std::vector<HeldPeak> held_peaks(const Plan& plan, const Program& program, double weight_share,
                                 const std::vector<double>& stage_blocks) {
  // Replica 0's worker of each rank: microbatch k runs on replica k mod d, so
  // all replicas run the same sequence of passes.
  std::vector<int> worker_of_rank(static_cast<size_t>(plan.num_ranks()), -1);
  for (int w = 0; w < program.num_workers(); ++w)
    if (program.workers[w].replica == 0) worker_of_rank[plan.rank_of(program.workers[w].stage)] = w;
  const int last_stage = plan.num_stages() - 1;
  // Per stage: its transformer blocks, one after another (layers_of), and
  // what they hold in blocks_of's units (the same count unless stage_blocks).
  std::vector<int> layers_of;
  std::vector<double> blocks_of;
  for (int s = 0; s <= last_stage; ++s) {
    layers_of.push_back(static_cast<int>(plan.stages[s].layers.size()) - (s == 0 ? 1 : 0) - (s == last_stage ? 1 : 0));
    blocks_of.push_back(stage_blocks.empty() ? layers_of.back() : stage_blocks.at(static_cast<size_t>(s)));
  }
  // A pair of Megatron's batch-level overlap runs its passes layer by layer,
  // forward block i beside backward block n_B - 1 - i, each backward block
  // letting its activations go as it ends (TransformerModelChunkSchedulePlan
  // .run): at worst what was held before, one forward block's more, less the
  // backward blocks already done, not both passes' chunks whole.
  const auto pair_peak = [&](const Action& forward, const Action& backward, double held) {
    const int n_forward = layers_of[forward.stage], n_backward = layers_of[backward.stage];
    const double each_forward = n_forward > 0 ? blocks_of[forward.stage] / n_forward : 0.0;
    const double each_backward = n_backward > 0 ? blocks_of[backward.stage] / n_backward : 0.0;
    double worst = held;
    for (int i = 0; i < std::max(n_forward, n_backward); ++i) {
      if (i < n_forward) held += each_forward;
      worst = std::max(worst, held);
      if (i < n_backward) held -= each_backward;
    }
    return worst;
  };
  std::vector<HeldPeak> peaks;
  for (const int worker : worker_of_rank) {
    // Running sums over the rank's chunks: a forward holds its chunk's
    // blocks for one more microbatch, a backward (B or I) lets them go; an I
    // leaves what the W pass needs (weight_share of them) until its W.
    HeldPeak peak;
    double blocks = 0.0;
    int count = 0;
    const std::vector<Action>& actions = program.actions[worker];
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& action = actions[i];
      const double in_stage = blocks_of[action.stage];
      if (plan.paired_steady_state && action.paired && action.kind == ActionKind::kForward) {
        size_t next = i + 1;
        while (next < actions.size() && !is_compute(actions[next].kind)) ++next;
        if (next < actions.size() && actions[next].kind == ActionKind::kBackward) {
          peak.block_microbatches = std::max(peak.block_microbatches, pair_peak(action, actions[next], blocks));
          peak.microbatches = std::max(peak.microbatches, count + 1);
          blocks += in_stage - blocks_of[actions[next].stage];
          i = next;
          continue;
        }
      }
      switch (action.kind) {
        case ActionKind::kForward:
          blocks += in_stage;
          ++count;
          break;
        case ActionKind::kBackward:
          blocks -= in_stage;
          --count;
          break;
        case ActionKind::kBackwardInput: blocks -= (1.0 - weight_share) * in_stage; break;
        case ActionKind::kBackwardWeight:
          blocks -= weight_share * in_stage;
          --count;
          break;
        default: continue;
      }
      peak.block_microbatches = std::max(peak.block_microbatches, blocks);
      peak.microbatches = std::max(peak.microbatches, count);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

MegatronMemory megatron_memory(const GptModel& model, const MegatronLayout& layout, const Plan& plan,
                               const MegatronProfile& profile, Bytes capacity, const std::vector<HeldPeak>* held) {
  MegatronMemory memory;
  memory.capacity = capacity;
  const double gradient = layout.gradient_bytes();
  // The experts' optimizer states shard over the t c d / (etp ep) ranks that hold them.
  const double states = 12.0 / (layout.distributed_optimizer ? layout.replicas() : 1);
  const double expert_states = 12.0 / (layout.distributed_optimizer ? layout.expert_replicas() : 1);
  double per_block = block_activation_bytes(model, layout);
  const bool mixed = model.moe() && model.moe_blocks() < model.layers;  // dense blocks among the MoE ones
  const double working =
      std::max(working_set_bytes(model, layout), mixed ? working_set_bytes(model.dense_blocks(), layout) : 0.0);
  // --recompute-method block: counted in blocks without recomputation, the
  // first N of each chunk at the input they keep; with dense blocks among
  // MoE ones (--moe-layer-freq), each in MoE blocks' units.
  std::vector<double> stage_blocks;
  const bool bf16_blocks = model.uses_fp8() && model.bf16_end_blocks();
  if (layout.recompute_block || mixed || model.mtp_layers > 0 || bf16_blocks) {
    MegatronLayout none = layout;
    none.recompute = Recompute::kNone;
    per_block = block_activation_bytes(model, layout.recompute_block ? none : layout);
    const GptModel dense = model.dense_blocks();
    int64_t block = 0;
    for (const int blocks : layout.stage_layers(model)) {
      double units = 0.0;
      for (int j = 0; j < blocks; ++j, ++block) {
        const bool kept = layout.recompute_block && j >= layout.recompute_layers;  // runs as without recomputation
        const GptModel& kind = model.moe_block(block) ? model : dense;
        units += block_activation_bytes(bf16_blocks ? kind.with_fp8_blocks(model.fp8_block(block)) : kind,
                                        kept ? none : layout) /
                 per_block;
      }
      stage_blocks.push_back(units);
    }
    // Multi-token prediction's depths on their stage: each a block of the
    // last block's kind (not recomputed with --recompute-method block, as
    // Megatron-core skips them) with eh_proj's input (2h a token, split
    // over t with sequence parallelism) and the two norms' inputs (h each).
    const MegatronLayout& depth_layout = layout.recompute_block ? none : layout;
    const double depth_extra = static_cast<double>(layout.local_sequence(model)) * layout.micro_batch *
                               static_cast<double>(model.hidden) * 2.0 * 4.0 /
                               (layout.sequence_parallel ? layout.tensor : 1);
    stage_blocks.at(static_cast<size_t>(layout.mtp_stage(model))) +=
        static_cast<double>(model.mtp_layers) *
        (block_activation_bytes(model.mtp_block(), depth_layout) + depth_extra) / per_block;
    held = nullptr;  // counted in blocks, not these units
  }
  const double logit_bytes = model.te_loss() ? 2.0 : 4.0 * 2.0;
  const double logits = static_cast<double>(layout.local_sequence(model)) * layout.micro_batch *
                        static_cast<double>(padded_vocab(model, layout.tensor)) / layout.tensor * logit_bytes *
                        static_cast<double>(1 + model.mtp_layers);  // each depth's logits too
  // The allgather dispatcher's gathered tokens (Megatron-core's
  // MoEAllGatherTokenDispatcher over the G = etp ep GPUs of the tp_ep
  // group): the hidden states gathered into Megatron's global memory buffer,
  // which stays allocated (G s b / (c t) rows of h, 2 bytes), and at the
  // combine the unpermuted outputs at the gathered size with their fp32 copy
  // for the reduce-scatter (2 + 4 bytes; in the backward the all-gathered
  // fp32 gradient and its bf16 copy), beside the block's activations, not
  // the loss's logits.
  const int expert_group = layout.expert_tensor_parallel() * std::max(1, layout.expert_parallel);
  const bool gathers = model.moe() && layout.moe_dispatcher == MoeDispatcher::kAllGather && expert_group > 1;
  const double gathered_values = gathers ? static_cast<double>(layout.local_sequence(model)) * layout.micro_batch /
                                               layout.tensor * expert_group * static_cast<double>(model.hidden)
                                         : 0.0;
  const double global_buffer = gathered_values * 2.0, combine = gathered_values * 6.0;
  const std::vector<HeldPeak> computed =
      held ? std::vector<HeldPeak>{} : held_peaks(plan, weight_pass_share(model, layout), stage_blocks);
  const std::vector<HeldPeak>& peaks = held ? *held : computed;
  const int last_stage = plan.num_stages() - 1;
  for (int rank = 0; rank < layout.pipeline; ++rank) {
    MegatronRankMemory entry;
    entry.rank = rank;
    const MegatronRankWork work = megatron_rank_work(profile, plan, rank);
    const double dense = work.parameters - work.expert_parameters;
    entry.weights_and_optimizer =
        Bytes::counted(dense * (2.0 + gradient + states) + work.expert_parameters * (2.0 + gradient + expert_states) +
                       work.fp8_parameters * (model.fp8_param_gather ? 0.0 : 2.0));
    const bool last = plan.rank_of(last_stage) == rank;
    const bool experts = work.expert_parameters > 0.0;  // the rank runs MoE blocks
    entry.activations =
        Bytes::counted(peaks[rank].block_microbatches * per_block + working + (experts ? global_buffer : 0.0) +
                       std::max(last ? logits : 0.0, experts ? combine : 0.0));
    entry.inflight_microbatches = peaks[rank].microbatches;
    entry.peak = entry.weights_and_optimizer + entry.activations;
    memory.ranks.push_back(entry);
  }
  return memory;
}

}  // namespace baton
