// The layers at the pipeline's two ends and multi-token prediction's depths
// (sim/megatron_block.h): the embedding's and the output layer's times and
// weights on one rank, a depth's work beside its block, and the sum of two
// layers' times. Internal to sim/; thread safety: pure functions.
#include "sim/megatron_block.h"

#include <array>

namespace baton::megatron_detail {

MegatronLayerTime embedding_time(const GpuModel& gpu, const BlockShape& x, const GptModel& model, int64_t vocab,
                                 const CollectiveTime& tp_allreduce) {
  MegatronLayerTime time;
  const double values = x.tokens * x.h;
  time.forward_compute = gpu.memory_bound(2.0 * values * kHalf) + gpu.memory_bound(3.0 * x.local_tokens * x.h * kHalf);
  time.forward_comm = x.t > 1 ? tp_allreduce(values * kHalf) : Seconds(0.0);
  time.weight_gradient = gpu.memory_bound(3.0 * values * kHalf);
  time.backward_compute = time.weight_gradient + gpu.memory_bound(3.0 * x.local_tokens * x.h * kHalf);
  const double positions = static_cast<double>(model.position_rows());  // the learned table's rows
  time.parameters = (static_cast<double>(vocab) / x.t + positions) * x.h;
  return time;
}

// The vocabulary-parallel cross entropy's memory-bound kernels, bytes per
// logit of the rank (T x V / t; reads + writes), as Megatron runs them.
// Unfused (tensor_parallel.vocab_parallel_cross_entropy): the cast of the
// half-precision logits to fp32 (2 + 4), their maximum (4), its subtraction
// in place (8), exp in place (8), the sum (4), the division by it in place
// (8); backward, the gradient in the softmax's place times the loss's
// gradient (8) and its cast back to half precision (4 + 2). In half
// precision (--fp16-lm-cross-entropy, unfused): no casts, every pass at 2
// bytes a value (2, 4, 4, 2, 4; backward 4). Fused
// (--cross-entropy-loss-fusion, fused_vocab_parallel_cross_entropy's
// compiled pieces, fp32 whatever the flag above): the cast with the maximum
// (6), subtraction, exp and sum (8), the division (8); backward one kernel
// reading the softmax, writing the gradient in its place and its
// half-precision copy (4 + 4 + 2). Transformer Engine's
// (--cross-entropy-fusion-impl te; transformer_engine/pytorch/triton/
// cross_entropy.py): the online softmax's one pass reading the half-
// precision logits for each token's maximum and sum (2), their all-gather
// over t and the loss per token (small); backward one kernel reading the
// logits and writing the gradient in their place (2 + 2). The target's gathers and the
// tensor-parallel all-reduces of one value per token are small beside these.
constexpr std::array<double, 6> kCrossEntropyForward{6.0, 4.0, 8.0, 8.0, 4.0, 8.0};
constexpr std::array<double, 2> kCrossEntropyBackward{8.0, 6.0};
constexpr std::array<double, 5> kHalfCrossEntropyForward{2.0, 4.0, 4.0, 2.0, 4.0};
constexpr std::array<double, 1> kHalfCrossEntropyBackward{4.0};
constexpr std::array<double, 3> kFusedCrossEntropyForward{6.0, 8.0, 8.0};
constexpr std::array<double, 1> kFusedCrossEntropyBackward{10.0};
constexpr std::array<double, 1> kTeCrossEntropyForward{2.0};
constexpr std::array<double, 1> kTeCrossEntropyBackward{4.0};

template <size_t N>
Seconds kernels_over(const GpuModel& gpu, const std::array<double, N>& bytes_per_logit, double logits) {
  Seconds time;
  for (const double bytes : bytes_per_logit) time += gpu.memory_bound(bytes * logits);
  return time;
}

Seconds cross_entropy_time(const GpuModel& gpu, const BlockShape& x, double logits, bool backward) {
  if (x.te_loss)
    return backward ? kernels_over(gpu, kTeCrossEntropyBackward, logits)
                    : kernels_over(gpu, kTeCrossEntropyForward, logits);
  if (x.loss_fusion)
    return backward ? kernels_over(gpu, kFusedCrossEntropyBackward, logits)
                    : kernels_over(gpu, kFusedCrossEntropyForward, logits);
  if (x.half_loss)
    return backward ? kernels_over(gpu, kHalfCrossEntropyBackward, logits)
                    : kernels_over(gpu, kHalfCrossEntropyForward, logits);
  return backward ? kernels_over(gpu, kCrossEntropyBackward, logits) : kernels_over(gpu, kCrossEntropyForward, logits);
}

MegatronLayerTime head_time(const GpuModel& gpu, const BlockShape& x, int64_t vocab, bool own_copy, double norm,
                            const CollectiveTime& tp_allreduce) {
  MegatronLayerTime time;
  const double v = static_cast<double>(vocab) / x.t;
  const double logits = x.tokens * v;
  time.forward_compute = gpu.memory_bound(2.0 * x.local_tokens * x.h * kHalf) + gpu.gemm(x.tokens, v, x.h) +
                         cross_entropy_time(gpu, x, logits, false);
  time.weight_gradient = gpu.gemm(v, x.h, x.tokens);
  time.backward_compute = time.weight_gradient + gpu.gemm(x.tokens, x.h, v) + cross_entropy_time(gpu, x, logits, true) +
                          gpu.memory_bound(2.0 * x.local_tokens * x.h * kHalf);
  time.backward_comm = x.t > 1 ? tp_allreduce(x.tokens * x.h * kHalf) : Seconds(0.0);
  time.parameters = norm + (own_copy ? v * x.h : 0.0);  // the final norm, the output weights
  return time;
}

// A multi-token prediction depth's work beside its block (GptModel::
// mtp_layers; Megatron-core's MultiTokenPredictionLayer), per microbatch:
//   the shifted tokens' embedding lookup (embedding_time's, without weights
//     of its own: the word embedding's);
//   enorm and hnorm, each read and written over the rank's T / t (sequence
//     parallel) or T tokens, and their concatenation (read and written), 4
//     such passes forward, 5 backward;
//   eh_proj [T x 2h] x [2h x h / t] (column-parallel, no bias): its input
//     all-gathered over t with sequence parallelism, its output gathered over
//     t (Megatron's gather_from_tensor_model_parallel_region) and scattered
//     back to the sequence shards; in the backward the input's and the
//     weight's gradient GEMMs, the input gradient reduce-scattered (all-
//     reduced without sequence parallelism); each a tp_allreduce half (all-
//     gather, reduce-scatter) or whole, exposed; with full recomputation
//     (uniform: Megatron-core checkpoints eh_proj and the block together) its
//     forward again;
//   its final norm's weights (the norm runs with its output layer and cross
//     entropy where the loss is: make_megatron_profile's head).
MegatronLayerTime mtp_time(const GpuModel& gpu, const BlockShape& x, const GptModel& model, int64_t vocab, double norm,
                           bool recomputed, const CollectiveTime& tp_allreduce) {
  MegatronLayerTime time = embedding_time(gpu, x, model, vocab, tp_allreduce);
  const double rows = x.local_tokens * x.h * kHalf;  // one norm's input, bytes
  const double h_t = x.h / x.t;
  Seconds proj_comm;
  if (x.t > 1)
    proj_comm = tp_allreduce(x.tokens * x.h * kHalf) * 0.5 +
                (x.local_tokens < x.tokens ? tp_allreduce(2.0 * x.tokens * x.h * kHalf) * 0.5 : Seconds(0.0));
  const Seconds proj = linear_gemm(gpu, x, x.tokens, h_t, 2.0 * x.h) + fp8_quantize(gpu, x, x.local_tokens * 2.0 * x.h);
  time.forward_compute += gpu.memory_bound(4.0 * 2.0 * rows) + proj;
  time.forward_comm += proj_comm;
  const Seconds proj_weight = linear_gemm(gpu, x, h_t, 2.0 * x.h, x.tokens);
  time.weight_gradient += proj_weight;
  time.backward_compute += gpu.memory_bound(5.0 * 2.0 * rows) + linear_gemm(gpu, x, x.tokens, 2.0 * x.h, h_t) +
                           fp8_quantize(gpu, x, x.tokens * h_t) + proj_weight;
  if (x.t > 1)
    time.backward_comm += tp_allreduce(2.0 * x.tokens * x.h * kHalf) * (x.local_tokens < x.tokens ? 0.5 : 1.0);
  if (recomputed) time.recompute += proj + proj_comm;
  time.parameters = 2.0 * x.h * h_t + 3.0 * norm;  // eh_proj and the three norms
  time.fp8_parameters = x.linear_bytes == 1 ? 2.0 * x.h * h_t : 0.0;
  time.fp8_weight_cast = fp8_weight_cast(gpu, x, time.fp8_parameters);
  return time;
}

void add_time(MegatronLayerTime& into, const MegatronLayerTime& more) {
  for (Seconds MegatronLayerTime::*field :
       {&MegatronLayerTime::forward_compute, &MegatronLayerTime::forward_comm, &MegatronLayerTime::backward_compute,
        &MegatronLayerTime::backward_comm, &MegatronLayerTime::recompute, &MegatronLayerTime::weight_gradient,
        &MegatronLayerTime::host_wait, &MegatronLayerTime::context_forward, &MegatronLayerTime::context_backward,
        &MegatronLayerTime::expert_forward, &MegatronLayerTime::expert_backward, &MegatronLayerTime::expert_recompute,
        &MegatronLayerTime::embedding_allreduce, &MegatronLayerTime::fp8_weight_cast})
    into.*field += more.*field;
  into.parameters += more.parameters;
  into.expert_parameters += more.expert_parameters;
  into.fp8_parameters += more.fp8_parameters;
}

}  // namespace baton::megatron_detail
