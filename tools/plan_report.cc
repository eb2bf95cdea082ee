#include "tools/plan_report.h"

#include <fmt/format.h>

#include "planner/chunked_plans.h"
#include "sim/schedules.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

double samples_per_iteration(const Plan& plan) {
  return plan.schedule == Schedule::kPipeDream ? plan.microbatch_size : double(plan.batches) * plan.microbatch_size;
}

double simulated_throughput(const PlanChoice& choice) {
  if (!choice.simulated) return 0.0;
  return samples_per_iteration(choice.plan) / choice.simulated->iteration_time.value;
}

std::string describe(const PlanChoice& choice) {
  const Plan& plan = choice.plan;
  std::string text = std::string(schedule_name(plan.schedule));
  if (plan.schedule != Schedule::kPipeDream) text += fmt::format(" M={}", plan.batches);
  return text + " " + stages_to_string(plan.stages);
}

nlohmann::json stages_json(const Plan& plan) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StagePlan& stage : plan.stages)
    stages.push_back(
        {{"layers", {stage.layers.begin, stage.layers.end}}, {"replicas", stage.replicas}, {"devices", stage.devices}});
  return stages;
}

nlohmann::json choice_json(const PlanChoice& choice) {
  nlohmann::json entry = {{"schedule", schedule_name(choice.plan.schedule)},
                          {"microbatches", choice.plan.batches},
                          {"stages", stages_json(choice.plan)},
                          {"predicted_iteration_time_s", choice.estimate.iteration_time.value},
                          {"predicted_throughput_samples_per_s", choice.estimate.throughput_samples_per_s},
                          {"predicted_peak_memory_bytes", choice.estimate.peak_memory.value},
                          {"bottleneck", choice.estimate.bottleneck},
                          {"bottleneck_stage", choice.estimate.bottleneck_stage}};
  if (choice.simulated) entry["simulated"] = metrics_to_json(*choice.simulated);
  return entry;
}

std::string stage_table(const PlanChoice& choice, const Profile& profile, Bytes limit) {
  std::vector<std::vector<std::string>> rows = {{"stage", "layers", "first..last", "replicas", "devices", "compute",
                                                 "all-reduce", "period", "busy", "memory", ""}};
  for (int s = 0; s < choice.plan.num_stages(); ++s) {
    const StagePlan& stage = choice.plan.stages[s];
    const StageEstimate& e = choice.estimate.stages[s];
    const auto& devices = stage.devices;
    rows.push_back(
        {std::to_string(s), fmt::format("{}-{}", stage.layers.begin, stage.layers.end),
         fmt::format("{}..{}", profile.layers[stage.layers.begin].name, profile.layers[stage.layers.end - 1].name),
         std::to_string(stage.replicas),
         devices.size() == 1 ? std::to_string(devices[0]) : fmt::format("{}-{}", devices.front(), devices.back()),
         human_seconds(e.forward + e.backward), human_seconds(e.allreduce), human_seconds(e.period),
         fmt::format("{:.0f}%", 100.0 * e.busy_fraction),
         fmt::format("{} / {}", human_bytes(e.memory), human_bytes(limit)),
         s == choice.estimate.bottleneck_stage ? "<- bottleneck" : ""});
  }
  return render_table(rows);
}

std::string headline(const PlanChoice& choice) {
  const Plan& plan = choice.plan;
  std::string unit = plan.schedule == Schedule::kPipeDream
                         ? fmt::format("per minibatch of {} samples (steady state)", plan.microbatch_size)
                         : fmt::format("per iteration of {} x {} samples", plan.batches, plan.microbatch_size);
  std::string text = fmt::format("predicted   {} {}: {:.1f} samples/s\n", human_seconds(choice.estimate.iteration_time),
                                 unit, choice.estimate.throughput_samples_per_s);
  if (choice.simulated && runs_steady_state(plan.schedule)) {
    // The prediction is the run once it repeats; `simulate` reports its window.
    const double error = choice.estimate.iteration_time / choice.simulated->iteration_time - 1.0;
    text += fmt::format(
        "simulated   {}: {:.1f} samples/s over the run's measurement window "
        "(the steady state is {:+.1f}% from it{})\n",
        human_seconds(choice.simulated->iteration_time), simulated_throughput(choice), 100.0 * error,
        choice.estimate.exact ? "" : "; the run did not repeat");
  }
  return text;
}

}  // namespace

