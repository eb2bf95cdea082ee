#include "sim/plan_layouts.h"

namespace baton {

namespace {

// Layers [0, num_layers) on `workers` replicas, replica j on device j.
StagePlan whole_model_stage(int num_layers, int workers) {
  StagePlan stage{LayerRange{0, num_layers}, workers, {}};
  for (int device = 0; device < workers; ++device) stage.devices.push_back(device);
  return stage;
}

}  // namespace

Plan data_parallel_plan(const Profile& profile, int workers, int microbatches) {
  Plan plan;
  plan.model = profile.model;
  plan.schedule = Schedule::kDataParallel;
  plan.microbatch_size = profile.microbatch_size;
  plan.batches = microbatches;
  plan.stages = {whole_model_stage(profile.num_layers(), workers)};
  return plan;
}

Plan plan_with_schedule(const Plan& plan, Schedule schedule, int num_layers) {
  Plan result = plan;
  result.schedule = schedule;
  if (!runs_chunks(schedule))
    result.virtual_stages = 1;
  else if (schedule != Schedule::kInterleaved1F1B || result.virtual_stages < 2)
    result.virtual_stages = 2;
  if (schedule == Schedule::kDataParallel && plan.num_stages() > 1)
    result.stages = {whole_model_stage(num_layers, plan.num_workers())};
  return result;
}

}  // namespace baton
