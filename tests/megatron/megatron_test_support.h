// Helpers shared by the Megatron tests.
#pragma once

#include "sim/megatron.h"

namespace baton::testing {

// A layout of t x p x d GPUs, micro-batch b, global batch `global`; the rest default.
inline MegatronLayout megatron_layout(int t, int p, int d, int b, int global) {
  MegatronLayout l;
  l.tensor = t;
  l.pipeline = p;
  l.data = d;
  l.micro_batch = b;
  l.global_batch = global;
  return l;
}

}  // namespace baton::testing
