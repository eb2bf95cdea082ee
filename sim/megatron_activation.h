// The MLP's SwiGLU without Megatron-core's fused kernel
// (--no-bias-swiglu-fusion: bias_activation_fusion off): transformer/mlp.py's
// glu, torch.chunk into the gate and the linear halves, F.silu on the gate
// and the product, as PyTorch's ops run them, per block and pass. With the
// fusion (bias_swiglu_impl), its one kernel reading the 2f-wide input and
// writing f is mlp_activation's (sim/megatron_profile.cc), the backward
// taken as twice it. Internal to sim/; thread safety: pure functions.
#pragma once

#include "sim/gpu_model.h"
#include "sim/megatron_block.h"

namespace baton::megatron_detail {

// Per value of the activation's output (half-precision values), bytes read
// and written, one kernel each:
// - forward: with biases, the bias added to the 2f-wide input (8); SiLU on
//   the gate (4); its product with the linear half (6): 10 bytes in two
//   kernels without biases, where the fused kernel moves 6 in one;
// - backward (their autograd): the product's two gradients (6 + 6), SiLU's
//   (6), the halves' gradients joined into the input's (8): 26 bytes in
//   four kernels (the bias's gradient, a reduction over the tokens, not
//   counted), where the fused backward is taken as twice its forward, 12.
// Memory: the product keeps SiLU's output for its backward, f values a
// token beside the 2f-wide input the fused kernel keeps (block_activation_
// bytes, sim/megatron_sim.cc).
// GeLU with biases unfused (--no-bias-gelu-fusion): the bias added by its own
// kernel (4 bytes a value: read, write) before F.gelu, whose 4 bytes are
// the fused kernel's (bias_gelu_impl); the backward runs GeLU's gradient and
// the bias's reduction as the fused backward does, and GeLU keeps its input
// (the sum, f values a token) as the fused kernel keeps its own: one kernel
// more forward, nothing else. Without biases Megatron runs one GeLU kernel
// either way.
struct UnfusedActivation {
  // What the unfused ops take beyond the fused kernel's forward and twice it
  // backward (block_time adds these to the fused figures).
  Seconds forward_extra, backward_extra;
  int forward_kernels_extra = 0, backward_kernels_extra = 0;
};

// The bias-dropout-add after the attention and after the MLP unfused
// (--no-bias-dropout-fusion; fusions/fused_bias_dropout.py's
// _bias_dropout_add_func as PyTorch's ops), per block, on each of the two n =
// T h (split over t with sequence parallelism) values: with biases the
// bias's addition (4 bytes a value), with --hidden-dropout above 0 the
// dropout (read 2, write 2 and its 1-byte mask: 5), and the residual's
// addition (6), where the fused kernel moves 6 in one. The backward is taken
// as the fused one's (the dropout's gradient, and the bias's reduction).
// Zero where `x` fuses them.
UnfusedActivation unfused_bias_dropout_add(const GpuModel& gpu, const BlockShape& x, Seconds fused_forward);

// For `values` output values whose fused kernel takes `fused_forward` (the
// MLP's or the experts', T k f / t; a shared expert's, T S / t); zero where
// `x` fuses its activation, or runs GeLU without biases.
UnfusedActivation unfused_activation(const GpuModel& gpu, const BlockShape& x, double values, Seconds fused_forward);

}  // namespace baton::megatron_detail
