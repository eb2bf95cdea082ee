// Skipping the repeated periods of a run (SimOptions::skip_repeats).
//
// Why the figures are those of the full run. The engine is deterministic:
// what it does from an instant on depends only on its state at that instant
// (each worker's next action, blocked flag and pending event; when each
// device's compute stream and each link is next free; the arrivals sent and
// not yet received; the memory held) and on the actions ahead. Take the state
// at two instants t1 < t2, each when worker 0 is about to run a forward of the
// same stage, of microbatches m1 and m2 = m1 + dm. Suppose that, relative to
// its instant, the state at t2 is the state at t1 with every microbatch moved
// on by dm: each worker w at pc2_w = pc1_w + P_w (P_w >= 1), every pending
// time the same after t2 as after t1, each arrival in flight for microbatch m
// at t1 in flight for m + dm at t2, the same memory held. (A device or link
// free before its instant counts as free at it: nothing is issued before it.)
// Then the run from t2 on repeats the run from t1 on, shifted by T = t2 - t1
// and dm, for as long as each worker's actions repeat: if actions[w][i + P_w]
// is actions[w][i] with its microbatch moved on by dm for every i in
// [pc1_w, pc1_w + n P_w] (the last one is the action a worker waits at when a
// repeat ends) and every w, the state at t2 + n T is the state at t2 moved on
// n times: workers at pc2_w + n P_w, every time n T later, arrivals in flight
// for m + n dm, compute busy time n (busy2 - busy1) more, stage 0's
// completions of the skipped microbatches n T apart, the memory held the same
// and its peaks unchanged (every repeat holds what the first one did). The
// engine builds that state and goes on from it.
//
// Times are compared within 1e-10 s per simulated second (rounding), so the
// figures equal a full run's to about 1e-9 relative. Collectives end the
// search (an issued all-reduce stops it) and are never skipped: ALLREDUCE and
// STEP end a repeat of the actions. The search costs a snapshot per forward
// of worker 0 and a comparison with a few earlier ones; where no repeat shows
// within a few groups of microbatches (patience, below) it stops, so a run
// without repeats costs little more than before.
#include <algorithm>
#include <climits>
#include <cmath>

#include "sim/engine_internal.h"
#include "sim/plan.h"

namespace baton::engine_detail {

namespace {

constexpr size_t kRing = 128;  // snapshots kept

// Earlier snapshots of the same stage compared with a new one: a period is
// at most one forward of each microbatch of a group of (at most) one per
// worker through the stage (interleaved 1F1B: p), and a repeat is looked for
// only until each chunk of worker 0 has seen a few groups go by.
size_t candidates(size_t workers) { return std::min<size_t>(kRing - 1, workers + 1); }
size_t patience(size_t workers, size_t chunks) { return 8 * (workers + 1) * chunks + 64; }

bool repeats(const Action& later, const Action& earlier, int shift) {
  return later.kind == earlier.kind && later.paired == earlier.paired && later.stage == earlier.stage &&
         later.peer == earlier.peer && later.kind != ActionKind::kAllReduce && later.kind != ActionKind::kStep &&
         later.number == earlier.number + shift;
}

bool same_times(const std::vector<double>& a, const std::vector<double>& b, double tolerance) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] < 0) != (b[i] < 0)) return false;  // a time and "none"
    if (std::abs(a[i] - b[i]) > tolerance) return false;
  }
  return true;
}

}  // namespace

double Engine::skip_repeats(double now) {
  const auto& list = program_.actions[0];
  const int pc = state_[0].pc;
  if (pc >= static_cast<int>(list.size()) || list[pc].kind != ActionKind::kForward) return now;
  for (const WorkerState& st : state_)
    if (!st.pending.empty()) {
      skipping_ = false;  // the all-reduces have begun: no repeats left to find
      return now;
    }
  if (snapshots_taken_ > patience(state_.size(), stages_of(program_.workers[0]).size())) {
    skipping_ = false;  // no repeat found by now: simulate the rest
    return now;
  }
  if (snapshots_.empty()) snapshots_.resize(kRing);
  Snapshot& current = snapshots_[snapshots_taken_ % kRing];
  take_snapshot(current, now, list[pc]);
  const size_t earlier_ones = std::min(snapshots_taken_, kRing - 1);
  size_t compared = 0;
  for (size_t back = 1; back <= earlier_ones && compared < candidates(state_.size()); ++back) {
    const Snapshot& earlier = snapshots_[(snapshots_taken_ - back) % kRing];
    if (earlier.stage != current.stage) continue;
    ++compared;
    const int periods = repeats_ahead(earlier, current);
    if (periods <= 0) continue;
    jump(earlier, current, periods);
    skipping_ = false;  // one jump: what is left is the last repeats and the cool-down
    snapshots_.clear();
    return now + periods * (current.now - earlier.now);
  }
  ++snapshots_taken_;
  return now;
}

