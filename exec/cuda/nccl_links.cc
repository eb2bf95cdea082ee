// exec/cuda/nccl_links.h: NCCL point-to-point and all-reduce for one rank.
#include "exec/cuda/nccl_links.h"

#include <c10/cuda/CUDAStream.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "exec/cuda/cuda_event.h"
#include "exec/gpu/nccl_comm.h"

namespace baton::exec::cuda {

namespace {

using gpu::NcclComm;
using Clock = std::chrono::steady_clock;

c10::cuda::CUDAStream stream_of(NcclComm& comm, const WorkerDevice& device) {
  return c10::cuda::getStreamFromExternal(comm.stream(), device.device().index());
}

// `comm`'s stream waits until the worker's work so far is done.
void follow_worker(NcclComm& comm, WorkerDevice& device) {
  const EventPtr ready = device.ready();
  if (auto* event = dynamic_cast<CudaEvent*>(ready.get())) event->event.block(stream_of(comm, device));
}

// Waits on the host for `done` (recorded on `comm`'s stream after an
// operation), at most `timeout`; on an asynchronous error or past the
// timeout the communicator is aborted and the Error names `peer`.
Status wait_done(at::cuda::CUDAEvent& done, NcclComm& comm, Seconds timeout, const std::string& what,
                 const std::string& peer) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout.value));
  for (;;) {
    try {
      if (done.query()) return ok_status();
    } catch (const std::exception& e) {
      comm.abort();
      return Error{fmt::format("{} failed: {}", what, e.what())};
    }
    if (Status s = comm.async_error(); !s) {
      comm.abort();
      return Error{fmt::format("{} failed: {} is gone ({})", what, peer, s.error().message)};
    }
    if (Clock::now() > deadline) {
      comm.abort();
      return Error{fmt::format("{} timed out after {:.0f} s: {} is not responding", what, timeout.value, peer)};
    }
    std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
}

// A send or an all-reduce in flight: its tensor is kept until it is done.
class NcclOp final : public Pending {
 public:
  NcclOp(NcclComm& comm, at::Tensor tensor, std::string what, std::string peer)
      : comm_(&comm), tensor_(std::move(tensor)), what_(std::move(what)), peer_(std::move(peer)) {}
  at::cuda::CUDAEvent& done_event() { return done_; }
  bool done() override {
    try {
      return done_.query();
    } catch (const std::exception&) {
      return true;  // the error is reported by wait
    }
  }
  Status wait(Seconds timeout) override { return wait_done(done_, *comm_, timeout, what_, peer_); }

 private:
  NcclComm* comm_;
  at::Tensor tensor_;
  std::string what_;
  std::string peer_;
  at::cuda::CUDAEvent done_{cudaEventDisableTiming};
};

class NcclRecv final : public PostedRecv {
 public:
  NcclRecv(NcclComm& comm, at::Tensor buffer, std::string what, std::string peer)
      : comm_(&comm), buffer_(std::move(buffer)), what_(std::move(what)), peer_(std::move(peer)) {}
  at::cuda::CUDAEvent& done_event() { return done_; }
  Result<at::Tensor> wait(Seconds timeout) override {
    if (Status s = wait_done(done_, *comm_, timeout, what_, peer_); !s) return s.error();
    return buffer_;
  }

 private:
  NcclComm* comm_;
  at::Tensor buffer_;
  std::string what_;
  std::string peer_;
  at::cuda::CUDAEvent done_{cudaEventDisableTiming};
};

std::string describe(const MessageKey& key) {
  return fmt::format("{} of sequence {}", key.payload == Payload::kActivation ? "activation" : "gradient",
                     key.sequence);
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(std::map<int, std::unique_ptr<NcclComm>> to, std::map<int, std::unique_ptr<NcclComm>> from,
                WorkerDevice& device, Seconds timeout)
      : to_(std::move(to)), from_(std::move(from)), device_(&device), timeout_(timeout) {}

  Result<PendingPtr> send(const MessageKey& key, const at::Tensor& tensor) override {
    auto it = to_.find(key.dst);
    if (it == to_.end()) return Error{fmt::format("no NCCL link to rank {}", key.dst)};
    if (tensor.scalar_type() != at::kFloat) return Error{"the nccl backend moves float32 tensors only"};
    NcclComm& comm = *it->second;
    const at::Tensor data = tensor.contiguous();
    auto op = std::make_unique<NcclOp>(comm, data, fmt::format("send of the {} to rank {}", describe(key), key.dst),
                                       fmt::format("rank {}", key.dst));
    follow_worker(comm, *device_);
    if (Status s = comm.send(data.data_ptr<float>(), static_cast<size_t>(data.numel()), 1); !s) return s.error();
    op->done_event().record(stream_of(comm, *device_));
    data.record_stream(stream_of(comm, *device_));
    return PendingPtr(std::move(op));
  }

  Result<PostedRecvPtr> post_recv(const MessageKey& key, const std::vector<int64_t>& shape,
                                  at::ScalarType dtype) override {
    auto it = from_.find(key.src);
    if (it == from_.end()) return Error{fmt::format("no NCCL link from rank {}", key.src)};
    if (dtype != at::kFloat) return Error{"the nccl backend moves float32 tensors only"};
    NcclComm& comm = *it->second;
    at::Tensor buffer = at::empty(shape, at::TensorOptions().dtype(at::kFloat).device(device_->device()));
    auto posted =
        std::make_unique<NcclRecv>(comm, buffer, fmt::format("receive of the {} from rank {}", describe(key), key.src),
                                   fmt::format("rank {}", key.src));
    follow_worker(comm, *device_);  // the buffer's memory is free for it
    if (Status s = comm.recv(buffer.data_ptr<float>(), static_cast<size_t>(buffer.numel()), 0); !s) return s.error();
    posted->done_event().record(stream_of(comm, *device_));
    buffer.record_stream(stream_of(comm, *device_));
    return PostedRecvPtr(std::move(posted));
  }

  Result<at::Tensor> recv(const MessageKey& key, const std::vector<int64_t>& shape, at::ScalarType dtype) override {
    auto posted = post_recv(key, shape, dtype);
    if (!posted) return posted.error();
    return (*posted)->wait(timeout_);
  }

 private:
  std::map<int, std::unique_ptr<NcclComm>> to_;    // by receiving rank
  std::map<int, std::unique_ptr<NcclComm>> from_;  // by sending rank
  WorkerDevice* device_;
  Seconds timeout_;
};

