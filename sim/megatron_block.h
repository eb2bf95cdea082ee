// What a transformer block's time is made of, shared by the block model
// (sim/megatron_profile.cc) and the mixture of experts' part of it
// (sim/megatron_moe_time.cc), FlashAttention's and context parallelism's
// time (sim/megatron_attention_time.cc): the block's shape on one rank, the MLP's GEMMs,
// and the MoE layer's work around the experts; and the layers at the
// pipeline's ends with multi-token prediction's depths
// (sim/megatron_ends.cc). Internal to sim/; thread safety: pure functions.
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
  double c;                  // context-parallel ranks
  ContextComm comm;          // how they move the keys and values
  double q;                  // the queries' (and the attention output's) width, a d (h by default)
  double kv;                 // keys' (and values') width, G d (h G / a by default)
  double f;                  // the MLP's width
  double up;                 // the up projection's width: f, 2f gated
  bool gated;                // SwiGLU
  bool activation_fusion;    // false: --no-bias-swiglu-fusion (sim/megatron_activation.h)
  bool linear_bias;          // the linear layers' biases (no --disable-bias-linear)
  bool hidden_dropout;       // --hidden-dropout above 0
  bool bias_dropout_fusion;  // false: --no-bias-dropout-fusion (sim/megatron_activation.h)
  bool flash;                // FlashAttention
  bool softmax_fusion;       // false: --no-masked-softmax-fusion
  bool loss_fusion;          // --cross-entropy-loss-fusion
  bool te_loss;              // with it, Transformer Engine's implementation (GptModel::te_cross_entropy)
  bool half_loss;            // --fp16-lm-cross-entropy
  bool rope;                 // rotary positions
  bool rope_fusion;          // false: --no-rope-fusion (sim/megatron_rope.h)
  double block_parameters;   // gpt_block_parameters
  // The MLP's GEMMs: `mlp_gemms` of `mlp_m` tokens each, its widths split
  // over `mlp_t` (dense: one of the T tokens, over t; experts: the E / ep
  // local experts, over etp, each on the T k ep etp / (t E) tokens that the
  // all-to-all and the expert-tensor-parallel all-gather bring it, T k ep / E
  // with etp = t; as one grouped kernel or one after another).
  bool moe;
  double mlp_m, mlp_gemms, mlp_t;
  bool grouped;
  double experts, topk, ep;  // topk: GptModel::expert_copies (k, dropless)
  bool fp32_router;          // GptModel::fp32_router (--moe-router-dtype fp32)
  MoeDispatcher dispatcher;  // MegatronLayout::moe_dispatcher
  bool shared_overlap;       // MegatronLayout::moe_shared_expert_overlap, with a shared expert
  double expert_parameters;  // gpt_block_expert_parameters
  double shared;             // the shared expert's width S (0: none)
  // The attention core's head widths, the query's and key's and the value's:
  // d each (--kv-channels, h / a by default), multi-latent attention's dn + dr and dv.
  double head_qk, head_v;
  // Multi-latent attention (GptModel): the latents' widths (q_lora 0: the
  // queries straight from h) and the rotary part dr; qk_norm: --qk-layernorm.
  bool mla, qk_norm;
  double q_lora, kv_lora, pos;
  double unsplit;  // gpt_block_unsplit_parameters: the down projections' weights
  // FP8 (sim/megatron_fp8.h): the linears' operands, 1 byte with FP8 and 2
  // without; fp8_current: tensorwise scaling (each tensor's maximum taken
  // before it is quantized).
  int linear_bytes;
  bool fp8_current;
  bool fp8_param_gather;  // --fp8-param-gather: the weights are FP8 parameters
  bool tp_overlap;        // --tp-comm-overlap with t > 1 (MegatronLayout::tp_comm_overlap)
};

BlockShape shape_of(const GptModel& model, const MegatronLayout& layout);

// A linear layer's GEMM [m x k] x [k x n] (`count` of them): at the FP8 rate
// with FP8 (BlockShape::linear_bytes).
Seconds linear_gemm(const GpuModel& gpu, const BlockShape& x, double m, double n, double k, double count = 1.0);

