// In-process transport for the threads backend: one Mailbox shared by all
// workers of the process, and one ThreadsReduceGroup per replicated stage.
//
// Mailbox: one slot per receiving worker (its own mutex and condition
// variable, so a delivery wakes only its receiver). A send stores the tensor
// under its MessageKey in the receiver's slot (no copy: the sender never
// modifies it afterwards) and completes at once; a receive waits until its
// key is there, the timeout passes, or the mailbox is aborted (a peer
// failed). Delivery is instant, so SEND spans of the threads backend have
// zero length.
// ThreadsReduceGroup: the n-th allreduce of each member forms collective n;
// the member that arrives last sums the members' buffers in member order and
// writes the sum back into every buffer, then wakes the others' Pendings.
// Thread safety: all methods may be called from any worker thread.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <tuple>

#include "exec/transport.h"

namespace baton::exec {

class Mailbox {
 public:
  Mailbox(int workers, Seconds timeout);
  void put(const MessageKey& key, at::Tensor tensor);
  Result<at::Tensor> take(const MessageKey& key);
  // Wakes every waiter with an error; later takes fail at once.
  void abort();

 private:
  using Key = std::tuple<int, int, int64_t>;  // (src, payload, sequence)
  struct Slot {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<Key, at::Tensor> messages;
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
  explicit ThreadsTransport(Mailbox& mailbox) : mailbox_(&mailbox) {}
  Result<PendingPtr> send(const MessageKey& key, const at::Tensor& tensor) override;
  Result<at::Tensor> recv(const MessageKey& key, const std::vector<int64_t>& shape, at::ScalarType dtype) override;

 private:
  Mailbox* mailbox_;
};

class ThreadsReduceGroup {
 public:
  ThreadsReduceGroup(int members, Seconds timeout) : members_(members), timeout_(timeout) {}
  Result<PendingPtr> contribute(int member, const at::Tensor& flat);
  void abort();

 private:
  struct Collective {
    std::vector<at::Tensor> parts;  // index = member
    int arrived = 0;
    bool done = false;
  };
  class Ticket;
  Status wait_done(int64_t round, Seconds timeout);
  bool is_done(int64_t round);
  void reduce(Collective& collective);

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
  ThreadsReducer(ThreadsReduceGroup& group, int member) : group_(&group), member_(member) {}
  Result<PendingPtr> allreduce(const at::Tensor& flat) override { return group_->contribute(member_, flat); }

 private:
  ThreadsReduceGroup* group_;
  int member_;
};

}  // namespace baton::exec
