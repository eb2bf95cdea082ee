// validate_program: every generated program passes; each kind of broken
// program is rejected with a message that names the problem and shows the grid
// with the offending cell marked.
#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "sim/validate.h"
#include "tests/schedule/schedule_test_support.h"

namespace baton {
namespace {

using testing::make_plan;

// A program from one action list per worker; `stages[w]` is worker w's stage,
// replicas numbered in order of appearance.
Program program_of(const std::vector<int>& stages, const std::vector<std::string>& lists, int microbatches) {
  Program program;
  program.batches = microbatches;
  std::vector<int> replicas;
  for (size_t w = 0; w < lists.size(); ++w) {
    const int s = stages[w];
    if (static_cast<int>(replicas.size()) <= s) replicas.resize(s + 1, 0);
    program.workers.push_back(WorkerInfo{s, replicas[s]++, static_cast<int>(w), {}});
    auto actions = parse_action_list(lists[w]);
    REQUIRE(actions.ok());
    program.actions.push_back(*actions);
  }
  program.num_stages = static_cast<int>(replicas.size());
  return program;
}

// Asserts rejection: the message names `problem` and marks `cell` ("[B0]").
void require_rejected(const Program& program, const std::string& problem, const std::string& cell) {
  const Status status = validate_program(program);
  REQUIRE_FALSE(status.ok());
  const std::string& message = status.error().message;
  INFO(message);
  CHECK_THAT(message, Catch::Contains(problem));
  CHECK_THAT(message, Catch::Contains(cell));
  CHECK_THAT(message, Catch::Contains("^"));
  CHECK_THAT(message, Catch::Contains("step |"));
}

bool divides_all(int microbatches, const std::vector<int>& replicas) {
  for (int r : replicas) {
    if (microbatches % r != 0) return false;
  }
  return true;
}

TEST_CASE("every generated program passes validation", "[validate]") {
  const std::vector<std::vector<int>> layouts = {{1},       {1, 1}, {1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1, 1},
                                                 {2, 1},    {1, 2}, {2, 1, 1}, {15, 1},      {3, 2, 1},
                                                 {1, 3, 2}, {2, 2}, {4},       {2, 3, 4}};
  int checked = 0;
  for (const std::vector<int>& replicas : layouts) {
    for (int m = 1; m <= 12; ++m) {
      for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB, Schedule::kPipeDream}) {
        const Plan plan = make_plan(schedule, replicas, m);
        const Program program = build_program(plan);
        INFO(schedule_name(schedule) << " stages " << stages_to_string(plan.stages) << " M=" << m);
        const Status status = validate_program(program);
        // PipeDream's replicas run one all-reduce per backward, so they pair up
        // only when every replica gets the same number of microbatches.
        if (schedule == Schedule::kPipeDream && !divides_all(m, replicas)) {
          REQUIRE_FALSE(status.ok());
          CHECK_THAT(status.error().message, Catch::Contains("different numbers of ALLREDUCE"));
          continue;
        }
        CHECK(status.ok());
        if (!status.ok()) FAIL(status.error().message);
        ++checked;
      }
    }
  }
  for (int workers = 1; workers <= 6; ++workers) {
    for (int m = 1; m <= 12; ++m) {
      CHECK(validate_program(build_program(make_plan(Schedule::kDataParallel, {workers}, m))).ok());
    }
  }
  CHECK(checked > 0);
}

TEST_CASE("a program with ~400k actions validates", "[validate]") {
  // PipeDream, S = 8, M = 8000: per stage 3M compute actions (F, B, STEP) and
  // per cut 4M transfers.
  const int stages = 8;
  const int m = 8000;
  const Program program = build_program(make_plan(Schedule::kPipeDream, std::vector<int>(stages, 1), m));
  CHECK(program.num_actions() == int64_t{stages} * 3 * m + int64_t{stages - 1} * 4 * m);
  CHECK(validate_program(program).ok());
}

TEST_CASE("a hand-written valid program passes", "[validate]") {
  const Program program = program_of({0, 1},
                                     {"s0:F0 s0:SEND_ACT0>w1 s0:RECV_GRAD0<w1 s0:B0 s0:STEP0",
                                      "s1:RECV_ACT0<w0 s1:F0 s1:I0 s1:SEND_GRAD0>w0 s1:W0 s1:STEP0"},
                                     1);
  const Status status = validate_program(program);
  INFO((status.ok() ? std::string() : status.error().message));
  CHECK(status.ok());
}

TEST_CASE("a backward before its forward is rejected", "[validate]") {
  require_rejected(program_of({0}, {"s0:F1 s0:B1 s0:B0 s0:F0 s0:STEP0"}, 2), "comes before its forward", "[B0]");
}

TEST_CASE("a forward without backward and a repeated action are rejected", "[validate]") {
  require_rejected(program_of({0}, {"s0:F0 s0:F1 s0:B1 s0:STEP0"}, 2), "F0 has no backward", "[F0]");
  require_rejected(program_of({0}, {"s0:F0 s0:B0 s0:F0 s0:STEP0"}, 1), "repeats", "[F0]");
  require_rejected(program_of({0}, {"s0:F0 s0:B0 s0:I0 s0:STEP0"}, 1), "both B and I/W", "[I0]");
  require_rejected(program_of({0}, {"s0:F0 s0:W0 s0:I0 s0:STEP0"}, 1), "W0 comes before I0", "[W0]");
}

