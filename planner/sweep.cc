#include "planner/sweep.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/planner.h"
#include "sim/plan_layouts.h"

namespace baton {

namespace {

int level_of(const std::string& key, const Topology& topology) {
  for (int l = 0; l < topology.num_levels(); ++l)
    if (topology.levels[l].name == key || std::to_string(l) == key) return l;
  return -1;
}

constexpr const char* kAxisNames =
    "bandwidth_gbps.L, latency_us.L (L = level index or name), servers, devices_per_server, memory_gib, "
    "microbatches, virtual_stages";

// What an axis varies: bandwidth_gbps.L and latency_us.L by the level's
// index, so a level's name and its index are one axis (check_axis first).
std::string axis_key(const std::string& name, const Topology& topology) {
  const auto dot = name.find('.');
  if (dot == std::string::npos) return name;
  return fmt::format("{}.{}", name.substr(0, dot), level_of(name.substr(dot + 1), topology));
}

}  // namespace

Status apply_axis(const std::string& name, double value, Topology& topology, PointKnobs& knobs) {
  const auto dot = name.find('.');
  const std::string head = name.substr(0, dot);
  if (dot != std::string::npos && (head == "bandwidth_gbps" || head == "latency_us")) {
    const int level = level_of(name.substr(dot + 1), topology);
    if (level < 0) return Error{fmt::format("--vary {}: the topology has no level \"{}\"", name, name.substr(dot + 1))};
    if (head == "bandwidth_gbps") {
      if (!(value > 0)) return Error{fmt::format("--vary {}: bandwidth must be > 0, got {}", name, value)};
      topology.levels[level].bandwidth_gbps = value;
    } else {
      if (!(value >= 0)) return Error{fmt::format("--vary {}: latency must be >= 0, got {}", name, value)};
      topology.levels[level].latency = Seconds::from_us(value);
    }
    return ok_status();
  }
  const bool whole = value >= 1 && std::floor(value) == value && value <= (1 << 20);
  if (name == "servers" || name == "devices_per_server" || name == "microbatches") {
    if (!whole)
      return Error{fmt::format("--vary {}: values must be whole numbers from 1 to 1048576, got {}", name, value)};
    if (name == "servers") topology.levels.back().size = static_cast<int>(value);
    if (name == "devices_per_server") topology.levels.front().size = static_cast<int>(value);
    // As `--stages` bounds a stage's replicas (sim/plan.h): a cluster a sweep point can simulate.
    double devices = 1;  // the product in floating point: int would overflow first
    for (const Level& level : topology.levels) devices *= level.size;
    if (devices > kMaxReplicas)
      return Error{fmt::format("--vary {}: {} makes a cluster of {:.0f} devices, more than {}", name, value, devices,
                               kMaxReplicas)};
    if (name == "microbatches") knobs.microbatches = static_cast<int>(value);
    return ok_status();
  }
  if (name == "virtual_stages") {
    if (!whole || value < 2)
      return Error{fmt::format("--vary virtual_stages: chunks per device, whole numbers >= 2, got {}", value)};
    knobs.virtual_stages = static_cast<int>(value);
    return ok_status();
  }
  if (name == "memory_gib") {
    if (!(value > 0) || value > kMaxDeviceMemoryGib)
      return Error{fmt::format("--vary memory_gib: must be > 0 and <= {}, got {}", kMaxDeviceMemoryGib, value)};
    topology.device.memory = Bytes::from_gib(value);
    return ok_status();
  }
  return Error{fmt::format("--vary: unknown axis \"{}\" (expected {})", name, kAxisNames)};
}

Status check_axis(const SweepAxis& axis, const Topology& topology) {
  if (axis.values.empty()) return Error{fmt::format("--vary {}: no values given", axis.name)};
  for (double value : axis.values) {
    Topology copy = topology;
    PointKnobs knobs;
    if (auto ok = apply_axis(axis.name, value, copy, knobs); !ok) return ok;
  }
  return ok_status();
}

Plan balanced_plan(const Profile& profile, int devices, int stages, Schedule schedule, int microbatches) {
  stages = std::max(1, std::min({stages, devices, profile.num_layers()}));
  std::vector<double> prefix(profile.layers.size() + 1, 0.0);
  for (int i = 0; i < profile.num_layers(); ++i)
    prefix[i + 1] = prefix[i] + (profile.layers[i].forward + profile.layers[i].backward).value;
  Plan plan;
  plan.model = profile.model;
  plan.schedule = schedule;
  plan.batches = microbatches;
  plan.microbatch_size = profile.microbatch_size;
  int begin = 0, device = 0;
  for (int s = 0; s < stages; ++s) {
    const double target = prefix.back() * (s + 1) / stages;
    int end = begin + 1;
    while (end < profile.num_layers() - (stages - s - 1) && prefix[end] < target) ++end;
    if (s == stages - 1) end = profile.num_layers();
    const int replicas = devices / stages + (s < devices % stages ? 1 : 0);
    StagePlan stage{LayerRange{begin, end}, replicas, {}};
    for (int r = 0; r < replicas; ++r) stage.devices.push_back(device++);
    plan.stages.push_back(stage);
    begin = end;
  }
  return plan;
}

size_t sweep_size(const SweepSpec& spec) {
  size_t total = spec.schedules.size();
  for (const SweepAxis& axis : spec.axes) total *= axis.values.size();
  return total;
}

namespace {

Result<Plan> plan_for_point(const Profile& profile, const Topology& topology, const SweepSpec& spec, Schedule schedule,
                            const PointKnobs& knobs) {
  const int microbatches = knobs.microbatches;
  const int devices = topology.num_devices();
  if (schedule == Schedule::kDataParallel) return data_parallel_plan(profile, devices, microbatches);
  if (runs_chunks(schedule) && spec.split != SplitStrategy::kPlan)
    return Error{
        fmt::format("{} runs several chunks per device: its points need --split plan", schedule_name(schedule))};
  if (spec.split == SplitStrategy::kBalanced)
    return balanced_plan(profile, devices, spec.balanced_stages, schedule, microbatches);
  if (spec.split == SplitStrategy::kFixed) {
    Plan plan = balanced_plan(profile, devices, 1, schedule, microbatches);
    plan.stages = spec.fixed_stages;
    for (StagePlan& stage : plan.stages) stage.devices.clear();
    if (auto ok = assign_devices(plan, topology); !ok) return ok.error();
    return plan;
  }
  PlannerOptions options;
  options.schedule = schedule;
  options.microbatches = microbatches;
  if (schedule == Schedule::kInterleaved1F1B) options.virtual_stages = knobs.virtual_stages;
  options.optimizer = spec.optimizer;
  options.memory_limit = Bytes::from_gib(1 << 20);  // fit is judged from the simulated peak
  auto outcome = make_plan(profile, topology, options);
  if (!outcome) return outcome.error();
  return outcome->best.plan;
}

SweepPoint evaluate(const Profile& profile, const Topology& base, const SweepSpec& spec, size_t index) {
  SweepPoint point;
  point.point = index;
  const size_t schedules = spec.schedules.size();
  point.schedule = spec.schedules[index % schedules];
  size_t rest = index / schedules;
  Topology topology = base;
  PointKnobs knobs{spec.microbatches, 0};
  point.axis_values.resize(spec.axes.size());
  for (size_t a = spec.axes.size(); a-- > 0;) {
    const SweepAxis& axis = spec.axes[a];
    point.axis_values[a] = axis.values[rest % axis.values.size()];
    rest /= axis.values.size();
    (void)apply_axis(axis.name, point.axis_values[a], topology, knobs);  // checked up front
  }
  point.devices = topology.num_devices();
  auto plan = plan_for_point(profile, topology, spec, point.schedule, knobs);
  if (!plan) {
    point.error = plan.error().message;
    return point;
  }
  SimOptions options;
  options.record_trace = false;
  options.optimizer = spec.optimizer;
  auto simulation = simulate_plan(*plan, profile, topology, options);
  if (!simulation) {
    point.error = simulation.error().message;
    return point;
  }
  const Metrics& m = simulation->metrics;
  point.stages = stages_to_string(plan->stages);
  point.num_stages = plan->num_stages();
  point.throughput_samples_per_s = m.throughput_samples_per_s;
  point.iteration_time_s = m.iteration_time.value;
  point.bubble_fraction = m.bubble_fraction;
  // Per device: workers placed on one device share its memory (Metrics::devices).
  for (const DeviceMetrics& d : m.devices) point.peak_memory = max(point.peak_memory, d.peak_memory);
  point.fits = point.peak_memory <= topology.device.memory;
  return point;
}

}  // namespace

Result<std::vector<SweepPoint>> run_sweep(const Profile& profile, const Topology& topology, const SweepSpec& spec,
                                          const std::function<void(size_t, size_t)>& progress) {
  GivenAxes given;
  for (const SweepAxis& axis : spec.axes) {
    if (auto ok = check_axis(axis, topology); !ok) return ok.error();
    if (auto ok = given.add(axis_key(axis.name, topology), axis.name); !ok) return ok.error();
  }
  if (spec.schedules.empty()) return Error{"sweep: no schedule given"};
  const PointRange range = shard_range(sweep_size(spec), spec.shard);
  std::vector<SweepPoint> points(range.size());
  run_points(
      range, spec.threads, [&](size_t i) { points[i - range.begin] = evaluate(profile, topology, spec, i); }, progress);
  return points;
}

SweepTable profile_sweep_table(const std::vector<SweepPoint>& points, const SweepSpec& spec, const std::string& model,
                               const Topology& topology, const std::string& split) {
  SweepTable table{sweep_lead_columns(), {}};
  for (const SweepAxis& axis : spec.axes) table.header.push_back(axis.name);
  for (const char* column : {"schedule", "split", "devices", "stages", "throughput_samples_per_s", "iteration_time_s",
                             "bubble_fraction", "peak_memory_bytes", "fits", "error"})
    table.header.push_back(column);
  for (const SweepPoint& p : points) {
    std::vector<std::string> row = {std::to_string(p.point), std::to_string(sweep_size(spec)), model, topology.name};
    for (double v : p.axis_values) row.push_back(fmt::format("{:g}", v));
    const bool figures = p.error.empty();
    // A balanced split is labelled with the stages the point ran: fewer than
    // asked where it has fewer devices.
    const bool balanced = spec.split == SplitStrategy::kBalanced && p.schedule != Schedule::kDataParallel;
    const std::string point_split =
        balanced && p.num_stages > 0 ? fmt::format("{} balanced stages", p.num_stages) : split;
    for (std::string field :
         {std::string(schedule_name(p.schedule)), point_split, std::to_string(p.devices), p.stages,
          figures ? fmt::format("{:.6f}", p.throughput_samples_per_s) : "",
          figures ? fmt::format("{:.9f}", p.iteration_time_s) : "",
          figures ? fmt::format("{:.6f}", p.bubble_fraction) : "", figures ? std::to_string(p.peak_memory.value) : "",
          figures ? std::string(p.fits ? "yes" : "no") : "", p.error})
      row.push_back(field);
    table.rows.push_back(row);
  }
  return table;
}

}  // namespace baton
