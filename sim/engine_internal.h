// Internal to the simulator: the event loop's state (sim/engine.cc) and its
// skipping of repeated periods (sim/engine_repeats.cc).
//
// Every worker has at most one pending event: "try to run your next action at
// time t". Events are processed in (time, worker) order, so links and shared
// compute streams are granted first come, first served in simulated time.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "sim/memory_tracker.h"
#include "sim/network.h"
#include "sim/simulator.h"
#include "sim/simulator_internal.h"

namespace baton::engine_detail {

constexpr double kUnknown = -1.0;   // an arrival not yet known, a time not yet reached
constexpr double kConsumed = -2.0;  // an arrival its receive has taken

struct Collective {
  int arrived = 0;
  Seconds latest_issue;
  double end = kUnknown;
  std::vector<std::pair<int, int>> members;  // (worker, action index)
};

// A compute unit whose streams run at once (Level::shared_speedup > 1): what
// its running actions hold of it from now on, as steps: from `at[i]` until
// `at[i + 1]` (the last: forever) they hold `used[i]` of its capacity (1 = a
// whole device as profiled) and `issued[i]` of its host's issuing (1 = one
// thread launching all the time). An action issues `share` of its time at
// rate 1 (its host time over its device time), so at rate r it holds r of
// the capacity and r x share of the issuing; it gets at most 1, at most what
// the others leave of each, and keeps it (sim/topology.h). Launches from the
// workers' threads interleave call by call: an action issued in full (share
// 1) leaves nothing and the others wait, one that issues half its time leaves
// room for a second at full rate.
class SharedUnit {
 public:
  explicit SharedUnit(double capacity) : capacity_(capacity) {}
  // Commits an action of `work` (seconds at rate 1) that issues `share` of
  // its time, starting at `start` (never before an earlier start), and
  // returns its end.
  double run(double start, double work, double share);

 private:
  double capacity_;
  std::vector<double> at_;      // step starts, increasing; the last step holds nothing
  std::vector<double> used_;    // [step]
  std::vector<double> issued_;  // [step]
};

struct WorkerState {
  int pc = 0;
  bool blocked = false;  // waiting for data or an all-reduce; woken by its producer
  double reached = kUnknown;
  bool dispatched = false;                   // the action at pc has had its SimOptions::worker_action_overhead
  double next_event = kUnknown;              // the time of its pending event, if it has one
  std::vector<std::pair<int, int>> pending;  // (stage, round) of issued all-reduces a STEP has not seen
};

// An event, kept as one unsigned number (time's bits, then the worker) so
// that the queue compares without branches: events often tie in time (an
// overlapped pair's two inputs, a pipeline in lockstep), and a branch on the
// tie mispredicts. A non-negative double's bits order as the double does
// (+ 0.0 turns a -0.0 into +0.0).
class Event {
 public:
  __extension__ using Key = unsigned __int128;
  Event(double time, int worker)
      : key_((Key{std::bit_cast<uint64_t>(time + 0.0)} << 32) | Key{static_cast<uint32_t>(worker)}) {}
  double time() const { return std::bit_cast<double>(static_cast<uint64_t>(key_ >> 32)); }
  int worker() const { return static_cast<int>(static_cast<uint32_t>(key_)); }
  bool operator>(const Event& other) const { return key_ > other.key_; }

 private:
  Key key_;
};

// What decides the run's future at one instant, relative to that instant
// (engine_repeats.cc): taken when worker 0 is about to run a forward.
struct Snapshot {
  double now = 0.0;
  int stage = -1;
  int microbatch = 0;
  std::vector<int> pc;
  std::vector<double> event;  // per worker: pending event - now, or kUnknown
  std::vector<char> blocked;
  std::vector<double> free;                           // devices then links: max(free - now, 0)
  std::vector<std::pair<uint32_t, double>> inflight;  // (arrival slot, max(arrival - now, 0)), by slot
  std::vector<int64_t> memory;                        // per worker: in-flight microbatches, activation bytes
  std::vector<double> busy;
  double makespan = 0.0;
  size_t completions = 0;  // entries of the completion log so far
};

class Engine {
 public:
  Engine(const Program& program, const std::vector<StageCost>& costs, const Topology& topology,
         const SimOptions& options);
  Status run();
  RawRun take() {
    raw_.memory = std::move(memory_);
    return std::move(raw_);
  }