TEST_CASE("wrong stages, peers and numbers are rejected", "[validate]") {
  require_rejected(program_of({0}, {"s1:F0 s1:B0 s1:STEP0"}, 1), "w0 is on stage 0", "[F0]");
  require_rejected(program_of({0}, {"s0:F0 s0:B0 s0:F1 s0:B1 s0:STEP0"}, 1), "outside [0, 1)", "[F1]");
  // SEND_ACT must go to stage + 1; w0 is stage 0 itself.
  require_rejected(program_of({0, 1},
                              {"s0:F0 s0:SEND_ACT0>w0 s0:RECV_GRAD0<w1 s0:B0 s0:STEP0",
                               "s1:RECV_ACT0<w0 s1:F0 s1:B0 s1:SEND_GRAD0>w0 s1:STEP0"},
                              1),
                   "not a worker of stage 1", "[SEND_ACT0>w0]");
  require_rejected(program_of({0}, {"s0:F0 s0:B0 s0:STEP1"}, 1), "should carry round 0", "[STEP1]");
}

TEST_CASE("a forward on a later stage needs its receive", "[validate]") {
  require_rejected(program_of({0, 1},
                              {"s0:F0 s0:SEND_ACT0>w1 s0:RECV_GRAD0<w1 s0:B0 s0:STEP0",
                               "s1:F0 s1:RECV_ACT0<w0 s1:B0 s1:SEND_GRAD0>w0 s1:STEP0"},
                              1),
                   "RECV_ACT0 must come before", "[RECV_ACT0<w0]");
}

TEST_CASE("a stage that skips a microbatch is rejected", "[validate]") {
  require_rejected(program_of({0, 0}, {"s0:F0 s0:B0 s0:STEP0", "s0:F1 s0:B1 s0:STEP0"}, 3), "stage 0 never runs F2",
                   "STEP0  []");
  require_rejected(program_of({0, 0}, {"s0:F0 s0:B0 s0:STEP0", "s0:F0 s0:B0 s0:STEP0"}, 1), "a second time", "[F0]");
}

// Stage 0 has one worker (w0), stage 1 two (w1, w2): microbatch k goes to w1 + k mod 2.
TEST_CASE("an unmatched send is rejected", "[validate]") {
  Program program = build_program(make_plan(Schedule::kGPipe, {1, 2}, 2));
  REQUIRE(validate_program(program).ok());
  // w0 sends microbatch 0's activation to w2, which expects microbatch 1 only.
  for (Action& a : program.actions[0]) {
    if (a.kind == ActionKind::kSendAct && a.batch() == 0) a.peer = 2;
  }
  require_rejected(program, "has no matching s1:RECV_ACT0<w0 on w2", "[SEND_ACT0>w2]");
}

TEST_CASE("a receive with no send is rejected", "[validate]") {
  Program program = build_program(make_plan(Schedule::kGPipe, {1, 2}, 2));
  // w0 waits for microbatch 0's gradient from w2, but w1 ran microbatch 0.
  for (Action& a : program.actions[0]) {
    if (a.kind == ActionKind::kRecvGrad && a.batch() == 0) a.peer = 2;
  }
  require_rejected(program, "has no matching s1:SEND_GRAD0>w0 on w2", "[RECV_GRAD0<w2]");
}

TEST_CASE("a send whose receiver expects another sender is rejected", "[validate]") {
  Program program = build_program(make_plan(Schedule::kGPipe, {2, 1}, 2));
  // w2 claims microbatch 0's activation comes from w1; w0 sends it.
  for (Action& a : program.actions[2]) {
    if (a.kind == ActionKind::kRecvAct && a.batch() == 0) a.peer = 1;
  }
  require_rejected(program, "but w2 has s1:RECV_ACT0<w1", "[SEND_ACT0>w2]");
}

TEST_CASE("two workers that each receive first deadlock", "[validate]") {
  const Program program = program_of({0, 1},
                                     {"s0:RECV_GRAD0<w1 s0:F0 s0:SEND_ACT0>w1 s0:B0 s0:STEP0",
                                      "s1:RECV_ACT0<w0 s1:F0 s1:B0 s1:SEND_GRAD0>w0 s1:STEP0"},
                                     1);
  require_rejected(program, "deadlock", "[RECV_GRAD0<w1]");
  const std::string message = validate_program(program).error().message;
  CHECK_THAT(message, Catch::Contains("w0@0 w1@0"));
  CHECK_THAT(message, Catch::Contains("waits for s1:SEND_GRAD0>w0"));
}

