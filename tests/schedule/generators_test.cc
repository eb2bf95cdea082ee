// Schedule generators, before lowering. Expected orders are written like the
// pictures in sim/schedules.cc: one line per worker, "sK:" prefixes dropped.
#include <algorithm>
#include <map>
#include <string>

#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "tests/schedule/schedule_test_support.h"

namespace baton {
namespace {

using testing::count_kind;
using testing::make_plan;
using testing::order_of;

// Forwards a worker runs before its first backward: its warm-up plus the F that
// opens the first F,B pair (all of them when the warm-up is capped).
int forwards_before_first_backward(const Program& program, int worker) {
  int forwards = 0;
  for (const Action& a : program.actions[worker]) {
    if (a.kind == ActionKind::kBackward) break;
    forwards += a.kind == ActionKind::kForward ? 1 : 0;
  }
  return forwards;
}

// The most activations a worker holds at once: max over prefixes of #F - #B.
int peak_in_flight(const Program& program, int worker) {
  int in_flight = 0;
  int peak = 0;
  for (const Action& a : program.actions[worker]) {
    in_flight += a.kind == ActionKind::kForward ? 1 : a.kind == ActionKind::kBackward ? -1 : 0;
    peak = std::max(peak, in_flight);
  }
  return peak;
}

// Local microbatch count of replica r of a stage with R replicas: ceil((M - r) / R).
int local_count(int microbatches, int replicas, int replica) {
  return std::max(0, (microbatches - replica + replicas - 1) / replicas);
}

TEST_CASE("generators copy the plan's placement into the program", "[generators]") {
  Plan plan = make_plan(Schedule::kPipeDream, {2, 1, 3}, 6);
  plan.vertical_sync = true;
  const Program program = make_pipedream(plan);
  CHECK(program.schedule == Schedule::kPipeDream);
  CHECK(program.num_stages == 3);
  CHECK(program.batches == 6);
  CHECK(program.vertical_sync);
  REQUIRE(program.num_workers() == 2 + 1 + 3);
  REQUIRE(program.actions.size() == 6u);
  CHECK(program.workers[2].stage == 1);
  CHECK(program.workers[4].stage == 2);
  CHECK(program.workers[4].replica == 1);
  CHECK(program.replicas_of(2) == 3);
}

TEST_CASE("gpipe: all forwards, then all backwards, then the flush", "[generators][gpipe]") {
  const Program program = make_gpipe(make_plan(Schedule::kGPipe, {1, 1, 1}, 4));
  for (int w = 0; w < 3; ++w) {
    INFO("worker " << w);
    CHECK(order_of(program, w) == "F0 F1 F2 F3 B0 B1 B2 B3 STEP0");
    for (const Action& a : program.actions[w]) CHECK(a.stage == w);
  }
}

TEST_CASE("gpipe with a replicated stage splits microbatches round robin", "[generators][gpipe]") {
  const Program program = make_gpipe(make_plan(Schedule::kGPipe, {2, 1}, 5));
  CHECK(order_of(program, 0) == "F0 F2 F4 B0 B2 B4 ALLREDUCE0 STEP0");
  CHECK(order_of(program, 1) == "F1 F3 B1 B3 ALLREDUCE0 STEP0");
  CHECK(order_of(program, 2) == "F0 F1 F2 F3 F4 B0 B1 B2 B3 B4 STEP0");
  // Stage s holds all of its local microbatches until the flush.
  CHECK(peak_in_flight(program, 0) == 3);
  CHECK(peak_in_flight(program, 2) == 5);
}

// 1F1B, S = 3, M = 4:
//   stage 0 | F0 F1 F2       B0 F3 B1    B2    B3
//   stage 1 |    F0 F1    B0 F2 B1 F3 B2    B3
//   stage 2 |       F0 B0 F1 B1 F2 B2 F3 B3
TEST_CASE("1f1b order for S = 3, M = 4 matches the picture", "[generators][1f1b]") {
  const Program program = make_1f1b(make_plan(Schedule::kOneFOneB, {1, 1, 1}, 4));
  CHECK(order_of(program, 0) == "F0 F1 F2 B0 F3 B1 B2 B3 STEP0");
  CHECK(order_of(program, 1) == "F0 F1 B0 F2 B1 F3 B2 B3 STEP0");
  CHECK(order_of(program, 2) == "F0 B0 F1 B1 F2 B2 F3 B3 STEP0");
}

TEST_CASE("1f1b warm-up is min(S - s - 1, M) and stage s holds min(S - s, M)", "[generators][1f1b]") {
  for (int stages = 1; stages <= 6; ++stages) {
    for (int m = 1; m <= 8; ++m) {
      const Program program = make_1f1b(make_plan(Schedule::kOneFOneB, std::vector<int>(stages, 1), m));
      for (int s = 0; s < stages; ++s) {
        INFO("S=" << stages << " M=" << m << " s=" << s);
        const int warmup = std::min(stages - s - 1, m);
        CHECK(warmup_forwards(make_plan(Schedule::kOneFOneB, std::vector<int>(stages, 1), m), s, m) == warmup);
        CHECK(forwards_before_first_backward(program, s) == std::min(warmup + 1, m));
        CHECK(peak_in_flight(program, s) == std::min(stages - s, m));
        // 2M compute actions and one STEP.
        CHECK(static_cast<int>(program.actions[s].size()) == 2 * m + 1);
        CHECK(order_of(program, s).substr(order_of(program, s).size() - 5) == "STEP0");
      }
    }
  }
}

TEST_CASE("1f1b on one stage, paired: F0, then F1&B0, F2&B1, ..., the last B alone", "[generators][1f1b]") {
  // Plan::paired_steady_state: Megatron-core's no-pipelining schedule with
  // --overlap-moe-expert-parallel-comm (combined_1f1b.py's phases 0 to m).
  Plan plan = make_plan(Schedule::kOneFOneB, {1}, 4);
  plan.paired_steady_state = true;
  CHECK(warmup_forwards(plan, 0, 4) == 1);
  const Program program = make_1f1b(plan);
  CHECK(order_of(program, 0) == "F0 F1& B0 F2& B1 F3& B2 B3 STEP0");
  // Two microbatches held at once (one without the pairs), m - 1 pairs.
  CHECK(peak_in_flight(program, 0) == 2);
  CHECK(forwards_before_first_backward(program, 0) == 2);
  // Replicated: each replica pairs its own microbatches; one microbatch
  // leaves nothing to pair.
  Plan replicated = make_plan(Schedule::kOneFOneB, {2}, 6);
  replicated.paired_steady_state = true;
  const Program both = make_1f1b(replicated);
  CHECK(order_of(both, 0) == "F0 F2& B0 F4& B2 B4 ALLREDUCE0 STEP0");
  CHECK(order_of(both, 1) == "F1 F3& B1 F5& B3 B5 ALLREDUCE0 STEP0");
  Plan single = make_plan(Schedule::kOneFOneB, {1}, 1);
  single.paired_steady_state = true;
  CHECK(order_of(make_1f1b(single), 0) == "F0 B0 STEP0");
}

// PipeDream, S = 3, M = 6: 1F1B order, each B followed by its STEP.
TEST_CASE("pipedream order for S = 3, M = 6 matches the picture", "[generators][pipedream]") {
  const Program program = make_pipedream(make_plan(Schedule::kPipeDream, {1, 1, 1}, 6));
  CHECK(order_of(program, 0) == "F0 F1 F2 B0 STEP0 F3 B1 STEP1 F4 B2 STEP2 F5 B3 STEP3 B4 STEP4 B5 STEP5");
  CHECK(order_of(program, 1) == "F0 F1 B0 STEP0 F2 B1 STEP1 F3 B2 STEP2 F4 B3 STEP3 F5 B4 STEP4 B5 STEP5");
  CHECK(order_of(program, 2) == "F0 B0 STEP0 F1 B1 STEP1 F2 B2 STEP2 F3 B3 STEP3 F4 B4 STEP4 F5 B5 STEP5");
}

// Replicated 2-1, M = 6 (the second picture in sim/schedules.cc).
TEST_CASE("pipedream 2-1: round robin and an all-reduce before every step", "[generators][pipedream]") {
  const Program program = make_pipedream(make_plan(Schedule::kPipeDream, {2, 1}, 6));
  CHECK(order_of(program, 0) == "F0 F2 B0 ALLREDUCE0 STEP0 F4 B2 ALLREDUCE1 STEP1 B4 ALLREDUCE2 STEP2");
  CHECK(order_of(program, 1) == "F1 F3 B1 ALLREDUCE0 STEP0 F5 B3 ALLREDUCE1 STEP1 B5 ALLREDUCE2 STEP2");
  CHECK(forwards_before_first_backward(program, 2) == 1);
}

TEST_CASE("pipedream warm-up is (workers in s..S-1 minus 1) / r_s", "[generators][pipedream]") {
  struct Case {
    std::vector<int> replicas;
    int microbatches;
  };
  const std::vector<Case> cases = {
      {{2, 1, 1}, 8},    {{15, 1}, 30}, {{1, 3}, 6}, {{3, 2, 1}, 12},
      {{1, 1, 1, 1}, 8}, {{4}, 8},      {{2, 2}, 4}, {{15, 1}, 45},
  };
  for (const Case& c : cases) {
    const Plan plan = make_plan(Schedule::kPipeDream, c.replicas, c.microbatches);
    const Program program = make_pipedream(plan);
    for (int w = 0; w < program.num_workers(); ++w) {
      const int s = program.workers[w].stage;
      int downstream = 0;
      for (size_t t = s; t < c.replicas.size(); ++t) downstream += c.replicas[t];
      const int local = local_count(c.microbatches, c.replicas[s], program.workers[w].replica);
      const int expected = std::min((downstream - 1) / c.replicas[s], local);
      INFO("stages " << stages_to_string(plan.stages) << " M=" << c.microbatches << " w" << w);
      CHECK(forwards_before_first_backward(program, w) == std::min(expected + 1, local));
      CHECK(warmup_forwards(plan, s, local) == expected);
      // A worker holds at most warm-up + 1 activations (and weight versions).
      CHECK(peak_in_flight(program, w) == std::min(expected + 1, local));
    }
  }
  // The examples from the design: 2-1-1 gives 1, 1, 0; 15-1 gives 1, 0.
  const Plan a = make_plan(Schedule::kPipeDream, {2, 1, 1}, 8);
  CHECK(warmup_forwards(a, 0, 4) == (4 - 1) / 2);
  CHECK(warmup_forwards(a, 1, 8) == (2 - 1) / 1);
  CHECK(warmup_forwards(a, 2, 8) == 0);
  const Plan b = make_plan(Schedule::kPipeDream, {15, 1}, 30);
  CHECK(warmup_forwards(b, 0, 2) == (16 - 1) / 15);
  CHECK(warmup_forwards(b, 1, 30) == 0);
}

TEST_CASE("pipedream 15-1 assigns microbatch k to replica k mod 15", "[generators][pipedream]") {
  const int m = 30;
  const Program program = make_pipedream(make_plan(Schedule::kPipeDream, {15, 1}, m));
  for (int r = 0; r < 15; ++r) {
    INFO("replica " << r);
    const std::string a = std::to_string(r);
    const std::string b = std::to_string(r + 15);
    CHECK(order_of(program, r) == "F" + a + " F" + b + " B" + a + " ALLREDUCE0 STEP0 B" + b + " ALLREDUCE1 STEP1");
  }
  CHECK(count_kind(program, 15, ActionKind::kForward) == m);
  CHECK(count_kind(program, 15, ActionKind::kAllReduce) == 0);
}

TEST_CASE("pipedream follows every backward with its update, rounds counting up", "[generators][pipedream]") {
  const Program program = make_pipedream(make_plan(Schedule::kPipeDream, {3, 2, 1}, 12));
  for (int w = 0; w < program.num_workers(); ++w) {
    const bool replicated = program.replicas_of(program.workers[w].stage) > 1;
    const std::vector<Action>& list = program.actions[w];
    int round = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].kind != ActionKind::kBackward) continue;
      INFO("worker " << w << " action " << i);
      size_t next = i + 1;
      if (replicated) {
        REQUIRE(next < list.size());
        CHECK(list[next] == make_action(ActionKind::kAllReduce, list[i].stage, round));
        ++next;
      }
      REQUIRE(next < list.size());
      CHECK(list[next] == make_action(ActionKind::kStep, list[i].stage, round));
      ++round;
    }
    CHECK(round == count_kind(program, w, ActionKind::kBackward));
    CHECK(count_kind(program, w, ActionKind::kStep) == round);
  }
}

