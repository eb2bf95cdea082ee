// NCCL on raw device buffers: the collective and point-to-point core of the
// executor's GPU transport (EXEC_NOTES: NCCL point-to-point and all-reduce).
// Torch-free, so that it builds wherever the CUDA runtime and NCCL headers are:
// CI compiles it without a GPU; tests/gpu/nccl_comm_test.cc runs it on one.
//
// A NcclComm is one rank of a communicator of `ranks` ranks on the current
// CUDA device, created from a unique id that rank 0 makes (`make_unique_id`)
// and hands to the others out of band (the TCPStore in a real run). Every call
// enqueues on `stream` and returns at once; `synchronize` waits for the stream.
// Errors are values naming the call and NCCL's or CUDA's own words.
// NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), so a one-GPU
// machine uses one rank, which may send to itself inside a group.
// Thread safety: one thread per communicator.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <cuda_runtime.h>
#include <nccl.h>

#include "sim/result.h"

namespace baton::exec::gpu {

// Number of CUDA devices; 0 when there is none or no driver.
int device_count();

Result<ncclUniqueId> make_unique_id();

class NcclComm {
 public:
  static Result<std::unique_ptr<NcclComm>> create(int rank, int ranks, const ncclUniqueId& id);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  cudaStream_t stream() const { return stream_; }

  // `count` float32 values.
  Status send(const float* buffer, size_t count, int peer);
  Status recv(float* buffer, size_t count, int peer);
  // Sends and receives between group_begin and group_end form one NCCL group
  // (needed for a rank that sends to itself, or to pair sends with receives).
  Status group_begin();
  Status group_end();
  // In place: buffer = sum over the ranks.
  Status allreduce_sum(float* buffer, size_t count);
  Status synchronize();

 private:
  NcclComm(int rank, ncclComm_t comm, cudaStream_t stream) : rank_(rank), comm_(comm), stream_(stream) {}
  int rank_;
  ncclComm_t comm_;
  cudaStream_t stream_;
};

}  // namespace baton::exec::gpu
