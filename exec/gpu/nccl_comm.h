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
// The communicator is non-blocking (ncclConfig_t::blocking = 0), so that no
// call can hang on a peer that died: creating it, and a call NCCL takes in
// asynchronously (ncclInProgress), are waited for at most `timeout`, polling
// ncclCommGetAsyncError; past it the communicator is aborted (ncclCommAbort)
// and the Error says so. `async_error` reports what NCCL saw go wrong since
// (a peer's connection lost), and `abort` ends the communicator at once, its
// enqueued operations with it: what a timed-out wait on its stream does.
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
#include "sim/units.h"

namespace baton::exec::gpu {

// Number of CUDA devices; 0 when there is none or no driver.
int device_count();

Result<ncclUniqueId> make_unique_id();

class NcclComm {
 public:
  static Result<std::unique_ptr<NcclComm>> create(int rank, int ranks, const ncclUniqueId& id,
                                                  Seconds timeout = Seconds(30));
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
  // The communicator's asynchronous error, if any (ncclInProgress is none).
  Status async_error();
  // Ends the communicator and what it has enqueued; later calls fail.
  void abort();
  bool aborted() const { return aborted_; }

 private:
  NcclComm(int rank, ncclComm_t comm, cudaStream_t stream, Seconds timeout)
      : rank_(rank), comm_(comm), stream_(stream), timeout_(timeout) {}
  // `result` of a call named `what`: success, an error, or (ncclInProgress)
  // polled until NCCL has taken the call in, at most timeout_.
  Status settle(ncclResult_t result, const char* what);
  int rank_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  Seconds timeout_;
  bool aborted_ = false;
};

}  // namespace baton::exec::gpu
