#include "exec/transport_gloo.h"

#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "exec/errors.h"

namespace baton::exec {

namespace {

std::chrono::milliseconds to_ms(Seconds s) { return std::chrono::milliseconds(static_cast<int64_t>(s.value * 1e3)); }

std::shared_ptr<::gloo::transport::Device> make_device(const std::string& master_addr) {
  if (is_loopback(master_addr)) return compat::GlooGroup::createDeviceForHostname("127.0.0.1");
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr && *interface)
    return compat::GlooGroup::createDeviceForInterface(interface);
  return compat::GlooGroup::createDefaultDevice();
}

// Gloo's loop thread is created with its device and inherits the creating
// thread's scheduling policy, so the device is created on a helper thread
// under SCHED_IDLE (nice 19 where that is refused; both are per thread on
// Linux, the caller's stay as they were), or with GlooIo::kNormal as the
// caller's. Why: transport_gloo.h.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr, GlooIo io) {
  std::shared_ptr<::gloo::transport::Device> device;
  std::exception_ptr failure;
  std::thread creator([&] {
    const sched_param none{};
    if (io == GlooIo::kIdle && sched_setscheduler(0, SCHED_IDLE, &none) != 0)
      setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    try {
      device = make_device(master_addr);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  creator.join();
  if (failure) std::rethrow_exception(failure);
  return device;
}

c10::intrusive_ptr<compat::GlooGroup> make_group(const c10::intrusive_ptr<::c10d::Store>& store,
                                                 const std::string& master_addr, int rank, int size, Seconds timeout,
                                                 GlooIo io) {
  auto options = compat::GlooGroup::Options::create(to_ms(timeout));
  options->devices.push_back(gloo_device(master_addr, io));
  options->threads = 1;
  return c10::make_intrusive<compat::GlooGroup>(store, rank, size, options);
}

int tag_of(const MessageKey& key) { return static_cast<int>(2 * key.sequence + static_cast<int>(key.payload)); }

class WorkPending final : public Pending {
 public:
  WorkPending(c10::intrusive_ptr<::c10d::Work> work, at::Tensor keep_alive, std::string what, std::string peer)
      : work_(std::move(work)), tensor_(std::move(keep_alive)), what_(std::move(what)), peer_(std::move(peer)) {}
  bool done() override { return work_->isCompleted(); }
  Status wait(Seconds timeout) override { return wait_work(work_, timeout, what_, peer_); }

 private:
  c10::intrusive_ptr<::c10d::Work> work_;
  at::Tensor tensor_;
  std::string what_;
  std::string peer_;
};

bool mentions(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// Gloo's words for a peer whose socket went away (closed, reset, or written to after it died).
bool is_lost_connection(const std::string& reason) {
  return mentions(reason, "onnection closed") || mentions(reason, "onnection reset") ||
         mentions(reason, "roken pipe") || mentions(reason, "Connection refused");
}

// "Timed out waiting 5000ms for recv ..." (gloo) or "Operation timed out!" (c10d).
// LibTorch 1.13's store and Gloo say "timed out" / "Socket Timeout"; 2.x's
// store says "wait timeout after 2000ms, keys: ...".
bool is_timeout(const std::string& reason) { return mentions(reason, "imed out") || mentions(reason, "imeout"); }

// c10's exceptions append a backtrace to their message: keep the message.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// "<what> failed: ...", naming `peer` when the connection to it is gone (the
// same words whether Gloo reports it to a wait or to the call that issues an
// operation, which throws once Gloo's I/O thread has seen the peer go).
Error failure(const std::string& what, const std::string& peer, const std::exception& e) {
  const std::string reason = first_line(e.what());
  if (is_lost_connection(reason))
    return Error{fmt::format("{} failed: connection closed by {} ({})", what, peer, reason)};
  return Error{fmt::format("{} failed: {}", what, reason)};
}

}  // namespace

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

Status wait_work(const c10::intrusive_ptr<::c10d::Work>& work, Seconds timeout, const std::string& what,
                 const std::string& peer) {
  const std::string silent = fmt::format("{} timed out after {:g} s: {} is not responding", what, timeout.value, peer);
  try {
    if (!work->wait(to_ms(timeout))) return Error{silent};
  } catch (const std::exception& e) {
    if (is_timeout(first_line(e.what()))) return Error{silent};
    return failure(what, peer, e);
  }
  return ok_status();
}

const char* gloo_io_name(GlooIo io) { return io == GlooIo::kNormal ? "normal" : "idle"; }

Result<GlooIo> gloo_io_from_environment() {
  const char* value = std::getenv(kGlooIoVariable);
  if (value == nullptr || *value == '\0' || std::string(value) == gloo_io_name(GlooIo::kIdle)) return GlooIo::kIdle;
  if (std::string(value) == gloo_io_name(GlooIo::kNormal)) return GlooIo::kNormal;
  return Error{fmt::format("{}={}: the class of Gloo's I/O threads is idle (SCHED_IDLE, the default) or normal",
                           kGlooIoVariable, value)};
}

Result<GlooGroups> connect_world(const RankEnv& env, Seconds timeout) {
  auto io = gloo_io_from_environment();
  if (!io) return io.error();
  try {
    GlooGroups groups;
    groups.io = *io;
    groups.store = compat::make_tcp_store(env.master_addr, static_cast<uint16_t>(env.master_port), env.world_size,
                                          env.rank == 0, to_ms(timeout));
    auto prefixed = c10::make_intrusive<::c10d::PrefixStore>("world", groups.store);
    groups.world = make_group(prefixed, env.master_addr, env.rank, env.world_size, timeout, groups.io);
    return groups;
  } catch (const std::exception& e) {
    const std::string reason = first_line(error_text(e));
    if (is_timeout(reason)) {
      return Error{fmt::format(
          "rendezvous at {}:{}: not all {} ranks met within {:g} s (--timeout): is every rank started, with the "
          "same MASTER_ADDR and MASTER_PORT? ({})",
          env.master_addr, env.master_port, env.world_size, timeout.value, reason)};
    }
    return Error{fmt::format("rendezvous at {}:{} failed: {}", env.master_addr, env.master_port, reason)};
  }
}

Result<c10::intrusive_ptr<compat::GlooGroup>> connect_subgroup(const GlooGroups& groups, int stage, int member,
                                                               int members, Seconds timeout,
                                                               const std::string& master_addr) {
  try {
    auto prefixed = c10::make_intrusive<::c10d::PrefixStore>(fmt::format("stage{}", stage), groups.store);
    return make_group(prefixed, master_addr, member, members, timeout, groups.io);
  } catch (const std::exception& e) {
    return Error{fmt::format("stage {} replica group: rendezvous failed: {}", stage, e.what())};
  }
}

Result<PendingPtr> GlooTransport::send(const MessageKey& key, const at::Tensor& tensor) {
  try {
    std::vector<at::Tensor> buffers{tensor.contiguous()};
    auto work = world_->send(buffers, key.dst, tag_of(key));
    return PendingPtr(std::make_unique<WorkPending>(
        std::move(work), buffers[0], fmt::format("send to rank {}", key.dst), fmt::format("rank {}", key.dst)));
  } catch (const std::exception& e) {
    return failure(fmt::format("send to rank {}", key.dst), fmt::format("rank {}", key.dst), e);
  }
}

Result<at::Tensor> GlooTransport::recv(const MessageKey& key, const std::vector<int64_t>& shape, at::ScalarType dtype) {
  auto posted = post_recv(key, shape, dtype);
  if (!posted) return posted.error();
  return (*posted)->wait(timeout_);
}

namespace {

class GlooPostedRecv final : public PostedRecv {
 public:
  GlooPostedRecv(c10::intrusive_ptr<::c10d::Work> work, at::Tensor buffer, int src)
      : work_(std::move(work)), buffer_(std::move(buffer)), src_(src) {}
  Result<at::Tensor> wait(Seconds timeout) override {
    const Status status =
        wait_work(work_, timeout, fmt::format("receive from rank {}", src_), fmt::format("rank {}", src_));
    if (!status) return status.error();
    return buffer_;
  }

 private:
  c10::intrusive_ptr<::c10d::Work> work_;
  at::Tensor buffer_;
  int src_;
};

}  // namespace

Result<PostedRecvPtr> GlooTransport::post_recv(const MessageKey& key, const std::vector<int64_t>& shape,
                                               at::ScalarType dtype) {
  try {
    std::vector<at::Tensor> buffers{at::empty(shape, at::TensorOptions().dtype(dtype))};
    auto work = world_->recv(buffers, key.src, tag_of(key));
    return PostedRecvPtr(std::make_unique<GlooPostedRecv>(std::move(work), buffers[0], key.src));
  } catch (const std::exception& e) {
    return failure(fmt::format("receive from rank {}", key.src), fmt::format("rank {}", key.src), e);
  }
}

GlooReducer::GlooReducer(c10::intrusive_ptr<compat::GlooGroup> group, const std::vector<int>& ranks)
    : group_(std::move(group)), members_(fmt::format("ranks {}", fmt::join(ranks, ", "))) {}

Result<PendingPtr> GlooReducer::allreduce(const at::Tensor& flat) {
  try {
    std::vector<at::Tensor> buffers{flat};
    auto work = group_->allreduce(buffers);
    return PendingPtr(std::make_unique<WorkPending>(std::move(work), flat, "gradient all-reduce over " + members_,
                                                    "one of " + members_));
  } catch (const std::exception& e) {
    return Error{fmt::format("gradient all-reduce failed: {}", e.what())};
  }
}

}  // namespace baton::exec
