#include "exec/transport_gloo.h"

#include <chrono>
#include <cstdlib>
#include <exception>

#include <fmt/format.h>

namespace baton::exec {

namespace {

std::chrono::milliseconds to_ms(Seconds s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s.value * 1e3));
}

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (is_loopback(master_addr)) return compat::GlooGroup::createDeviceForHostname("127.0.0.1");
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr && *interface)
    return compat::GlooGroup::createDeviceForInterface(interface);
  return compat::GlooGroup::createDefaultDevice();
}

c10::intrusive_ptr<compat::GlooGroup> make_group(const c10::intrusive_ptr<::c10d::Store>& store,
                                                 const std::string& master_addr, int rank, int size,
                                                 Seconds timeout) {
  auto options = compat::GlooGroup::Options::create(to_ms(timeout));
  options->devices.push_back(gloo_device(master_addr));
  options->threads = 1;
  return c10::make_intrusive<compat::GlooGroup>(store, rank, size, options);
}

int tag_of(const MessageKey& key) {
  return static_cast<int>(2 * key.sequence + static_cast<int>(key.payload));
}

class WorkPending final : public Pending {
 public:
  WorkPending(c10::intrusive_ptr<::c10d::Work> work, at::Tensor keep_alive, std::string what)
      : work_(std::move(work)), tensor_(std::move(keep_alive)), what_(std::move(what)) {}
  bool done() override { return work_->isCompleted(); }
  Status wait(Seconds timeout) override { return wait_work(work_, timeout, what_); }

 private:
  c10::intrusive_ptr<::c10d::Work> work_;
  at::Tensor tensor_;
  std::string what_;
};

}  // namespace

Status wait_work(const c10::intrusive_ptr<::c10d::Work>& work, Seconds timeout, const std::string& what) {
  try {
    if (!work->wait(to_ms(timeout))) return Error{fmt::format("{} did not complete", what)};
  } catch (const std::exception& e) {
    return Error{fmt::format("{} failed: {}", what, e.what())};
  }
  return ok_status();
}

Result<GlooGroups> connect_world(const RankEnv& env, Seconds timeout) {
  try {
    GlooGroups groups;
    groups.store = compat::make_tcp_store(env.master_addr, static_cast<uint16_t>(env.master_port),
                                          env.world_size, env.rank == 0, to_ms(timeout));
    auto prefixed = c10::make_intrusive<::c10d::PrefixStore>("world", groups.store);
    groups.world = make_group(prefixed, env.master_addr, env.rank, env.world_size, timeout);
    return groups;
  } catch (const std::exception& e) {
    return Error{fmt::format("rank {}: rendezvous at {}:{} failed: {}", env.rank, env.master_addr,
                             env.master_port, e.what())};
  }
}

Result<c10::intrusive_ptr<compat::GlooGroup>> connect_subgroup(const GlooGroups& groups, int stage,
                                                              int member, int members, Seconds timeout,
                                                              const std::string& master_addr) {
  try {
    auto prefixed = c10::make_intrusive<::c10d::PrefixStore>(fmt::format("stage{}", stage), groups.store);
    return make_group(prefixed, master_addr, member, members, timeout);
  } catch (const std::exception& e) {
    return Error{fmt::format("stage {} replica group: rendezvous failed: {}", stage, e.what())};
  }
}

Result<PendingPtr> GlooTransport::send(const MessageKey& key, const at::Tensor& tensor) {
  try {
    std::vector<at::Tensor> buffers{tensor.contiguous()};
    auto work = world_->send(buffers, key.dst, tag_of(key));
    return PendingPtr(std::make_unique<WorkPending>(
        std::move(work), buffers[0], fmt::format("send to rank {} (tag {})", key.dst, tag_of(key))));
  } catch (const std::exception& e) {
    return Error{fmt::format("send to rank {} failed: {}", key.dst, e.what())};
  }
}

Result<at::Tensor> GlooTransport::recv(const MessageKey& key, const std::vector<int64_t>& shape,
                                       at::ScalarType dtype) {
  try {
    std::vector<at::Tensor> buffers{at::empty(shape, at::TensorOptions().dtype(dtype))};
    auto work = world_->recv(buffers, key.src, tag_of(key));
    const Status status = wait_work(work, timeout_, fmt::format("receive from rank {} (tag {})", key.src,
                                                                tag_of(key)));
    if (!status) return status.error();
    return buffers[0];
  } catch (const std::exception& e) {
    return Error{fmt::format("receive from rank {} failed: {}", key.src, e.what())};
  }
}

Result<PendingPtr> GlooReducer::allreduce(const at::Tensor& flat) {
  try {
    std::vector<at::Tensor> buffers{flat};
    auto work = group_->allreduce(buffers);
    return PendingPtr(std::make_unique<WorkPending>(std::move(work), flat, "gradient all-reduce"));
  } catch (const std::exception& e) {
    return Error{fmt::format("gradient all-reduce failed: {}", e.what())};
  }
}

}  // namespace baton::exec
