#include "exec/cuda/nccl_links.h"

namespace baton::exec::cuda {

Result<NcclLinks> connect_nccl(::c10d::Store&, const Program&, int, WorkerDevice&, Seconds) {
  return Error{
      "the nccl backend needs a baton built against a LibTorch with CUDA and with NCCL found "
      "(BATON_CUDA and BATON_NCCL; see tools/gpu-check)"};
}

}  // namespace baton::exec::cuda
