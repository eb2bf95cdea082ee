#include "planner/baton_model.h"

#include <algorithm>
#include <limits>

#include "sim/network.h"
#include "sim/rating.h"
#include "sim/schedules.h"
#include "sim/stage_costs.h"
#include "sim/worker_demand.h"

namespace baton {

namespace {

constexpr double kOwnPaceTolerance = 0.02;

// The first worker of every stage in the Program the rating simulated.
std::vector<int> first_workers(const Program& program) {
  std::vector<int> first(static_cast<size_t>(program.num_stages), -1);
  for (int w = program.num_workers() - 1; w >= 0; --w)
    for (int s : stages_of(program.workers[w])) first[s] = w;
  return first;
}

StageEstimate estimate_stage(const StagePlan& stage, const StageCost& cost, const Network& network,
                             const WorkerDemand& demand, int microbatches) {
  StageEstimate e;
  e.forward = cost.forward;
  e.backward = cost.backward;
  e.allreduce = stage.replicas > 1 ? network.allreduce_time(stage.devices, cost.params) : Seconds(0.0);
  const Seconds device_time = cost.forward * demand.forwards + cost.backward * demand.backwards +
                              cost.backward_input * demand.input_passes + cost.backward_weight * demand.weight_passes +
                              e.allreduce * demand.allreduces;
  e.period = device_time / double(std::max(microbatches, 1));
  e.allreduce_share = e.allreduce * demand.allreduces / double(std::max(microbatches, 1));
  e.weights = cost.params;
  return e;
}

void add_simulated(StageEstimate& e, const Metrics& metrics, const Program& program, int stage, int first_worker) {
  const WorkerMetrics& first = metrics.workers[static_cast<size_t>(first_worker)];
  e.busy_fraction = 1.0 - first.bubble_fraction;
  e.weight_versions = first.weight_versions;
  e.inflight = first.peak_inflight_microbatches;
  e.activations = first.peak_activation_bytes;
  for (const WorkerMetrics& w : metrics.workers)
    if (program.workers[static_cast<size_t>(w.worker)].runs(stage)) e.memory = max(e.memory, w.peak_memory);
}

void name_bottleneck(PlanEstimate& estimate, double microbatches_per_iteration) {
  const auto slowest =
      std::max_element(estimate.stages.begin(), estimate.stages.end(),
                       [](const StageEstimate& a, const StageEstimate& b) { return a.period < b.period; });
  estimate.bottleneck_stage = static_cast<int>(slowest - estimate.stages.begin());
  const Seconds per_microbatch = estimate.iteration_time / microbatches_per_iteration;
  if (slowest->period.value >= (1.0 - kOwnPaceTolerance) * per_microbatch.value) {
    estimate.bottleneck = slowest->allreduce_share > slowest->period * 0.5 ? "all-reduce" : "compute";
  } else {
    estimate.bottleneck = "communication or pipeline depth";
  }
}

}  // namespace

PlanEstimate estimate_plan(const Profile& profile, const Topology& topology, const Plan& plan, Optimizer optimizer) {
  PlanEstimate estimate;
  const auto rating = rate_plan(plan, profile, topology, optimizer);
  if (!rating) {
    estimate.rated = false;
    estimate.bottleneck = "deadlock";
    estimate.iteration_time = Seconds(std::numeric_limits<double>::infinity());
    return estimate;
  }
  Plan simulated = plan;
  simulated.batches = rating->simulated_minibatches;
  const Program program = generate_program(simulated);
  const std::vector<StageCost> costs = stage_costs(profile, simulated, topology);
  const Network network(topology);
  const std::vector<int> first = first_workers(program);
  for (int s = 0; s < plan.num_stages(); ++s) {
    StageEstimate e =
        estimate_stage(plan.stages[s], costs[s], network, worker_demand(program, first[s], s), simulated.batches);
    add_simulated(e, rating->metrics, program, s, first[s]);
    estimate.peak_memory = max(estimate.peak_memory, e.memory);
    estimate.stages.push_back(e);
  }
  estimate.iteration_time = rating->iteration_time;
  estimate.samples_per_iteration = rating->samples_per_iteration;
  estimate.throughput_samples_per_s = rating->throughput_samples_per_s;
  estimate.exact = rating->exact;
  estimate.simulated = rating->metrics;
  name_bottleneck(estimate, runs_steady_state(plan.schedule) ? 1.0 : double(plan.batches));
  return estimate;
}

}  // namespace baton