// With FP8, what quantizing a block's activation operands costs per pass
// (sim/megatron_fp8.h): each linear's forward input, and each linear's output
// gradient before its input-gradient GEMM, one kernel each (two with
// tensorwise scaling), 4 bytes a value (6 tensorwise). The values, per rank:
// the projection's input T q / t and the second MLP GEMM's T f / t; the QKV's
// and the first MLP GEMM's inputs only with tensorwise scaling, on the
// rank's own tokens (T / t with sequence parallelism: quantized before they
// are gathered): with delayed scaling Transformer Engine's fused norm and
// linear (Megatron-core's TELayerNormColumnParallelLinear) writes the norm's
// output in FP8, with no kernel of its own; the gradients of
// the QKV's T (q + 2 kv) / t outputs, the projection's and the second MLP
// GEMM's on the own tokens, the first MLP GEMM's T up / t. Multi-latent
// attention's down projections' inputs (and output gradients) on the own
// tokens, its up projections' on the gathered latents (their inputs, like
// the QKV's, written in FP8 by the latents' norms with --qk-layernorm and
// delayed scaling); the experts' on the
// tokens they receive (m per GEMM, one cast per expert run one after
// another), the shared expert's as a dense MLP's. Nothing without FP8.
struct Fp8Casts {
  Seconds forward, backward;
  int forward_kernels = 0, backward_kernels = 0;
};
Fp8Casts fp8_casts(const GpuModel& gpu, const BlockShape& x);
// Quantizing `values` activation values (one tensor) to FP8.
Seconds fp8_quantize(const GpuModel& gpu, const BlockShape& x, double values);
// Per iteration, `weights` of the block quantized to FP8 once (Transformer
// Engine's weight cache, filled at the first microbatch): read in bf16,
// written with their transpose, 4 bytes a weight; with --fp8-param-gather
// the weights are FP8 already (the optimizer writes them) and only their
// transposes are made, 2 bytes a weight. Nothing without FP8.
Seconds fp8_weight_cast(const GpuModel& gpu, const BlockShape& x, double weights);
// The kernels one quantization takes: 1 (delayed scaling), 2 (tensorwise), 0
// without FP8.
int fp8_quantize_kernels(const BlockShape& x);

// A tensor-parallel all-reduce of `values` activation values as `tp_allreduce`
// times it, or with sequence parallelism its all-gather and reduce-scatter
// (each half of it): with FP8 the all-gather moves FP8 values (Transformer
// Engine quantizes before it gathers), the reduce-scatter bf16.
Seconds tp_exchange(const BlockShape& x, const CollectiveTime& tp_allreduce, double values);

// A tensor-parallel collective of `comm` pipelined with the GEMMs it feeds or
// drains, `gemm` (--tp-comm-overlap): both cut into t chunks, chunk i's
// transfer beside chunk i - 1's GEMM, so the pair takes max(comm, gemm) +
// min(comm, gemm) / t (the first transfer or the last GEMM alone) and what
// it adds to the GEMMs is exposed: max(0, comm - gemm) + min(comm, gemm) / t.
Seconds overlapped_exposure(const BlockShape& x, Seconds comm, Seconds gemm);

// FlashAttention's forward (Dao, 2023): the two products on tiles held on
// chip, the softmax inside the kernel and no s x s scores written; a causal
// mask skips the tiles above the diagonal, half of them. Taken as the two
// products at the GEMM model's rate for their shapes, over half the tiles.
// Its backward recomputes the scores and takes five products where the
// forward takes two: 2.5 times the forward.
// With context parallelism (p2p, all_gather) the rank's s / c queries meet
// every rank's keys: c steps of s / c x s / c, half of each step's tiles
// under the causal mask (the diagonal's, or half of another rank's chunks:
// Megatron's 2c chunks balance them), so c of the steps above on s / c
// tokens (all_gather's two kernels take the same products). With a2a the rank
// runs the whole sequence on a / (t c) heads.
inline constexpr double kFlashBackwardRatio = 2.5;
// One causal step of FlashAttention's forward over s x s (a block's s: s / c
// with context parallelism), and the whole forward (c steps, or with a2a the
// whole sequence on a / (t c) heads).
Seconds flash_attention_step(const GpuModel& gpu, const BlockShape& x);
Seconds flash_attention_forward(const GpuModel& gpu, const BlockShape& x);

