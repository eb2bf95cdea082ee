// The mixture of experts' work around the experts (sim/megatron_block.h).
#include "sim/megatron_activation.h"
#include "sim/megatron_block.h"

namespace baton::megatron_detail {

namespace {

// The MoE layer's kernels (sim/megatron_block.h says which).
constexpr int kMoeForwardKernels = 10;
constexpr int kMoeBackwardKernels = 12;
constexpr int kFp32RouterCasts = 4;  // --moe-router-dtype fp32: input and weight to fp32, their gradients back
constexpr int kMoeAllToAllKernels = 2;
// The allgather dispatcher's collectives: the tokens', the routing map's and
// the probabilities' all-gathers and the outputs' reduce-scatter forward; the
// outputs' all-gather and the tokens' and probabilities' reduce-scatters
// backward.
constexpr int kMoeAllGatherCollectives = 4;
constexpr int kMoeAllGatherBackwardCollectives = 3;
// Experts run one after another (no --moe-grouped-gemm): each local expert
// beyond the first dispatches its up GEMM, activation and down GEMM, and in
// the backward their gradients (two GEMMs each for up and down, the
// activation's).
constexpr int kExpertForwardKernels = 3;
constexpr int kExpertBackwardKernels = 5;

// The shared expert's work beside each all-to-all (sim/megatron_block.h):
// in the forward beside the dispatch and the combine, in the backward beside
// the dispatch's and the combine's.
struct SharedBeside {
  Seconds dispatch, combine, dispatch_backward, combine_backward;
};

// The shared expert's share of moe_time (sim/megatron_block.h).
SharedBeside add_shared_expert(MoeTime& time, const GpuModel& gpu, const BlockShape& x,
                               const CollectiveTime& tp_allreduce) {
  if (x.shared <= 0.0) return {};
  const double T = x.tokens, h = x.h, t = x.t;
  const double width = x.shared / t, up = (x.gated ? 2.0 : 1.0) * width;
  const Seconds fused = gpu.memory_bound((x.gated ? 3.0 : 2.0) * T * width * kHalf);
  const UnfusedActivation glu = unfused_activation(gpu, x, T * width, fused);
  const Seconds activation = fused + glu.forward_extra, activation_backward = fused * 2.0 + glu.backward_extra;
  const Seconds up_forward = linear_gemm(gpu, x, T, up, h), down_forward = linear_gemm(gpu, x, T, h, width);
  const Seconds up_w = linear_gemm(gpu, x, up, h, T), down_w = linear_gemm(gpu, x, h, width, T);
  const Seconds up_input = linear_gemm(gpu, x, T, h, up), down_input = linear_gemm(gpu, x, T, width, h);
  time.forward_compute += up_forward + down_forward + activation;
  time.weight_gradient += up_w + down_w;
  time.backward_compute += down_input + up_input + activation_backward + up_w + down_w;
  Seconds allreduce;
  if (t > 1) {
    allreduce = tp_exchange(x, tp_allreduce, T * h);
    time.forward_comm += allreduce;
    time.backward_comm += max(Seconds(0.0), allreduce - up_w);
  }
  time.forward_kernels += kExpertForwardKernels + glu.forward_kernels_extra;
  time.backward_kernels += kExpertBackwardKernels + glu.backward_kernels_extra;
  // The all-gather and the reduce-scatter, half the exchange each.
  return {allreduce * 0.5 + up_forward + activation, down_forward + allreduce * 0.5,
          activation_backward + up_input + up_w, down_input + down_w};
}

}  // namespace

MoeTime moe_time(const GpuModel& gpu, const BlockShape& x, const CollectiveTime& tp_allreduce,
                 const CollectiveTime& expert_comm, const CollectiveTime& expert_tp) {
  MoeTime time;
  if (!x.moe) return time;
  const double local = x.tokens / x.t;  // the sequence-parallel shard (sequence parallelism is required with t > 1)
  const double copies = local * x.topk * x.h * kHalf;
  const Seconds router = gpu.gemm(local, x.experts, x.h);  // bf16 operands either way
  const double logit_bytes = x.fp32_router ? 4.0 : kHalf;
  const Seconds routing = gpu.memory_bound(2.0 * local * x.experts * logit_bytes) * 2.0;  // softmax, top-k
  const int gradient_operands = x.fp32_router ? 4 : 2;  // bytes a value of the backward GEMMs' operands
  time.weight_gradient = gpu.gemm(x.h, x.experts, local, 1.0, gradient_operands);
  // fp32: the input and the weight cast to fp32, their gradients cast back, 6 bytes a value each.
  const Seconds casts = x.fp32_router
                            ? (gpu.memory_bound(6.0 * local * x.h) + gpu.memory_bound(6.0 * x.h * x.experts)) * 2.0
                            : Seconds(0.0);
  Seconds permutation;  // permute and unpermute
  int collectives = 0;  // the dispatcher's kernels in the forward
  if (sends_to_expert_ranks(x.dispatcher)) permutation = gpu.memory_bound(2.0 * copies) * 2.0;
  if (x.dispatcher == MoeDispatcher::kAllToAll) {
    if (x.mlp_t > 1) time.forward_comm = time.backward_comm = expert_tp(x.mlp_m * x.mlp_gemms * x.h * kHalf);
    if (x.ep > 1 && expert_comm) time.all_to_all = expert_comm(copies) * 2.0;
    collectives = x.ep > 1 ? kMoeAllToAllKernels : 0;
  } else if (x.dispatcher == MoeDispatcher::kFlex) {
    // DeepEP: one copy of each token to each GPU of its experts (an expert's
    // etp shards each), no expert-tensor collective besides; expert_comm
    // (flex_dispatch_time) takes one copy's bytes and counts the copies.
    if (expert_comm) {
      time.all_to_all = expert_comm(local * x.h * kHalf) * 2.0;
      collectives = kMoeAllToAllKernels;
    }
  } else {
    const double group = x.mlp_t * x.ep;  // the expert group's G = etp ep GPUs
    const double gathered = group * local;
    const double received = x.tokens * x.topk * x.mlp_t / x.t;  // rows routed to the rank's experts
    // The unpermuted outputs fill the gathered size: beyond the shard's own
    // (which the alltoall dispatcher's unpermutation writes too), the other
    // G - 1 shards' rows.
    permutation = gpu.memory_bound(2.0 * received * x.h * kHalf) * 2.0;
    if (group > 1) permutation += gpu.memory_bound((gathered - local) * x.h * kHalf);
    if (group > 1 && expert_comm) {
      time.all_to_all = expert_comm(gathered * x.h * kHalf) + expert_comm(gathered * x.experts) * 0.5 +
                        expert_comm(gathered * x.experts * kHalf) * 0.5;
      collectives = kMoeAllGatherCollectives;
    }
  }
  time.forward_compute = router + routing + permutation;
  time.backward_compute =
      gpu.gemm(local, x.h, x.experts, 1.0, gradient_operands) + time.weight_gradient + routing + permutation + casts;
  const int sequential = x.grouped ? 0 : static_cast<int>(x.mlp_gemms) - 1;
  const int backward_collectives =
      x.dispatcher == MoeDispatcher::kAllGather && collectives > 0 ? kMoeAllGatherBackwardCollectives : collectives;
  time.forward_kernels = kMoeForwardKernels + collectives + kExpertForwardKernels * sequential;
  time.backward_kernels = kMoeBackwardKernels + backward_collectives + kExpertBackwardKernels * sequential +
                          (x.fp32_router ? kFp32RouterCasts : 0);
  const SharedBeside beside = add_shared_expert(time, gpu, x, tp_allreduce);
  time.all_to_all_backward = time.all_to_all;
  if (x.shared_overlap && time.all_to_all.value > 0.0) {
    const Seconds one = time.all_to_all * 0.5;  // the dispatch's, the combine's
    time.all_to_all -= min(one, beside.dispatch) + min(one, beside.combine);
    time.all_to_all_backward -= min(one, beside.dispatch_backward) + min(one, beside.combine_backward);
  }
  return time;
}

}  // namespace baton::megatron_detail
