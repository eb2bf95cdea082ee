// The profile of a Megatron GPT for one tensor-parallel rank: per-layer times
// from the GPU model (sim/gpu_model.h), with the layer's tensor-parallel
// collectives, recomputation and optimizer step, as a baton Profile whose
// layers are [embedding, block.0 .. block.L-1, head].
//
// Per block and microbatch of b sequences (T = b s tokens), on one of t ranks:
//   forward GEMMs: QKV [T x h] x [h x 3h/t], scores b a / t x [s x h/a] x
//     [h/a x s], weights x V, output projection [T x h/t] x [h/t x h], MLP
//     [T x h] x [h x 4h/t] and [T x 4h/t] x [4h/t x h];
//   memory-bound kernels: two LayerNorms (2 T h values each), the fused
//     scale-mask-softmax and dropout over b a s^2 / t scores (3 passes), two
//     bias-dropout-adds (3 T h) and GeLU (2 T 4h / t), at 2 bytes per value;
//     with sequence parallelism the LayerNorms and dropouts run on T / t tokens;
//     where Megatron's fused softmax does not take the scores
//     (fused_softmax_available: b a / t not a multiple of 4, for one), the
//     softmax runs as PyTorch's five kernels in fp32 (Megatron's default
//     query-key layer scaling makes it fp32): cast, scale, masked fill,
//     softmax, cast back, moving 37 bytes per score where the fused kernel
//     moves 4, and five kernels again in the backward (36 bytes against 6);
//   tensor-parallel collectives: two all-reduces of T h x 2 bytes in the
//     forward pass (with sequence parallelism an all-gather and a
//     reduce-scatter in place of each, the same time on a ring), two in the
//     backward, where each overlaps the weight-gradient GEMM of its
//     column-parallel layer (QKV, MLP up) as Megatron's asynchronous
//     all-reduce does, so only what outlasts that GEMM is charged;
//   backward: every GEMM twice (input and weight gradient), every
//     memory-bound kernel twice; W (the weight-gradient half) is the
//     weight-gradient GEMMs, I the rest;
//   recomputation: full runs the block's forward (with its collectives) again
//     before its backward; selective runs the attention core (scores,
//     softmax, dropout, weights x V) again;
//   the host floor: the host dispatches a forward pass's 16 kernels (20
//     with the unfused softmax) and a backward's 34 (38; plus the forward's
//     again with full recomputation) at host_per_kernel each, while the GPU
//     runs what it was given: a pass takes the longer of the host's dispatch
//     and the GPU's work with its collectives (a collective runs while the
//     host dispatches the kernels after it, so it hides behind the host as
//     compute does; host_wait is what the host adds over the GPU). The
//     host's own work per stage pass (GpuModel::host_per_pass: the training
//     loop's per microbatch and stage) is shared among the pass's blocks (a
//     chunk's with interleaving, L / p otherwise) and added to each block's
//     dispatch, forward and backward: it costs time only where the host is
//     the longer.
// Beyond GPT-3's architecture (sim/megatron.h): the QKV GEMMs are (h + 2 h G
//   / a) / t wide (G query groups; each head still takes its own attention
//   products), the MLP's f / t (2 f / t for SwiGLU's up projection, whose
//   SiLU-and-gate moves 3 T f / t values where GeLU moves 2); rotary positions
//   read and write the queries and keys once more each pass (two kernels);
//   FlashAttention runs the attention core as the two products at the GEMM
//   model's rate over the causal half of their tiles, with no scores pass
//   (one kernel where Megatron runs four, two backward where it runs six),
//   and its backward as 2.5 times its forward (five products for two). Not
//   held against a measured run: the GEMM model's constants come from GPT
//   runs on A100s (docs/TRANSFORMERS.md). Biases and RMSNorm change the
//   parameters, not the time.
// Context parallelism c (sim/megatron.h): every term above on s / c tokens of
//   each sequence (T = b s / c), but the attention core, which takes c ring
//   steps of FlashAttention over s / c x s / c (half of each step's tiles
//   under the causal mask), while the keys and values (forward: 2 T kv / t
//   values per step, c - 1 sends) and with them their gradients (backward:
//   c sends, the first of the keys and values, the last of their gradients,
//   the others of both) travel round the ring; what a send takes beyond its
//   step's attention is exposed (context_forward,
//   context_backward), and counted again where the attention is recomputed.
//   Each later step adds three kernels to the host's dispatch, each way.
//   --cp-comm-type all_gather gathers the keys and values before the
//   attention (and again in the backward, with a reduce-scatter of their
//   gradients), exposed; a2a moves the queries, keys and values to the ranks
//   of their heads and the output back, exposed, and runs the attention over
//   the whole sequence on a / (t c) heads.
// Mixture of experts (sim/megatron.h): the MLP's GEMMs are each of the E / ep
//   local experts' over T k ep / E tokens (routing balanced), F / t wide, as
//   one grouped kernel (--moe-grouped-gemm) or one after another; the
//   activation over k T tokens; the router, the routing and the permutation
//   on the T / t tokens of the sequence-parallel shard; the experts'
//   tensor-parallel all-gather and reduce-scatter of k T h values (not
//   overlapped); with ep > 1 the dispatch's and the combine's all-to-alls of
//   T / t k h values a GPU each way (expert_forward, expert_backward), not
//   overlapped but in DualPipeV's pairs (Layer::forward_overlap,
//   backward_overlap); a shared expert of width S as a dense MLP of that
//   width beside them; megatron_profile.cc's moe_time has the terms.
// Embedding: gather 2 T h x 2 bytes, its all-reduce across t (the vocabulary
// is split), scatter-add in the backward. Head: final LayerNorm, logits
// [T x h] x [h x V/t], vocabulary-parallel cross entropy as Megatron's
// kernels run it (38 bytes per logit forward, 14 backward; fused or in half
// precision with their flags: sim/megatron_ends.cc), the input gradient's
// all-reduce.
// With p > 1 the head holds its own copy of the word embedding (V / t x h
// parameters: Megatron's last stage keeps one for the output layer), whose
// gradient the replicas all-reduce and the optimizer steps like any other;
// with p = 1 the output layer shares the embedding's. Before the optimizer
// step, the first and the last stage all-reduce the copies' gradients (V / t
// x h x the bytes of one reduced gradient, between the two GPUs of each pair:
// Megatron's embedding group); `embedding_allreduce` gives its time, which
// the embedding's and the head's step include.
// Optimizer step per layer: 38 bytes per parameter of the rank (Adam with fp32
// master weights: read gradient, master weights, two moments; write those
// three and the half-precision weights; unscale and zero the gradients),
// divided by d with the distributed optimizer (the experts' by d c / ep).
// Sizes for the simulator, whose devices are whole tensor-parallel groups
// (sim/megatron_sim.h): a layer's output_bytes = T h x 2 (the group sends one
// copy: Megatron scatters it across the t ranks, or it is already split with
// sequence parallelism) and param_bytes = t x the rank's parameters x the
// bytes of one reduced gradient (2 in fp16, 4 in bf16, which Megatron reduces
// in fp32), or with the distributed optimizer the all-reduce that takes as
// long as its reduce-scatter and all-gather (MegatronLayerTime::reduced_bytes
// and gathered_bytes).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/gpu_model.h"
#include "sim/megatron.h"
#include "sim/profile.h"

