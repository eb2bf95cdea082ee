#include "exec/gpu/nccl_comm.h"

#include <chrono>
#include <thread>

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

Result<std::unique_ptr<NcclComm>> NcclComm::create(int rank, int ranks, const ncclUniqueId& id, Seconds timeout) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return Error{fmt::format("NCCL communicator: rank {} is outside [0, {})", rank, ranks)};
  cudaStream_t stream = nullptr;
  if (Status s = check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); !s)
    return s.error();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t handle = nullptr;
  const ncclResult_t result = ncclCommInitRankConfig(&handle, ranks, id, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    cudaStreamDestroy(stream);
    return check(result, "ncclCommInitRankConfig").error();
  }
  std::unique_ptr<NcclComm> comm(new NcclComm(rank, handle, stream, timeout));
  if (Status s = comm->settle(result, "ncclCommInitRankConfig (a peer did not join)"); !s) return s.error();
  return comm;
}

NcclComm::~NcclComm() {
  if (!aborted_) ncclCommDestroy(comm_);
  cudaStreamDestroy(stream_);
}

Status NcclComm::settle(ncclResult_t result, const char* what) {
  if (result != ncclSuccess && result != ncclInProgress) return check(result, what);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_.value);
  while (result == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      return Error{
          fmt::format("{}: NCCL did not finish it within {:.0f} s; the communicator is aborted", what, timeout_.value)};
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess) break;
  }
  return check(result, what);
}

Status NcclComm::async_error() {
  if (aborted_) return Error{"the NCCL communicator was aborted"};
  ncclResult_t state = ncclSuccess;
  if (Status s = check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError"); !s) return s;
  return state == ncclInProgress ? ok_status() : check(state, "NCCL (asynchronous error)");
}

void NcclComm::abort() {
  if (aborted_) return;
  ncclCommAbort(comm_);
  aborted_ = true;
}

Status NcclComm::send(const float* buffer, size_t count, int peer) {
  return settle(ncclSend(buffer, count, ncclFloat32, peer, comm_, stream_), "ncclSend");
}

Status NcclComm::recv(float* buffer, size_t count, int peer) {
  return settle(ncclRecv(buffer, count, ncclFloat32, peer, comm_, stream_), "ncclRecv");
}

Status NcclComm::group_begin() { return check(ncclGroupStart(), "ncclGroupStart"); }

Status NcclComm::group_end() { return settle(ncclGroupEnd(), "ncclGroupEnd"); }

Status NcclComm::allreduce_sum(float* buffer, size_t count) {
  return settle(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
}

Status NcclComm::synchronize() { return check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

}  // namespace baton::exec::gpu
