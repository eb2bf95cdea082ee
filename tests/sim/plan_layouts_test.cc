// data_parallel_plan and plan_with_schedule (sim/plan_layouts.h): dp as the
// whole model on one stage, replica j on device j.
#include "tests/catch_compat.h"

#include "sim/plan_layouts.h"

using namespace baton;

namespace {

constexpr int kLayers = 5;

Profile five_layer_profile() {
  Profile profile;
  profile.model = "five";
  profile.microbatch_size = 16;
  profile.layers.resize(kLayers);
  return profile;
}

// Stages "0-2x2@4+5,2-5x1@7": three workers on devices 4, 5 and 7.
Plan two_stage_plan() {
  Plan plan;
  plan.model = "five";
  plan.schedule = Schedule::kOneFOneB;
  plan.microbatch_size = 8;
  plan.batches = 12;
  plan.vertical_sync = true;
  plan.stages = {StagePlan{LayerRange{0, 2}, 2, {4, 5}}, StagePlan{LayerRange{2, kLayers}, 1, {7}}};
  plan.prediction = {{"iteration_s", 1.5}};
  return plan;
}

}  // namespace

TEST_CASE("data_parallel_plan: every layer on one stage of W replicas, devices 0..W-1", "[sim][plan-layouts]") {
  const Plan plan = data_parallel_plan(five_layer_profile(), 4, 9);
  CHECK(plan.model == "five");
  CHECK(plan.schedule == Schedule::kDataParallel);
  CHECK(plan.microbatch_size == 16);  // the profile's
  CHECK(plan.batches == 9);
  CHECK_FALSE(plan.vertical_sync);
  REQUIRE(plan.num_stages() == 1);
  CHECK(plan.stages[0].layers == LayerRange{0, kLayers});
  CHECK(plan.stages[0].replicas == 4);
  CHECK(plan.stages[0].devices == std::vector<int>{0, 1, 2, 3});
  CHECK(plan.num_workers() == 4);
  CHECK(stages_to_string(plan.stages) == "0-5x4");
}

TEST_CASE("data_parallel_plan: one worker is one replica on device 0", "[sim][plan-layouts]") {
  const Plan plan = data_parallel_plan(five_layer_profile(), 1, 3);
  REQUIRE(plan.num_stages() == 1);
  CHECK(plan.stages[0].replicas == 1);
  CHECK(plan.stages[0].devices == std::vector<int>{0});
  CHECK(plan.batches == 3);
}

TEST_CASE("plan_with_schedule: dp folds several stages into one on as many workers", "[sim][plan-layouts]") {
  const Plan base = two_stage_plan();
  const Plan dp = plan_with_schedule(base, Schedule::kDataParallel, kLayers);
  CHECK(dp.schedule == Schedule::kDataParallel);
  REQUIRE(dp.num_stages() == 1);
  // 2 + 1 workers; the devices the stages named (4, 5, 7) are not kept.
  CHECK(dp.stages[0].layers == LayerRange{0, kLayers});
  CHECK(dp.stages[0].replicas == 3);
  CHECK(dp.stages[0].devices == std::vector<int>{0, 1, 2});
  // Every other field is the base plan's.
  CHECK(dp.model == base.model);
  CHECK(dp.microbatch_size == 8);
  CHECK(dp.batches == 12);
  CHECK(dp.vertical_sync);
  CHECK(dp.prediction == base.prediction);
}

TEST_CASE("plan_with_schedule: a one-stage plan stays as it is under dp, devices included", "[sim][plan-layouts]") {
  Plan base = two_stage_plan();
  base.stages = {StagePlan{LayerRange{0, kLayers}, 2, {6, 3}}};
  const Plan dp = plan_with_schedule(base, Schedule::kDataParallel, kLayers);
  CHECK(dp.schedule == Schedule::kDataParallel);
  REQUIRE(dp.num_stages() == 1);
  CHECK(dp.stages[0].replicas == 2);
  CHECK(dp.stages[0].devices == std::vector<int>{6, 3});
}

TEST_CASE("plan_with_schedule: other schedules keep the stages and only change the schedule", "[sim][plan-layouts]") {
  const Plan base = two_stage_plan();
  for (Schedule schedule : {Schedule::kPipeDream, Schedule::kOneFOneB, Schedule::kGPipe}) {
    const Plan plan = plan_with_schedule(base, schedule, kLayers);
    CHECK(plan.schedule == schedule);
    CHECK(stages_to_string(plan.stages) == stages_to_string(base.stages));
    REQUIRE(plan.num_stages() == 2);
    CHECK(plan.stages[0].devices == std::vector<int>{4, 5});
    CHECK(plan.stages[1].devices == std::vector<int>{7});
    CHECK(plan.batches == 12);
  }
}
