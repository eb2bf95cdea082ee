// The Program of one replica (sim/program.h one_replica_program and
// sim/schedules.h build_replica0_program): replica 0's workers with their
// actions and peers renumbered, the all-reduces spanning every replica.
#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "tests/schedule/schedule_test_support.h"

namespace baton {
namespace {

using testing::make_plan;

TEST_CASE("one replica: generating replica 0 alone gives what the whole Program gives it, for every schedule") {
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB, Schedule::kPipeDream, Schedule::kZbH1,
                            Schedule::kZbH2, Schedule::kInterleaved1F1B, Schedule::kZbV, Schedule::kDualPipeV}) {
    INFO(schedule_name(schedule));
    // 4 stages of 3 replicas; the chunked schedules run 2 chunks on 2 ranks.
    Plan plan = make_plan(schedule, {3, 3, 3, 3}, 12);
    if (runs_chunks(schedule)) {
      plan.virtual_stages = 2;
      for (int s = 2; s < 4; ++s) plan.stages[s].devices = plan.stages[plan.rank_of(s)].devices;
    }
    const Program whole = build_program(plan);
    const Program expected = one_replica_program(whole);
    const Program fast = build_replica0_program(plan);
    CHECK(program_to_text(fast) == program_to_text(expected));
    CHECK(fast.allreduce_devices == expected.allreduce_devices);
    REQUIRE(fast.num_workers() == whole.num_workers() / 3);
    for (const WorkerInfo& worker : fast.workers) CHECK(worker.replica == 0);
    // Every stage's all-reduce spans its 3 replicas' devices.
    for (int s = 0; s < plan.num_stages(); ++s) CHECK(fast.allreduce_devices[s] == plan.stages[s].devices);
  }
}

TEST_CASE("one replica: peers are renumbered to the kept workers") {
  // 2 stages x 2 replicas, 4 microbatches: replica 0 runs microbatches 0 and 2
  // and stage 0's replica 0 (worker 0) sends to stage 1's (worker 2 of 4,
  // worker 1 of the 2 kept).
  const Program fast = build_replica0_program(make_plan(Schedule::kGPipe, {2, 2}, 4));
  REQUIRE(fast.num_workers() == 2);
  CHECK(fast.workers[1].stage == 1);
  for (const Action& action : fast.actions[0])
    if (is_send(action.kind)) CHECK(action.peer == 1);
  for (const Action& action : fast.actions[1])
    if (is_recv(action.kind)) CHECK(action.peer == 0);
  CHECK(testing::order_of(fast, 0) == "F0 F2 B0 B2 ALLREDUCE0 STEP0");
}

}  // namespace
}  // namespace baton
