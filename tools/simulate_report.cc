#include "tools/simulate_report.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/stage_costs.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

std::string layer_span(const Profile& profile, LayerRange range) {
  return fmt::format("{}-{} ({}..{})", range.begin, range.end, profile.layers[range.begin].name,
                     profile.layers[range.end - 1].name);
}

std::string device_list(const std::vector<int>& devices) {
  if (devices.size() > 1 && devices.back() - devices.front() + 1 == static_cast<int>(devices.size()))
    return fmt::format("{}-{}", devices.front(), devices.back());
  std::string text;
  for (int d : devices) text += (text.empty() ? "" : ",") + std::to_string(d);
  return text;
}

// The workers of each stage, from the metrics (a worker that runs several
// chunks counts, whole, for each of them).
std::vector<std::vector<const WorkerMetrics*>> workers_by_stage(const Metrics& metrics, const Plan& plan) {
  std::vector<std::vector<const WorkerMetrics*>> by_stage(static_cast<size_t>(plan.num_stages()));
  const std::vector<WorkerInfo> workers = workers_of(plan);
  for (const WorkerMetrics& w : metrics.workers) {
    const std::vector<int> stages = w.worker >= 0 && w.worker < static_cast<int>(workers.size())
                                        ? stages_of(workers[w.worker])
                                        : std::vector<int>{w.stage};
    for (int s : stages) by_stage[s].push_back(&w);
  }
  return by_stage;
}

// The worker of largest peak memory in each stage.
const WorkerMetrics* peak_worker(const std::vector<const WorkerMetrics*>& workers) {
  return *std::max_element(workers.begin(), workers.end(), [](const WorkerMetrics* a, const WorkerMetrics* b) {
    return a->peak_memory < b->peak_memory;
  });
}

// A stage's bubble over the workers that run it: "18.8%" when they agree to
// the printed digit, else their range "18.8-35.1%" (replicas of a stage can
// run different numbers of microbatches, and so idle differently).
std::string bubble_span(const std::vector<const WorkerMetrics*>& workers) {
  const auto [low, high] = std::minmax_element(
      workers.begin(), workers.end(),
      [](const WorkerMetrics* a, const WorkerMetrics* b) { return a->bubble_fraction < b->bubble_fraction; });
  const std::string from = percent((*low)->bubble_fraction);
  const std::string to = percent((*high)->bubble_fraction);
  return from == to ? to : from.substr(0, from.size() - 1) + "-" + to;
}

// The device whose workers' sum peaked highest among those shared by several
// workers; nullptr when every device runs one worker (its peak is then the
// worker's, reported as such).
const DeviceMetrics* fullest_shared_device(const Metrics& metrics) {
  const DeviceMetrics* fullest = nullptr;
  for (const DeviceMetrics& d : metrics.devices)
    if (d.workers.size() > 1 && (fullest == nullptr || d.peak_memory > fullest->peak_memory)) fullest = &d;
  return fullest;
}

// Whether every device holds what its workers hold at once.
bool fits_memory(const Metrics& metrics, const Topology& topology) {
  return std::all_of(metrics.devices.begin(), metrics.devices.end(),
                     [&](const DeviceMetrics& d) { return d.peak_memory <= topology.device.memory; });
}

std::string shared_device_line(const Metrics& metrics, const Topology& topology) {
  const DeviceMetrics* shared = fullest_shared_device(metrics);
  if (shared == nullptr) return "";
  return fmt::format("peak on one device  {} on device {} (workers {} share it: their sum at one instant){}\n",
                     human_bytes(shared->peak_memory), shared->device, fmt::join(shared->workers, ", "),
                     shared->peak_memory > topology.device.memory ? ": DOES NOT FIT" : "");
}

std::string window_note(const SimulatedPlan& run) {
  const Metrics& m = run.simulation.metrics;
  if (run.plan.schedule != Schedule::kPipeDream)
    return fmt::format("one iteration of {} microbatches x {} samples", run.plan.batches, run.plan.microbatch_size);
  return fmt::format("steady state per minibatch of {} samples, measured from {} to {} of {} minibatches",
                     run.plan.microbatch_size, human_seconds(m.window_start), human_seconds(m.window_end),
                     run.simulated_microbatches);
}

