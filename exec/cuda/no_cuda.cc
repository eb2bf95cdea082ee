#include <fmt/format.h>

#include "exec/cuda/device_cuda.h"

namespace baton::exec::cuda {

bool built() { return false; }

int device_count() { return 0; }

Result<WorkerDevicePtr> make_device(int index) {
  return Error{
      fmt::format("device cuda:{}: this baton is built against a LibTorch without CUDA; build it against one with CUDA "
                  "(a pip PyTorch's, found through python3's torch.utils.cmake_prefix_path, or Debian 13's "
                  "libtorch-cuda-dev: tools/check-debian13 --cuda) to run on a GPU",
                  index)};
}

}  // namespace baton::exec::cuda
