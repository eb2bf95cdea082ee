#include "tools/validate_report.h"

#include <cmath>

#include <fmt/format.h>

#include "sim/link_fit.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

std::string calibration_markdown(const nlohmann::json& calibration, const Topology& topology) {
  const Level& level = topology.levels.front();
  std::string out = fmt::format(
      "Topology `{}`: {} devices, link {:.3f} Gb/s, latency {}; ring all-reduce {:.3f} Gb/s, "
      "latency {}.\n\n",
      topology.name, topology.num_devices(), level.bandwidth_gbps, human_seconds(level.latency),
      level.ring_bandwidth().gbps(), human_seconds(level.ring_latency()));
  if (calibration.is_null()) return out + "Given with --topology (no calibration in this run).\n";
  std::vector<std::vector<std::string>> rows{{"bytes", "one-way measured", "link model", "all-reduce median",
                                              "all-reduce undisturbed (0.1 quantile)", "all-reduce model"}};
  const bool undisturbed = calibration.contains("allreduce_undisturbed");
  const auto& p2p = calibration.at("point_to_point");
  for (size_t i = 0; i < p2p.size(); ++i) {
    const Bytes size(p2p[i].at("bytes").get<int64_t>());
    const LinkFit fit{topology.levels.front().latency, topology.levels.front().bandwidth_gbps, 0.0};
    rows.push_back({human_bytes(size), human_seconds(Seconds(p2p[i].at("seconds").get<double>())),
                    human_seconds(fit.predict(size)),
                    human_seconds(Seconds(calibration.at("allreduce")[i].at("seconds").get<double>())),
                    undisturbed
                        ? human_seconds(Seconds(calibration.at("allreduce_undisturbed")[i].at("seconds").get<double>()))
                        : std::string("-"),
                    human_seconds(Seconds(calibration.at("allreduce_model")[i].at("seconds").get<double>()))});
  }
  out += render_markdown_table(rows);
  if (calibration.contains("gloo_io_threads"))
    out += fmt::format("\nGloo's I/O threads ran in the {} class (BATON_GLOO_IO; exec/transport_gloo.h).\n",
                       calibration.at("gloo_io_threads").get<std::string>());
  return out;
}

// The device's speed and noise, one line.
std::string device_markdown(const Topology& topology) {
  const DeviceType& device = topology.device;
  std::string out = fmt::format("Device: relative_speed {:.3f}", device.relative_speed);
  const auto at = [](const auto& sample, double q) {
    return sample[static_cast<size_t>(q * double(sample.size() - 1))];
  };
  if (!device.compute_noise.empty()) {
    out += fmt::format("; compute noise (factor) 0.1 / 0.5 / 0.9 / 0.99 quantiles {:.2f} / {:.2f} / {:.2f} / {:.2f}",
                       at(device.compute_noise, 0.1), at(device.compute_noise, 0.5), at(device.compute_noise, 0.9),
                       at(device.compute_noise, 0.99));
  }
  if (!device.allreduce_noise.empty()) {
    out += fmt::format("; all-reduce noise (extra time) 0.1 / 0.5 / 0.9 quantiles {} / {} / {}",
                       human_seconds(at(device.allreduce_noise, 0.1)), human_seconds(at(device.allreduce_noise, 0.5)),
                       human_seconds(at(device.allreduce_noise, 0.9)));
  }
  for (const auto& [sample, what] : {std::pair{&device.transfer_noise, "waiting for its data"},
                                     std::pair{&device.transfer_noise_ready, "its data there"}}) {
    if (sample->empty()) continue;
    out +=
        fmt::format("; receive noise ({}: wait beyond the link model) 0.5 / 0.9 / 0.99 quantiles {} / {} / {}", what,
                    human_seconds(at(*sample, 0.5)), human_seconds(at(*sample, 0.9)), human_seconds(at(*sample, 0.99)));
  }
  const Level& streams = topology.levels.front();
  if (streams.shared_compute) {
    out += streams.shared_speedup > 1.0
               ? fmt::format(
                     "; the workers share one device, computing at once at {:.3f} times one stream's work "
                     "per second (shared_speedup) and sharing its host's issuing",
                     streams.shared_speedup)
               : std::string("; the workers share one device and take turns on its compute (shared_compute)");
  }
  return out + ".\n";
}

