// Rotary positions without Megatron-core's fused kernel (--no-rope-fusion):
// apply_rotary_pos_emb on the queries and on the keys as the PyTorch ops of
// models/common/embeddings/rope_utils.py (_apply_rotary_pos_emb_bshd,
// _rotate_half) run them, per block and pass. With the fusion, its one
// kernel each for the queries and the keys (read and written once) is
// block_memory_bound's (sim/megatron_profile.cc). Internal to sim/; thread
// safety: pure functions.
#pragma once

#include "sim/gpu_model.h"
#include "sim/megatron_block.h"

namespace baton::megatron_detail {

// Per tensor of n half-precision values (the queries: T a / t heads' worth,
// T h / t; the keys: T kv / t), bytes read and written per value, one kernel
// each:
// - forward: the negated second half (2), the rotated halves' concatenation
//   (4), the products with the cosines (4) and the sines (4), their sum (6),
//   the concatenation with the unrotated rest (4, empty as Megatron runs it
//   with --rotary-percent 1): 24 bytes in six kernels; and the tables, the
//   cosines and sines of the s x d frequencies times the scale and cast to
//   half precision (six small kernels);
// - backward (their autograd): the two products' gradients (4 + 4), the
//   negation's (2), the halves' concatenation (4), the two branches' sum
//   into the input's gradient (6): 20 bytes in five kernels. The slices'
//   gradients, views here, are not counted.
// The activations the ops keep are the tables (s d each), not counted.
struct UnfusedRope {
  Seconds forward, backward;
  int forward_kernels = 0, backward_kernels = 0;
};

// The unfused rotary positions of one block on `x`'s rank; zero where `x`
// has no rotary positions or fuses them.
UnfusedRope unfused_rope(const GpuModel& gpu, const BlockShape& x);

}  // namespace baton::megatron_detail
