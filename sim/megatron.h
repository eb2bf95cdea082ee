// Megatron-style GPT training: the model, its layout, and what baton predicts
// for it (sim/megatron_sim.h runs it).
//
// The model is sim/gpt_model.h's GptModel.
//
// A MegatronLayout is one run's parallel layout in Megatron's own terms:
// tensor parallel t, pipeline parallel p, data parallel d, micro-batch b,
// global batch B (microbatches per iteration m = B / (b d)), optionally
// layers per virtual pipeline stage (interleaved 1F1B with v = L / (p x that)
// chunks per device), activation recomputation, sequence parallelism, fp16
// or bf16, the distributed optimizer, overlapped gradient reduction and
// context parallelism c (the sequence split over c ranks) and expert
// parallelism ep (the experts split over ep of the d c ranks that share a
// pipeline rank's weights).
// Ranks are placed as Megatron places them: tensor-parallel ranks innermost
// (consecutive devices), then context parallel, then data parallel, then
// pipeline; an expert-parallel group is ep consecutive tensor-parallel groups
// (Megatron-core's expert ranks tp-ep-dp-pp, with the experts' tensor
// parallelism that of the rest).
//
// Formulas used by every caller:
//   model FLOPs per iteration (Narayanan et al. 2021, eq. 3, which counts the
//     recomputed forward only with full recomputation):
//     F = 24 k B s L h^2 (1 + s / (6 h) + V / (16 L h)),
//     k = 4 with full recomputation, 3 otherwise; in general
//     F = k B s L (2 P_lin + 4 s h) + 6 B s h V (P_lin: sim/gpt_model.h; the attention products
//     counted over the whole s x s, as Megatron's own formula counts them);
//     with experts P_lin counts the k experts a token passes through, not the
//     E, nor the router (Megatron's num_floating_point_operations); with
//     multi-latent attention Megatron-core's own count: P_lin with the
//     latents' norm weights, and s a (dn + dr + dv) in place of 4 s h (the
//     products over the causal half); with D multi-token prediction depths
//     (Megatron's count) L + D blocks, 3 h + 2 h^2 more linear weights per
//     depth (its three norms' h each and eh_proj), and 6 B s h V (1 + D)
//   model_tflops_per_gpu = F / (iteration time x GPUs) / 1e12
// Thread safety: plain values and pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/gpt_model.h"
#include "sim/megatron_fp8.h"
#include "sim/megatron_names.h"
#include "sim/result.h"

