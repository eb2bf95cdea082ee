#include "exec/gpu/nccl_comm.h"

#include <fmt/format.h>

namespace baton::exec::gpu {

namespace {

Status check(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return ok_status();
  return Error{fmt::format("{}: NCCL error {}: {}", what, static_cast<int>(result), ncclGetErrorString(result))};
}

Status check(cudaError_t result, const char* what) {
  if (result == cudaSuccess) return ok_status();
  return Error{fmt::format("{}: CUDA error {}: {}", what, static_cast<int>(result), cudaGetErrorString(result))};
}

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

Result<ncclUniqueId> make_unique_id() {
  ncclUniqueId id;
  if (Status s = check(ncclGetUniqueId(&id), "ncclGetUniqueId"); !s) return s.error();
  return id;
}

Result<std::unique_ptr<NcclComm>> NcclComm::create(int rank, int ranks, const ncclUniqueId& id) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return Error{fmt::format("NCCL communicator: rank {} is outside [0, {})", rank, ranks)};
  cudaStream_t stream = nullptr;
  if (Status s = check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); !s)
    return s.error();
  ncclComm_t comm = nullptr;
  if (Status s = check(ncclCommInitRank(&comm, ranks, id, rank), "ncclCommInitRank"); !s) {
    cudaStreamDestroy(stream);
    return s.error();
  }
  return std::unique_ptr<NcclComm>(new NcclComm(rank, comm, stream));
}

NcclComm::~NcclComm() {
  ncclCommDestroy(comm_);
  cudaStreamDestroy(stream_);
}

Status NcclComm::send(const float* buffer, size_t count, int peer) {
  return check(ncclSend(buffer, count, ncclFloat32, peer, comm_, stream_), "ncclSend");
}

Status NcclComm::recv(float* buffer, size_t count, int peer) {
  return check(ncclRecv(buffer, count, ncclFloat32, peer, comm_, stream_), "ncclRecv");
}

Status NcclComm::group_begin() { return check(ncclGroupStart(), "ncclGroupStart"); }

Status NcclComm::group_end() { return check(ncclGroupEnd(), "ncclGroupEnd"); }

Status NcclComm::allreduce_sum(float* buffer, size_t count) {
  return check(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
}

Status NcclComm::synchronize() { return check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

}  // namespace baton::exec::gpu
