// FlashAttention's and context parallelism's time in a block (the
// declarations and their model: sim/megatron_block.h), for the block model
// of sim/megatron_profile.cc.
#include "sim/megatron_block.h"

namespace baton::megatron_detail {

namespace {

// Context parallelism's kernels beyond one attention kernel each way. p2p:
// each ring step after the first adds its attention kernel (forward or
// backward), the rescaling of the output (forward) or the accumulation of the
// keys' and values' gradients (backward), and the step's send and receive.
// all_gather: the second local chunk's attention kernel each way, the
// all-gather (forward), the all-gather and the reduce-scatter (backward).
// a2a: the all-to-alls of the queries, keys and values and of the output,
// each way.
constexpr int kContextStepKernels = 3;
constexpr int kAllGatherForwardKernels = 2;
constexpr int kAllGatherBackwardKernels = 3;
constexpr int kAllToAllKernels = 2;

}  // namespace

Seconds flash_attention_step(const GpuModel& gpu, const BlockShape& x) {
  const double count = x.b * x.a / x.t;
  return (gpu.gemm(x.s, x.s, x.head_qk, count) + gpu.gemm(x.s, x.head_v, x.s, count)) * 0.5;
}
Seconds flash_attention_forward(const GpuModel& gpu, const BlockShape& x) {
  if (x.c > 1 && x.comm == ContextComm::kAllToAll) {
    const double s = x.s * x.c, count = x.b * x.a / (x.t * x.c);
    return (gpu.gemm(s, s, x.head_qk, count) + gpu.gemm(s, x.head_v, s, count)) * 0.5;
  }
  return flash_attention_step(gpu, x) * x.c;
}

ContextExchange context_exchange(const GpuModel& gpu, const BlockShape& x, const CollectiveTime& comm) {
  if (x.c < 2 || !comm) return {};
  const double keys_values = 2.0 * x.b * x.s * x.kv / x.t * kHalf;
  switch (x.comm) {
    case ContextComm::kP2P: {
      const Seconds step = flash_attention_step(gpu, x);
      const Seconds backward_step = step * kFlashBackwardRatio;
      return {max(Seconds(0.0), comm(keys_values) - step) * (x.c - 1.0),
              max(Seconds(0.0), comm(keys_values) - backward_step) * 2.0 +
                  max(Seconds(0.0), comm(2.0 * keys_values) - backward_step) * (x.c - 2.0)};
    }
    case ContextComm::kAllGather: return {comm(keys_values), comm(keys_values) * 2.0};
    case ContextComm::kAllToAll: {
      const Seconds moved = comm(x.b * x.s * (x.q + 2.0 * x.kv) / x.t * kHalf) + comm(x.b * x.s * x.q / x.t * kHalf);
      return {moved, moved};
    }
  }
  return {};
}

int context_kernels(const BlockShape& x, bool backward) {
  if (x.c < 2) return 0;
  switch (x.comm) {
    case ContextComm::kP2P: return kContextStepKernels * (static_cast<int>(x.c) - 1);
    case ContextComm::kAllGather: return backward ? kAllGatherBackwardKernels : kAllGatherForwardKernels;
    case ContextComm::kAllToAll: return kAllToAllKernels;
  }
  return 0;
}

}  // namespace baton::megatron_detail
