#include "sim/validate_internal.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include <fmt/format.h>

namespace baton::validate_detail {

namespace {

// Programs up to this many steps per worker are shown whole in messages;
// longer ones as an excerpt of kGridContextSteps either side of the mark.
constexpr int kFullGridMaxSteps = 40;
constexpr int kGridContextSteps = 10;

std::string grid_for(const Program& program, int worker, int step) {
  int longest = 0;
  for (const std::vector<Action>& list : program.actions) longest = std::max(longest, static_cast<int>(list.size()));
  if (longest <= kFullGridMaxSteps) return program_grid(program, worker, step);
  return program_grid_excerpt(program, worker, step, kGridContextSteps);
}

}  // namespace

int num_rows(const Program& program) { return static_cast<int>(program.actions.size()); }

int row_length(const Program& program, int worker) { return static_cast<int>(program.actions[worker].size()); }

// "invalid program: <what>" followed by the grid marked at (worker, step).
Error fail(const Program& program, int worker, int step, const std::string& what) {
  return Error{fmt::format("invalid program: {}\n{}", what, grid_for(program, worker, step))};
}

// "s1:B3 (w2 step 5)"
std::string describe(const Program& program, int worker, int step) {
  return fmt::format("{} (w{} step {})", to_string(program.actions[worker][step]), worker, step);
}

namespace {

// Symbolic execution of the interpreter semantics. Each action is executed
// once and each wake-up is paid for by a send or an ALLREDUCE, so the run is
// O(actions).
class SymbolicRun {
 public:
  SymbolicRun(const Program& program, const StageTable& table, const std::vector<std::vector<int>>& send_step)
      : program_(program),
        table_(table),
        send_step_(send_step),
        pc_(program.actions.size(), 0),
        queued_(program.actions.size(), true),
        reached_(table.size()),
        complete_(table.size(), 0),
        step_waiters_(table.size()) {}

  // Runs until every worker is finished or blocked; returns the first blocked worker or -1.
  int run() {
    for (int w = 0; w < num_rows(program_); ++w) ready_.push_back(w);
    while (!ready_.empty()) {
      const int w = ready_.front();
      ready_.pop_front();
      queued_[w] = false;
      advance(w);
    }
    for (int w = 0; w < num_rows(program_); ++w) {
      if (pc_[w] < row_length(program_, w)) return w;
    }
    return -1;
  }

  int pc(int worker) const { return pc_[worker]; }
  int issued(int worker, int stage) const {
    const auto it = issued_.find(issued_key(worker, stage));
    return it == issued_.end() ? 0 : it->second;
  }
  int complete(int stage) const { return complete_[stage]; }

 private:
  void wake(int worker) {
    if (queued_[worker]) return;
    queued_[worker] = true;
    ready_.push_back(worker);
  }

  bool can_run(int worker, const Action& a) {
    if (is_recv(a.kind)) return pc_[a.peer] > send_step_[worker][pc_[worker]];
    if (a.kind != ActionKind::kStep || complete_[a.stage] >= issued(worker, a.stage)) return true;
    step_waiters_[a.stage].push_back(worker);
    return false;
  }

  // A send may unblock its receiver, if the receiver waits on exactly this send.
  void on_send(int worker, const Action& a) {
    const int receiver = a.peer;
    const int at = pc_[receiver];
    if (at < row_length(program_, receiver) && is_recv(program_.actions[receiver][at].kind) &&
        program_.actions[receiver][at].peer == worker && send_step_[receiver][at] == pc_[worker])
      wake(receiver);
  }

  void on_allreduce(int worker, int stage) {
    const size_t round = static_cast<size_t>(issued_[issued_key(worker, stage)]++);
    if (reached_[stage].size() <= round) reached_[stage].resize(round + 1, 0);
    if (++reached_[stage][round] < static_cast<int>(table_[stage].size())) return;
    ++complete_[stage];
    std::vector<int> waiters;
    waiters.swap(step_waiters_[stage]);
    for (int w : waiters) wake(w);
  }

  void advance(int worker) {
    const std::vector<Action>& list = program_.actions[worker];
    while (pc_[worker] < static_cast<int>(list.size())) {
      const Action& a = list[pc_[worker]];
      if (!can_run(worker, a)) return;
      if (is_send(a.kind)) on_send(worker, a);
      if (a.kind == ActionKind::kAllReduce) on_allreduce(worker, a.stage);
      ++pc_[worker];
    }
  }

  const Program& program_;
  const StageTable& table_;
  const std::vector<std::vector<int>>& send_step_;
  std::vector<int> pc_;  // next action of each worker
  static uint64_t issued_key(int worker, int stage) {
    return (static_cast<uint64_t>(worker) << 32) | static_cast<uint32_t>(stage);
  }
  std::unordered_map<uint64_t, int> issued_;  // ALLREDUCEs issued by each (worker, stage)
  std::vector<bool> queued_;                  // in ready_
  std::deque<int> ready_;
  std::vector<std::vector<int>> reached_;       // [stage][round] replicas that issued it
  std::vector<int> complete_;                   // [stage] rounds complete (a prefix)
  std::vector<std::vector<int>> step_waiters_;  // [stage] workers blocked on STEP
};

std::string stuck_reason(const Program& program, const SymbolicRun& run, int worker,
                         const std::vector<std::vector<int>>& send_step) {
  const int step = run.pc(worker);
  const Action& a = program.actions[worker][step];
  if (is_recv(a.kind)) {
    const int sender = a.peer;
    const int send_at = send_step[worker][step];
    return fmt::format("{} waits for {} (w{} step {}), but w{} is stuck at step {}", describe(program, worker, step),
                       to_string(program.actions[sender][send_at]), sender, send_at, sender, run.pc(sender));
  }
  return fmt::format(
      "{} waits for ALLREDUCE round {} of stage {}, which not every replica "
      "reaches",
      describe(program, worker, step), run.complete(a.stage), a.stage);
}

}  // namespace

Status check_deadlock(const Program& program, const StageTable& table, const std::vector<std::vector<int>>& send_step) {
  SymbolicRun run(program, table, send_step);
  const int stuck = run.run();
  if (stuck < 0) return ok_status();
  std::string blocked;
  for (int w = 0; w < num_rows(program); ++w) {
    if (run.pc(w) < row_length(program, w)) blocked += fmt::format(" w{}@{}", w, run.pc(w));
  }
  return fail(program, stuck, run.pc(stuck),
              fmt::format("deadlock: no worker can progress (blocked worker@step:{}); {}", blocked,
                          stuck_reason(program, run, stuck, send_step)));
}

}  // namespace baton::validate_detail
