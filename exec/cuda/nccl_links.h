// One rank's data links in the process backend on GPUs (run --backend nccl):
// activations and gradients over NCCL point-to-point, one communicator and
// stream per direction between two ranks that exchange data (its sender rank
// 0, its receiver rank 1, so the messages of one direction are matched in the
// order they are sent: the receiver posts them in that order, sim/program.h
// receive_order), and the gradient all-reduce of each replicated stage over
// a communicator of its replicas (member m is rank m). Each communicator's
// stream is ordered after the worker's compute stream by an event recorded
// when the data are ready (a receive buffer: when it is allocated), and every
// wait is a host wait for the operation's completion event, at most the
// timeout, watching the communicator's asynchronous error: a dead or silent
// peer ends the wait with the rank named, and the communicator is aborted
// (exec/gpu/nccl_comm.h). The host having seen an operation complete, the
// compute stream needs no event to follow it.
// Communicators are made from unique ids handed over through the run's
// TCPStore ("nccl/<src>-<dst>", "nccl/stage<s>"), in one order every rank
// derives from the Program, so that no two ranks wait on each other's.
// Only float32 data travel (every activation after the first stage's input).
// Built against a LibTorch with CUDA and NCCL; elsewhere connect_nccl says
// what the build lacks (no_nccl.cc).
#pragma once

#include <memory>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "exec/device.h"
#include "exec/transport.h"
#include "sim/program.h"

namespace baton::exec::cuda {

struct NcclLinks {
  std::unique_ptr<Transport> transport;
  std::vector<std::unique_ptr<Reducer>> reducers;  // per stage the rank runs (stages_of), null unless replicated
};

// `device` is this rank's GPU, bound to the calling thread.
Result<NcclLinks> connect_nccl(::c10d::Store& store, const Program& program, int rank, WorkerDevice& device,
                               Seconds timeout);

}  // namespace baton::exec::cuda
