// lower_communication: where sends and receives go and whom they name.
#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "tests/schedule/schedule_test_support.h"

namespace baton {
namespace {

using testing::count_kind;
using testing::make_plan;
using testing::order_of;

TEST_CASE("lowering a two-stage gpipe program", "[lowering]") {
  const Program program = lower_communication(make_gpipe(make_plan(Schedule::kGPipe, {1, 1}, 2)));
  CHECK(order_of(program, 0, false) == "F0 SEND_ACT0>w1 F1 SEND_ACT1>w1 RECV_GRAD0<w1 B0 RECV_GRAD1<w1 B1 STEP0");
  CHECK(order_of(program, 1, false) == "RECV_ACT0<w0 F0 RECV_ACT1<w0 F1 B0 SEND_GRAD0>w0 B1 SEND_GRAD1>w0 STEP0");
}

TEST_CASE("a middle stage receives and sends in both directions", "[lowering]") {
  const Program program = lower_communication(make_1f1b(make_plan(Schedule::kOneFOneB, {1, 1, 1}, 2)));
  // Stage 1 of 1F1B, S = 3, M = 2: F0 F1 B0 B1 STEP0 (warm-up 1, capped by M).
  CHECK(order_of(program, 1, false) ==
        "RECV_ACT0<w0 F0 SEND_ACT0>w2 RECV_ACT1<w0 F1 SEND_ACT1>w2 "
        "RECV_GRAD0<w2 B0 SEND_GRAD0>w0 RECV_GRAD1<w2 B1 SEND_GRAD1>w0 STEP0");
}

TEST_CASE("lowered peers follow round robin over the neighbour's replicas", "[lowering]") {
  // Stages with 2, 3 and 1 replicas: workers w0 w1 | w2 w3 w4 | w5.
  const Plan plan = make_plan(Schedule::kPipeDream, {2, 3, 1}, 12);
  const Program program = lower_communication(make_pipedream(plan));
  const auto worker_of = [&](int stage, int k) { return worker_index(plan, stage, k % plan.stages[stage].replicas); };
  for (int w = 0; w < program.num_workers(); ++w) {
    const int s = program.workers[w].stage;
    const std::vector<Action>& list = program.actions[w];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      INFO("w" << w << " action " << i << " " << to_string(a));
      CHECK(a.stage == s);
      const int k = a.batch();
      switch (a.kind) {
        case ActionKind::kRecvAct: CHECK(a.peer == worker_of(s - 1, k)); break;
        case ActionKind::kSendAct: CHECK(a.peer == worker_of(s + 1, k)); break;
        case ActionKind::kRecvGrad: CHECK(a.peer == worker_of(s + 1, k)); break;
        case ActionKind::kSendGrad: CHECK(a.peer == worker_of(s - 1, k)); break;
        default: CHECK(a.peer == -1);
      }
      // Receives sit immediately before, sends immediately after their compute.
      if (is_recv(a.kind)) {
        REQUIRE(i + 1 < list.size());
        const ActionKind compute = a.kind == ActionKind::kRecvAct ? ActionKind::kForward : ActionKind::kBackward;
        CHECK(list[i + 1] == make_action(compute, s, k));
      }
      if (is_send(a.kind)) {
        REQUIRE(i > 0);
        const ActionKind compute = a.kind == ActionKind::kSendAct ? ActionKind::kForward : ActionKind::kBackward;
        CHECK(list[i - 1] == make_action(compute, s, k));
      }
    }
  }
}

TEST_CASE("lowering adds 2 transfers per microbatch per neighbouring stage", "[lowering]") {
  for (int stages = 1; stages <= 5; ++stages) {
    for (int m = 1; m <= 6; ++m) {
      const Program program = build_program(make_plan(Schedule::kOneFOneB, std::vector<int>(stages, 1), m));
      INFO("S=" << stages << " M=" << m);
      // Per stage: 2M compute + 1 STEP; per cut: M activations and M gradients,
      // each a send plus a receive.
      CHECK(program.num_actions() == stages * (2 * m + 1) + (stages - 1) * 4 * m);
      for (int s = 0; s < stages; ++s) {
        const int neighbours = (s > 0 ? 1 : 0) + (s < stages - 1 ? 1 : 0);
        const int sends = count_kind(program, s, ActionKind::kSendAct) + count_kind(program, s, ActionKind::kSendGrad);
        CHECK(sends == neighbours * m);
      }
    }
  }
}

TEST_CASE("lowering is idempotent and build_program dispatches on the schedule", "[lowering]") {
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB, Schedule::kPipeDream}) {
    const Plan plan = make_plan(schedule, {2, 1, 2}, 8);
    const Program once = build_program(plan);
    const Program twice = lower_communication(once);
    CHECK(program_to_text(twice) == program_to_text(once));
    CHECK(once.schedule == schedule);
  }
  const Plan gpipe = make_plan(Schedule::kGPipe, {1, 1}, 3);
  CHECK(program_to_text(build_program(gpipe)) == program_to_text(lower_communication(make_gpipe(gpipe))));
  const Plan dp = make_plan(Schedule::kDataParallel, {4}, 8);
  const Program dp_program = build_program(dp);
  CHECK(program_to_text(dp_program) == program_to_text(make_data_parallel(dp)));
}

TEST_CASE("with split backwards, gradients travel around I, not W", "[lowering]") {
  const Plan plan = make_plan(Schedule::kOneFOneB, {1, 1, 1}, 1);
  Program program = make_1f1b(plan);
  auto split = parse_action_list("s1:F0 s1:I0 s1:W0 s1:STEP0");
  REQUIRE(split.ok());
  program.actions[1] = *split;
  const Program lowered = lower_communication(program);
  CHECK(order_of(lowered, 1, false) == "RECV_ACT0<w0 F0 SEND_ACT0>w2 RECV_GRAD0<w2 I0 SEND_GRAD0>w0 W0 STEP0");
}

}  // namespace
}  // namespace baton
