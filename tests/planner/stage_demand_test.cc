// StageDemands (planner/stage_demand.h): a stage's work and memory from its
// schedule's generator, through a two-stage stand-in. The stand-in must count
// what the real pipeline's Program holds for that stage, whatever the stages
// after it look like.
#include "tests/catch_compat.h"

#include "planner/stage_demand.h"
#include "sim/schedules.h"
#include "sim/simulator.h"
#include "tests/schedule/schedule_test_support.h"

using namespace baton;

TEST_CASE("stage demand: the stand-in counts what a real pipeline's first worker of each stage holds",
          "[stage_demand]") {
  // Real pipelines of stages with various replica counts; every stage s is
  // compared with the stand-in for (r_s, workers from s on, workers before s).
  const std::vector<std::vector<int>> pipelines = {{1, 1, 1, 1},
                                                   {2, 1, 1},
                                                   {1, 3},
                                                   {2, 2, 1, 1},
                                                   {3, 1, 2},
                                                   std::vector<int>(12, 1),
                                                   {2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                                                   {4, 8, 8},
                                                   {1, 2, 3, 4, 5}};
  for (Schedule schedule : all_schedules()) {
    // dp has one stage and the chunked schedules are planned apart
    // (planner/chunked_plans.h): the search weighs neither.
    if (schedule == Schedule::kDataParallel || runs_chunks(schedule)) continue;
    for (const auto& replicas : pipelines) {
      int total = 0;
      for (int r : replicas) total += r;
      Plan plan = testing::make_plan(schedule, replicas, 12);
      plan.batches = simulated_microbatches(plan);  // a steady state: what the simulator runs
      const Program program = build_program(plan);
      StageDemands demands(schedule, 12, 2.0);
      int upstream = 0;
      for (size_t s = 0; s < replicas.size(); ++s) {
        const WorkerDemand real = worker_demand(program, upstream);
        const StageDemand& stand_in = demands.of(replicas[s], total - upstream, upstream);
        INFO(schedule_name(schedule) << " pipeline of " << replicas.size() << " stages, stage " << s
                                     << ", r = " << replicas[s]);
        CHECK(stand_in.worker.peak_in_flight() == real.peak_in_flight());
        CHECK(stand_in.worker.peak_versions() == real.peak_versions());
        // Work per microbatch of the run: the counts scale with the run's length.
        CHECK(stand_in.forwards_per_microbatch() == Approx(double(real.forwards) / plan.batches));
        CHECK(stand_in.allreduces_per_microbatch() == Approx(double(real.allreduces) / plan.batches));
        CHECK(double(stand_in.worker.input_passes) / stand_in.microbatches ==
              Approx(double(real.input_passes) / plan.batches));
        // The search's memory equals the simulator's accounting for any sizes (Adam: factor 2).
        CHECK(stand_in.peak_bytes(4096.0, 100.0) ==
              Approx(double(real.peak_bytes(Bytes(4096), Bytes(100), 2.0).value)));
        upstream += replicas[s];
      }
    }
  }
}

TEST_CASE("stage demand: flush schedules, ceil(M / r) forwards and one all-reduce per iteration", "[stage_demand]") {
  StageDemands demands(Schedule::kOneFOneB, 10, 2.0);
  const StageDemand& d = demands.of(3, 5);
  CHECK(d.microbatches == 10);
  CHECK(d.forwards_per_microbatch() == Approx(4.0 / 10.0));  // replica 0: microbatches 0, 3, 6, 9
  CHECK(d.allreduces_per_microbatch() == Approx(1.0 / 10.0));
  CHECK(d.worker.peak_in_flight() == std::min((5 - 1) / 3 + 1, 4));
  CHECK(&demands.of(3, 5) == &d);  // memoized
}

TEST_CASE("stage demand: pipedream, (tF + tB + AR) / r per minibatch", "[stage_demand]") {
  // One forward and one all-reduce per r minibatches on each replica.
  StageDemands demands(Schedule::kPipeDream, 1, 2.0);
  for (int r : {1, 2, 4}) {
    const StageDemand& d = demands.of(r, r + 3);
    CHECK(d.forwards_per_microbatch() == Approx(1.0 / r));
    CHECK(d.allreduces_per_microbatch() == Approx(r > 1 ? 1.0 / r : 0.0));
    CHECK(d.worker.peak_in_flight() == (r + 3 - 1) / r + 1);
  }
}