namespace baton {

// Time of a tensor-parallel all-reduce of `bytes` among the t ranks.
using CollectiveTime = std::function<Seconds(double bytes)>;

// One layer's time split by cause, per microbatch (sums over its kernels).
struct MegatronLayerTime {
  Seconds forward_compute;   // GEMMs and memory-bound kernels
  Seconds forward_comm;      // tensor-parallel collectives
  Seconds backward_compute;  // both halves, without recomputation
  Seconds backward_comm;     // exposed part
  Seconds recompute;         // forward work redone in the backward (with its collectives)
  Seconds weight_gradient;   // the W half of backward_compute
  Seconds host_wait;         // what the host floor adds over the GPU's work
  // Context parallelism: the ring's exchange of keys and values (their
  // gradients in the backward) that outlasts the attention steps, exposed.
  Seconds context_forward;
  Seconds context_backward;
  // Expert parallelism: the dispatch's and the combine's all-to-alls, each
  // way (not overlapped, but in DualPipeV's pairs).
  Seconds expert_forward;
  Seconds expert_backward;
  Seconds expert_recompute;  // the recomputed forward's (full recomputation; in `recompute`)
  // The experts' work between the all-to-alls (Layer::experts): a block
  // with experts, not recomputed whole (whose backward runs its forward's
  // all-to-alls again, which a pair's pieces do not follow).
  std::optional<Layer::ExpertWork> expert_work;
  // Per iteration, on the embedding and the head with p > 1: the tied word
  // embedding's gradient all-reduce between the first and the last pipeline
  // stage, which runs before the optimizer step (charged in Layer::optimizer).
  Seconds embedding_allreduce;
  double parameters = 0.0;         // of this rank
  double expert_parameters = 0.0;  // of them, the experts' (reduced over d c / ep ranks)
  double fp8_parameters = 0.0;     // of them, those cached in FP8 too (sim/megatron_fp8.h)
  // Per iteration, with FP8: the weights' quantization (charged in Layer::optimizer).
  Seconds fp8_weight_cast;
  // Per iteration, what the replicas move for this layer, counted for the t
  // GPUs of a tensor-parallel group together: the gradients reduced (all-
  // reduced, or reduce-scattered with the distributed optimizer: 2 bytes each
  // in fp16, 4 in bf16, the experts' weighted by expert_gradient_weight),
  // and with the distributed optimizer the updated weights all-gathered (2
  // bytes each, 1 for FP8 parameters with --fp8-param-gather). A ring's
  // reduce-scatter and all-gather of S bytes each take half an all-reduce of
  // S, so Layer::param_bytes, which the simulator all-reduces, is `reduced`
  // without the distributed optimizer and (reduced + gathered) / 2 with it.
  double reduced_bytes = 0.0;
  double gathered_bytes = 0.0;
};

struct MegatronProfile {
  Profile profile;                       // layers: embedding, blocks, head
  std::vector<MegatronLayerTime> times;  // index = profile layer
};

// Whether Megatron's fused scale-mask-softmax kernel takes the causal
// attention scores of `micro_batch` x `heads_per_rank` heads of `sequence`^2
// (FusedScaleMaskSoftmax.is_kernel_available): 16 < s <= 16384, s a multiple
// of 4, and b x heads a multiple of 4 and of the kernel's rows per block
// (blocks of 128 threads in warps of min(next_pow2(s), 32), each warp one row,
// or two up to s = 128). Otherwise the block's softmax runs unfused (above).
bool fused_softmax_available(int64_t micro_batch, int64_t heads_per_rank, int64_t sequence);

// `embedding_allreduce`: the time of the embedding group's all-reduce of
// `bytes` per GPU (two members); empty: none is charged. `context_comm`: with
// context parallelism, the time of its collective for `bytes` per GPU
// (context_comm_time in sim/megatron_sim.h says which, by --cp-comm-type);
// empty: none is charged. With experts: `expert_comm`, the all-to-all among
// the ep ranks in which each GPU holds `bytes` (expert_all_to_all_time in
// sim/megatron_sim.h; empty: none is charged), and `expert_gradient_weight`,
// what a byte of the experts' gradients costs in the reduction the
// simulator runs over the d c ranks (Layer::param_bytes), for the d c / ep
// ranks that reduce it (expert_gradient_weight in sim/megatron_sim.h), and
// `expert_tensor_comm`, the all-reduce among the etp GPUs of an expert's
// tensor-parallel group, whose halves gather the tokens the experts take and
// reduce-scatter their outputs (tensor_allreduce(topology, etp); empty:
// `tp_allreduce`, the same group when etp = t).
MegatronProfile make_megatron_profile(const GptModel& model, const MegatronLayout& layout, const GpuModel& gpu,
                                      const CollectiveTime& tp_allreduce,
                                      const CollectiveTime& embedding_allreduce = {},
                                      const CollectiveTime& context_comm = {}, const CollectiveTime& expert_comm = {},
                                      double expert_gradient_weight = 1.0,
                                      const CollectiveTime& expert_tensor_comm = {});

}  // namespace baton