std::string profile_markdown(const Profile& profile) {
  std::vector<std::vector<std::string>> rows{{"layer", "forward", "backward", "optimizer", "output", "parameters"}};
  for (const Layer& layer : profile.layers) {
    rows.push_back({layer.name, human_seconds(layer.forward), human_seconds(layer.backward),
                    human_seconds(layer.optimizer), human_bytes(layer.output_bytes), human_bytes(layer.param_bytes)});
  }
  return render_markdown_table(rows);
}

}  // namespace

std::vector<std::vector<std::string>> validation_summary_rows(const std::vector<ValidationCase>& cases,
                                                              double tolerance) {
  std::vector<std::vector<std::string>> rows{{"schedule", "stages", "workers", "microbatches", "speed", "run compute",
                                              "attempts", "steps", "predicted", "measured", "median", "range", "error",
                                              fmt::format("within {:g}%", 100.0 * tolerance)}};
  for (const ValidationCase& c : cases) {
    rows.push_back(
        {std::string(schedule_name(c.schedule)), stages_to_string(c.plan.stages), std::to_string(c.plan.num_workers()),
         std::to_string(c.plan.batches), fmt::format("{:.3f}", c.relative_speed),
         c.run_compute > 0.0 ? signed_percent(c.run_compute - 1.0) : std::string("-"), std::to_string(c.attempts),
         std::to_string(c.steps), human_seconds(c.predicted), human_seconds(c.measured),
         human_seconds(c.measured_median), human_seconds(c.measured_min) + " - " + human_seconds(c.measured_max),
         signed_percent(c.error()), std::abs(c.error()) <= tolerance ? "yes" : "NO"});
  }
  return rows;
}

std::string validation_markdown(const ValidateArgs& args, const Profile& profile, const Topology& topology,
                                const nlohmann::json& calibration, const std::vector<ValidationCase>& cases,
                                const std::optional<MachineLoad>& load) {
  std::string out = args.device == "cpu"
                        ? fmt::format("# Validation: {} on {} gloo ranks\n\n", profile.model, args.nproc)
                        : fmt::format("# Validation: {} on {} workers of the threads backend on {}\n\n", profile.model,
                                      args.nproc, profile.device);
  out += fmt::format(
      "Predicted: the {0:g} quantile of the iteration time over {6} simulations of the Program each plan runs "
      "(with slices: one per measured step, at the speeds its workers had; see Speed), on a noisy machine (compute "
      "times drawn from the topology's compute_noise, all-reduce times from its "
      "allreduce_noise_us, each receive's wait beyond the link model from its transfer_noise_us or "
      "transfer_noise_ready_us; the deterministic "
      "simulation "
      "is in report.json), from a profile that keeps the {0:g} quantile of its steps per layer; with gloo ranks "
      "plus the two barriers a step's wall time holds (Gloo's dissemination barrier: 2 ceil(log2 n) rounds of "
      "the calibrated all-reduce latency, report.json's step_barrier_s). Measured: the "
      "{0:g} quantile of the wall times of steps after the first of `baton run` (barrier to barrier; at least {1} "
      "steps, and {5:g} s by the prediction); the median is beside it (see `baton validate --help`). Error = "
      "(measured - predicted) / predicted; tolerance {2:g}%. Microbatch size {3}, SGD, {4} LibTorch thread(s) per "
      "rank.\n\n"
      "Speed: each schedule is predicted at the speeds its run's workers had, step by step: the slice measured "
      "just before the run (every rank profiling at once) gives the device's speed and noise, at which each "
      "worker is expected to compute so much per step; each step after the first is simulated once (its own "
      "noise draw) with every worker's compute scaled by what that worker computed in that step over its "
      "expectation, and the {0:g} quantile of those is the prediction. A shared machine's cores change speed "
      "from second to second, one at a time, so a run meets other speeds than its slice did. Only the run's "
      "compute goes in (each worker's forward, backward and optimizer time per step), never its iteration time, "
      "waits or transfers; the executor's own time per action (each worker's loop time neither computing nor "
      "waiting, over its actions, mostly the issue of Gloo's sends) is recorded in report.json "
      "(action_overhead_s), not predicted (bench/RESULTS.md says why). The speed column: the slice's speed times the "
      "compute per step the slice expects "
      "(all workers) over the {0:g} quantile of the steps' compute. Run compute: the run's mean compute per step "
      "against the slice's expectation; beyond {7:g}% the machine changed speed between the slice and the run, "
      "and the schedule was measured again (a new slice, a new run; its noise then comes from the machine the "
      "run met), at most {8} attempts, the last kept.\n\n",
      args.quantile, args.steps, 100.0 * args.tolerance, profile.microbatch_size, args.threads, args.run_seconds,
      kNoiseSamples, 100.0 * args.drift, args.attempts);
  if (load) {
    out += fmt::format("Machine load before the first measurement: {}.{}\n\n", describe_load(*load),
                       is_busy(*load) ? " **Warning:** " + busy_machine_warning(*load) + "." : "");
  }
  out += "## Summary\n\n" + render_markdown_table(validation_summary_rows(cases, args.tolerance));
  out += "\n## Link calibration and device\n\n" + calibration_markdown(calibration, topology) + "\n" +
         device_markdown(topology);
  out += "\n## Profile (measured on this machine)\n\n" + profile_markdown(profile);
  for (const ValidationCase& c : cases) {
    const std::string name(schedule_name(c.schedule));
    out += fmt::format(
        "\n## {}\n\nStages {} on {} workers, {} microbatches of {}. Spans: {} paired, {} only "
        "predicted, {} only measured (the measured trace is the last step).\n\n",
        name, stages_to_string(c.plan.stages), c.plan.num_workers(), c.plan.batches, c.plan.microbatch_size,
        c.comparison.paired, c.comparison.only_predicted, c.comparison.only_measured);
    if (c.slice_speed <= 0.0 && c.predicted_at_run_speeds.value > 0.0)
      out += fmt::format(
          "At the speeds its workers had (each step after the first simulated once with every worker's compute "
          "scaled by what it computed in that step over what the topology's speed expects, as a slice's speed is "
          "used on the CPU; report.json's predicted_at_run_speeds_s): predicted {}, error {}.\n\n",
          human_seconds(c.predicted_at_run_speeds), signed_percent(c.error_at_run_speeds()));
    out += comparison_tables(c.comparison, true);
    const bool sends = c.comparison.kinds.contains("SEND_ACT") || c.comparison.kinds.contains("SEND_GRAD");
    if (args.device == "cpu" && sends)
      out +=
          "\nA measured SEND runs from its issue until the executor saw the send complete: c10d's Gloo marks a "
          "send complete only once it is waited for, which the executor does when the step's actions are done, so "
          "these spans end near the step's end and say nothing of the transfer; a predicted SEND is the transfer "
          "on the link. The receiver's RECV spans show when the data came.\n";
    out += fmt::format("\n![{0}: predicted and measured]({0}/compare.svg)\n", name);
  }
  return out;
}