// Context parallelism's exchange of the keys and values, exposed, each way.
// `comm` (make_megatron_profile's `context_comm`) by type:
//   p2p: in each of the c - 1 steps but the last every rank sends the keys
//     and values it holds, 2 b s / c kv / t values, to the next rank while
//     the step computes; in the backward (2.5 times longer steps) every one of
//     the c steps sends: the first the keys and values, the last their
//     gradients, the others both, twice the bytes (Transformer Engine's
//     AttnFuncWithCPAndKVP2P); what a send takes beyond its step is exposed.
//     `comm`: one step's send of `bytes` a GPU;
//   all_gather: the keys and values gathered from the c ranks before the
//     attention, and in the backward gathered again and their gradients
//     reduce-scattered, none of it overlapped. `comm`: the all-gather in which
//     each GPU gives `bytes` (the reduce-scatter takes as long);
//   a2a: the queries, keys and values (b s / c (q + 2 kv) / t values) to the
//     rank of their heads before the attention and its output (b s / c q / t)
//     back after it; the backward moves their gradients the same way. `comm`:
//     the all-to-all in which each GPU holds `bytes`.
struct ContextExchange {
  Seconds forward, backward;
};
ContextExchange context_exchange(const GpuModel& gpu, const BlockShape& x, const CollectiveTime& comm);
// The host's kernels context parallelism adds to a block's pass.
int context_kernels(const BlockShape& x, bool backward);

// One of the MLP's GEMMs, `m` being BlockShape::mlp_m or in its place: the dense
// MLP's, or every local expert's (one grouped kernel, or one per expert).
Seconds mlp_gemm(const GpuModel& gpu, const BlockShape& x, double m, double n, double k);

// The attention's linears on one rank, per pass: the forward's GEMMs, the
// backward's input-gradient and weight-gradient GEMMs, and `first_weight`,
// the weight gradients the backward's tensor-parallel collective runs beside
// (the QKV's; multi-latent attention's up projections'). Megatron's: QKV [T x
// h] x [h x (q + 2 kv) / t], the projection [T x q / t] x [q / t x h] (q = a d,
// h unless --kv-channels says otherwise).
// Multi-latent attention's (Megatron-core 0.14 on): the down projections,
// whole on every rank, on the rank's own tokens (the sequence-parallel
// shard, T / t; T without), [h x q_lora] and [h x (kv_lora + dr)]; the up
// projections on the gathered latents, [q_lora x a (dn + dr) / t] and
// [kv_lora x a (dn + dv) / t] (without q_lora the queries [h x a (dn + dr) /
// t] on the gathered input); the projection [T x a dv / t] x [a dv / t x h].
struct AttentionLinears {
  Seconds forward, input, weight, first_weight;
};
AttentionLinears attention_linears(const GpuModel& gpu, const BlockShape& x);
// The attention's tensor-parallel collectives per pass, as `tp_allreduce`
// times them: Megatron's all-gather of the input and reduce-scatter of the
// output (an all-reduce of T h values without sequence parallelism);
// multi-latent attention's gather the latents (T (q_lora + kv_lora + dr)
// values; T h in place of q_lora without it) where the others gather the
// input, and reduce-scatter the output: half an all-reduce of each. None
// with t = 1.
Seconds attention_collectives(const BlockShape& x, const CollectiveTime& tp_allreduce);