TEST_CASE("warm-up is capped by the worker's local microbatches", "[generators]") {
  const Program a = make_1f1b(make_plan(Schedule::kOneFOneB, {1, 1, 1, 1}, 2));
  CHECK(order_of(a, 0) == "F0 F1 B0 B1 STEP0");
  const Program b = make_pipedream(make_plan(Schedule::kPipeDream, {1, 4}, 4));
  // Stage 0 would warm up (5 - 1) / 1 = 4 forwards; it owns all 4.
  CHECK(order_of(b, 0) == "F0 F1 F2 F3 B0 STEP0 B1 STEP1 B2 STEP2 B3 STEP3");
}

TEST_CASE("1f1b with replication uses the same warm-up and one flush", "[generators][1f1b]") {
  const Program program = make_1f1b(make_plan(Schedule::kOneFOneB, {2, 1, 1}, 8));
  CHECK(order_of(program, 0) == "F0 F2 B0 F4 B2 F6 B4 B6 ALLREDUCE0 STEP0");
  CHECK(order_of(program, 1) == "F1 F3 B1 F5 B3 F7 B5 B7 ALLREDUCE0 STEP0");
  CHECK(order_of(program, 2) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7 STEP0");
}

TEST_CASE("data parallel: F,B per local microbatch, then all-reduce and step", "[generators][dp]") {
  const int workers = 3;
  const int m = 7;
  const Program program = make_data_parallel(make_plan(Schedule::kDataParallel, {workers}, m));
  CHECK(order_of(program, 0) == "F0 B0 F3 B3 F6 B6 ALLREDUCE0 STEP0");
  CHECK(order_of(program, 1) == "F1 B1 F4 B4 ALLREDUCE0 STEP0");
  for (int w = 0; w < workers; ++w) {
    CHECK(static_cast<int>(program.actions[w].size()) == 2 * local_count(m, workers, w) + 2);
  }
  const Program single = make_data_parallel(make_plan(Schedule::kDataParallel, {1}, 2));
  CHECK(order_of(single, 0) == "F0 B0 F1 B1 STEP0");
}

// Microbatches held at once (F run, the microbatch's last backward pass, B or
// W, not yet): max over prefixes.
int peak_held(const Program& program, int worker) {
  int held = 0;
  int peak = 0;
  for (const Action& a : program.actions[worker]) {
    held += a.kind == ActionKind::kForward ? 1 : ends_microbatch(a.kind) ? -1 : 0;
    peak = std::max(peak, held);
  }
  return peak;
}

// Every local microbatch has one F, then one I, then one W.
void check_split_backward(const Program& program, int worker) {
  std::map<int, std::string> passes;
  for (const Action& a : program.actions[worker]) {
    if (a.kind == ActionKind::kForward) passes[a.batch()] += 'F';
    if (a.kind == ActionKind::kBackwardInput) passes[a.batch()] += 'I';
    if (a.kind == ActionKind::kBackwardWeight) passes[a.batch()] += 'W';
  }
  for (const auto& [k, order] : passes) {
    INFO("worker " << worker << " microbatch " << k);
    CHECK(order == "FIW");
  }
}

TEST_CASE("zb-h1: 1F1B's F and I order, stage s holds back s W's", "[generators][zero-bubble]") {
  // The picture in sim/schedules.cc (Qi et al., ICLR 2024, section 3.1).
  const Program program = make_zb_h1(make_plan(Schedule::kZbH1, {1, 1, 1}, 4));
  CHECK(order_of(program, 0) == "F0 F1 F2 I0 W0 F3 I1 W1 I2 W2 I3 W3 STEP0");
  CHECK(order_of(program, 1) == "F0 F1 I0 F2 I1 W0 F3 I2 W1 I3 W2 W3 STEP0");
  CHECK(order_of(program, 2) == "F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3 STEP0");
  // Every stage holds S microbatches at its peak, 1F1B's stage-0 figure.
  for (int stages : {2, 5, 8}) {
    const Program big = make_zb_h1(make_plan(Schedule::kZbH1, std::vector<int>(stages, 1), 3 * stages));
    for (int w = 0; w < stages; ++w) {
      INFO("S = " << stages << " worker " << w);
      CHECK(peak_held(big, w) == stages);
      check_split_backward(big, w);
    }
  }
}

TEST_CASE("zb-h2: warm-up 2 (S - s - 1), 2 s W's held back, 2S - 1 held", "[generators][zero-bubble]") {
  const Program program = make_zb_h2(make_plan(Schedule::kZbH2, {1, 1, 1}, 6));
  CHECK(order_of(program, 0) == "F0 F1 F2 F3 F4 I0 W0 F5 I1 W1 I2 W2 I3 W3 I4 W4 I5 W5 STEP0");
  CHECK(order_of(program, 1) == "F0 F1 F2 I0 F3 I1 F4 I2 W0 F5 I3 W1 I4 W2 I5 W3 W4 W5 STEP0");
  CHECK(order_of(program, 2) == "F0 I0 F1 I1 F2 I2 F3 I3 F4 I4 W0 F5 I5 W1 W2 W3 W4 W5 STEP0");
  for (int stages : {2, 5, 8}) {
    const Program big = make_zb_h2(make_plan(Schedule::kZbH2, std::vector<int>(stages, 1), 3 * stages));
    for (int w = 0; w < stages; ++w) {
      INFO("S = " << stages << " worker " << w);
      CHECK(peak_held(big, w) == 2 * stages - 1);
      check_split_backward(big, w);
    }
  }
}

TEST_CASE("zero bubble with replicated stages: w_s = (downstream - 1) / r, u_s / r W's held back, one flush",
          "[generators][zero-bubble]") {
  // Stages of 2, 1 and 1 replicas, M = 8. Stage 0: w = 3 / 2 = 1, nothing
  // held back; stage 1: w = 1, u = 2 held back; stage 2: w = 0, u = 3.
  const Program program = make_zb_h1(make_plan(Schedule::kZbH1, {2, 1, 1}, 8));
  CHECK(order_of(program, 0) == "F0 F2 I0 W0 F4 I2 W2 F6 I4 W4 I6 W6 ALLREDUCE0 STEP0");
  CHECK(order_of(program, 2) == "F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 F7 I6 W4 I7 W5 W6 W7 STEP0");
  CHECK(order_of(program, 3) == "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 W4 W5 W6 W7 STEP0");
  for (int w = 0; w < program.num_workers(); ++w) check_split_backward(program, w);
  // zb-h2 doubles both: stage 1 warms up with 2 and holds back 4.
  const Program h2 = make_zb_h2(make_plan(Schedule::kZbH2, {2, 1, 1}, 8));
  CHECK(order_of(h2, 2) == "F0 F1 F2 I0 F3 I1 F4 I2 F5 I3 F6 I4 W0 F7 I5 W1 I6 W2 I7 W3 W4 W5 W6 W7 STEP0");
}

TEST_CASE("a replica with no microbatch still joins the flush", "[generators]") {
  const Program program = make_gpipe(make_plan(Schedule::kGPipe, {3, 1}, 2));
  CHECK(order_of(program, 2) == "ALLREDUCE0 STEP0");
}

}  // namespace
}  // namespace baton
