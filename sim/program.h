// The schedule IR: a Program is, for every worker, the ordered list of actions
// it performs. It holds order only, never times; the simulator and the executor
// are two interpreters of the same Program.
//
// Action text forms (round-trip through `to_string` / `parse_action`):
//   s2:F7            stage 2 forward of microbatch 7
//   s2:B7            stage 2 backward (input and weight gradients)
//   s2:I7 / s2:W7    the zero-bubble split of B: input gradient, weight gradient
//   s2:SEND_ACT7>w5  send microbatch 7's activation to worker 5
//   s2:RECV_ACT7<w3  receive microbatch 7's activation from worker 3
//   s2:SEND_GRAD7>w1 send microbatch 7's gradient (w.r.t. the stage input) to worker 1
//   s2:RECV_GRAD7<w5 receive microbatch 7's output gradient from worker 5
//   s1:F4& s2:B2     an overlapped pair (DualPipe's F&B): "&" marks the first of
//                    two compute actions that run as one unit (below)
//   s2:ALLREDUCE3    gradient all-reduce number 3 among the replicas of stage 2
//                    (the n-th ALLREDUCE of each replica of a stage forms one collective)
//   s2:STEP3         optimizer step producing weight version 3+1 (waits for this
//                    worker's outstanding ALLREDUCE)
// The number is the batch: a microbatch, or under pipedream a minibatch (each
// its own weight update; Plan::batches). For ALLREDUCE and STEP it is the round
// (weight update index).
//
// Semantics every interpreter follows:
// - a worker runs its actions strictly in order;
// - SEND_* is issued when the worker reaches it and does not block the worker;
// - RECV_* blocks the worker until the matching send has been delivered;
// - ALLREDUCE is issued without blocking; it completes when every replica of
//   the stage has issued its n-th ALLREDUCE and the collective has run;
// - STEP blocks until the worker's ALLREDUCEs are complete;
// - an overlapped pair (a compute action marked `paired` and the worker's next
//   compute action) is one unit: lowering puts both receives before both
//   passes and both sends after them, so neither pass starts before both
//   inputs are there and neither output leaves before both passes end; the
//   unit takes the two passes' time less what it hides: each pass's
//   overlappable communication (StageCost::forward_overlap,
//   backward_overlap: a mixture of experts' all-to-alls, DualPipe's reason
//   for the pairs) up to the other pass's compute beside it (F&B = F + B
//   where there is none), charged to the second pass;
// - weight stashing (pipedream): a microbatch's B uses the weight version its
//   F used on that stage; with vertical sync, the version stage 0 used.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/plan.h"
#include "sim/result.h"

namespace baton {

enum class ActionKind : uint8_t {
  kForward,         // F
  kBackward,        // B
  kBackwardInput,   // I
  kBackwardWeight,  // W
  kSendAct,
  kRecvAct,
  kSendGrad,
  kRecvGrad,
  kAllReduce,
  kStep,
};

constexpr bool is_compute(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput ||
         kind == ActionKind::kBackwardWeight || kind == ActionKind::kStep;
}
constexpr bool is_send(ActionKind kind) { return kind == ActionKind::kSendAct || kind == ActionKind::kSendGrad; }
constexpr bool is_recv(ActionKind kind) { return kind == ActionKind::kRecvAct || kind == ActionKind::kRecvGrad; }
// The action that ends a microbatch's work on a stage: its stashed activations
// are freed and the weight version its forward used is released (B, or W when
// the backward is split into I and W).
constexpr bool ends_microbatch(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardWeight;
}
// The passes an overlapped pair is made of.
constexpr bool can_pair(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput;
}
std::string_view kind_name(ActionKind kind);  // "F", "B", ..., "SEND_ACT", "ALLREDUCE", "STEP"

struct Action {
  ActionKind kind = ActionKind::kForward;
  // The first of an overlapped pair: it and the worker's next compute action
  // run as one unit (see the semantics above). Only F, B and I are paired.
  bool paired = false;
  int32_t stage = 0;
  // The batch of F, B, I, W and the transfers (a microbatch; under pipedream
  // a minibatch, see Plan::batches), or the round (weight update index) of
  // ALLREDUCE and STEP; read it as batch() or round(), whichever the kind
  // holds.
  int32_t number = 0;
  int32_t peer = -1;  // the other worker, for sends and receives

