#include "planner/stage_demand.h"

#include "sim/schedules.h"

namespace baton {

namespace {

Plan stand_in(Schedule schedule, int microbatches, int replicas, int downstream, int upstream) {
  Plan plan;
  plan.model = "stand-in";
  plan.schedule = schedule;
  plan.microbatch_size = 1;
  plan.batches = microbatches;
  int device = 0;
  const auto add_stage = [&](int begin, int count) {
    StagePlan stage{LayerRange{begin, begin + 1}, count, {}};
    for (int k = 0; k < count; ++k) stage.devices.push_back(device++);
    plan.stages.push_back(stage);
  };
  if (upstream > 0) add_stage(0, upstream);
  add_stage(plan.num_stages(), replicas);
  if (downstream > replicas) add_stage(plan.num_stages(), downstream - replicas);
  // A steady state: enough minibatches that each replica runs a warm-up over
  // `downstream` workers and then as many again in step (its weight versions
  // pile up only then), and a multiple of r.
  if (runs_steady_state(schedule)) plan.batches = replicas * (2 * ((downstream + replicas - 1) / replicas) + 4);
  return plan;
}

}  // namespace

const StageDemand& StageDemands::of(int replicas, int downstream, int upstream) {
  if (!sees_upstream(schedule_)) upstream = 0;
  const auto key = std::make_tuple(replicas, downstream, upstream);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const Plan plan = stand_in(schedule_, microbatches_, replicas, downstream, upstream);
  const Program program = generate_program(plan);
  StageDemand demand{worker_demand(program, upstream), std::max(plan.batches, 1), {}};
  for (const MemoryPoint& p : demand.worker.memory)
    demand.memory.push_back({p.versions + 1.0 + optimizer_factor_, double(p.in_flight)});
  return memo_.emplace(key, std::move(demand)).first->second;
}

}  // namespace baton