namespace baton {

struct MegatronLayout {
  int tensor = 1;
  int pipeline = 1;
  int data = 1;
  int micro_batch = 1;
  int global_batch = 1;
  int layers_per_virtual_stage = 0;  // 0: not interleaved
  Recompute recompute = Recompute::kNone;
  // With full recomputation, Megatron-core's --recompute-method and
  // --recompute-num-layers N (it asks for both with full recomputation):
  // uniform keeps the input of every N blocks of a chunk and recomputes the N
  // together before their backward (N = 1: each block alone, Megatron-LM's
  // full recomputation); block (recompute_block) recomputes the first N
  // blocks of each chunk, one by one, and keeps every activation of the rest.
  int recompute_layers = 1;
  bool recompute_block = false;
  bool sequence_parallel = false;
  bool bf16 = false;  // else fp16
  // --grad-reduce-in-bf16: with bf16, gradients accumulated and reduced in
  // bf16 (2 bytes) rather than fp32 (4); with fp16 they are 2 bytes anyway.
  bool grad_reduce_in_bf16 = false;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  // Megatron's --overlap-param-gather (with the distributed optimizer and
  // --overlap-grad-reduce, as Megatron asks): the all-gather of the updated
  // weights runs beside the next iteration's first forward pass instead of
  // after the optimizer step; only what outlasts that pass is exposed.
  bool overlap_param_gather = false;
  // Megatron's --tp-comm-overlap (Transformer Engine's userbuffers; with
  // --sequence-parallel, as Megatron asks): each tensor-parallel all-gather
  // and reduce-scatter of a block's dense linears is cut into chunks and
  // pipelined with the GEMM it feeds or drains, so only what outlasts those
  // GEMMs is exposed (sim/megatron_profile.h). The experts' collectives are
  // not overlapped.
  bool tp_comm_overlap = false;
  // Bytes of a gradient in the buffers Megatron accumulates and reduces: 4
  // with bf16 (fp32, as Megatron keeps them), 2 with fp16 or --grad-reduce-in-bf16.
  double gradient_bytes() const { return bf16 && !grad_reduce_in_bf16 ? 4.0 : 2.0; }
  // The zero-bubble schedules of Qi et al. (ICLR 2024) instead of 1F1B (one
  // chunk per GPU, p >= 2): 0 none, 1 ZB-H1, 2 ZB-H2. Flags of the Zero
  // Bubble authors' Megatron-LM fork: --enable-zero-bubble with
  // --zero-bubble-max-pending-backward p (ZB-H1) or 2p (ZB-H2).
  int zero_bubble = 0;
  // With zero_bubble: instead of baton's handcrafted ZB-H1 / ZB-H2 orders,
  // the Zero Bubble authors' greedy scheduler (sim/zb_heuristic.h) on the
  // profile's stage times under the same memory limit (p or 2p microbatches'
  // activations): their fork's ZB-1p / ZB-2p without its ILP refinement.
  // baton's flag --zero-bubble-heuristic.
  bool zero_bubble_heuristic = false;
  // A V-shaped schedule instead (p >= 2, not with interleaving, zero_bubble
  // or an uneven split): 2p chunks of L / (2p) blocks.
  VSchedule v_schedule = VSchedule::kNone;
  // Uneven splits (Megatron-core's --decoder-first-pipeline-num-layers and
  // --decoder-last-pipeline-num-layers, not interleaved): the first and the
  // last pipeline stage's blocks, 0 for an even share; the other stages share
  // the rest evenly. The first stage also runs the embedding, the last the
  // output layer, so one block fewer there can balance the pipeline.
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  // Megatron-core's --account-for-embedding-in-pipeline-split and
  // --account-for-loss-in-pipeline-split: the embedding (the output layer and
  // loss) counts as one more layer when the L (+1, +2) layers are cut into p
  // stages (and each stage into chunks of --num-layers-per-virtual-pipeline-
  // stage), so the first (last) chunk holds one block fewer, none when chunks
  // are one layer. Not with the decoder-first/last counts above.
  bool embedding_in_split = false;
  bool loss_in_split = false;
  // Context parallelism (Megatron-core's --context-parallel-size c and
  // --cp-comm-type): each sequence cut into 2c chunks, rank j of the c
  // holding chunks j and 2c - 1 - j (the causal work balanced), so every
  // block runs on s / c tokens; with p2p (the default) the attention runs in
  // c steps, each over the rank's queries and one rank's keys and values,
  // which travel round the ring of the c ranks while the step computes
  // (Transformer Engine's ring attention, which Megatron needs for it:
  // FlashAttention's core); ContextComm has the others. The c ranks of one
  // data-parallel rank share its microbatches and hold the same weights: the
  // gradients (and the distributed optimizer's shards) are reduced over d c
  // ranks. Ranks are placed tensor, context, data, pipeline (Megatron's order
  // tp-cp-dp-pp).
  int context = 1;
  ContextComm context_comm = ContextComm::kP2P;
  // Expert parallelism (Megatron-core's --expert-model-parallel-size ep, with
  // --num-experts): the E experts of every block split over ep of the d c
  // ranks that would each hold them all (E / ep each), which move each
  // token to the rank of its experts and back as `moe_dispatcher` says and
  // reduce the experts' gradients over the d c / ep ranks that hold the
  // same experts. The other weights stay replicated over d c.
  int expert_parallel = 1;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllGather;  // Megatron-core's default
  // Megatron-core's --moe-shared-expert-overlap (with a shared expert and the
  // alltoall dispatcher, as Megatron asks): the shared expert runs on a
  // stream of its own, its all-gather, first GEMM and activation beside the
  // dispatch's all-to-all, its second GEMM and reduce-scatter beside the
  // combine's, so each all-to-all is exposed only where it outlasts that
  // work (sim/megatron_block.h).
  bool moe_shared_expert_overlap = false;
  // Megatron-core's --overlap-moe-expert-parallel-comm (its batch-level
  // overlap: ep > 1, the alltoall dispatcher, interleaved 1F1B when p > 1,
  // no full recomputation, not with the shared expert's overlap, as Megatron
  // asks): each steady-state forward runs with the backward after it as one
  // unit, each pass's all-to-alls hidden behind the other's compute
  // (Plan::paired_steady_state, sim/program.h's pairs); with p = 1, Megatron-
  // core's no-pipelining schedule: F0, F1&B0, F2&B1, ..., the last B.
  bool overlap_moe_ep_comm = false;
  // Megatron-core's --delay-wgrad-compute (with --overlap-moe-expert-
  // parallel-comm, as Megatron asks): in each pair the experts' weight
  // gradients run after their input gradients, beside the dispatch's
  // backward all-to-all, which so starts earlier (Plan::delay_wgrad_compute).
  bool delay_wgrad_compute = false;
  // Expert tensor parallelism (Megatron-core's --expert-tensor-parallel-size
  // etp; 0: t, its default): each expert's weights split over etp GPUs as a
  // dense MLP's over t. The experts have a grid of their own over the t c d
  // GPUs of a pipeline rank, placed expert-tensor, expert, expert-data
  // (Megatron-core's expert ranks tp-ep-dp-pp): etp consecutive GPUs split an
  // expert, ep ranks etp apart hold the E experts (so with etp 1 and t 8 the
  // eight GPUs of a tensor-parallel group are an expert-parallel group), and
  // t c d / (etp ep) ranks etp ep apart hold the same experts. The tokens a
  // rank sends are its sequence-parallel shard's, as before.
  int expert_tensor = 0;
  // Megatron-core's --pipeline-model-parallel-layout (core 0.13 on): every
  // chunk's layers spelled out, `pipeline_layout` the text as given and
  // `layout_chunks` its p v chunks in model order (chunk k on pipeline rank k
  // mod p, as interleaving places them), each a string of E (the embedding),
  // t (a block), m (a multi-token prediction depth) and L (the output layer
  // and loss). Empty: the other split flags decide.
  std::string pipeline_layout;
  std::vector<std::string> layout_chunks;

