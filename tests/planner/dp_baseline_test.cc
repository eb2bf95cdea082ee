// The planner's data-parallel baseline (PlannerOutcome::data_parallel), the
// "x over data parallelism" of `baton plan`: data parallelism at the samples
// per optimizer step of the plan it is held against, so that a flush schedule's
// M microbatches are not compared with a data parallelism that all-reduces
// after every D of them.
#include "tests/catch_compat.h"

#include "planner/planner.h"
#include "sim/plan_layouts.h"
#include "sim/simulator.h"

using namespace baton;

namespace {

// 16 layers of 1 ms forward, 2 ms backward, 4 MiB of weights each, on 8
// devices of one 100 Gb/s level.
const Profile& profile() {
  static const Profile p =
      make_uniform_profile(16, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(1 << 20), Bytes(1 << 22));
  return p;
}

const Topology& topology() {
  static const Topology t = make_flat_topology(8, 100.0, Seconds::from_us(5));
  return t;
}

PlannerOutcome planned(PlannerOptions options) {
  auto outcome = make_plan(profile(), topology(), options);
  REQUIRE(outcome.ok());
  REQUIRE(outcome->data_parallel);
  return std::move(*outcome);
}

}  // namespace

TEST_CASE("dp baseline: a flush schedule's M microbatches per step, M / D on each replica", "[planner][dp-baseline]") {
  for (int m : {8, 16, 64}) {
    PlannerOptions options;
    options.schedule = Schedule::kOneFOneB;
    options.microbatches = m;
    const PlannerOutcome outcome = planned(options);
    const PlanChoice& dp = *outcome.data_parallel;
    INFO("M = " << m);
    CHECK(outcome.best.plan.batches == m);
    CHECK(dp.plan.schedule == Schedule::kDataParallel);
    CHECK(dp.plan.batches == m);
    CHECK(dp.plan.stages.size() == 1);
    CHECK(dp.plan.stages[0].replicas == 8);
    // Its estimate is the estimate of that plan: (M / D)(tF + tB) of compute per
    // step, so the compute per sample does not depend on M; only the all-reduce
    // is shared by more samples as M grows.
    const PlanEstimate again =
        estimate_plan(profile(), topology(), data_parallel_plan(profile(), 8, m), Optimizer::kAdam);
    CHECK(dp.estimate.iteration_time.value == Approx(again.iteration_time.value).epsilon(1e-12));
    CHECK(dp.estimate.samples_per_iteration == Approx(double(m) * profile().microbatch_size));
  }
}

TEST_CASE("dp baseline: larger steps amortize its all-reduce, so the baseline per sample is no slower",
          "[planner][dp-baseline]") {
  double previous = 1e300;
  for (int m : {8, 16, 32, 64}) {
    PlannerOptions options;
    options.schedule = Schedule::kGPipe;
    options.microbatches = m;
    const double per_sample = planned(options).data_parallel->time_per_sample_s();
    INFO("M = " << m);
    CHECK(per_sample <= previous * (1 + 1e-12));
    previous = per_sample;
  }
}

TEST_CASE("dp baseline: fewer microbatches than devices still gives each device one", "[planner][dp-baseline]") {
  PlannerOptions options;
  options.schedule = Schedule::kOneFOneB;
  options.microbatches = 4;
  CHECK(planned(options).data_parallel->plan.batches == 8);
}

TEST_CASE("dp baseline: against PipeDream's steady state, one microbatch per device per step (the paper's)",
          "[planner][dp-baseline]") {
  PlannerOptions options;
  options.schedule = Schedule::kPipeDream;
  const PlannerOutcome outcome = planned(options);
  CHECK(outcome.data_parallel->plan.batches == 8);
}