// Mixture of experts' work around the experts, per block and pass (Megatron-
// core's MoE layer), on the T / t tokens of a rank's sequence-parallel shard
// (T without tensor parallelism):
//   router: logits [T / t x h] x [h x E] (its backward: the input's and the
//     weight's gradient), the softmax and top-k over T / t x E values;
//   with the alltoall dispatcher (MegatronLayout::moe_dispatcher):
//   - permutation: each token copied to its k experts' order before the
//     dispatch and summed back after the combine (T / t k h values read and
//     written each), the same in the backward;
//   - the dispatch: an all-to-all among the ep ranks of the tokens' k copies
//     (T / t k h values a GPU), and the combine bringing the experts' outputs
//     back (the same), each way (`expert_comm`: the all-to-all in which each
//     GPU holds `bytes`); not overlapped;
//   - expert tensor parallelism: the etp GPUs that split each expert's weights
//     (as t split a dense MLP's; etp = t by default) all-gather the tokens
//     their experts received and reduce-scatter the outputs, k T etp / t h
//     values (k T h with etp = t, where the dense MLP's sequence-parallel
//     collectives move T h), not overlapped with a weight-gradient GEMM in
//     the backward; none with etp = 1;
//   with the allgather dispatcher (Megatron-core's MoEAllGatherTokenDispatcher),
//   over the G = etp ep consecutive GPUs of an expert group (its tp_ep group):
//   - the dispatch all-gathers the shard's tokens, their routing map (a byte
//     a token and expert) and probabilities (2 bytes each) from the G GPUs,
//     G T / t tokens, and the combine reduce-scatters the experts' outputs,
//     unpermuted into a tensor of the gathered size, back to each GPU's
//     shard: a ring all-reduce of the gathered tokens (its two halves) plus
//     half a one of the map's and half a one of the probabilities', each way
//     (the backward reduce-scatters the tokens' gradients and the
//     probabilities', and all-gathers the outputs'; taken as the same), none
//     with G = 1; `expert_comm` is then the all-reduce among the G GPUs of
//     `bytes`; not overlapped, and no collective of the etp GPUs besides;
//   - permutation: the rows routed to the rank's experts (T k etp / t tokens)
//     read from the gathered tokens and written, and scattered back into the
//     gathered size, whose (G - 1) T / t h values beyond the shard's own are
//     written too, the same in the backward (with G = 1, alltoall's terms).
// With --moe-router-dtype fp32 the logits, the softmax and the top-k move 4
// bytes a value where they move 2, and the backward casts the router's input
// and weight to fp32 (2 bytes read, 4 written a value), takes its two
// gradient GEMMs on fp32 operands (GpuModel::gemm at 4 bytes: TF32) and casts
// the gradients back (4 read, 2 written): four kernels more.
// The kernels the host dispatches for them (router GEMM, softmax, top-k, the
// auxiliary loss's three, the permutation's two and the unpermutation's two;
// in the backward two more for the router's gradients; the all-to-alls, or
// the allgather dispatcher's three all-gathers and one reduce-scatter forward
// and three collectives backward) are counted from Megatron-core's MoE layer,
// not measured.
// A shared expert of width S runs as a dense MLP beside them on all T
// tokens: its two GEMMs (S / t wide; the up projection 2 S / t with
// SwiGLU), its activation, and the dense MLP's tensor-parallel collectives,
// the backward's overlapping its up projection's weight-gradient GEMM; three
// more kernels forward, five backward. With --moe-shared-expert-overlap
// (alltoall only) it runs on a stream of its own beside the all-to-alls: in
// the forward its all-gather (half its collectives), first GEMM and
// activation beside the dispatch, its second GEMM and reduce-scatter beside
// the combine; in the backward the second GEMM's input and weight gradients
// beside the combine's all-to-all, the activation's and the first GEMM's
// beside the dispatch's. Each all-to-all is then exposed only where it
// outlasts the work beside it: min(all-to-all, work) is taken off it.
struct MoeTime {
  Seconds forward_compute, backward_compute, weight_gradient;
  // The experts' all-gather and reduce-scatter (and the shared expert's
  // collectives), forward and exposed backward.
  Seconds forward_comm, backward_comm;
  // The dispatch and the combine (the dispatcher's collectives), exposed: in
  // the forward pass, and in the backward (the same but with the shared
  // expert's overlap).
  Seconds all_to_all, all_to_all_backward;
  int forward_kernels = 0, backward_kernels = 0;
};
MoeTime moe_time(const GpuModel& gpu, const BlockShape& x, const CollectiveTime& tp_allreduce,
                 const CollectiveTime& expert_comm, const CollectiveTime& expert_tp);

// The embedding's lookup on one rank (the word embedding split over t, the
// learned position table whole), and its weights there.
MegatronLayerTime embedding_time(const GpuModel& gpu, const BlockShape& x, const GptModel& model, int64_t vocab,
                                 const CollectiveTime& tp_allreduce);
// The final norm, the output layer [T x h] x [h x V / t] and its cross
// entropy (its kernels' bytes per logit in sim/megatron_ends.cc); `own_copy`: the rank holds output weights of its
// own (a copy of the word embedding with p > 1, or untied ones); `norm`: the
// final norm's parameters.
MegatronLayerTime head_time(const GpuModel& gpu, const BlockShape& x, int64_t vocab, bool own_copy, double norm,
                            const CollectiveTime& tp_allreduce);
// A multi-token prediction depth's work beside its block (the lookup, enorm
// and hnorm, eh_proj and its collectives; sim/megatron_ends.cc has the
// terms); `recomputed`: eh_proj runs again with the block (full
// recomputation); `norm`: one norm's parameters.
MegatronLayerTime mtp_time(const GpuModel& gpu, const BlockShape& x, const GptModel& model, int64_t vocab, double norm,
                           bool recomputed, const CollectiveTime& tp_allreduce);
// `more`'s times and parameters added into `into`.
void add_time(MegatronLayerTime& into, const MegatronLayerTime& more);

}  // namespace baton::megatron_detail
