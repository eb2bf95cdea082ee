#include "exec/transport_threads.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace baton::exec {

namespace {

std::chrono::nanoseconds to_duration(Seconds s) {
  return std::chrono::nanoseconds(static_cast<int64_t>(s.value * 1e9));
}

std::string describe(const MessageKey& key) {
  return fmt::format("{} of sequence {} from worker {} to worker {}",
                     key.payload == Payload::kActivation ? "activation" : "gradient", key.sequence, key.src, key.dst);
}

}  // namespace

Mailbox::Mailbox(int workers, Seconds timeout) : timeout_(timeout) {
  for (int w = 0; w < workers; ++w) slots_.push_back(std::make_unique<Slot>());
}

Mailbox::Key Mailbox::key_of(const MessageKey& key) { return {key.src, static_cast<int>(key.payload), key.sequence}; }

void Mailbox::put(const MessageKey& key, Message message) {
  Slot& slot = slot_of(key);
  {
    std::lock_guard lock(slot.mutex);
    slot.messages[key_of(key)] = std::move(message);
  }
  slot.arrived.notify_one();
}

Result<Mailbox::Message> Mailbox::take(const MessageKey& key) {
  Slot& slot = slot_of(key);
  const Key wanted = key_of(key);
  std::unique_lock lock(slot.mutex);
  const bool ready = slot.arrived.wait_for(lock, to_duration(timeout_),
                                           [&] { return slot.aborted || slot.messages.count(wanted) > 0; });
  if (slot.aborted) return Error{fmt::format("receive of the {} abandoned: a peer failed", describe(key))};
  if (!ready) {
    return Error{fmt::format("timed out after {:.0f} s waiting for the {}", timeout_.value, describe(key))};
  }
  auto it = slot.messages.find(wanted);
  Message message = std::move(it->second);
  slot.messages.erase(it);
  return message;
}

void Mailbox::abort() {
  for (auto& slot : slots_) {
    {
      std::lock_guard lock(slot->mutex);
      slot->aborted = true;
    }
    slot->arrived.notify_all();
  }
}

Result<PendingPtr> ThreadsTransport::send(const MessageKey& key, const at::Tensor& tensor) {
  mailbox_->put(key, Mailbox::Message{tensor, device_->ready()});
  return PendingPtr{};
}

Result<at::Tensor> ThreadsTransport::recv(const MessageKey& key, const std::vector<int64_t>& shape,
                                          at::ScalarType dtype) {
  auto message = mailbox_->take(key);
  if (!message) return message.error();
  if (message->tensor.sizes() != at::IntArrayRef(shape) || message->tensor.scalar_type() != dtype) {
    return Error{fmt::format("the {} has an unexpected shape or type", describe(key))};
  }
  return device_->accept(message->tensor, message->ready);
}

// The Pending of one member's n-th allreduce.
class ThreadsReduceGroup::Ticket final : public Pending {
 public:
  Ticket(ThreadsReduceGroup& group, int64_t round, WorkerDevice& device)
      : group_(&group), round_(round), device_(&device) {}
  bool done() override { return group_->is_done(round_); }
  Status wait(Seconds timeout) override { return group_->wait_done(round_, timeout, *device_); }

 private:
  ThreadsReduceGroup* group_;
  int64_t round_;
  WorkerDevice* device_;
};

Result<PendingPtr> ThreadsReduceGroup::contribute(int member, const at::Tensor& flat, WorkerDevice& device) {
  std::unique_lock lock(mutex_);
  if (calls_.empty()) calls_.assign(static_cast<size_t>(members_), 0);
  const int64_t round = calls_[static_cast<size_t>(member)]++;
  Collective& collective = collectives_[round];
  if (collective.parts.empty()) {
    collective.parts.resize(static_cast<size_t>(members_));
    collective.ready.resize(static_cast<size_t>(members_));
  }
  collective.parts[static_cast<size_t>(member)] = flat;
  collective.ready[static_cast<size_t>(member)] = device.ready();
  if (++collective.arrived == members_) {
    reduce(collective, device);
    lock.unlock();
    finished_.notify_all();
    lock.lock();
  }
  // A member issues round n only after its STEP waited for round n - 1, so
  // rounds below min(calls) - 1 have no waiter left.
  const int64_t oldest_needed = *std::min_element(calls_.begin(), calls_.end()) - 1;
  std::erase_if(collectives_, [&](const auto& entry) { return entry.first < oldest_needed; });
  return PendingPtr(std::make_unique<Ticket>(*this, round, device));
}

// On the thread (and stream) of the member that arrived last.
void ThreadsReduceGroup::reduce(Collective& collective, WorkerDevice& device) {
  for (const EventPtr& ready : collective.ready) device.await(ready);
  at::NoGradGuard no_grad;
  at::Tensor sum = collective.parts[0].clone();
  for (size_t m = 1; m < collective.parts.size(); ++m) sum.add_(collective.parts[m]);
  for (at::Tensor& part : collective.parts) part.copy_(sum);
  collective.summed = device.ready();
  collective.parts.clear();
  collective.ready.clear();
  collective.done = true;
}

bool ThreadsReduceGroup::is_done(int64_t round) {
  std::lock_guard lock(mutex_);
  auto it = collectives_.find(round);
  return it == collectives_.end() || it->second.done;
}

Status ThreadsReduceGroup::wait_done(int64_t round, Seconds timeout, WorkerDevice& device) {
  std::unique_lock lock(mutex_);
  const bool ready = finished_.wait_for(lock, to_duration(timeout), [&] {
    auto it = collectives_.find(round);
    return aborted_ || it == collectives_.end() || it->second.done;
  });
  if (aborted_) return Error{fmt::format("all-reduce {} abandoned: a peer failed", round)};
  if (!ready) return Error{fmt::format("timed out after {:.0f} s in all-reduce {}", timeout.value, round)};
  auto it = collectives_.find(round);
  if (it != collectives_.end()) device.await(it->second.summed);
  return ok_status();
}

void ThreadsReduceGroup::abort() {
  {
    std::lock_guard lock(mutex_);
    aborted_ = true;
  }
  finished_.notify_all();
}

}  // namespace baton::exec