std::string single_text(const SimulatedPlan& run, const Profile& profile, const Topology& topology) {
  const Metrics& m = run.simulation.metrics;
  const auto costs = stage_costs(profile, run.plan, topology);
  const auto by_stage = workers_by_stage(m, run.plan);
  std::vector<std::vector<std::string>> rows = {{"stage", "layers", "replicas", "devices", "forward", "backward",
                                                 "sends", "weights", "versions", "activations", "peak memory",
                                                 "bubble"}};
  for (int s = 0; s < run.plan.num_stages(); ++s) {
    const StagePlan& stage = run.plan.stages[s];
    const WorkerMetrics& w = *peak_worker(by_stage[s]);
    rows.push_back({std::to_string(s), layer_span(profile, stage.layers), std::to_string(stage.replicas),
                    device_list(stage.devices), human_seconds(costs[s].forward), human_seconds(costs[s].backward),
                    human_bytes(costs[s].activation_out), human_bytes(w.weight_bytes),
                    std::to_string(w.weight_versions), human_bytes(w.peak_activation_bytes), human_bytes(w.peak_memory),
                    bubble_span(by_stage[s])});
  }
  std::string out = fmt::format("{} on {} ({} x {}, {} memory), schedule {}\n\n", profile.model, topology.name,
                                topology.num_devices(), topology.device.name, human_bytes(topology.device.memory),
                                schedule_name(run.plan.schedule));
  out += render_table(rows);
  out += fmt::format("\ntime per iteration  {}  ({})\n", human_seconds(m.iteration_time), window_note(run));
  out += fmt::format("throughput          {:.1f} samples/s\n", m.throughput_samples_per_s);
  out += fmt::format("bubble fraction     {}\n", percent(m.bubble_fraction));
  const auto worst = std::max_element(m.workers.begin(), m.workers.end(),
                                      [](const auto& a, const auto& b) { return a.peak_memory < b.peak_memory; });
  out += fmt::format("peak memory         {} on worker {} (device memory {}{})\n", human_bytes(worst->peak_memory),
                     worst->worker, human_bytes(topology.device.memory),
                     worst->peak_memory > topology.device.memory ? ": DOES NOT FIT" : "");
  out += shared_device_line(m, topology);
  out += fmt::format("simulated actions   {}\n", m.actions);
  return out;
}

std::string side_by_side_text(const std::vector<SimulatedPlan>& runs, const Profile& profile,
                              const Topology& topology) {
  std::vector<std::vector<std::string>> rows = {{""}};
  for (const auto& run : runs) rows[0].push_back(std::string(schedule_name(run.plan.schedule)));
  const auto add_row = [&](std::string label, auto value_of) {
    std::vector<std::string> row{std::move(label)};
    for (const auto& run : runs) row.push_back(value_of(run));
    rows.push_back(std::move(row));
  };
  add_row("stages", [](const SimulatedPlan& r) { return stages_to_string(r.plan.stages); });
  add_row("throughput (samples/s)",
          [](const SimulatedPlan& r) { return fmt::format("{:.1f}", r.simulation.metrics.throughput_samples_per_s); });
  add_row("time per iteration",
          [](const SimulatedPlan& r) { return human_seconds(r.simulation.metrics.iteration_time); });
  add_row("samples per iteration", [](const SimulatedPlan& r) {
    const int per = r.plan.schedule == Schedule::kPipeDream ? 1 : r.plan.batches;
    return std::to_string(per * r.plan.microbatch_size);
  });
  add_row("bubble fraction", [](const SimulatedPlan& r) { return percent(r.simulation.metrics.bubble_fraction); });
  int most_stages = 0;
  for (const auto& run : runs) most_stages = std::max(most_stages, run.plan.num_stages());
  for (int s = 0; s < most_stages; ++s) {
    add_row(fmt::format("peak memory, stage {}", s), [s](const SimulatedPlan& r) {
      if (s >= r.plan.num_stages()) return std::string("-");
      const WorkerMetrics& peak = *peak_worker(workers_by_stage(r.simulation.metrics, r.plan)[s]);
      return fmt::format("{} ({}v)", human_bytes(peak.peak_memory), peak.weight_versions);
    });
  }
  // Per device: workers placed on one device share its memory.
  add_row(fmt::format("fits {}", human_bytes(topology.device.memory)), [&](const SimulatedPlan& r) {
    return std::string(fits_memory(r.simulation.metrics, topology) ? "yes" : "no");
  });
  std::string out = fmt::format("{} on {} ({} x {}), {} samples per microbatch\n\n", profile.model, topology.name,
                                topology.num_devices(), topology.device.name, runs.front().plan.microbatch_size);
  out += render_table(rows);
  out +=
      "\npipedream: steady-state time per minibatch (one microbatch, one weight update);\n"
      "flush schedules: one iteration of all microbatches. (Nv) = weight versions held.\n";
  return out;
}

}  // namespace

std::string simulations_text(const std::vector<SimulatedPlan>& runs, const Profile& profile, const Topology& topology) {
  if (runs.size() == 1) return single_text(runs.front(), profile, topology);
  return side_by_side_text(runs, profile, topology);
}

nlohmann::json simulations_json(const std::vector<SimulatedPlan>& runs, const Profile&, const Topology& topology) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& run : runs) {
    nlohmann::json entry = metrics_to_json(run.simulation.metrics);
    for (nlohmann::json& device : entry["devices"])
      device["fits"] = device["peak_memory_bytes"].get<int64_t>() <= topology.device.memory.value;
    entry["device_memory_bytes"] = topology.device.memory.value;
    entry["fits"] = fits_memory(run.simulation.metrics, topology);
    entry["schedule"] = schedule_name(run.plan.schedule);
    entry["plan"] = plan_to_json(run.plan);
    all.push_back(std::move(entry));
  }
  return runs.size() == 1 ? all.front() : all;
}

}  // namespace baton::cli
