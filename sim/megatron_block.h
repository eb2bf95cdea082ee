// What a transformer block's time is made of, shared by the block model
// (sim/megatron_profile.cc) and the mixture of experts' part of it
// (sim/megatron_moe_time.cc): the block's shape on one rank, the MLP's GEMMs,
// and the MoE layer's work around the experts. Internal to sim/; thread
// safety: pure functions.
#pragma once

#include "sim/gpu_model.h"
#include "sim/megatron.h"
#include "sim/megatron_profile.h"

namespace baton::megatron_detail {

inline constexpr double kHalf = 2.0;  // bytes per fp16/bf16 value

struct BlockShape {
  // s: the tokens of a sequence on this rank (s / c with context parallelism);
  // tokens: b s; local_tokens: split over t with sequence parallelism.
  double b, s, h, a, t, tokens, local_tokens;
  double c;                 // context-parallel ranks
  ContextComm comm;         // how they move the keys and values
  double kv;                // keys' (and values') width, h G / a
  double f;                 // the MLP's width
  double up;                // the up projection's width: f, 2f gated
  bool gated;               // SwiGLU
  bool flash;               // FlashAttention
  bool rope;                // rotary positions
  double block_parameters;  // gpt_block_parameters
  // The MLP's GEMMs: `mlp_gemms` of `mlp_m` tokens each, its widths split
  // over `mlp_t` (dense: one of the T tokens, over t; experts: the E / ep
  // local experts, over etp, each on the T k ep etp / (t E) tokens that the
  // all-to-all and the expert-tensor-parallel all-gather bring it, T k ep / E
  // with etp = t; as one grouped kernel or one after another).
  bool moe;
  double mlp_m, mlp_gemms, mlp_t;
  bool grouped;
  double experts, topk, ep;
  double expert_parameters;  // gpt_block_expert_parameters
  double shared;             // the shared expert's width S (0: none)
};

BlockShape shape_of(const GptModel& model, const MegatronLayout& layout);

// One of the MLP's GEMMs, `m` being BlockShape::mlp_m or in its place: the dense
// MLP's, or every local expert's (one grouped kernel, or one per expert).
Seconds mlp_gemm(const GpuModel& gpu, const BlockShape& x, double m, double n, double k);

// Mixture of experts' work around the experts, per block and pass (Megatron-
// core's MoE layer with the alltoall token dispatcher), on the T / t tokens
// of a rank's sequence-parallel shard (T without tensor parallelism):
//   router: logits [T / t x h] x [h x E] (its backward: the input's and the
//     weight's gradient), the softmax and top-k over T / t x E values;
//   permutation: each token copied to its k experts' order before the
//     dispatch and summed back after the combine (T / t k h values read and
//     written each), the same in the backward;
//   the dispatch: an all-to-all among the ep ranks of the tokens' k copies
//     (T / t k h values a GPU), and the combine bringing the experts' outputs
//     back (the same), each way (`expert_comm`: the all-to-all in which each
//     GPU holds `bytes`); not overlapped;
//   expert tensor parallelism: the etp GPUs that split each expert's weights
//     (as t split a dense MLP's; etp = t by default) all-gather the tokens
//     their experts received and reduce-scatter the outputs, k T etp / t h
//     values (k T h with etp = t, where the dense MLP's sequence-parallel
//     collectives move T h), not overlapped with a weight-gradient GEMM in
//     the backward; none with etp = 1.
// The kernels the host dispatches for them (router GEMM, softmax, top-k, the
// auxiliary loss's three, the permutation's two and the unpermutation's two;
// in the backward two more for the router's gradients; the all-to-alls) are
// counted from Megatron-core's MoE layer, not measured.
// A shared expert of width S runs as a dense MLP beside them on all T
// tokens: its two GEMMs (S / t wide; the up projection 2 S / t with
// SwiGLU), its activation, and the dense MLP's tensor-parallel collectives,
// the backward's overlapping its up projection's weight-gradient GEMM; three
// more kernels forward, five backward.
struct MoeTime {
  Seconds forward_compute, backward_compute, weight_gradient;
  // The experts' all-gather and reduce-scatter (and the shared expert's
  // collectives), forward and exposed backward.
  Seconds forward_comm, backward_comm;
  Seconds all_to_all;  // each way: the dispatch and the combine
  int forward_kernels = 0, backward_kernels = 0;
};
MoeTime moe_time(const GpuModel& gpu, const BlockShape& x, const CollectiveTime& tp_allreduce,
                 const CollectiveTime& expert_comm, const CollectiveTime& expert_tp);

}  // namespace baton::megatron_detail
