// The CUDA side's DeviceEvent (exec/device.h): a c10 CUDA event. Built only
// against a LibTorch with CUDA.
#pragma once

#include <ATen/cuda/CUDAEvent.h>

#include "exec/device.h"

namespace baton::exec::cuda {

class CudaEvent final : public DeviceEvent {
 public:
  explicit CudaEvent(unsigned int flags) : event(flags) {}
  at::cuda::CUDAEvent event;
};

}  // namespace baton::exec::cuda
