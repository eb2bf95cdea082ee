#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "sim/network.h"
#include "sim/schedules.h"
#include "sim/simulator_internal.h"

namespace baton {

double optimizer_state_factor(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgd: return 0.0;
    case Optimizer::kMomentum: return 1.0;
    case Optimizer::kAdam: return 2.0;
  }
  return 0.0;
}

Result<Optimizer> parse_optimizer(std::string_view name) {
  if (name == "sgd") return Optimizer::kSgd;
  if (name == "momentum") return Optimizer::kMomentum;
  if (name == "adam") return Optimizer::kAdam;
  return Error{fmt::format("unknown optimizer \"{}\" (expected sgd, momentum or adam)", name)};
}

namespace {

int noam_of(const Program& program) {
  const int first = program.replicas_of(0);
  return (program.num_workers() + first - 1) / first;
}

int64_t replica_period(const Program& program) {
  int64_t period = 1;
  for (int s = 0; s < program.num_stages; ++s) {
    period = std::lcm(period, static_cast<int64_t>(program.replicas_of(s)));
    if (period > program.batches) return 1;  // no common period fits: use 1
  }
  return period;
}

struct Window {
  Seconds start;
  Seconds end;
  int minibatches = 1;  // iterations inside the window
};

// See simulator.h: the steady-state window of a pipedream run.
Window steady_window(const Program& program, const RawRun& raw) {
  const int n = program.batches;
  const int noam = noam_of(program);
  const int64_t period = replica_period(program);
  // With replicas (period > 1), the first round of minibatches is start-up
  // (every replica's first one) and the last round drain (the replicas'
  // links fall quiet): the window leaves both out when a whole period still
  // fits between them.
  const int margin = period > 1 && n - 2 * noam - 1 - 3 * period >= 0 ? static_cast<int>(period) : 0;
  const int a = std::min(noam + margin, n - 1);
  int b = std::max(a + 1, n - noam - 1 - margin);
  b = std::min(b, n - 1);
  const int span = static_cast<int>(((b - a) / period) * period);
  if (span >= 1) b = a + span;
  return Window{raw.stage0_completion[a], raw.stage0_completion[b], std::max(b - a, 1)};
}

Seconds busy_inside(const std::vector<std::pair<Seconds, Seconds>>& intervals, Window window) {
  Seconds total;
  for (const auto& [start, end] : intervals) {
    const Seconds from = max(start, window.start);
    const Seconds to = min(end, window.end);
    if (to > from) total += to - from;
  }
  return total;
}

WorkerMetrics worker_metrics(int worker, const WorkerInfo& info, const MemoryTracker& memory, Seconds busy,
                             Seconds window_length) {
  WorkerMetrics m;
  m.worker = worker;
  m.stage = info.stage;
  m.device = info.device;
  m.busy = busy;
  m.bubble_fraction = window_length.value > 0 ? 1.0 - busy / window_length : 0.0;
  m.peak_memory = memory.peak();
  m.weight_bytes = memory.params();
  m.weight_versions = memory.peak_versions();
  m.peak_stashed_weight_bytes = memory.params() * (memory.peak_versions() - 1);
  m.gradient_bytes = memory.params();
  m.optimizer_bytes = memory.optimizer_bytes();
  m.peak_activation_bytes = memory.peak_activations();
  m.peak_inflight_microbatches = memory.peak_inflight();
  return m;
}

// The devices that run workers, in device order, each with its workers and the
// peak of their sum (RawRun::device_peak_memory).
std::vector<DeviceMetrics> device_metrics(const Program& program, const RawRun& raw) {
  std::map<int, DeviceMetrics> by_device;
  for (int w = 0; w < program.num_workers(); ++w) {
    const int device = raw.memory_device[static_cast<size_t>(w)];
    DeviceMetrics& d = by_device[device];
    d.device = device;
    d.workers.push_back(w);
    d.peak_memory = raw.device_peak_memory[static_cast<size_t>(device)];
  }
  std::vector<DeviceMetrics> devices;
  for (auto& [device, d] : by_device) devices.push_back(std::move(d));
  return devices;
}

Metrics metrics_of(const Program& program, const RawRun& raw, int microbatch_size) {
  Metrics metrics;
  metrics.makespan = raw.makespan;
  metrics.actions = program.num_actions();
  metrics.actions_skipped = raw.skipped;
  const bool steady = runs_steady_state(program.schedule);
  const Window window = steady ? steady_window(program, raw) : Window{Seconds(0.0), raw.makespan, 1};
  metrics.window_start = window.start;
  metrics.window_end = window.end;
  const Seconds length = window.end - window.start;
  metrics.iteration_time = length / window.minibatches;
  const double samples = steady ? microbatch_size : double(program.batches) * microbatch_size;
  metrics.throughput_samples_per_s = metrics.iteration_time.value > 0 ? samples / metrics.iteration_time.value : 0.0;
  Seconds busy_total;
  for (int w = 0; w < program.num_workers(); ++w) {
    const Seconds busy = steady ? busy_inside(raw.compute_intervals[w], window) : raw.busy[w];
    busy_total += busy;
    metrics.workers.push_back(worker_metrics(w, program.workers[w], raw.memory[w], busy, length));
  }
  metrics.devices = device_metrics(program, raw);
  const double capacity = length.value * program.num_workers();
  metrics.bubble_fraction = capacity > 0 ? 1.0 - busy_total.value / capacity : 0.0;
  return metrics;
}

Trace trace_of(const Program& program, RawRun& raw) {
  Trace trace;
  trace.origin = "predicted";
  trace.workers = program.workers;
  trace.num_stages = program.num_stages;
  trace.spans = std::move(raw.spans);
  std::sort(trace.spans.begin(), trace.spans.end(), [](const Span& x, const Span& y) {
    if (x.start != y.start) return x.start < y.start;
    if (x.worker != y.worker) return x.worker < y.worker;
    return x.action_index < y.action_index;
  });
  return trace;
}

}  // namespace