  int batch() const { return number; }
  int round() const { return number; }
  bool operator==(const Action&) const = default;
};

// An action of `kind` on `stage` for batch (or round) `number`; `peer`
// for transfers.
inline Action make_action(ActionKind kind, int stage, int number, int peer = -1) {
  return Action{kind, false, static_cast<int32_t>(stage), static_cast<int32_t>(number), static_cast<int32_t>(peer)};
}

// The index of the first pass (an action that is not a send or a receive)
// after `after` in `list`, or list.size(): an overlapped pair's second half.
inline size_t next_pass(const std::vector<Action>& list, size_t after) {
  size_t next = after + 1;
  while (next < list.size() && (is_send(list[next].kind) || is_recv(list[next].kind))) ++next;
  return next;
}

std::string to_string(const Action& action);
Result<Action> parse_action(std::string_view text);

// A Program plus the placement it was generated for.
struct Program {
  Schedule schedule = Schedule::kOneFOneB;
  int num_stages = 0;
  int batches = 0;  // Plan::batches: microbatches of an iteration, or pipedream's minibatches
  bool vertical_sync = false;
  std::vector<WorkerInfo> workers;           // index = worker id
  std::vector<std::vector<Action>> actions;  // actions[worker]
  // Empty, or (a program of one replica of interchangeable ones, see
  // one_replica_program) per stage the devices its ALLREDUCE spans: all its
  // replicas', of which `workers` holds one.
  std::vector<std::vector<int>> allreduce_devices;

  int num_workers() const { return static_cast<int>(workers.size()); }
  int64_t num_actions() const;
  // Replicas of stage s (from `workers`).
  int replicas_of(int stage) const;
};

// Parses a space-separated list of actions ("s0:F0 s0:F1 s0:B0"); any run of
// whitespace separates. An empty text is an empty list. The error names the
// position (1-based) and text of the first bad action.
Result<std::vector<Action>> parse_action_list(std::string_view text);

// The receives of `worker` (indices into its action list) in the order their
// senders issue the matching sends: grouped by peer (increasing), then by where
// the matching SEND stands in the peer's list (RECV_ACT at stage s matches the
// peer's SEND_ACT at stage s - 1 of the same microbatch, RECV_GRAD at s its
// SEND_GRAD at s + 1); a receive without a matching send (a Program that fails
// validation) comes last. A transport that matches the messages between two
// workers in the order they are sent (NCCL's point-to-point, one stream per
// direction) posts the receives in this order.
std::vector<int> receive_order(const Program& program, int worker);

// workers_by_stage(p)[s][r] = id of the worker that is replica r of stage s.
// Every stage in [0, p.num_stages) has an entry (empty if no worker has it).
std::vector<std::vector<int>> workers_by_stage(const Program& program);

// The workers of replica 0 of `program` with their actions (peers renumbered),
// and allreduce_devices set to every replica's devices of each stage. The
// engine runs it as the whole program when the replicas' timelines are equal
// (sim/simulator.h, SimOptions::one_replica says when they are).
Program one_replica_program(const Program& program);

// Text form of a whole program: one line per worker, "w0: s0:F0 s0:F1 ...".
std::string program_to_text(const Program& program);
// The worker x step grid, one column per step, with the cell at
// (`mark_worker`, `mark_step`) marked (use -1 for no mark).
//
// Layout: a header row of step indices, then one row per worker labelled
// "w3 s1|", one fixed-width cell per step holding the action's text without
// its "sK:" prefix (the row label names the stage). The marked cell is
// bracketed ("[B7]") and a line with "^" under it follows its row. A mark one
// past the end of a worker's list shows as an empty "[]" cell (for "the worker
// is stuck here" messages). Trailing spaces are trimmed.
std::string program_grid(const Program& program, int mark_worker = -1, int mark_step = -1);
// The same grid restricted to steps [mark_step - context_steps,
// mark_step + context_steps]; elided columns show as "..." so the excerpt of a
// program with hundreds of thousands of actions stays readable. Without a
// mark (mark_step < 0) it shows the first 2 * context_steps + 1 steps.
std::string program_grid_excerpt(const Program& program, int mark_worker, int mark_step, int context_steps);

}  // namespace baton
