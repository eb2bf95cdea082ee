// In-process transport for the threads backend: one Mailbox shared by all
// workers of the process, and one ThreadsReduceGroup per replicated stage.
//
// Mailbox: one slot per receiving worker (its own mutex and condition
// variable, so a delivery wakes only its receiver). A send stores the tensor
// under its MessageKey in the receiver's slot (no copy: the sender never
// modifies it afterwards) and completes at once; a receive waits until its
// key is there, the timeout passes, or the mailbox is aborted (a peer
// failed). Delivery is instant, so SEND spans of the threads backend have
// zero length. On a GPU (exec/device.h) a message also carries the event its
// sender's stream recorded after producing it; the receiver's stream waits for
// it and copies the tensor (WorkerDevice::accept).
// ThreadsReduceGroup: the n-th allreduce of each member forms collective n;
// the member that arrives last sums the members' buffers in member order and
// writes the sum back into every buffer, then wakes the others' Pendings. On a
// GPU the summing stream first waits for every member's contribution event,
// and each member's stream waits for the sum's event when its Pending is
// waited for.
// Thread safety: all methods may be called from any worker thread.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <tuple>

#include "exec/device.h"
#include "exec/transport.h"

namespace baton::exec {

class Mailbox {
 public:
  Mailbox(int workers, Seconds timeout);
  struct Message {
    at::Tensor tensor;
    EventPtr ready;  // null on CPU
  };
  void put(const MessageKey& key, Message message);
  Result<Message> take(const MessageKey& key);
  // Wakes every waiter with an error; later takes fail at once.
  void abort();

 private:
  using Key = std::tuple<int, int, int64_t>;  // (src, payload, sequence)
  struct Slot {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<Key, Message> messages;
    bool aborted = false;
  };
  static Key key_of(const MessageKey& key);
  Slot& slot_of(const MessageKey& key) { return *slots_[static_cast<size_t>(key.dst)]; }

  Seconds timeout_;
  std::vector<std::unique_ptr<Slot>> slots_;  // [receiving worker]
};

// The Transport view of a Mailbox for one worker.
class ThreadsTransport final : public Transport {
 public:
  ThreadsTransport(Mailbox& mailbox, WorkerDevice& device) : mailbox_(&mailbox), device_(&device) {}
  Result<PendingPtr> send(const MessageKey& key, const at::Tensor& tensor) override;
  Result<at::Tensor> recv(const MessageKey& key, const std::vector<int64_t>& shape, at::ScalarType dtype) override;

 private:
  Mailbox* mailbox_;
  WorkerDevice* device_;
};

class ThreadsReduceGroup {
 public:
  ThreadsReduceGroup(int members, Seconds timeout) : members_(members), timeout_(timeout) {}
  // `device`: the member's.
  Result<PendingPtr> contribute(int member, const at::Tensor& flat, WorkerDevice& device);
  void abort();

 private:
  struct Collective {
    std::vector<at::Tensor> parts;  // index = member
    std::vector<EventPtr> ready;    // index = member
    EventPtr summed;                // null on CPU
    int arrived = 0;
    bool done = false;
  };
  class Ticket;
  Status wait_done(int64_t round, Seconds timeout, WorkerDevice& device);
  bool is_done(int64_t round);
  void reduce(Collective& collective, WorkerDevice& device);

  int members_;
  Seconds timeout_;
  std::mutex mutex_;
  std::condition_variable finished_;
  std::map<int64_t, Collective> collectives_;
  std::vector<int64_t> calls_;  // per member: allreduces issued so far
  bool aborted_ = false;
};

class ThreadsReducer final : public Reducer {
 public:
  ThreadsReducer(ThreadsReduceGroup& group, int member, WorkerDevice& device)
      : group_(&group), member_(member), device_(&device) {}
  Result<PendingPtr> allreduce(const at::Tensor& flat) override { return group_->contribute(member_, flat, *device_); }

 private:
  ThreadsReduceGroup* group_;
  int member_;
  WorkerDevice* device_;
};

}  // namespace baton::exec
