#include "sim/megatron_activation.h"

namespace baton::megatron_detail {

UnfusedActivation unfused_activation(const GpuModel& gpu, const BlockShape& x, double values, Seconds fused_forward) {
  UnfusedActivation out;
  if (x.activation_fusion) return out;
  if (!x.gated) {
    // GeLU with biases: the bias's addition a kernel of its own (4 bytes a
    // value) before GeLU's, which moves what the fused kernel moves.
    if (!x.linear_bias) return out;
    out.forward_extra = gpu.memory_bound(4.0 * values);
    out.forward_kernels_extra = 1;
    return out;
  }
  const Seconds bias = x.linear_bias ? gpu.memory_bound(8.0 * values) : Seconds(0.0);
  const Seconds forward = bias + gpu.memory_bound(4.0 * values) + gpu.memory_bound(6.0 * values);
  const Seconds backward = gpu.memory_bound(6.0 * values) * 3.0 + gpu.memory_bound(8.0 * values);
  out.forward_extra = forward - fused_forward;
  out.backward_extra = backward - fused_forward * 2.0;
  out.forward_kernels_extra = x.linear_bias ? 2 : 1;
  out.backward_kernels_extra = 3;
  return out;
}

UnfusedActivation unfused_bias_dropout_add(const GpuModel& gpu, const BlockShape& x, Seconds fused_forward) {
  UnfusedActivation out;
  if (x.bias_dropout_fusion) return out;
  const double values = x.local_tokens * x.h;
  const Seconds bias = x.linear_bias ? gpu.memory_bound(4.0 * values) : Seconds(0.0);
  const Seconds dropout = x.hidden_dropout ? gpu.memory_bound(5.0 * values) : Seconds(0.0);
  const Seconds one = bias + dropout + gpu.memory_bound(6.0 * values);
  out.forward_extra = (one - fused_forward) * 2.0;
  out.forward_kernels_extra = 2 * ((x.linear_bias ? 1 : 0) + (x.hidden_dropout ? 1 : 0));
  return out;
}

}  // namespace baton::megatron_detail
