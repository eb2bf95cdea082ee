#include "sim/validation_figures.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "sim/schedules.h"
#include "sim/stage_costs.h"
#include "sim/stats.h"

namespace baton {

namespace {

SimOptions sgd_options() {
  SimOptions options;
  options.optimizer = Optimizer::kSgd;
  return options;
}

// The steps every worker of `step_compute` has (the fewest any has); an
// error, named for `what`, when there are no workers or a worker has none.
Result<size_t> steps_of_all(const std::vector<std::vector<Seconds>>& step_compute, const char* what) {
  if (step_compute.empty()) return Error{fmt::format("{}: no workers", what)};
  size_t steps = step_compute.front().size();
  for (const std::vector<Seconds>& worker : step_compute) steps = std::min(steps, worker.size());
  if (steps == 0) return Error{fmt::format("{}: a worker has no steps' compute", what)};
  return steps;
}

double quantile_s(const std::vector<Seconds>& samples, double q) {
  std::vector<double> values;
  values.reserve(samples.size());
  for (Seconds s : samples) values.push_back(s.value);
  return quantile(std::move(values), q);
}

}  // namespace

Seconds compute_per_microbatch(const Profile& profile) {
  const LayerRange all{0, profile.num_layers()};
  return forward_time(profile, all) + backward_time(profile, all);
}

double loaded_speed(const Profile& alone, const Profile& loaded) {
  return compute_per_microbatch(alone) / compute_per_microbatch(loaded);
}

DeviceType pooled_device(const DeviceType& device, const std::vector<LoadedSlice>& slices) {
  DeviceType pooled = device;
  std::vector<double> speeds;
  pooled.compute_noise.clear();
  for (const LoadedSlice& slice : slices) {
    speeds.push_back(slice.speed);
    pooled.compute_noise.insert(pooled.compute_noise.end(), slice.noise.begin(), slice.noise.end());
  }
  std::sort(pooled.compute_noise.begin(), pooled.compute_noise.end());
  pooled.relative_speed = quantile(speeds, 0.5);
  return pooled;
}

Result<Simulation> simulate_iteration(const Plan& plan, const Profile& profile, const Topology& topology) {
  return simulate_program(build_program(plan), stage_costs(profile, plan, topology), topology, plan.microbatch_size,
                          sgd_options());
}

Seconds executor_step_barrier(const Topology& topology, int workers) {
  if (workers < 2 || topology.levels.front().shared_compute) return Seconds(0);
  const int level = topology.common_level(0, workers - 1);
  const int rounds = static_cast<int>(std::ceil(std::log2(static_cast<double>(workers))));
  return topology.levels[static_cast<size_t>(std::max(level, 0))].ring_latency() * (2.0 * rounds);
}

Result<IterationPrediction> predict_iteration(const Plan& plan, const Profile& profile, const Topology& topology,
                                              double q, int samples) {
  auto deterministic = simulate_iteration(plan, profile, topology);
  if (!deterministic) return deterministic.error();
  IterationPrediction prediction{std::move(*deterministic), executor_step_barrier(topology, plan.num_workers()),
                                 Seconds(0)};
  prediction.at_quantile = prediction.plain();
  if (!topology.device.noisy() || samples == 0) return prediction;
  const auto noisy = noisy_makespans(build_program(plan), stage_costs(profile, plan, topology), topology,
                                     plan.microbatch_size, sgd_options(), samples);
  if (!noisy) return noisy.error();
  prediction.at_quantile = Seconds(quantile_s(*noisy, q)) + prediction.step_barrier;
  return prediction;
}

Result<Seconds> expected_compute_per_step(const Plan& plan, const Profile& profile, const Topology& topology,
                                          const LoadedSlice& slice) {
  Topology at_slice = topology;
  at_slice.device.relative_speed = slice.speed;
  const auto iteration = simulate_iteration(plan, profile, at_slice);
  if (!iteration) return iteration.error();
  Seconds compute(0);
  for (const Span& span : iteration->trace.spans)
    if (is_compute(span.action.kind)) compute += span.end - span.start;
  double mean_noise = 1.0;
  if (!slice.noise.empty())
    mean_noise = std::accumulate(slice.noise.begin(), slice.noise.end(), 0.0) / double(slice.noise.size());
  return compute * mean_noise;
}

Result<double> run_speed(const std::vector<std::vector<Seconds>>& step_compute, Seconds expected, double speed,
                         double q) {
  const auto steps = steps_of_all(step_compute, "run_speed");
  if (!steps) return steps.error();
  if (!(expected.value > 0.0)) return Error{"run_speed: the expected compute per step is not positive"};
  std::vector<Seconds> sums(*steps);
  for (const std::vector<Seconds>& worker : step_compute)
    for (size_t k = 0; k < *steps; ++k) sums[k] += worker[k];
  const Seconds at_q = step_times_after_first(std::move(sums), q).at_quantile;
  if (!(at_q.value > 0.0)) return Error{"run_speed: the run's steps have no compute"};
  return speed * (expected / at_q);
}

Result<Seconds> predict_run(const Plan& plan, const Profile& profile, const Topology& topology,
                            const std::vector<std::vector<Seconds>>& step_compute, double q,
                            const std::vector<Seconds>& action_overhead) {
  const auto workers = static_cast<size_t>(plan.num_workers());
  if (step_compute.size() != workers)
    return Error{fmt::format("predict_run: {} workers' step compute for {} workers", step_compute.size(), workers)};
  const auto steps = steps_of_all(step_compute, "predict_run");
  if (!steps) return steps.error();
  const auto iteration = simulate_iteration(plan, profile, topology);
  if (!iteration) return iteration.error();
  std::vector<Seconds> expected(workers);
  for (const Span& span : iteration->trace.spans)
    if (is_compute(span.action.kind)) expected[static_cast<size_t>(span.worker)] += span.end - span.start;
  const std::vector<double>& noise = topology.device.compute_noise;
  const double mean_noise =
      noise.empty() ? 1.0 : std::accumulate(noise.begin(), noise.end(), 0.0) / double(noise.size());
  const Program program = build_program(plan);
  const std::vector<StageCost> costs = stage_costs(profile, plan, topology);
  SimOptions options = sgd_options();
  options.worker_slowdown.assign(workers, 1.0);
  options.worker_action_overhead = action_overhead;
  std::vector<Seconds> makespans;
  for (size_t k = *steps > 1 ? 1 : 0; k < *steps; ++k) {
    for (size_t w = 0; w < workers; ++w) {
      const Seconds at_speed = expected[w] * mean_noise;
      const Seconds measured = step_compute[w][k];
      options.worker_slowdown[w] = at_speed.value > 0.0 && measured.value > 0.0 ? measured / at_speed : 1.0;
    }
    const auto makespan =
        noisy_makespans(program, costs, topology, plan.microbatch_size, options, 1, static_cast<uint64_t>(k) + 1);
    if (!makespan) return makespan.error();
    makespans.push_back(makespan->front());
  }
  return Seconds(quantile_s(makespans, q));
}

StepTimes step_times_after_first(std::vector<Seconds> walls, double q) {
  if (walls.size() > 1) walls.erase(walls.begin());
  return StepTimes{Seconds(quantile_s(walls, q)), Seconds(quantile_s(walls, 0.5)), Seconds(quantile_s(walls, 0.0)),
                   Seconds(quantile_s(walls, 1.0))};
}

int steps_to_run(int min_steps, Seconds run_time, Seconds estimate) {
  return std::max(min_steps, 1 + static_cast<int>(std::ceil(run_time / estimate)));
}

int whole_pipedream_rounds(const Plan& plan) {
  const auto period = static_cast<int>(pipedream_period(plan));
  return (plan.batches + period - 1) / period * period;
}

}  // namespace baton