nlohmann::json prediction_json(const PlannerOutcome& outcome) {
  nlohmann::json prediction = choice_json(outcome.best);
  if (outcome.pipedream_time) prediction["pipedream_time_per_minibatch_s"] = outcome.pipedream_time->value;
  return prediction;
}

nlohmann::json outcome_json(const PlannerOutcome& outcome) {
  const PlanChoice& best = outcome.best;
  nlohmann::json result = {{"time_per_minibatch_s", outcome.pipedream_time ? outcome.pipedream_time->value
                                                                           : best.estimate.iteration_time.value},
                           {"schedule", schedule_name(best.plan.schedule)},
                           {"microbatches", best.plan.batches},
                           {"microbatch_size", best.plan.microbatch_size},
                           {"stages", stages_json(best.plan)},
                           {"predicted", choice_json(best)},
                           {"memory_limit_bytes", outcome.memory_limit.value},
                           {"single_device_time_per_sample_s", outcome.single_device_per_sample.value}};
  if (outcome.data_parallel) result["data_parallel"] = choice_json(*outcome.data_parallel);
  nlohmann::json others = nlohmann::json::array();
  for (const PlanChoice& choice : outcome.runners_up) others.push_back(choice_json(choice));
  result["runners_up"] = others;
  result["plan"] = plan_to_json(best.plan);
  return result;
}

std::string outcome_text(const PlannerOutcome& outcome, const Profile& profile, const Topology& topology,
                         const PlannerOptions& options) {
  const PlanChoice& best = outcome.best;
  std::string out = fmt::format("{} ({} layers, {} samples per microbatch) on {}: {} x {}, {} per device\n",
                                profile.model, profile.num_layers(), profile.microbatch_size, topology.name,
                                topology.num_devices(), topology.device.name, human_bytes(outcome.memory_limit));
  out += fmt::format("cost model {}, schedule {}{}\n\n",
                     options.cost_model == CostModel::kBaton ? "baton" : "pipedream", schedule_name(best.plan.schedule),
                     options.schedule || options.cost_model == CostModel::kPipeDream
                         ? ""
                         : " (chosen: fastest simulated plan that fits memory)");
  out += stage_table(best, profile, outcome.memory_limit);
  out += fmt::format("\nbottleneck  stage {} ({})\n", best.estimate.bottleneck_stage, best.estimate.bottleneck);
  out += headline(best);
  if (const int used = best.plan.num_workers(); used < topology.num_devices()) {
    const Plan& plan = best.plan;
    const int most = most_chunked_workers(plan.schedule, plan.batches);
    out += fmt::format(
        "devices     {} of the {}, the rest idle ({})\n", used, topology.num_devices(),
        runs_chunks(plan.schedule) && most < topology.num_devices()
            ? fmt::format("{} at {} microbatches runs on at most {}", schedule_name(plan.schedule), plan.batches, most)
            : std::string("no plan on more was faster"));
  }
  if (outcome.pipedream_time)
    out += fmt::format("pipedream   objective T = {:.9f} s per minibatch (the reference optimizer's figure)\n",
                       outcome.pipedream_time->value);
  const double per_sample = best.time_per_sample_s();
  out += fmt::format("speedup     x{:.2f} over one device", outcome.single_device_per_sample.value / per_sample);
  if (outcome.data_parallel) {
    const PlanChoice& dp = *outcome.data_parallel;
    out += fmt::format(", x{:.2f} over data parallelism on {} devices at {} microbatches per step ({:.1f} samples/s{})",
                       dp.time_per_sample_s() / per_sample, dp.plan.stages[0].replicas, dp.plan.batches,
                       dp.estimate.throughput_samples_per_s,
                       dp.estimate.peak_memory > outcome.memory_limit ? ", does not fit memory" : "");
  }
  out += "\n";
  if (!outcome.runners_up.empty()) {
    out += "\nrunners-up (simulated):\n";
    for (const PlanChoice& choice : outcome.runners_up)
      out += fmt::format("  {:<60} {:>10.1f} samples/s\n", describe(choice).substr(0, 60),
                         choice.estimate.throughput_samples_per_s);
  }
  return out;
}

}  // namespace baton::cli