  int gpus() const { return tensor * pipeline * data * context; }
  // The ranks that hold each pipeline rank's weights: d c.
  int replicas() const { return data * context; }
  // etp: expert_tensor, or t when it is 0.
  int expert_tensor_parallel() const { return expert_tensor > 0 ? expert_tensor : tensor; }
  // The ranks that hold the same experts: t c d / (etp ep), d c / ep with etp = t.
  int expert_replicas() const { return tensor * replicas() / std::max(1, expert_parallel * expert_tensor_parallel()); }
  // Tokens of a sequence on one context-parallel rank: s / c.
  int64_t local_sequence(const GptModel& model) const { return model.sequence / std::max(1, context); }
  int microbatches() const { return global_batch / (micro_batch * data); }
  // The layers the pipeline split counts: L, plus one for each account flag.
  int64_t split_layers(const GptModel& model) const {
    return model.layers + (embedding_in_split ? 1 : 0) + (loss_in_split ? 1 : 0);
  }
  // Chunks per device: split_layers / (p x layers per virtual stage), 1 without
  // interleaving, 2 with a V-shaped schedule.
  int virtual_stages(const GptModel& model) const;
  // Whether the schedule splits the backward into I and W passes (zero
  // bubble, ZB-V, DualPipeV): a block's I pass leaves what its W needs.
  bool splits_backward() const { return zero_bubble > 0 || v_schedule != VSchedule::kNone; }
  // Blocks of each of the p v stages (chunks) in model order; a checked layout.
  std::vector<int> stage_layers(const GptModel& model) const;
  // The chunk that runs the multi-token prediction depths: the last, or the
  // one --pipeline-model-parallel-layout puts them in.
  int mtp_stage(const GptModel& model) const;
  // The pipeline rank of chunk `stage` (Plan::rank_of's placement: k mod p,
  // down the ranks and back in a V).
  int stage_rank(int stage) const;
};

// A layout of t x p x d GPUs, micro-batch b, global batch `global`; the rest default.
MegatronLayout megatron_layout(int t, int p, int d, int b, int global);

// --moe-layer-freq's text into `model`: an integer N (moe_layer_freq), or a
// list expression of 0s and 1s as Megatron evaluates it, lists joined by +
// and repeated by * in parentheses ("([1]*3+[0]*1)*3", "[0]*3+[1]*58";
// moe_layer_pattern). Error, naming the flag: any other text, or a pattern
// of more than kMaxGptLayers entries.
Status parse_moe_layer_freq(std::string_view text, GptModel& model);

// --pipeline-model-parallel-layout's text as Megatron-core reads it
// (pipeline_parallel_layer_layout.py, parse_str_to_list): commas dropped,
// each "(...)*n" (no parenthesis inside) repeated n times, then each "x*n",
// then cut into chunks at "|"; each chunk's letters E, t, m and L. Error,
// naming the flag: any other character, a "*" without a count, a layout of
// more than kMaxGptLayers x 4 letters. check_megatron_layout checks the
// chunks against the model.
Result<std::vector<std::string>> parse_pipeline_layout(std::string_view text);
// The layout's chunks against the model (check_megatron_layout's part; the
// error names the flag), as Megatron-core's validate_layer_layout: a multiple
// of p chunks, E first and L last once each, L t blocks, D m depths after
// every block, all in one chunk that is the last of its rank; and baton's: no
// empty chunk, none of the other split flags, 1F1B or interleaved 1F1B.
Status check_pipeline_layout(const GptModel& model, const MegatronLayout& layout);

// Multi-latent attention's flags (check_megatron_layout's part; the error
// names the flag): each size at least 1 (--q-lora-rank 0: none) and at most
// kMaxGptHidden, none of them without --multi-latent-attention, no grouped
// queries (each head has its own keys and values from the latent), no
// context parallelism (not modelled).
Status check_latent_attention(const GptModel& model, const MegatronLayout& layout);

// The mixture of experts' flags (check_megatron_layout's part, sim/
// megatron_moe_checks.cc; the error names the flag): whole experts on each
// expert-parallel rank, the expert grid over a pipeline rank's GPUs, the
// router's top-k and its groups, the capacity factor and --moe-layer-freq as
// Megatron takes them, none of them without --num-experts.
Status check_experts(const GptModel& model, const MegatronLayout& layout);

// Model FLOPs of one iteration (above).
double megatron_model_flops(const GptModel& model, const MegatronLayout& layout);

// Checks a layout against its model and the devices there are; the error names
// the Megatron flag at fault (--tensor-model-parallel-size, ...) and says what
// would be valid: positive sizes, heads divisible by t, layers divisible among
// the pipeline stages (and their chunks), a micro-batch size that divides the
// global batch per data-parallel rank, at most `devices` GPUs, sequence
// parallelism only with t > 1, zero-bubble schedules only with p >= 2 and
// without interleaving, a V-shaped schedule only with p >= 2, alone among the
// schedule flags, an even split and L (plus the counted layers) divisible by
// 2p, uneven splits that leave the other stages a whole and
// equal number of blocks (the account flags: L plus the counted layers
// divisible by p, and by p x layers per virtual stage when interleaved).
Status check_megatron_layout(const GptModel& model, const MegatronLayout& layout, int devices);
// The rule of Megatron's that a layout check, the layout search's overlaps
// (planner/megatron_search.h) and the command line's pins share:
// --overlap-param-gather goes with --overlap-grad-reduce.
inline constexpr const char* kOverlapParamGatherNeedsGradReduce =
    "--overlap-param-gather needs --overlap-grad-reduce, as Megatron does";
// Likewise: --delay-wgrad-compute goes with --overlap-moe-expert-parallel-comm.
inline constexpr const char* kDelayWgradNeedsEpOverlap =
    "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm, as Megatron does";
// Likewise: DeepEP's flex dispatcher does not pad the experts' inputs.
inline constexpr const char* kFlexRefusesPadding =
    "--moe-token-dispatcher-type flex does not go with --moe-pad-expert-input-to-capacity, as in Megatron (DeepEP)";

}  // namespace baton
