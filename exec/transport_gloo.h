// c10d Gloo transport for the gloo backend: one process per worker (rank =
// worker id).
//
// Groups: `connect_world` joins the world group over a TCPStore (rank 0
// serves it) under the prefix "world/". A replicated stage's members join a
// group of their own, `connect_subgroup`, over a PrefixStore "stage<s>/" of
// the same store: LibTorch 1.13's C++ API has no new_group, but a
// ProcessGroupGloo built by exactly the members over a private key prefix is
// one (non-members build nothing).
// Tags: c10d's send/recv match on (peer, tag) with tag >= 0; baton uses
// tag = 2 * sequence + payload, unique within a run; tags from
// kFirstControlTag up are for the end-of-run gathers.
// Gloo's device: loopback when the master address is loopback; otherwise the
// interface named by GLOO_SOCKET_IFNAME, else the one the hostname resolves to.
// Each group has its own device and so its own I/O thread (Gloo's event loop,
// which reads every message), run under SCHED_IDLE: it runs only when its
// core has nothing else to run, and never takes the core from the rank's own
// thread. Why, in three steps measured on the 2-core machine:
// - At nice 0, when a message arrives while this rank's thread is inside a
//   Gloo send or receive, the loop finds the pair's lock taken and retries at
//   once (the socket stays readable): it spins. Woken, it preempts threads on
//   its core, the lock's holder among them, and the spin lasts until the
//   scheduler's next tick. Uprobes on Gloo (mlp, pipedream, micro-batch 32,
//   60 steps): 69-75 thousand failed lock attempts per loop, 99% of them while
//   a send or receive was in progress; those calls took 23 us at the median
//   and 3.6 ms at the 0.99 quantile; an all-reduce took 3-4 ms instead of
//   0.1-0.4.
// - At nice 19 the loop no longer preempted a normal thread (failed attempts
//   808 to 183 thousand over 200 steps, that run's step 11.1 to 8.3 ms, dp's
//   step 3-16% shorter), but a woken loop placed on a core busy with the other
//   rank's compute waited there 1-4 ms (perf sched: over 1 ms 24-74 times per
//   loop in one calibration) although its own rank's core was idle: the local
//   launcher starts each rank on its own share of the CPUs (exec/launcher.h).
// - Pinned, a nice-19 loop still got its rank's core now and then, for up to a
//   tick, spinning while its rank's thread, preempted inside a Gloo send,
//   held the lock: sends of mlp's pipedream at micro-batch 32 blocked 1.5-3.2
//   ms and its step took 10.5 ms against 5.7 predicted. Under SCHED_IDLE: 5.6
//   ms (3 alternated pairs); vgg-mini's gpipe and 1f1b, mlp's dp and pipedream
//   at 256 unchanged within the noise.
// The price: where other processes keep a rank's cores busy, its I/O thread
// gets almost no time, and every message waits for it. Calibrating two ranks
// beside busy loops (bench/busy_machine.sh, 2-core machine): with one loop the
// fastest 4-byte one-way time went from ~55 us to 14-16 ms, with two the
// calibration took 61-65 s instead of 2-3 s; with the I/O threads at the
// process's own class, 31-37 us and 3.3-4.1 s. So the class is a choice,
// BATON_GLOO_IO=idle|normal in the rank's environment (default idle): the
// local launcher (tools/rank_launch.h) sets normal when other work keeps half
// a CPU or more busy as it starts the ranks, idle otherwise, unless the
// variable is set already. An error
// Gloo raises when an operation is issued, after its I/O thread has seen the
// peer go, is worded as one a wait reports ("connection closed by rank N").
// Thread safety: one worker thread per process uses these.
#pragma once

#include <string>

#include "exec/executor.h"
#include "exec/launcher.h"
#include "exec/transport.h"

namespace baton::exec {

constexpr int kFirstControlTag = 1 << 30;

// The scheduling class of Gloo's I/O threads (see above).
enum class GlooIo { kIdle, kNormal };
// From BATON_GLOO_IO: unset, empty or "idle" is kIdle, "normal" kNormal;
// anything else is an Error that names the variable.
Result<GlooIo> gloo_io_from_environment();
// "idle" or "normal", as BATON_GLOO_IO and calibration.gloo_io_threads spell it.
const char* gloo_io_name(GlooIo io);

struct GlooGroups {
  c10::intrusive_ptr<::c10d::Store> store;
  c10::intrusive_ptr<compat::GlooGroup> world;
  GlooIo io = GlooIo::kIdle;  // of every group this rank builds
};

Result<GlooGroups> connect_world(const RankEnv& env, Seconds timeout);
// This rank is member `member` (its replica index) of stage `stage`'s
// `members` replicas; every member calls this, no one else does.
Result<c10::intrusive_ptr<compat::GlooGroup>> connect_subgroup(const GlooGroups& groups, int stage, int member,
                                                               int members, Seconds timeout,
                                                               const std::string& master_addr);

// Waits at most `timeout` for a c10d work item, turning its exceptions into
// Errors. `what` names the operation ("receive from rank 1"), `peer` whom it
// waits on as a noun phrase ("rank 1", "one of ranks 0, 2"): running out of
// time reads "<what> timed out after 5 s: <peer> is not responding", a lost
// connection "<what> failed: connection closed by <peer> (<gloo's words>)".
Status wait_work(const c10::intrusive_ptr<::c10d::Work>& work, Seconds timeout, const std::string& what,
                 const std::string& peer);

class GlooTransport final : public Transport {
 public:
  GlooTransport(c10::intrusive_ptr<compat::GlooGroup> world, Seconds timeout)
      : world_(std::move(world)), timeout_(timeout) {}
  Result<PendingPtr> send(const MessageKey& key, const at::Tensor& tensor) override;
  Result<at::Tensor> recv(const MessageKey& key, const std::vector<int64_t>& shape, at::ScalarType dtype) override;
  // Issues the c10d receive at once (Gloo moves the bytes only once it is posted).
  Result<PostedRecvPtr> post_recv(const MessageKey& key, const std::vector<int64_t>& shape,
                                  at::ScalarType dtype) override;

 private:
  c10::intrusive_ptr<compat::GlooGroup> world_;
  Seconds timeout_;
};

// `ranks`: the world ranks of the group's members (for messages).
class GlooReducer final : public Reducer {
 public:
  GlooReducer(c10::intrusive_ptr<compat::GlooGroup> group, const std::vector<int>& ranks);
  Result<PendingPtr> allreduce(const at::Tensor& flat) override;

 private:
  c10::intrusive_ptr<compat::GlooGroup> group_;
  std::string members_;  // "ranks 0, 2"
};

}  // namespace baton::exec
