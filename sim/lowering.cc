// Lowering (schedules.h, lower_communication): the sends and receives a
// generator's compute order needs, between the workers that run each side of
// a cut.
#include <optional>
#include <vector>

#include "sim/program.h"
#include "sim/schedules.h"

namespace baton {

namespace {

// The worker of `stage` that runs microbatch k, or -1 when the stage has none.
inline int peer_for(const std::vector<std::vector<int>>& by_stage, int stage, int microbatch) {
  if (stage < 0 || stage >= static_cast<int>(by_stage.size()) || by_stage[stage].empty()) return -1;
  const std::vector<int>& replicas = by_stage[stage];
  return replicas.size() == 1 ? replicas.front() : replicas[microbatch % static_cast<int>(replicas.size())];
}

// The receive a pass waits for and the send it ends with, where the other side
// of the cut is another worker.
struct Transfers {
  std::optional<Action> recv, send;
};

// Transfers are between the stages an action names; a worker that runs both
// sides of a cut (a V's turn, or every cut of a one-rank pipeline) hands the
// tensor over in its own memory, with no transfer.
Transfers transfers_of(int worker, const Action& action, int num_stages,
                       const std::vector<std::vector<int>>& by_stage) {
  Transfers t;
  const bool forward = action.kind == ActionKind::kForward;
  const bool backward = action.kind == ActionKind::kBackward || action.kind == ActionKind::kBackwardInput;
  if (!forward && !backward) return t;  // W, ALLREDUCE and STEP move nothing
  const int stage = action.stage;
  const int k = action.batch();
  const int upstream = stage > 0 ? peer_for(by_stage, stage - 1, k) : -1;
  const int downstream = stage < num_stages - 1 ? peer_for(by_stage, stage + 1, k) : -1;
  const bool remote_upstream = stage > 0 && upstream != worker;
  const bool remote_downstream = stage < num_stages - 1 && downstream != worker;
  if (forward && remote_upstream) t.recv = make_action(ActionKind::kRecvAct, stage, k, upstream);
  if (backward && remote_downstream) t.recv = make_action(ActionKind::kRecvGrad, stage, k, downstream);
  if (forward && remote_downstream) t.send = make_action(ActionKind::kSendAct, stage, k, downstream);
  if (backward && remote_upstream) t.send = make_action(ActionKind::kSendGrad, stage, k, upstream);
  return t;
}

// A pass: its receive, the pass, its send. An overlapped pair (`paired` and
// the next compute action): both receives, both passes, both sends.
void lower_worker(int worker, const std::vector<Action>& input, int num_stages,
                  const std::vector<std::vector<int>>& by_stage, std::vector<Action>& out) {
  const auto is_pass = [](const Action& a) { return !is_send(a.kind) && !is_recv(a.kind); };
  for (size_t i = 0; i < input.size(); ++i) {
    if (!is_pass(input[i])) continue;
    size_t second = input[i].paired ? next_pass(input, i) : i;  // the pair's second pass, or i itself
    if (second >= input.size()) second = i;
    const Transfers first = transfers_of(worker, input[i], num_stages, by_stage);
    const Transfers other = second != i ? transfers_of(worker, input[second], num_stages, by_stage) : Transfers{};
    if (first.recv) out.push_back(*first.recv);
    if (other.recv) out.push_back(*other.recv);
    out.push_back(input[i]);
    if (second != i) out.push_back(input[second]);
    if (first.send) out.push_back(*first.send);
    if (other.send) out.push_back(*other.send);
    i = second;
  }
}

}  // namespace

Program lower_communication(Program program) {
  const std::vector<std::vector<int>> by_stage = workers_by_stage(program);
  for (int w = 0; w < program.num_workers() && w < static_cast<int>(program.actions.size()); ++w) {
    std::vector<Action> lowered;
    lowered.reserve(program.actions[w].size() * 3);  // at most a receive and a send per pass
    lower_worker(w, program.actions[w], program.num_stages, by_stage, lowered);
    program.actions[w] = std::move(lowered);
  }
  return program;
}

}  // namespace baton