TEST_CASE("an overlapped pair must close on the worker's next pass", "[validate]") {
  // "&" opens a pair with the next F, B or I (transfers between are allowed).
  CHECK(validate_program(program_of({0}, {"s0:F0 s0:F1& s0:B0 s0:B1 s0:STEP0"}, 2)).ok());
  require_rejected(program_of({0}, {"s0:F0 s0:B0& s0:STEP0"}, 1), "not an F, B or I that closes it", "[B0&]");
  require_rejected(program_of({0}, {"s0:F0& s0:F1& s0:B0 s0:B1 s0:STEP0"}, 2), "not an F, B or I that closes it",
                   "[F0&]");
  Program last = program_of({0}, {"s0:F0 s0:B0 s0:STEP0"}, 1);
  last.actions[0].pop_back();
  last.actions[0].back().paired = true;
  require_rejected(last, "no pass follows it", "[B0&]");
}

TEST_CASE("two pairs that each wait for the other's output deadlock once lowered", "[validate]") {
  // w0 pairs F1 with B0: lowering receives B0's gradient before F1, and sends
  // F1's activation only after B0. w1 pairs F1 with B0 too: it receives F1's
  // activation first and sends B0's gradient last. Neither can begin.
  const Program unlowered =
      program_of({0, 1}, {"s0:F0 s0:F1& s0:B0 s0:B1 s0:STEP0", "s1:F0 s1:F1& s1:B0 s1:B1 s1:STEP0"}, 2);
  CHECK(validate_program(lower_communication(unlowered)).error().message.find("deadlock") != std::string::npos);
  // Unpaired, the same order runs.
  const Program plain = program_of({0, 1}, {"s0:F0 s0:F1 s0:B0 s0:B1 s0:STEP0", "s1:F0 s1:F1 s1:B0 s1:B1 s1:STEP0"}, 2);
  CHECK(validate_program(lower_communication(plain)).ok());
}

TEST_CASE("a step that waits for an all-reduce a stuck replica never issues deadlocks", "[validate]") {
  // Stage 0: w0 (microbatch 0), w1 (microbatch 1); stage 1: w2. w0 steps
  // before sending, so w2 waits for w0, w1 waits for w2 and w0 for w1's all-reduce.
  const Program program = program_of({0, 0, 1},
                                     {"s0:F0 s0:ALLREDUCE0 s0:STEP0 s0:SEND_ACT0>w2 s0:RECV_GRAD0<w2 s0:B0",
                                      "s0:F1 s0:SEND_ACT1>w2 s0:RECV_GRAD1<w2 s0:B1 s0:ALLREDUCE0 s0:STEP0",
                                      "s1:RECV_ACT0<w0 s1:F0 s1:B0 s1:SEND_GRAD0>w0 s1:RECV_ACT1<w1 s1:F1 s1:B1 "
                                      "s1:SEND_GRAD1>w1 s1:STEP0"},
                                     2);
  require_rejected(program, "waits for ALLREDUCE round 0 of stage 0", "[STEP0]");
}

TEST_CASE("mismatched all-reduce counts are rejected", "[validate]") {
  const Program program = program_of(
      {0, 0}, {"s0:F0 s0:B0 s0:ALLREDUCE0 s0:STEP0 s0:ALLREDUCE1 s0:STEP1", "s0:F1 s0:B1 s0:ALLREDUCE0 s0:STEP0"}, 2);
  require_rejected(program, "different numbers of ALLREDUCE (w0: 2, w1: 1)", "[ALLREDUCE1]");
  // PipeDream with 3 microbatches over 2 replicas: w0 runs 2 backwards, w1 one.
  const Program uneven = build_program(make_plan(Schedule::kPipeDream, {2}, 3));
  require_rejected(uneven, "different numbers of ALLREDUCE (w0: 2, w1: 1)", "[ALLREDUCE1]");
}

TEST_CASE("a broken placement is rejected before the actions are read", "[validate]") {
  Program program = build_program(make_plan(Schedule::kGPipe, {2, 1}, 2));
  program.workers[1].replica = 0;  // two workers claim replica 0 of stage 0
  const Status status = validate_program(program);
  REQUIRE_FALSE(status.ok());
  CHECK_THAT(status.error().message, Catch::Contains("taken by another worker"));
  program = build_program(make_plan(Schedule::kGPipe, {2, 1}, 2));
  program.actions.pop_back();
  REQUIRE_FALSE(validate_program(program).ok());
}

TEST_CASE("a long program's message shows an excerpt around the bad cell", "[validate]") {
  Program program = build_program(make_plan(Schedule::kPipeDream, {1, 1}, 100));
  // Swap the last F and its SEND on stage 0: the send then precedes its forward.
  std::vector<Action>& list = program.actions[0];
  size_t last_forward = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].kind == ActionKind::kForward) last_forward = i;
  }
  std::swap(list[last_forward], list[last_forward + 1]);
  const Status status = validate_program(program);
  REQUIRE_FALSE(status.ok());
  const std::string& message = status.error().message;
  CHECK_THAT(message, Catch::Contains("SEND_ACT99 must come after"));
  CHECK_THAT(message, Catch::Contains("[SEND_ACT99>w1]"));
  CHECK_THAT(message, Catch::Contains("|... "));
  CHECK(message.size() < 4000);
}

}  // namespace
}  // namespace baton
