#include "sim/validate.h"

#include "sim/validate_internal.h"

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

namespace baton {

namespace {

using namespace validate_detail;

// ---- 1. shape ---------------------------------------------------------------

Status check_stage_table(const Program& program, const StageTable& table) {
  std::vector<int> replicas_seen(table.size(), 0);
  for (int w = 0; w < program.num_workers(); ++w) {
    const WorkerInfo& info = program.workers[w];
    for (int stage : stages_of(info)) {
      if (stage < 0 || stage >= program.num_stages)
        return fail(program, w, -1, fmt::format("w{} is on stage {}, outside [0, {})", w, stage, program.num_stages));
      if (info.replica < 0 || table[stage][info.replica] != w)
        return fail(program, w, -1,
                    fmt::format("w{} claims replica {} of stage {}, which is "
                                "invalid or taken by another worker",
                                w, info.replica, stage));
      ++replicas_seen[stage];
    }
  }
  for (int s = 0; s < program.num_stages; ++s) {
    if (replicas_seen[s] == 0 || replicas_seen[s] != static_cast<int>(table[s].size()))
      return fail(program, -1, -1,
                  fmt::format("stage {} has replicas numbered with gaps or "
                              "no worker at all",
                              s));
  }
  return ok_status();
}

Status check_shape(const Program& program, const StageTable& table) {
  if (program.num_stages < 1)
    return fail(program, -1, -1, fmt::format("num_stages is {}, must be >= 1", program.num_stages));
  if (program.batches < 0)
    return fail(program, -1, -1, fmt::format("microbatches is {}, must be >= 0", program.batches));
  if (program.batches > program.num_actions())
    return fail(program, -1, -1,
                fmt::format("microbatches is {} but the program has only {} "
                            "actions, so some microbatch never runs",
                            program.batches, program.num_actions()));
  if (num_rows(program) != program.num_workers())
    return fail(program, -1, -1,
                fmt::format("{} action lists for {} workers", num_rows(program), program.num_workers()));
  return check_stage_table(program, table);
}

// ---- 2. fields --------------------------------------------------------------

// The stage a send or receive talks to, relative to the worker's own.
int peer_stage_offset(ActionKind kind) {
  return kind == ActionKind::kSendAct || kind == ActionKind::kRecvGrad ? +1 : -1;
}

bool is_round(ActionKind kind) { return kind == ActionKind::kAllReduce || kind == ActionKind::kStep; }

// Why the action's numbers are wrong, or "" when they are fine.
std::string field_problem(const Program& program, int worker, const Action& action) {
  const WorkerInfo& info = program.workers[worker];
  if (!info.runs(action.stage)) {
    if (info.chunks.empty())
      return fmt::format("names stage {} but w{} is on stage {}", action.stage, worker, info.stage);
    return fmt::format("names stage {}, which w{} does not run", action.stage, worker);
  }
  const int stage = action.stage;
  if (is_round(action.kind)) return action.round() < 0 ? "has a negative round" : "";
  if (action.batch() < 0 || action.batch() >= program.batches)
    return fmt::format("names microbatch {}, outside [0, {})", action.batch(), program.batches);
  const bool transfer = is_send(action.kind) || is_recv(action.kind);
  if (!transfer) return action.peer == -1 ? "" : "has a peer but is not a transfer";
  const int expected = stage + peer_stage_offset(action.kind);
  if (action.peer < 0 || action.peer >= program.num_workers() || !program.workers[action.peer].runs(expected))
    return fmt::format("names peer w{}, which is not a worker of stage {}", action.peer, expected);
  if (action.peer == worker)
    return fmt::format("sends to its own worker (w{} runs stages {} and {}: nothing moves)", worker, stage, expected);
  return "";
}

// Why an overlapped pair opened at `step` is malformed, or "": it pairs F, B
// or I with the worker's next pass (transfers between them are lowering's),
// which is one of those too and opens no pair itself.
std::string pair_problem(const Program& program, int worker, int step) {
  const std::vector<Action>& list = program.actions[worker];
  if (!list[step].paired) return "";
  if (!can_pair(list[step].kind)) return "opens an overlapped pair (&), which only F, B and I do";
  const size_t next = next_pass(list, static_cast<size_t>(step));
  if (next >= list.size()) return "opens an overlapped pair (&) but no pass follows it";
  const Action& other = list[next];
  if (!can_pair(other.kind) || other.paired)
    return fmt::format("opens an overlapped pair with {}, which is not an F, B or I that closes it", to_string(other));
  return "";
}

Status check_fields(const Program& program) {
  for (int w = 0; w < num_rows(program); ++w) {
    for (int step = 0; step < row_length(program, w); ++step) {
      std::string problem = field_problem(program, w, program.actions[w][step]);
      if (problem.empty()) problem = pair_problem(program, w, step);
      if (!problem.empty()) return fail(program, w, step, fmt::format("{} {}", describe(program, w, step), problem));
    }
  }
  return ok_status();
}

// ---- 3. per-worker order ----------------------------------------------------

// Step of each microbatch action kind on one worker (-1: absent). The first
// eight ActionKinds are exactly the per-microbatch kinds.
constexpr int kMicrobatchKinds = 8;
using Slot = std::array<int, kMicrobatchKinds>;
constexpr Slot kEmptySlot = {-1, -1, -1, -1, -1, -1, -1, -1};

int slot_of(const Slot& slot, ActionKind kind) { return slot[static_cast<int>(kind)]; }

// The rules of check 3 for one microbatch on one worker; a problem marks a step.
struct OrderProblem {
  int step = -1;
  std::string what;
};

OrderProblem backward_problem(const Slot& slot, int k) {
  const int f = slot_of(slot, ActionKind::kForward);
  const int b = slot_of(slot, ActionKind::kBackward);
  const int i = slot_of(slot, ActionKind::kBackwardInput);
  const int w = slot_of(slot, ActionKind::kBackwardWeight);
  for (int step : {b, i, w}) {
    if (step >= 0 && step < f)
      return {step, fmt::format("backward of microbatch {} comes before "
                                "its forward F{} (step {})",
                                k, k, f)};
  }
  if (b >= 0 && (i >= 0 || w >= 0)) return {std::max(i, w), fmt::format("microbatch {} has both B and I/W", k)};
  if (b < 0 && i < 0 && w < 0) return {f, fmt::format("F{} has no backward", k)};
  if (b < 0 && (i < 0 || w < 0))
    return {std::max(i, w), fmt::format("microbatch {} has {} without {}", k, i < 0 ? "W" : "I", i < 0 ? "I" : "W")};
  if (b < 0 && w < i) return {w, fmt::format("W{} comes before I{}", k, k)};
  return {};
}

// A transfer `kind` must exist and sit before (or after) the compute at `compute_step`.
OrderProblem transfer_problem(const Slot& slot, ActionKind kind, int compute_step, bool before, int k) {
  const int step = slot_of(slot, kind);
  const char* side = before ? "before" : "after";
  if (step < 0) return {compute_step, fmt::format("needs {}{} {} it on the same worker", kind_name(kind), k, side)};
  if ((step < compute_step) != before)
    return {step, fmt::format("{}{} must come {} the compute of microbatch {} (step {})", kind_name(kind), k, side, k,
                              compute_step)};
  return {};
}

// `upstream` / `downstream`: whether the neighbouring stage runs on another
// worker (transfers expected); a neighbour on the same worker hands over locally.
OrderProblem slot_problem(const Slot& slot, int k, bool upstream, bool downstream) {
  const int f = slot_of(slot, ActionKind::kForward);
  if (f < 0) {
    int first = -1;
    for (int step : slot) first = step >= 0 && (first < 0 || step < first) ? step : first;
    return {first, fmt::format("microbatch {} has no forward F{} on this worker", k, k)};
  }
  if (OrderProblem p = backward_problem(slot, k); p.step >= 0) return p;
  const int b = std::max(slot_of(slot, ActionKind::kBackward), slot_of(slot, ActionKind::kBackwardInput));
  // Activations arrive before F and leave after it; gradients likewise around B/I.
  struct Rule {
    bool applies;
    ActionKind kind;
    int compute_step;
    bool before;
  };
  const Rule rules[] = {{upstream, ActionKind::kRecvAct, f, true},
                        {downstream, ActionKind::kSendAct, f, false},
                        {downstream, ActionKind::kRecvGrad, b, true},
                        {upstream, ActionKind::kSendGrad, b, false}};
  for (const Rule& rule : rules) {
    if (!rule.applies) continue;
    OrderProblem p = transfer_problem(slot, rule.kind, rule.compute_step, rule.before, k);
    if (p.step >= 0) return p;
  }
  return {};
}

// The worker of `stage` that runs microbatch k, or -1 when the stage has none.
int runner(const StageTable& table, int stage, int k) {
  if (stage < 0 || stage >= static_cast<int>(table.size()) || table[stage].empty()) return -1;
  return table[stage][k % static_cast<int>(table[stage].size())];
}

// One stage of a worker's list. `slots` has one entry per microbatch, all
// empty on entry and on return.
Status check_stage_order(const Program& program, const StageTable& table, int worker, int stage,
                         std::vector<Slot>& slots) {
  std::vector<int> touched;
  const std::vector<Action>& list = program.actions[worker];
  const auto reset = [&] {
    for (int k : touched) slots[k] = kEmptySlot;
  };
  for (int step = 0; step < static_cast<int>(list.size()); ++step) {
    const Action& action = list[step];
    if (is_round(action.kind) || action.stage != stage) continue;
    Slot& slot = slots[action.batch()];
    if (slot == kEmptySlot) touched.push_back(action.batch());
    int& seen = slot[static_cast<int>(action.kind)];
    if (seen >= 0) {
      const int first = seen;
      reset();
      return fail(program, worker, step,
                  fmt::format("{} repeats the action at step {}", describe(program, worker, step), first));
    }
    seen = step;
  }
  for (int k : touched) {
    const bool upstream = stage > 0 && runner(table, stage - 1, k) != worker;
    const bool downstream = stage < program.num_stages - 1 && runner(table, stage + 1, k) != worker;
    const OrderProblem p = slot_problem(slots[k], k, upstream, downstream);
    if (p.step < 0) continue;
    reset();
    return fail(program, worker, p.step, fmt::format("w{} stage {}: {}", worker, stage, p.what));
  }
  reset();
  return ok_status();
}

// A worker that runs both sides of a cut hands the tensor over in its own
// list: F(k) of the later stage after F(k) of the earlier, and the backward
// (B or I) of the earlier after the later one's.
Status check_local_handoffs(const Program& program, const StageTable& table, int worker) {
  const WorkerInfo& info = program.workers[worker];
  if (info.chunks.size() < 2) return ok_status();
  std::unordered_map<int64_t, int> forward_at, backward_at;  // stage * M + k -> step
  const std::vector<Action>& list = program.actions[worker];
  const int64_t m = std::max(program.batches, 1);
  for (int step = 0; step < static_cast<int>(list.size()); ++step) {
    const Action& a = list[step];
    if (a.kind == ActionKind::kForward) forward_at[a.stage * m + a.batch()] = step;
    if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput)
      backward_at[a.stage * m + a.batch()] = step;
  }
  for (const auto& [key, step] : forward_at) {
    const int stage = static_cast<int>(key / m);
    const int k = static_cast<int>(key % m);
    if (stage == 0 || runner(table, stage - 1, k) != worker) continue;
    const auto before = forward_at.find((stage - 1) * m + k);
    if (before == forward_at.end() || before->second > step)
      return fail(program, worker, step,
                  fmt::format("{} runs before s{}:F{}, whose output it takes on the same worker",
                              describe(program, worker, step), stage - 1, k));
    const auto later = backward_at.find(key);
    const auto earlier = backward_at.find((stage - 1) * m + k);
    if (later != backward_at.end() && earlier != backward_at.end() && earlier->second < later->second)
      return fail(program, worker, earlier->second,
                  fmt::format("{} runs before s{}'s backward of microbatch {}, whose input gradient it takes",
                              describe(program, worker, earlier->second), stage, k));
  }
  return ok_status();
}

Status check_orders(const Program& program, const StageTable& table) {
  std::vector<Slot> slots(static_cast<size_t>(program.batches), kEmptySlot);
  for (int w = 0; w < num_rows(program); ++w) {
    for (int stage : stages_of(program.workers[w]))
      if (Status ok = check_stage_order(program, table, w, stage, slots); !ok) return ok;
    if (Status ok = check_local_handoffs(program, table, w); !ok) return ok;
  }
  return ok_status();
}

// ---- 4. every stage forwards every microbatch once --------------------------

Status check_stage_coverage(const Program& program, const std::vector<int>& workers, int stage,
                            std::vector<int>& forwarded_by) {
  std::fill(forwarded_by.begin(), forwarded_by.end(), -1);
  for (int w : workers) {
    for (int step = 0; step < row_length(program, w); ++step) {
      const Action& action = program.actions[w][step];
      if (action.kind != ActionKind::kForward || action.stage != stage) continue;
      int& owner = forwarded_by[action.batch()];
      if (owner >= 0)
        return fail(program, w, step,
                    fmt::format("{} runs microbatch {} on stage {} a second "
                                "time (w{} already runs it)",
                                describe(program, w, step), action.batch(), stage, owner));
      owner = w;
    }
  }
  const auto missing = std::find(forwarded_by.begin(), forwarded_by.end(), -1);
  if (missing == forwarded_by.end()) return ok_status();
  // Marked past the end of the replica that round robin would give it.
  const int k = static_cast<int>(missing - forwarded_by.begin());
  const int owner = workers[k % static_cast<int>(workers.size())];
  return fail(program, owner, row_length(program, owner),
              fmt::format("stage {} never runs F{} (every stage must forward microbatches 0..{})", stage, k,
                          program.batches - 1));
}

Status check_coverage(const Program& program, const StageTable& table) {
  std::vector<int> forwarded_by(static_cast<size_t>(program.batches), -1);
  for (int s = 0; s < program.num_stages; ++s) {
    if (Status ok = check_stage_coverage(program, table[s], s, forwarded_by); !ok) return ok;
  }
  return ok_status();
}

// ---- 5. sends match receives ------------------------------------------------

// (worker, kind, stage, microbatch) -> step, for every transfer of the
// program. Unique per key once check 3 has passed.
struct TransferKey {
  uint64_t worker_kind;       // worker << 4 | kind
  uint64_t stage_microbatch;  // stage << 32 | microbatch
  bool operator==(const TransferKey&) const = default;
};
struct TransferKeyHash {
  size_t operator()(const TransferKey& key) const {
    return std::hash<uint64_t>()(key.worker_kind * 0x9E3779B97F4A7C15ULL ^ key.stage_microbatch);
  }
};
using TransferIndex = std::unordered_map<TransferKey, int, TransferKeyHash>;

TransferKey transfer_key(int worker, ActionKind kind, int stage, int microbatch) {
  return {(static_cast<uint64_t>(worker) << 4) | static_cast<uint64_t>(kind),
          (static_cast<uint64_t>(static_cast<uint32_t>(stage)) << 32) | static_cast<uint32_t>(microbatch)};
}

ActionKind counterpart(ActionKind kind) {
  switch (kind) {
    case ActionKind::kSendAct: return ActionKind::kRecvAct;
    case ActionKind::kRecvAct: return ActionKind::kSendAct;
    case ActionKind::kSendGrad: return ActionKind::kRecvGrad;
    default: return ActionKind::kSendGrad;
  }
}

TransferIndex index_transfers(const Program& program) {
  TransferIndex index;
  index.reserve(static_cast<size_t>(program.num_actions()));
  for (int w = 0; w < num_rows(program); ++w) {
    for (int step = 0; step < row_length(program, w); ++step) {
      const Action& a = program.actions[w][step];
      if (is_send(a.kind) || is_recv(a.kind)) index.emplace(transfer_key(w, a.kind, a.stage, a.batch()), step);
    }
  }
  return index;
}

// Step of the partner of the transfer at (worker, step); -1 with `problem` set if none.
int find_partner(const Program& program, const TransferIndex& index, int worker, int step, std::string& problem) {
  const Action& a = program.actions[worker][step];
  const ActionKind other = counterpart(a.kind);
  const int other_stage = a.stage + peer_stage_offset(a.kind);
  const auto found = index.find(transfer_key(a.peer, other, other_stage, a.batch()));
  const std::string expected =
      fmt::format("s{}:{}{}{}w{}", other_stage, kind_name(other), a.batch(), is_send(a.kind) ? "<" : ">", worker);
  if (found == index.end()) {
    problem = fmt::format("{} has no matching {} on w{}", describe(program, worker, step), expected, a.peer);
    return -1;
  }
  const Action& partner = program.actions[a.peer][found->second];
  if (partner.peer != worker) {
    problem = fmt::format("{} expects {} on w{}, but w{} has {}", describe(program, worker, step), expected, a.peer,
                          a.peer, to_string(partner));
    return -1;
  }
  return found->second;
}

// On success, send_step[w][step] holds, for each receive, the step of its send on the peer.
Status check_transfers(const Program& program, std::vector<std::vector<int>>& send_step) {
  const TransferIndex index = index_transfers(program);
  send_step.assign(program.actions.size(), {});
  for (int w = 0; w < num_rows(program); ++w) {
    send_step[w].assign(program.actions[w].size(), -1);
    for (int step = 0; step < row_length(program, w); ++step) {
      const Action& a = program.actions[w][step];
      if (!is_send(a.kind) && !is_recv(a.kind)) continue;
      std::string problem;
      const int partner = find_partner(program, index, w, step, problem);
      if (partner < 0) return fail(program, w, step, problem);
      if (is_recv(a.kind)) send_step[w][step] = partner;
    }
  }
  return ok_status();
}

// ---- 6. collectives ---------------------------------------------------------

// Steps of each ALLREDUCE of one worker's stage, checking the round numbering.
Status collect_rounds(const Program& program, int worker, int stage, std::vector<int>& allreduce_steps) {
  int steps_seen = 0;
  for (int step = 0; step < row_length(program, worker); ++step) {
    const Action& a = program.actions[worker][step];
    if (!is_round(a.kind) || a.stage != stage) continue;
    const bool allreduce = a.kind == ActionKind::kAllReduce;
    const int expected = allreduce ? static_cast<int>(allreduce_steps.size()) : steps_seen;
    if (a.round() != expected)
      return fail(program, worker, step,
                  fmt::format("{} should carry round {} (the {} count from 0 on each worker and stage)",
                              describe(program, worker, step), expected, kind_name(a.kind)));
    if (allreduce)
      allreduce_steps.push_back(step);
    else
      ++steps_seen;
  }
  return ok_status();
}

Status check_stage_collectives(const Program& program, const std::vector<int>& workers, int stage) {
  std::vector<std::vector<int>> steps(workers.size());
  for (size_t r = 0; r < workers.size(); ++r) {
    if (Status ok = collect_rounds(program, workers[r], stage, steps[r]); !ok) return ok;
  }
  const auto [fewest, most] =
      std::minmax_element(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
  if (fewest->size() == most->size()) return ok_status();
  const int rich = workers[most - steps.begin()];
  const int poor = workers[fewest - steps.begin()];
  const int step = (*most)[fewest->size()];
  return fail(program, rich, step,
              fmt::format("replicas of stage {} run different numbers of ALLREDUCE (w{}: {}, "
                          "w{}: {}); {} has no partner on w{}",
                          stage, rich, most->size(), poor, fewest->size(), describe(program, rich, step), poor));
}

Status check_collectives(const Program& program, const StageTable& table) {
  for (int s = 0; s < program.num_stages; ++s) {
    if (Status ok = check_stage_collectives(program, table[s], s); !ok) return ok;
  }
  return ok_status();
}

}  // namespace

Status validate_program(const Program& program) {
  const StageTable table = workers_by_stage(program);
  if (Status ok = check_shape(program, table); !ok) return ok;
  if (Status ok = check_fields(program); !ok) return ok;
  if (Status ok = check_orders(program, table); !ok) return ok;
  if (Status ok = check_coverage(program, table); !ok) return ok;
  std::vector<std::vector<int>> send_step;
  if (Status ok = check_transfers(program, send_step); !ok) return ok;
  if (Status ok = check_collectives(program, table); !ok) return ok;
  return check_deadlock(program, table, send_step);
}

}  // namespace baton
