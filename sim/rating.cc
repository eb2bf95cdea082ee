#include "sim/rating.h"

#include <algorithm>
#include <cmath>

#include "sim/schedules.h"

namespace baton {

namespace {

constexpr double kRelativeTolerance = 1e-9;
constexpr int kRepeatsChecked = 3;
constexpr int kRunLength = 4;  // x pipedream_minibatches, then x 4 again
constexpr int kAttempts = 2;

// c_{k+p} - c_k == difference for every k from `first` on (k + p <= last).
bool repeats(const std::vector<Seconds>& c, int first, int last, int p, double difference) {
  const double tolerance = kRelativeTolerance * std::max(std::abs(difference), c[last].value);
  for (int k = first; k + p <= last; ++k)
    if (std::abs((c[k + p] - c[k]).value - difference) > tolerance) return false;
  return true;
}

// NOAM as the simulator's window counts it: workers / replicas of stage 0, rounded up.
int noam_of(const Plan& plan) {
  const int first = plan.stages.empty() ? 1 : plan.stages.front().replicas;
  return (plan.num_workers() + first - 1) / first;
}

Result<Simulation> simulate_with(Plan plan, int microbatches, const Profile& profile, const Topology& topology,
                                 Optimizer optimizer) {
  plan.batches = microbatches;
  SimOptions options;
  options.optimizer = optimizer;
  options.record_trace = false;
  return simulate_plan(plan, profile, topology, options);
}

// The last minibatch measured: before the drain, and before the run's last
// quarter, which the drain reaches into on long pipelines (stages emptying
// one after another speed stage 0 up well before its last NOAM minibatches).
int last_measured(const std::vector<Seconds>& c, int drain) {
  const int size = static_cast<int>(c.size());
  return std::min(size - 1 - drain, size * 3 / 4);
}

// The slope over the whole periods of the run's third quarter: not exact,
// the start-up may not have faded.
Seconds slope(const std::vector<Seconds>& c, int64_t period, int drain) {
  const int last = last_measured(c, drain);
  const int first = static_cast<int>(c.size()) / 2;
  const int64_t span = std::max<int64_t>((last - first) / period * period, 1);
  return (c[last] - c[last - span]) / double(span);
}

}  // namespace

std::optional<Repeat> find_repeat(const std::vector<Seconds>& completions, int64_t period, int drain) {
  const int last = last_measured(completions, drain);
  const int half = static_cast<int>(completions.size()) / 2;
  for (int k = 1; k <= kMaxRepeatPeriods; ++k) {
    const int64_t p = k * period;
    // At least kRepeatsChecked repeats, and every minibatch from the run's middle on.
    const int64_t first = std::min<int64_t>(half, last - kRepeatsChecked * p);
    if (first < 0) break;
    const int pi = static_cast<int>(p);
    const double difference = (completions[last] - completions[last - pi]).value;
    if (repeats(completions, static_cast<int>(first), last, pi, difference))
      return Repeat{Seconds(difference / double(p)), pi};
  }
  return std::nullopt;
}

Result<Rating> rate_plan(const Plan& plan, const Profile& profile, const Topology& topology, Optimizer optimizer) {
  Rating rating;
  if (!runs_steady_state(plan.schedule)) {
    auto simulation = simulate_with(plan, plan.batches, profile, topology, optimizer);
    if (!simulation) return simulation.error();
    rating.metrics = std::move(simulation->metrics);
    rating.iteration_time = rating.metrics.iteration_time;
    rating.samples_per_iteration = double(plan.batches) * plan.microbatch_size;
    rating.simulated_minibatches = plan.batches;
  } else {
    const int64_t period = pipedream_period(plan);
    // The drain reaches back NOAM rounds of every replica of stage 0, and a
    // round is a period of minibatches (one per replica).
    const int drain = (noam_of(plan) + 1) * static_cast<int>(period);
    int minibatches = kRunLength * std::max(pipedream_minibatches(plan), drain);
    for (int attempt = 0; attempt < kAttempts; ++attempt, minibatches *= kRunLength) {
      auto simulation = simulate_with(plan, minibatches, profile, topology, optimizer);
      if (!simulation) return simulation.error();
      rating.metrics = std::move(simulation->metrics);
      rating.simulated_minibatches = minibatches;
      const auto repeat = find_repeat(simulation->stage0_completion, period, drain);
      rating.exact = repeat.has_value();
      rating.iteration_time = repeat ? repeat->per_minibatch : slope(simulation->stage0_completion, period, drain);
      rating.repeat_minibatches = repeat ? repeat->minibatches : 0;
      if (repeat) break;
    }
    rating.samples_per_iteration = plan.microbatch_size;
  }
  rating.throughput_samples_per_s =
      rating.iteration_time.value > 0 ? rating.samples_per_iteration / rating.iteration_time.value : 0.0;
  return rating;
}

}  // namespace baton