 private:
  void advance(int worker, Seconds now);
  bool run_compute(int worker, const Action& action, Seconds now);
  void run_send(int worker, const Action& action, Seconds now);
  bool run_recv(int worker, const Action& action, Seconds now);
  // When a receive whose data's arrival is known may complete (its drawn extra included).
  double receive_ready(int worker, const Action& action);
  void run_allreduce(int worker, const Action& action, Seconds now);
  bool step_ready(int worker, Seconds now);
  Seconds noisy(Seconds cost, int layers);
  Seconds slowed(int worker, Seconds cost) const;  // SimOptions::worker_slowdown
  Seconds compute_time(const Action& action) const;
  // compute_time less, for the second pass of an overlapped pair (the
  // worker's previous action `paired`), what the pair hides: each pass's
  // overlap, up to the other's compute beside it.
  Seconds pass_time(int worker, const Action& action) const;
  // The part of `action`'s time its worker's host spends issuing it (StageCost).
  double host_share(const Action& action) const;
  void track_memory(int worker, const Action& action, bool starting);
  void update_memory(int worker, const Action& action, bool starting);
  void record(int worker, const Action& action, Stream stream, Seconds start, Seconds end, Bytes bytes);
  void schedule(int worker, Seconds at) {
    state_[worker].next_event = at.value;
    queue_.push(Event{at.value, worker});
  }
  size_t slot(int stage, int microbatch) const { return static_cast<size_t>(stage) * microbatches_ + microbatch; }
  double& arrival(int stage, ActionKind kind, int microbatch);

  // engine_repeats.cc: when worker 0 is about to run a forward at `now`,
  // looks for an earlier instant whose state this one repeats, shifted in
  // time and microbatches, and if the actions ahead repeat too, jumps over
  // the repeats. Returns the (possibly later) time to go on at.
  double skip_repeats(double now);
  void take_snapshot(Snapshot& into, double now, const Action& action);
  int repeats_ahead(const Snapshot& earlier, const Snapshot& later) const;
  void jump(const Snapshot& earlier, const Snapshot& later, int periods);

  const Program& program_;
  const std::vector<StageCost>& costs_;
  const SimOptions& options_;
  Network network_;
  int microbatches_;
  bool keep_intervals_;  // only pipedream measures busy time inside a window
  std::vector<WorkerState> state_;
  std::vector<Seconds> device_free_;  // [compute unit] (Topology::compute_unit)
  std::vector<int> compute_unit_;     // [worker]
  std::vector<SharedUnit> shared_;    // [compute unit], when its streams run at once (else empty)
  std::vector<double> act_arrival_;   // [receiving stage * M + microbatch] (one worker runs it)
  std::vector<double> grad_arrival_;
  std::vector<std::vector<Collective>> collectives_;  // [stage][round]
  std::vector<std::vector<int>> stage_devices_;       // what each stage's all-reduce spans
  std::vector<Seconds> collective_free_;              // [device]: when the last collective over it ends
  std::vector<int> stage_members_;                    // the program's workers of each stage
  std::vector<int> version_used_;                     // [stage * M + microbatch]
  std::vector<int> stage0_version_;                   // [microbatch], for vertical sync
  std::vector<MemoryTracker> memory_;
  std::vector<Bytes> device_held_;  // [device]: the sum of its workers' MemoryTracker::held
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  const std::vector<double>* noise_factors_ = nullptr;      // set only with a noise seed
  const std::vector<Seconds>* allreduce_extras_ = nullptr;  // likewise
  // Transfer noise (likewise): receives that wait for their data, receives whose data are there.
  const std::vector<Seconds>* late_extras_ = nullptr;
  const std::vector<Seconds>* ready_extras_ = nullptr;
  bool transfer_noise_ = false;
  std::vector<std::array<double, 2>> act_extra_;  // [as act_arrival_]: the receive's drawn extras, late and ready
  std::vector<std::array<double, 2>> grad_extra_;
  std::mt19937_64 noise_;
  RawRun raw_;
  // Skipping repeats (SimOptions::skip_repeats), until one jump is made.
  bool skipping_ = false;
  std::vector<uint32_t> sent_;       // arrival slots written (2 x slot, + 1 for gradients), consumed or not
  std::vector<int> completion_log_;  // microbatches whose stage-0 completion is set, in order
  std::vector<Snapshot> snapshots_;  // a ring of the latest ones
  size_t snapshots_taken_ = 0;
};

}  // namespace baton::engine_detail
