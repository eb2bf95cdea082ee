// Where a worker computes and how its actions are timed: the executor's only
// device-specific part (exec/worker.h's interpreter is the same on every
// device).
//
// CPU: a worker's work is done when the host call returns, so a mark is the
// host's steady clock and hand-overs between workers need no ordering.
// CUDA (exec/cuda/device_cuda.cc, built only against a LibTorch with CUDA):
// every worker has its own stream on the GPU, made current on the thread that
// runs it; kernels run asynchronously, so
// - a mark is a CUDA event recorded on the worker's stream, its time read once
//   the stream has passed it (settle): actions are timed by the GPU, not by
//   when the host launched them;
// - data handed to another worker carries an event recorded after the work
//   that produced it; the receiving stream waits for that event (on the GPU,
//   the host does not block) and copies the data into memory of its own
//   (a device-to-device copy), with the source kept alive for that stream by
//   the caching allocator (record_stream).
// An iteration's marks are seconds from its Origin: on CUDA an event recorded
// once the worker's stream went idle, so the marks of every worker on that GPU
// share one time axis.
// Thread safety: a WorkerDevice is used by its worker's thread (and by the
// thread that builds the worker, before it runs); origin() by one thread while
// no worker runs.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "exec/pch.h"
#include "sim/result.h"
#include "sim/units.h"

namespace baton::exec {

using Clock = std::chrono::steady_clock;

// A point in a worker's work that another worker's work can wait for.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
};
using EventPtr = std::shared_ptr<DeviceEvent>;

// Time zero of one iteration.
struct Origin {
  Clock::time_point host;
  EventPtr device;  // CUDA: recorded when the stream was idle; null on CPU
};

class WorkerDevice {
 public:
  virtual ~WorkerDevice() = default;
  virtual at::Device device() const = 0;
  // "cpu" or "cuda:N (<GPU name>)", for reports.
  virtual std::string describe() const = 0;
  // The device's memory (0 on the CPU).
  virtual int64_t memory_bytes() const = 0;

  // Makes the calling thread compute for this worker (CUDA: selects the GPU
  // and makes the worker's stream current) until unbind_thread.
  virtual void bind_thread() = 0;
  virtual void unbind_thread() = 0;

  // Waits until this worker's work is done and returns a new time zero (the
  // other workers of a step call begin with it: their streams must be idle
  // too, as they are between iterations).
  virtual Origin origin() = 0;
  // Starts an iteration's marks (numbered from 0) at `origin`.
  virtual void begin(const Origin& origin) = 0;
  // The point the worker's work has reached, as a mark number.
  virtual int mark() = 0;
  // Waits until the worker's work has passed every mark; then `seconds` may
  // be read.
  virtual Status settle() = 0;
  // Seconds from the iteration's origin to mark `m`.
  virtual Seconds seconds(int m) const = 0;

  // For data this worker hands to another: the point where it is ready
  // (null on CPU, where it is ready already).
  virtual EventPtr ready() = 0;
  // This worker's work waits for `event` (null: nothing to wait for).
  virtual void await(const EventPtr& event) = 0;
  // The receiving side of a hand-over: `tensor` once `event` has passed, as
  // data this worker may keep (CPU: the tensor itself; CUDA: a copy made on
  // this worker's stream).
  virtual at::Tensor accept(const at::Tensor& tensor, const EventPtr& event) = 0;
};
using WorkerDevicePtr = std::unique_ptr<WorkerDevice>;

// "cpu", "cuda" (GPU 0) or "cuda:N". An Error names the device when this build
// has no CUDA (a LibTorch without it), when no GPU is visible, or N is not one.
Result<WorkerDevicePtr> make_worker_device(const std::string& name);

// Whether this build's LibTorch has CUDA (the device may still be absent).
bool built_with_cuda();

}  // namespace baton::exec