Result<Simulation> simulate_program(const Program& program, const std::vector<StageCost>& costs,
                                    const Topology& topology, int microbatch_size, const SimOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto raw = run_engine(program, costs, topology, options);
  if (!raw) return raw.error();
  Simulation simulation;
  simulation.metrics = metrics_of(program, *raw, microbatch_size);
  simulation.trace = trace_of(program, *raw);
  simulation.stage0_completion = std::move(raw->stage0_completion);
  simulation.metrics.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return simulation;
}

Result<std::vector<Seconds>> noisy_makespans(const Program& program, const std::vector<StageCost>& costs,
                                             const Topology& topology, int microbatch_size, const SimOptions& options,
                                             int samples, uint64_t first_seed) {
  SimOptions noisy = options;
  noisy.record_trace = false;
  std::vector<Seconds> makespans;
  for (int i = 0; i < samples; ++i) {
    noisy.noise_seed = first_seed + static_cast<uint64_t>(i);
    auto raw = run_engine(program, costs, topology, noisy);
    if (!raw) return raw.error();
    makespans.push_back(metrics_of(program, *raw, microbatch_size).makespan);
  }
  return makespans;
}

int min_pipedream_minibatches(const Plan& plan) {
  const int workers = plan.num_workers();
  const int first = plan.stages.empty() ? 1 : plan.stages.front().replicas;
  const int noam = (workers + first - 1) / first;
  return static_cast<int>(4 * noam + 3 * pipedream_period(plan));
}

int64_t pipedream_period(const Plan& plan) {
  int64_t period = 1;
  for (const StagePlan& stage : plan.stages) period = std::lcm(period, int64_t{stage.replicas});
  return std::min<int64_t>(period, kMaxSteadyStatePeriod);
}

int simulated_microbatches(const Plan& plan) {
  return runs_steady_state(plan.schedule) ? pipedream_minibatches(plan) : plan.batches;
}

int pipedream_minibatches(const Plan& plan) {
  const int64_t period = pipedream_period(plan);
  const int64_t wanted = std::max(plan.batches, min_pipedream_minibatches(plan));
  return static_cast<int>((wanted + period - 1) / period * period);
}

Result<Simulation> simulate_plan(const Plan& plan, const Profile& profile, const Topology& topology,
                                 const SimOptions& options, Program* simulated) {
  if (auto ok = check_plan(plan, profile, topology, "plan"); !ok) return ok.error();
  Plan effective = plan;
  effective.batches = simulated_microbatches(plan);
  const bool one = simulates_one_replica(effective, topology, options);
  Program program = one ? build_replica0_program(effective) : build_program(effective);
  auto simulation =
      simulate_program(program, stage_costs(profile, effective, topology), topology, plan.microbatch_size, options);
  if (simulation) simulation->one_replica = one;
  if (simulated) *simulated = std::move(program);
  return simulation;
}

bool simulates_one_replica(const Plan& plan, const Topology& topology, const SimOptions& options) {
  return options.one_replica && !options.record_trace && options.noise_seed == 0 && options.worker_slowdown.empty() &&
         options.worker_action_overhead.empty() && replicas_interchangeable(plan, topology);
}

bool replicas_interchangeable(const Plan& plan, const Topology& topology) {
  if (runs_steady_state(plan.schedule) || plan.stages.empty()) return false;
  if (topology.levels.front().shared_compute) return false;  // replicas may take turns on one device
  const int d = plan.stages.front().replicas;
  if (d < 2 || plan.batches % d != 0) return false;
  for (const StagePlan& stage : plan.stages)
    if (stage.replicas != d || static_cast<int>(stage.devices.size()) != d) return false;
  // Replica 0 alone would miss another replica's worker on one of its devices
  // (sharing its compute stream and memory).
  std::map<int, int> replica_of_device;
  for (const StagePlan& stage : plan.stages)
    for (int j = 0; j < d; ++j)
      if (replica_of_device.emplace(stage.devices[j], j).first->second != j) return false;
  const Network network(topology);
  std::map<int, int> replica_of_link;
  const auto claim = [&](int link, int replica) {
    return link < 0 || replica_of_link.emplace(link, replica).first->second == replica;
  };
  for (int j = 0; j < d; ++j)
    for (size_t s = 0; s + 1 < plan.stages.size(); ++s) {
      const int a = plan.stages[s].devices[j], b = plan.stages[s + 1].devices[j];
      for (const auto& [up, down] : {network.links_of(a, b), network.links_of(b, a)})
        if (!claim(up, j) || !claim(down, j)) return false;
    }
  return true;
}

}  // namespace baton
