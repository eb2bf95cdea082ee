#include "sim/schedules.h"

#include <algorithm>
#include <utility>

#include "sim/schedules_internal.h"

namespace baton {

namespace schedules_detail {

std::vector<int> local_microbatches(int microbatches, int replicas, int replica) {
  std::vector<int> local;
  for (int k = replica; k < microbatches; k += replicas) local.push_back(k);
  return local;
}

std::vector<int> local_microbatches(const Plan& plan, const WorkerInfo& worker) {
  return local_microbatches(plan.batches, plan.stages[worker.stage].replicas, worker.replica);
}

Program empty_program(const Plan& plan) {
  Program program;
  program.schedule = plan.schedule;
  program.num_stages = plan.num_stages();
  program.batches = plan.batches;
  program.vertical_sync = plan.vertical_sync;
  program.workers = workers_of(plan);
  program.actions.resize(program.workers.size());
  return program;
}

}  // namespace schedules_detail

using schedules_detail::empty_program;
using schedules_detail::local_microbatches;

namespace {

// The end of a flush schedule's iteration: gradient sync, then the optimizer step.
void append_update(std::vector<Action>& out, int stage, int replicas, int round) {
  if (replicas > 1) out.push_back(make_action(ActionKind::kAllReduce, stage, round));
  out.push_back(make_action(ActionKind::kStep, stage, round));
}

// How the 1F1B family updates weights.
enum class Updates { kFlushAtEnd, kAfterEveryBackward };

// Warm-up forwards, then F,B pairs while forwards remain, then the remaining
// backwards; with kAfterEveryBackward each backward is followed by its update.
// `paired` (Plan::paired_steady_state, one stage): each steady-state F and
// the B after it run as an overlapped pair, F1&B0, F2&B1, ...
void append_one_f_one_b(std::vector<Action>& out, int stage, int replicas, const std::vector<int>& local, int warmup,
                        Updates updates, bool paired = false) {
  const int count = static_cast<int>(local.size());
  int round = 0;
  const auto backward = [&](int index) {
    out.push_back(make_action(ActionKind::kBackward, stage, local[index]));
    if (updates == Updates::kAfterEveryBackward) append_update(out, stage, replicas, round++);
  };
  out.reserve(out.size() + static_cast<size_t>(count) * (updates == Updates::kFlushAtEnd ? 2 : 4) + 2);
  for (int i = 0; i < warmup; ++i) out.push_back(make_action(ActionKind::kForward, stage, local[i]));
  for (int i = warmup; i < count; ++i) {
    out.push_back(make_action(ActionKind::kForward, stage, local[i]));
    out.back().paired = paired;
    backward(i - warmup);
  }
  for (int i = count - warmup; i < count; ++i) backward(i);
  if (updates == Updates::kFlushAtEnd) append_update(out, stage, replicas, 0);
}

Program make_one_f_one_b_family(const Plan& plan, Updates updates, const Program* only) {
  Program program = only ? *only : empty_program(plan);
  for (int w = 0; w < program.num_workers(); ++w) {
    const WorkerInfo& worker = program.workers[w];
    const std::vector<int> local = local_microbatches(plan, worker);
    const int warmup = warmup_forwards(plan, worker.stage, static_cast<int>(local.size()));
    append_one_f_one_b(program.actions[w], worker.stage, plan.stages[worker.stage].replicas, local, warmup, updates,
                       plan.paired_steady_state);
  }
  return program;
}

// The 1F1B warm-up of `stage` before it is capped at the local microbatches.
int uncapped_warmup(const Plan& plan, int stage) {
  int downstream_workers = 0;
  for (int s = stage; s < plan.num_stages(); ++s) downstream_workers += plan.stages[s].replicas;
  return (downstream_workers - 1) / plan.stages[stage].replicas;
}

// Zero bubble's order on one worker: `warmup` forwards, then F,I pairs while
// forwards remain, then the remaining I's; each I is followed by the W of the
// oldest microbatch whose W is still due once more than `held_back` are due;
// the W's still due run after the last I, oldest first; then the flush.
void append_zero_bubble(std::vector<Action>& out, int stage, int replicas, const std::vector<int>& local, int warmup,
                        int held_back) {
  const int count = static_cast<int>(local.size());
  warmup = std::min(warmup, count);
  std::vector<int> due;  // microbatches whose I ran and W did not, oldest first
  size_t next_due = 0;
  const auto input_pass = [&](int index) {
    out.push_back(make_action(ActionKind::kBackwardInput, stage, local[index]));
    due.push_back(local[index]);
    if (static_cast<int>(due.size() - next_due) > held_back)
      out.push_back(make_action(ActionKind::kBackwardWeight, stage, due[next_due++]));
  };
  for (int i = 0; i < warmup; ++i) out.push_back(make_action(ActionKind::kForward, stage, local[i]));
  for (int i = warmup; i < count; ++i) {
    out.push_back(make_action(ActionKind::kForward, stage, local[i]));
    input_pass(i - warmup);
  }
  for (int i = count - warmup; i < count; ++i) input_pass(i);
  for (; next_due < due.size(); ++next_due)
    out.push_back(make_action(ActionKind::kBackwardWeight, stage, due[next_due]));
  append_update(out, stage, replicas, 0);
}

// zb-h1 (factor 1) and zb-h2 (factor 2): warm-up factor x w_s, holding back
// factor x u_s / r_s W passes.
Program make_zero_bubble(const Plan& plan, int factor, const Program* only) {
  Program program = only ? *only : empty_program(plan);
  std::vector<int> upstream(static_cast<size_t>(plan.num_stages()), 0);
  for (int s = 1; s < plan.num_stages(); ++s) upstream[s] = upstream[s - 1] + plan.stages[s - 1].replicas;
  for (int w = 0; w < program.num_workers(); ++w) {
    const WorkerInfo& worker = program.workers[w];
    const int replicas = plan.stages[worker.stage].replicas;
    append_zero_bubble(program.actions[w], worker.stage, replicas, local_microbatches(plan, worker),
                       factor * uncapped_warmup(plan, worker.stage), factor * (upstream[worker.stage] / replicas));
  }
  return program;
}

}  // namespace

Program make_zb_heuristic(const Plan& plan, const ZbHeuristicOrder& order, const Program* only) {
  Program program = only ? *only : empty_program(plan);
  for (int w = 0; w < program.num_workers(); ++w) {
    const WorkerInfo& worker = program.workers[w];
    const std::vector<int> local = local_microbatches(plan, worker);
    std::vector<Action>& out = program.actions[w];
    for (const ZbStep& step : order.stages[static_cast<size_t>(worker.stage)]) {
      const ActionKind kind = step.pass == ZbPass::kF   ? ActionKind::kForward
                              : step.pass == ZbPass::kI ? ActionKind::kBackwardInput
                                                        : ActionKind::kBackwardWeight;
      out.push_back(make_action(kind, worker.stage, local[static_cast<size_t>(step.microbatch)]));
    }
    append_update(out, worker.stage, plan.stages[worker.stage].replicas, 0);
  }
  return program;
}

int warmup_forwards(const Plan& plan, int stage, int local_microbatches) {
  const int paired = plan.paired_steady_state && plan.schedule == Schedule::kOneFOneB ? 1 : 0;
  return std::min(uncapped_warmup(plan, stage) + paired, local_microbatches);
}

// GPipe, S = 3, M = 4 (one column per time unit, tF = tB):
//
//   stage 0 | F0 F1 F2 F3             B0 B1 B2 B3
//   stage 1 |    F0 F1 F2 F3       B0 B1 B2 B3
//   stage 2 |       F0 F1 F2 F3 B0 B1 B2 B3
//
// then ALLREDUCE0 (replicated stages) and STEP0 on every worker.
Program make_gpipe(const Plan& plan, const Program* only) {
  Program program = only ? *only : empty_program(plan);
  for (int w = 0; w < program.num_workers(); ++w) {
    const WorkerInfo& worker = program.workers[w];
    const std::vector<int> local = local_microbatches(plan, worker);
    std::vector<Action>& out = program.actions[w];
    for (int k : local) out.push_back(make_action(ActionKind::kForward, worker.stage, k));
    for (int k : local) out.push_back(make_action(ActionKind::kBackward, worker.stage, k));
    append_update(out, worker.stage, plan.stages[worker.stage].replicas, 0);
  }
  return program;
}

// 1F1B with flush, S = 3, M = 4 (warm-up S - s - 1 forwards):
//
//   stage 0 | F0 F1 F2       B0 F3 B1    B2    B3
//   stage 1 |    F0 F1    B0 F2 B1 F3 B2    B3
//   stage 2 |       F0 B0 F1 B1 F2 B2 F3 B3
//
// then ALLREDUCE0 (replicated stages) and STEP0 on every worker. Stage s holds
// at most min(S - s, M) activations.
Program make_1f1b(const Plan& plan, const Program* only) {
  return make_one_f_one_b_family(plan, Updates::kFlushAtEnd, only);
}

// PipeDream, S = 3, M = 6: the 1F1B order without a flush; every B is followed
// by STEP (and ALLREDUCE before it on replicated stages):
//
//   stage 0 | F0 F1 F2       B0 F3 B1 F4 B2 F5 B3    B4    B5
//   stage 1 |    F0 F1    B0 F2 B1 F3 B2 F4 B3 F5 B4    B5
//   stage 2 |       F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5
//
// Replicated 2-1 (workers w0, w1 on stage 0, w2 on stage 1), M = 6: stage 0's
// warm-up is (3 - 1) / 2 = 1, stage 1's is 0; round robin over the replicas:
//
//   w0 s0 | F0 F2 B0 F4 B2 B4        (each B followed by ALLREDUCE, STEP)
//   w1 s0 | F1 F3 B1 F5 B3 B5
//   w2 s1 | F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5   (each B followed by STEP)
Program make_pipedream(const Plan& plan, const Program* only) {
  return make_one_f_one_b_family(plan, Updates::kAfterEveryBackward, only);
}

// ZB-H1, S = 3, M = 4 (one column per time unit, tF = tI = tW, free
// communication): stage s holds back s W's (u_s / r_s), so the I's of the cool-down reach
// stage 0 without waiting behind W's, and the W's fill the gaps:
//
//   stage 0 | F0 F1 F2       I0 W0 F3 I1 W1 I2 W2 I3 W3
//   stage 1 |    F0 F1    I0 F2 I1 W0 F3 I2 W1 I3 W2 W3
//   stage 2 |       F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3
//
// then ALLREDUCE0 (replicated stages) and STEP0 on every worker.
Program make_zb_h1(const Plan& plan, const Program* only) { return make_zero_bubble(plan, 1, only); }

// ZB-H2, S = 3, M = 6: warm-up 2 (S - s - 1) forwards, 2 s W's held back;
// stage 0 holds 5 microbatches before its first I and no stage waits once
// it has started:
//
//   stage 0 | F0 F1 F2 F3 F4 I0 W0 F5 I1 W1 I2 W2 I3 W3 I4 W4 I5 W5
//   stage 1 |    F0 F1 F2 I0 F3 I1 F4 I2 W0 F5 I3 W1 I4 W2 I5 W3 W4 W5
//   stage 2 |       F0 I0 F1 I1 F2 I2 F3 I3 F4 I4 W0 F5 I5 W1 W2 W3 W4 W5
Program make_zb_h2(const Plan& plan, const Program* only) { return make_zero_bubble(plan, 2, only); }

// Data parallel, W = 2, M = 4: each replica runs its own microbatches.
//
//   w0 s0 | F0 B0 F2 B2 ALLREDUCE0 STEP0
//   w1 s0 | F1 B1 F3 B3 ALLREDUCE0 STEP0
Program make_data_parallel(const Plan& plan, const Program* only) {
  Program program = only ? *only : empty_program(plan);
  for (int w = 0; w < program.num_workers(); ++w) {
    const WorkerInfo& worker = program.workers[w];
    std::vector<Action>& out = program.actions[w];
    for (int k : local_microbatches(plan, worker)) {
      out.push_back(make_action(ActionKind::kForward, worker.stage, k));
      out.push_back(make_action(ActionKind::kBackward, worker.stage, k));
    }
    append_update(out, worker.stage, plan.stages[worker.stage].replicas, 0);
  }
  return program;
}

Program generate_program(const Plan& plan, const Program* only) {
  switch (plan.schedule) {
    case Schedule::kGPipe: return make_gpipe(plan, only);
    case Schedule::kOneFOneB: return make_1f1b(plan, only);
    case Schedule::kPipeDream: return make_pipedream(plan, only);
    case Schedule::kDataParallel: return make_data_parallel(plan, only);
    case Schedule::kZbH1: return make_zb_h1(plan, only);
    case Schedule::kZbH2: return make_zb_h2(plan, only);
    case Schedule::kInterleaved1F1B: return make_interleaved_1f1b(plan, only);
    case Schedule::kZbV: return make_zbv(plan, only);
    case Schedule::kDualPipeV: return make_dualpipev(plan, only);
  }
  return make_1f1b(plan, only);
}

Program build_program(const Plan& plan) { return lower_communication(generate_program(plan)); }

Program generate_replica0_program(const Plan& plan) {
  const Program skeleton = one_replica_program(empty_program(plan));
  return generate_program(plan, &skeleton);
}

Program build_replica0_program(const Plan& plan) { return lower_communication(generate_replica0_program(plan)); }

bool sees_upstream(Schedule schedule) { return schedule == Schedule::kZbH1 || schedule == Schedule::kZbH2; }

bool runs_steady_state(Schedule schedule) { return schedule == Schedule::kPipeDream; }

}  // namespace baton