class NcclReducer final : public Reducer {
 public:
  NcclReducer(std::unique_ptr<NcclComm> comm, WorkerDevice& device, std::string members)
      : comm_(std::move(comm)), device_(&device), members_(std::move(members)) {}
  Result<PendingPtr> allreduce(const at::Tensor& flat) override {
    auto op = std::make_unique<NcclOp>(*comm_, flat, fmt::format("all-reduce with {}", members_), members_);
    follow_worker(*comm_, *device_);
    if (Status s = comm_->allreduce_sum(flat.data_ptr<float>(), static_cast<size_t>(flat.numel())); !s)
      return s.error();
    op->done_event().record(stream_of(*comm_, *device_));
    flat.record_stream(stream_of(*comm_, *device_));
    return PendingPtr(std::move(op));
  }

 private:
  std::unique_ptr<NcclComm> comm_;
  WorkerDevice* device_;
  std::string members_;
};

std::vector<uint8_t> id_bytes(const ncclUniqueId& id) {
  const auto* first = reinterpret_cast<const uint8_t*>(&id);
  return std::vector<uint8_t>(first, first + sizeof(id));
}

// The communicator under `key` in the store: rank 0 of it makes the id.
Result<std::unique_ptr<NcclComm>> join(::c10d::Store& store, const std::string& key, int rank, int ranks,
                                       Seconds timeout) {
  ncclUniqueId id{};
  if (rank == 0) {
    auto made = gpu::make_unique_id();
    if (!made) return made.error();
    id = *made;
    store.set(key, id_bytes(id));
  } else {
    const std::vector<uint8_t> bytes = store.get(key);
    if (bytes.size() != sizeof(id)) return Error{fmt::format("{}: not an NCCL unique id", key)};
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(&id));
  }
  auto comm = NcclComm::create(rank, ranks, id, timeout);
  if (!comm) return Error{fmt::format("NCCL communicator {}: {}", key, comm.error().message)};
  return comm;
}

std::string members_of(const std::vector<int>& ranks, int self) {
  std::string out;
  for (int r : ranks)
    if (r != self) out += fmt::format("{}{}", out.empty() ? "rank " : ", ", r);
  return out;
}

}  // namespace

Result<NcclLinks> connect_nccl(::c10d::Store& store, const Program& program, int rank, WorkerDevice& device,
                               Seconds timeout) {
  // Every rank lists the same communicators in the same order: the directed
  // pairs that carry data, then the replicated stages.
  std::set<std::pair<int, int>> pairs;
  for (int w = 0; w < program.num_workers(); ++w)
    for (const Action& a : program.actions[static_cast<size_t>(w)])
      if (is_send(a.kind)) pairs.emplace(w, a.peer);
  try {
    std::map<int, std::unique_ptr<NcclComm>> to;
    std::map<int, std::unique_ptr<NcclComm>> from;
    for (const auto& [src, dst] : pairs) {
      if (src != rank && dst != rank) continue;
      auto comm = join(store, fmt::format("nccl/{}-{}", src, dst), src == rank ? 0 : 1, 2, timeout);
      if (!comm) return comm.error();
      (src == rank ? to[dst] : from[src]) = std::move(*comm);
    }
    NcclLinks links;
    const std::vector<std::vector<int>> by_stage = workers_by_stage(program);
    for (int s : stages_of(program.workers[static_cast<size_t>(rank)])) {
      const std::vector<int>& members = by_stage[static_cast<size_t>(s)];
      links.reducers.push_back(nullptr);
      if (members.size() < 2) continue;
      const int member = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
      auto comm = join(store, fmt::format("nccl/stage{}", s), member, static_cast<int>(members.size()), timeout);
      if (!comm) return comm.error();
      links.reducers.back() = std::make_unique<NcclReducer>(std::move(*comm), device, members_of(members, rank));
    }
    links.transport = std::make_unique<NcclTransport>(std::move(to), std::move(from), device, timeout);
    return links;
  } catch (const std::exception& e) {
    return Error{fmt::format("rank {}: connecting NCCL: {}", rank, e.what())};
  }
}

}  // namespace baton::exec::cuda
