// How a baton process (the CLI, the benchmarks) has glibc's allocator keep
// the memory it frees.
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace baton {

// Freed memory stays in the process. LibTorch's CPU allocator frees and
// allocates tensors of the same sizes every microbatch; where glibc hands
// large blocks back to the system (mmap above a threshold that moves, heap
// tops trimmed), each new one page-faults again, and how often depends on the
// order of the work: vgg-mini's profiled backward took 1.38 ms per microbatch
// so and 1.23 ms with memory kept, which is what a one-worker run of the
// executor measures either way. Profile, calibration and runs are all baton
// processes, so they all allocate alike. Sweeps gain too: each simulated
// layout builds and drops Programs of up to megabytes (the GPT sweep of
// bench/bench_gpt_sweep.cc runs about a third faster).
inline void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest; fixed, not sliding
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace baton