void Engine::take_snapshot(Snapshot& s, double now, const Action& action) {
  const size_t workers = state_.size();
  s.now = now;
  s.stage = action.stage;
  s.microbatch = action.batch();
  s.pc.resize(workers);
  s.event.resize(workers);
  s.blocked.resize(workers);
  s.busy.resize(workers);
  s.memory.resize(3 * workers);
  for (size_t w = 0; w < workers; ++w) {
    const WorkerState& st = state_[w];
    s.pc[w] = st.pc;
    s.event[w] = st.next_event < 0 ? kUnknown : st.next_event - now;
    s.blocked[w] = st.blocked ? 1 : 0;
    s.busy[w] = raw_.busy[w].value;
    s.memory[3 * w] = memory_[w].live_version();
    s.memory[3 * w + 1] = memory_[w].inflight();
    s.memory[3 * w + 2] = memory_[w].activations().value;
  }
  s.free.clear();
  for (const Seconds free : device_free_) s.free.push_back(std::max(free.value - now, 0.0));
  for (int link = 0; link < network_.num_links(); ++link)
    s.free.push_back(std::max(network_.link_free(link).value - now, 0.0));
  const auto value = [&](uint32_t key) { return (key % 2 == 0 ? act_arrival_ : grad_arrival_)[key / 2]; };
  std::erase_if(sent_, [&](uint32_t key) { return value(key) < 0; });  // received since
  s.inflight.clear();
  for (const uint32_t key : sent_) s.inflight.emplace_back(key, std::max(value(key) - now, 0.0));
  std::sort(s.inflight.begin(), s.inflight.end());
  s.makespan = std::max(raw_.makespan.value - now, 0.0);
  s.completions = completion_log_.size();
}

int Engine::repeats_ahead(const Snapshot& a, const Snapshot& b) const {
  const int dm = b.microbatch - a.microbatch;
  if (dm <= 0) return 0;
  const size_t workers = state_.size();
  for (size_t w = 0; w < workers; ++w) {
    const auto& list = program_.actions[w];
    if (b.pc[w] <= a.pc[w] || b.pc[w] >= static_cast<int>(list.size())) return 0;
    if (!repeats(list[b.pc[w]], list[a.pc[w]], dm)) return 0;
  }
  const double tolerance = 1e-10 * std::max(1.0, b.now);
  if (a.blocked != b.blocked || a.memory != b.memory || a.inflight.size() != b.inflight.size()) return 0;
  if (!same_times(a.event, b.event, tolerance) || !same_times(a.free, b.free, tolerance)) return 0;
  if (std::abs(a.makespan - b.makespan) > tolerance) return 0;
  for (size_t i = 0; i < a.inflight.size(); ++i) {
    if (b.inflight[i].first != a.inflight[i].first + 2u * static_cast<uint32_t>(dm)) return 0;
    if (std::abs(b.inflight[i].second - a.inflight[i].second) > tolerance) return 0;
  }
  // The actions ahead: n periods need actions[i + P] to repeat actions[i] for
  // i in [pc1, pc1 + n P].
  int periods = INT_MAX;
  for (size_t w = 0; w < workers && periods > 0; ++w) {
    const auto& list = program_.actions[w];
    const int period = b.pc[w] - a.pc[w];
    int64_t last = static_cast<int64_t>(list.size()) - period;
    if (periods != INT_MAX) last = std::min<int64_t>(last, a.pc[w] + int64_t{periods} * period + 1);
    int64_t i = a.pc[w];
    while (i < last && repeats(list[i + period], list[i], dm)) ++i;
    periods = std::min<int64_t>(periods, (i - a.pc[w] - 1) / period);
  }
  return periods == INT_MAX ? 0 : periods;
}

void Engine::jump(const Snapshot& a, const Snapshot& b, int periods) {
  const double period = b.now - a.now;
  const double shift = periods * period;
  const int dm = b.microbatch - a.microbatch;
  queue_ = {};
  for (size_t w = 0; w < state_.size(); ++w) {
    WorkerState& st = state_[w];
    st.pc += periods * (b.pc[w] - a.pc[w]);
    raw_.skipped += int64_t{periods} * (b.pc[w] - a.pc[w]);
    if (st.reached >= 0) st.reached += shift;
    if (st.next_event >= 0) schedule(static_cast<int>(w), Seconds(st.next_event + shift));
    raw_.busy[w] += Seconds(periods * (b.busy[w] - a.busy[w]));
  }
  for (Seconds& free : device_free_) free += Seconds(shift);
  network_.delay(Seconds(shift));
  const auto arrival_at = [&](uint32_t key) -> double& {
    return (key % 2 == 0 ? act_arrival_ : grad_arrival_)[key / 2];
  };
  // Read them all before writing any: a moved one may land on another's slot.
  std::vector<double> values;
  for (const auto& [key, relative] : b.inflight) {
    values.push_back(arrival_at(key));
    arrival_at(key) = kConsumed;
  }
  sent_.clear();
  for (size_t i = 0; i < b.inflight.size(); ++i) {
    const uint32_t moved = b.inflight[i].first + 2u * static_cast<uint32_t>(periods) * static_cast<uint32_t>(dm);
    arrival_at(moved) = values[i] + shift;
    sent_.push_back(moved);
  }
  raw_.makespan += Seconds(shift);
  for (size_t i = a.completions; i < b.completions; ++i) {
    const int microbatch = completion_log_[i];
    const Seconds end = raw_.stage0_completion[microbatch];
    for (int k = 1; k <= periods; ++k) raw_.stage0_completion[microbatch + k * dm] = end + Seconds(k * period);
  }
}

}  // namespace baton::engine_detail
