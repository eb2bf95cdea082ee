// How workers exchange tensors: point-to-point transfers (activations forward,
// gradients back) and the gradient all-reduce of a replicated stage.
//
// Contract (mirrors the interpreter semantics of sim/program.h):
// - `send` is issued and returns at once; the tensor (contiguous) must not be
//   modified until the returned Pending is done. A null Pending means the
//   transfer completed during the call.
// - `recv` blocks until the matching send has been delivered, for at most the
//   transport's timeout; the receiver names the shape and element type (known
//   from the model), so only raw bytes travel.
// - `post_recv` posts the same receive without waiting; the PostedRecv's
//   `wait` then returns the tensor. Workers post their receives ahead of the
//   RECV actions (exec/worker.h) so that a transport whose protocol moves the
//   data only once the receiver is ready (Gloo's TCP pairs: the sender
//   announces, the receiver answers when its receive is posted, then the bytes
//   flow) delivers as soon as the sender sends, as the simulator models it.
//   The default posts nothing and receives in `wait`, right for transports
//   that deliver eagerly (the in-process mailboxes).
// - A message is matched by (src, dst, payload, sequence): `sequence` is the
//   global microbatch number (step * microbatches + k), unique per payload
//   within a run.
// - `allreduce` is issued without blocking and sums `flat` over the members
//   of the replica group, in place, in a fixed member order; the caller does
//   not touch `flat` until the Pending is done. The n-th call of every member
//   forms one collective.
// Implementations: exec/transport_threads.h (in-process) and
// exec/transport_gloo.h (c10d Gloo).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "exec/pch.h"
#include "sim/result.h"
#include "sim/units.h"

namespace baton::exec {

class Pending {
 public:
  virtual ~Pending() = default;
  // Non-blocking poll.
  virtual bool done() = 0;
  // Blocks until done, at most `timeout`.
  virtual Status wait(Seconds timeout) = 0;
};
using PendingPtr = std::unique_ptr<Pending>;

class PostedRecv {
 public:
  virtual ~PostedRecv() = default;
  // Blocks until the tensor is there, at most `timeout`; call once.
  virtual Result<at::Tensor> wait(Seconds timeout) = 0;
};
using PostedRecvPtr = std::unique_ptr<PostedRecv>;

enum class Payload : uint8_t { kActivation = 0, kGradient = 1 };

struct MessageKey {
  int src = 0;
  int dst = 0;
  Payload payload = Payload::kActivation;
  int64_t sequence = 0;

  bool operator==(const MessageKey&) const = default;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual Result<PendingPtr> send(const MessageKey& key, const at::Tensor& tensor) = 0;
  virtual Result<at::Tensor> recv(const MessageKey& key, const std::vector<int64_t>& shape, at::ScalarType dtype) = 0;
  virtual Result<PostedRecvPtr> post_recv(const MessageKey& key, const std::vector<int64_t>& shape,
                                          at::ScalarType dtype);
};

// One member's handle on its replica group.
class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual Result<PendingPtr> allreduce(const at::Tensor& flat) = 0;
};

}  // namespace baton::exec