nlohmann::json validation_json(const std::vector<ValidationCase>& cases, double tolerance, double q,
                               const std::optional<MachineLoad>& load) {
  nlohmann::json out = {{"tolerance", tolerance}, {"quantile", q}, {"cases", nlohmann::json::array()}};
  out["machine_load"] =
      load ? nlohmann::json{{"busy_cpus", load->busy_cpus}, {"cpus", load->cpus}, {"window_s", load->window.value}}
           : nlohmann::json(nullptr);
  for (const ValidationCase& c : cases) {
    nlohmann::json overhead = nlohmann::json::array();
    for (Seconds per_action : c.action_overhead) overhead.push_back(per_action.value);
    out["cases"].push_back(
        {{"schedule", schedule_name(c.schedule)},
         {"stages", stages_to_string(c.plan.stages)},
         {"workers", c.plan.num_workers()},
         {"microbatches", c.plan.batches},
         {"steps", c.steps},
         {"predicted_s", c.predicted.value},
         {"predicted_without_noise_s", c.predicted_plain.value},
         {"step_barrier_s", c.step_barrier.value},
         {"predicted_at_run_speeds_s", c.predicted_at_run_speeds.value},
         {"error_at_run_speeds",
          c.predicted_at_run_speeds.value > 0.0 ? nlohmann::json(c.error_at_run_speeds()) : nlohmann::json(nullptr)},
         {"relative_speed", c.relative_speed},
         {"slice_speed", c.slice_speed},
         {"action_overhead_s", overhead},
         {"run_compute", c.run_compute},
         {"attempts", c.attempts},
         {"measured_s", c.measured.value},
         {"measured_median_s", c.measured_median.value},
         {"measured_min_s", c.measured_min.value},
         {"measured_max_s", c.measured_max.value},
         {"error", c.error()},
         {"comparison", comparison_json(c.comparison)}});
  }
  return out;
}

}  // namespace baton::cli
