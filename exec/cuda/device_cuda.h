// The CUDA half of exec/device.h. Two implementations, one per build:
// device_cuda.cc against a LibTorch with CUDA (streams, events and the caching
// allocator of c10/cuda), no_cuda.cc otherwise, whose make_device says what
// build the device needs. exec/CMakeLists.txt picks one.
#pragma once

#include "exec/device.h"

namespace baton::exec::cuda {

bool built();
int device_count();  // visible GPUs; 0 without CUDA

// The worker's own stream on GPU `index`. An Error when this build has no
// CUDA, no GPU is visible, or `index` is not one of them.
Result<WorkerDevicePtr> make_device(int index);

}  // namespace baton::exec::cuda
