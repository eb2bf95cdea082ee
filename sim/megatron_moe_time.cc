// The mixture of experts' work around the experts (sim/megatron_block.h).
#include "sim/megatron_block.h"

namespace baton::megatron_detail {

namespace {

// The MoE layer's kernels (sim/megatron_block.h says which).
constexpr int kMoeForwardKernels = 10;
constexpr int kMoeBackwardKernels = 12;
constexpr int kMoeAllToAllKernels = 2;
// Experts run one after another (no --moe-grouped-gemm): each local expert
// beyond the first dispatches its up GEMM, activation and down GEMM, and in
// the backward their gradients (two GEMMs each for up and down, the
// activation's).
constexpr int kExpertForwardKernels = 3;
constexpr int kExpertBackwardKernels = 5;

// The shared expert's share of moe_time (sim/megatron_block.h).
void add_shared_expert(MoeTime& time, const GpuModel& gpu, const BlockShape& x, const CollectiveTime& tp_allreduce) {
  if (x.shared <= 0.0) return;
  const double T = x.tokens, h = x.h, t = x.t;
  const double width = x.shared / t, up = (x.gated ? 2.0 : 1.0) * width;
  const Seconds activation = gpu.memory_bound((x.gated ? 3.0 : 2.0) * T * width * kHalf);
  const Seconds up_w = linear_gemm(gpu, x, up, h, T);
  const Seconds weight = up_w + linear_gemm(gpu, x, h, width, T);
  time.forward_compute += linear_gemm(gpu, x, T, up, h) + linear_gemm(gpu, x, T, h, width) + activation;
  time.weight_gradient += weight;
  time.backward_compute += linear_gemm(gpu, x, T, width, h) + linear_gemm(gpu, x, T, h, up) + activation * 2.0 + weight;
  if (t > 1) {
    const Seconds allreduce = tp_exchange(x, tp_allreduce, T * h);
    time.forward_comm += allreduce;
    time.backward_comm += max(Seconds(0.0), allreduce - up_w);
  }
  time.forward_kernels += kExpertForwardKernels;
  time.backward_kernels += kExpertBackwardKernels;
}

}  // namespace

MoeTime moe_time(const GpuModel& gpu, const BlockShape& x, const CollectiveTime& tp_allreduce,
                 const CollectiveTime& expert_comm, const CollectiveTime& expert_tp) {
  MoeTime time;
  if (!x.moe) return time;
  const double local = x.tokens / x.t;  // the sequence-parallel shard (sequence parallelism is required with t > 1)
  const double copies = local * x.topk * x.h * kHalf;
  const Seconds router = gpu.gemm(local, x.experts, x.h);
  const Seconds routing = gpu.memory_bound(2.0 * local * x.experts * kHalf) * 2.0;  // softmax, top-k
  const Seconds permutation = gpu.memory_bound(2.0 * copies) * 2.0;                 // permute, unpermute
  time.weight_gradient = gpu.gemm(x.h, x.experts, local);
  time.forward_compute = router + routing + permutation;
  time.backward_compute = gpu.gemm(local, x.h, x.experts) + time.weight_gradient + routing + permutation;
  if (x.mlp_t > 1) time.forward_comm = time.backward_comm = expert_tp(x.mlp_m * x.mlp_gemms * x.h * kHalf);
  if (x.ep > 1 && expert_comm) time.all_to_all = expert_comm(copies) * 2.0;
  const int sequential = x.grouped ? 0 : static_cast<int>(x.mlp_gemms) - 1;
  const int all_to_all = x.ep > 1 ? kMoeAllToAllKernels : 0;
  time.forward_kernels = kMoeForwardKernels + all_to_all + kExpertForwardKernels * sequential;
  time.backward_kernels = kMoeBackwardKernels + all_to_all + kExpertBackwardKernels * sequential;
  add_shared_expert(time, gpu, x, tp_allreduce);
  return time;
}

}  // namespace baton::megatron_detail
