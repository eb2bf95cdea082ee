// `baton simulate`: predict a plan's timeline, throughput, bubbles and memory.
#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "sim/megatron_arguments.h"
#include "sim/plan_layouts.h"
#include "sim/schedules.h"
#include "sim/simulator.h"
#include "sim/stage_costs.h"
#include "sim/stats.h"
#include "sim/trace_writers.h"
#include "sim/validate.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/megatron_flags.h"
#include "tools/megatron_report.h"
#include "tools/megatron_training_flags.h"
#include "tools/report.h"
#include "tools/simulate_report.h"

namespace baton::cli {

namespace {

struct SimulateArgs {
  std::string profile;
  std::string topology;
  std::string stages;
  std::string plan;
  std::string schedules;
  int microbatches = 0;
  int microbatch_size = 0;
  bool vertical_sync = false;
  int virtual_stages = 0;  // interleaved-1f1b's; 0: as plan_with_schedule gives it
  std::string optimizer = "adam";
  std::string trace;
  std::string gantt;
  std::string csv;
  bool json = false;
  int noise_samples = 0;
  MegatronArgs megatron;
};

// The profile's times, activations and transfers are per microbatch of its own
// size, and the simulator does not scale them: a plan at another size would
// keep the profile's timeline and only relabel its samples. `source` names
// where the other size came from (the flag, or the plan file's field).
void check_microbatch_size(int size, const std::string& source, const Profile& profile,
                           const std::string& profile_path) {
  if (size == profile.microbatch_size) return;
  throw UsageError(fmt::format(
      "{} is {} but profile {} was taken at {} samples per microbatch, and its per-microbatch times, activations "
      "and transfers do not scale: simulate at {}, or get a profile at {} (baton profile analytic --arch ... "
      "--microbatch-size {}, baton profile measure --model ... --microbatch-size {}, or baton import pipedream "
      "--microbatch-size {} for the size a PipeDream profile was taken at)",
      source, size, profile_path, profile.microbatch_size, profile.microbatch_size, size, size, size, size));
}

Plan base_plan(const SimulateArgs& args, const Profile& profile) {
  Plan plan;
  if (!args.plan.empty()) {
    plan = load_plan_file(args.plan);
    // A plan names its model (optional in the format): one made for another
    // model's layers is refused, as one made for another topology is.
    if (!plan.model.empty() && plan.model != profile.model)
      throw UsageError(fmt::format("simulate: {} was made for model \"{}\", not \"{}\" ({}'s)", args.plan, plan.model,
                                   profile.model, args.profile));
  } else {
    plan.stages = take(parse_stages(args.stages));
    plan.batches = 64;
    plan.microbatch_size = profile.microbatch_size;
  }
  plan.model = profile.model;
  if (args.microbatch_size > 0) {  // the flag replaces the plan file's size
    check_microbatch_size(args.microbatch_size, "--microbatch-size", profile, args.profile);
    plan.microbatch_size = args.microbatch_size;
  } else if (!args.plan.empty()) {
    check_microbatch_size(plan.microbatch_size, args.plan + ": microbatch_size", profile, args.profile);
  }
  if (args.microbatches > 0) plan.batches = args.microbatches;
  if (args.vertical_sync) plan.vertical_sync = true;
  return plan;
}

std::string with_suffix(const std::string& path, Schedule schedule, bool several) {
  if (!several) return path;
  const size_t dot = path.find_last_of('.');
  const size_t slash = path.find_last_of('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return fmt::format("{}.{}", path, schedule_name(schedule));
  return fmt::format("{}.{}{}", path.substr(0, dot), schedule_name(schedule), path.substr(dot));
}

// The files --trace, --csv and --gantt ask for; written together
// (write_files_atomic), so a path that cannot be written leaves none.
void add_outputs(const SimulateArgs& args, const SimulatedPlan& run, bool several, OutputFiles& files) {
  const Schedule schedule = run.plan.schedule;
  if (!args.trace.empty())
    files.emplace_back(with_suffix(args.trace, schedule, several), trace_to_chrome_json(run.simulation.trace));
  if (!args.csv.empty())
    files.emplace_back(with_suffix(args.csv, schedule, several), trace_to_csv(run.simulation.trace));
  if (!args.gantt.empty()) {
    GanttOptions gantt;
    gantt.title =
        fmt::format("{}: {} on {} ({} stages, {} microbatches), predicted", run.plan.model, schedule_name(schedule),
                    run.topology_name, run.plan.num_stages(), run.simulated_microbatches);
    files.emplace_back(with_suffix(args.gantt, schedule, several), trace_to_svg(run.simulation.trace, gantt));
  }
}

// --noise-samples: the iteration time's distribution over noisy simulations
// (seconds), or null where the topology has no noise.
nlohmann::json noise_summary(const SimulateArgs& args, const SimulatedPlan& run, const Profile& profile,
                             const Topology& topology, const SimOptions& options) {
  const std::string name(schedule_name(run.plan.schedule));
  if (!topology.device.noisy()) {
    std::fprintf(stderr,
                 "baton: simulate: --noise-samples: topology '%s' has no device compute or all-reduce "
                 "noise; %s is deterministic\n",
                 topology.name.c_str(), name.c_str());
    return nullptr;
  }
  const std::vector<Seconds> samples =
      take(noisy_makespans(build_program(run.plan), stage_costs(profile, run.plan, topology), topology,
                           run.plan.microbatch_size, options, args.noise_samples));
  std::vector<double> values;
  for (Seconds s : samples) values.push_back(s.value);
  const nlohmann::json summary = {
      {"samples", args.noise_samples},
      {"q10_s", quantile(values, 0.1)},
      {"median_s", quantile(values, 0.5)},
      {"mean_s", std::accumulate(values.begin(), values.end(), 0.0) / double(values.size())},
      {"q90_s", quantile(values, 0.9)}};
  std::fprintf(stderr,
               "baton: %s on a noisy machine, %d samples: q0.1 %s, median %s, mean %s, q0.9 %s (no noise: %s)\n",
               name.c_str(), args.noise_samples, human_seconds(Seconds(summary["q10_s"].get<double>())).c_str(),
               human_seconds(Seconds(summary["median_s"].get<double>())).c_str(),
               human_seconds(Seconds(summary["mean_s"].get<double>())).c_str(),
               human_seconds(Seconds(summary["q90_s"].get<double>())).c_str(),
               human_seconds(run.simulation.metrics.makespan).c_str());
  return summary;
}

// A GPT layout's schedule and batch are its own, and a profile's flags are not
// for it: refused, not ignored.
void refuse_schedule_flags(const SimulateArgs& args, const CLI::App& cmd) {
  if (cmd.count("--schedule") > 0 || args.virtual_stages > 0 || args.microbatches > 0 || args.microbatch_size > 0)
    throw UsageError(
        "simulate: with Megatron's flags the schedule is 1F1B, interleaved with "
        "--num-layers-per-virtual-pipeline-stage; the batch is --micro-batch-size and --global-batch-size");
  const std::vector<std::string> given = given_flags(cmd, {"--vertical-sync", "--optimizer", "--noise-samples"});
  if (!given.empty())
    throw UsageError(
        fmt::format("simulate: {} with --profile; a GPT model trains with Adam in mixed precision (--fp16, --bf16, "
                    "--use-distributed-optimizer) and its prediction has no noise model",
                    flags_go(given)));
}

// A GPT model and layout: predict_megatron (sim/megatron_sim.h), its outputs and report.
int simulate_megatron(const SimulateArgs& args, const GptModel& model, const MegatronLayout& layout,
                      const Topology& topology) {
  const bool trace = !args.trace.empty() || !args.gantt.empty() || !args.csv.empty();
  const MegatronPrediction prediction = take(predict_megatron(model, layout, topology, trace));
  if (trace) {
    OutputFiles files;
    add_outputs(args, SimulatedPlan{prediction.plan, topology.name, prediction.plan.batches, prediction.simulation},
                false, files);
    write_files_atomic(files);
  }
  if (args.json) {
    nlohmann::json out = megatron_json(model, layout, topology, prediction);
    out["not_modelled_flags"] = training_flag_names(args.megatron.not_modelled);  // Megatron's, accepted
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
  } else
    std::fputs(megatron_text(model, layout, topology, prediction).c_str(), stdout);
  return 0;
}

// A GPT model given by Megatron's flags.
int run_megatron_simulate(const SimulateArgs& args, const CLI::App& cmd) {
  if (!args.profile.empty() || !args.plan.empty() || !args.stages.empty())
    throw UsageError("simulate: a GPT model given by Megatron's flags replaces --profile, --stages and --plan");
  refuse_schedule_flags(args, cmd);
  const Topology topology = load_topology_file(args.topology);
  const MegatronRun run = megatron_run(args.megatron, topology);
  note_not_modelled("simulate", args.megatron.not_modelled);
  return simulate_megatron(args, run.model, run.layout, topology);
}

// A plan file of `baton plan -o` with Megatron's flags: its model and layout.
int run_megatron_plan_file(const SimulateArgs& args, const Plan& plan, const CLI::App& cmd) {
  if (!args.profile.empty() || !args.stages.empty())
    throw UsageError(
        fmt::format("simulate: {} is a GPT layout (its \"megatron\"); it needs no --profile or --stages", args.plan));
  if (const std::vector<std::string> given = given_megatron_flags(cmd); !given.empty())
    throw UsageError(fmt::format(
        "simulate: {} with Megatron's flags, not with {}: the plan file holds its model and layout (simulate it as "
        "it is, or give the whole model and layout by the flags without --plan)",
        flags_go(given), args.plan));
  refuse_schedule_flags(args, cmd);
  const Topology topology = load_topology_file(args.topology);
  take(check_plan_topology(plan, topology, args.plan));
  const MegatronSpec spec = take(megatron_from_arguments(plan.megatron, args.plan + ": megatron"));
  take(check_megatron_layout(spec.model, spec.layout, topology.num_devices()));
  return simulate_megatron(args, spec.model, spec.layout, topology);
}

int run_simulate(const SimulateArgs& args, const CLI::App& cmd) {
  if (args.megatron.given()) return run_megatron_simulate(args, cmd);
  if (!args.plan.empty()) {
    const Plan plan = load_plan_file(args.plan);
    if (!plan.megatron.is_null()) return run_megatron_plan_file(args, plan, cmd);
  }
  refuse_megatron_flags(cmd, "simulate");
  if (args.profile.empty())
    throw UsageError(
        "simulate: give --profile with --stages or --plan, or a GPT model with Megatron's flags "
        "(--num-layers, --hidden-size, ...)");
  if ((cmd.count("--plan") > 0) == (cmd.count("--stages") > 0))
    throw UsageError("simulate: give exactly one of --plan FILE or --stages RANGES");
  if (cmd.count("--plan") > 0 && args.plan.empty()) throw UsageError("simulate: --plan names no file");
  const Profile profile = load_profile_file(args.profile);
  const Topology topology = load_topology_file(args.topology);
  const Plan base = base_plan(args, profile);
  const std::string plan_source = args.plan.empty() ? std::string("--stages") : args.plan;
  std::vector<Schedule> schedules =
      cmd.count("--schedule") == 0 ? std::vector<Schedule>{base.schedule} : parse_schedule_list(args.schedules);
  SimOptions options;
  options.optimizer = take(parse_optimizer(args.optimizer));
  options.record_trace = !args.trace.empty() || !args.gantt.empty() || !args.csv.empty();

  std::vector<SimulatedPlan> runs;
  if (args.virtual_stages > 0 &&
      std::none_of(schedules.begin(), schedules.end(), [](Schedule s) { return s == Schedule::kInterleaved1F1B; }))
    throw UsageError(
        "simulate: --virtual-stages applies to interleaved-1f1b (zbv and dualpipev run 2 chunks per "
        "device, the other schedules 1)");
  if (args.vertical_sync &&
      std::none_of(schedules.begin(), schedules.end(), [](Schedule s) { return s == Schedule::kPipeDream; }))
    throw UsageError(
        "simulate: --vertical-sync applies to pipedream (its weight versions); the flush schedules keep one");
  for (Schedule schedule : schedules) {
    Plan plan = plan_with_schedule(base, schedule, profile.num_layers());
    if (schedule == Schedule::kInterleaved1F1B && args.virtual_stages > 0) plan.virtual_stages = args.virtual_stages;
    take(check_chunks(plan, plan_source));  // before the devices, which chunks share
    take(assign_devices(plan, topology));
    take(check_plan(plan, profile, topology, plan_source));
    if (schedule == Schedule::kPipeDream) plan.batches = pipedream_minibatches(plan);
    const Program program = build_program(plan);
    take(validate_program(program));
    auto simulation =
        simulate_program(program, stage_costs(profile, plan, topology), topology, plan.microbatch_size, options);
    if (!simulation) throw UsageError(simulation.error().message);
    runs.push_back(SimulatedPlan{plan, topology.name, plan.batches, std::move(*simulation)});
  }
  OutputFiles files;
  for (const SimulatedPlan& run : runs) add_outputs(args, run, runs.size() > 1, files);
  write_files_atomic(files);
  std::vector<nlohmann::json> noise;
  for (const SimulatedPlan& run : runs) {
    if (args.noise_samples > 0) noise.push_back(noise_summary(args, run, profile, topology, options));
    std::fprintf(stderr, "baton: simulated %s: %lld actions in %.3f s\n",
                 std::string(schedule_name(run.plan.schedule)).c_str(),
                 static_cast<long long>(run.simulation.metrics.actions), run.simulation.metrics.wall_seconds);
  }
  if (args.json) {
    nlohmann::json document = simulations_json(runs, profile, topology);
    for (size_t i = 0; i < noise.size(); ++i) (document.is_array() ? document[i] : document)["noise"] = noise[i];
    std::fputs((document.dump(2) + "\n").c_str(), stdout);
  } else {
    std::fputs(simulations_text(runs, profile, topology).c_str(), stdout);
  }
  return 0;
}

}  // namespace

void add_simulate_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd =
      app.add_subcommand("simulate", "Predict a plan's throughput, bubbles and memory; draw its Gantt chart");
  cmd->footer(
      "Predict the timeline of a plan with the discrete-event simulator: time per iteration,\n"
      "throughput, pipeline bubbles and peak memory per worker and per device (workers placed on one\n"
      "device with @ share its memory: the peak of their sum), and optionally a Gantt chart\n"
      "(SVG), a Perfetto/chrome://tracing trace (JSON) and a CSV of every action.\n\n"
      "Example:\n"
      "  baton simulate --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json \\\n"
      "      --stages 0-31x15,31-39x1 --schedule pipedream --trace out/vgg16.json --gantt out/vgg16.svg\n"
      "Give several schedules (--schedule 1f1b,zb-h1,zb-h2) to compare them side by side;\n"
      "dp then runs the whole model on as many devices as the plan uses.\n"
      "interleaved-1f1b, zbv and dualpipev run several of the listed stages on each device\n"
      "(chunks): with S stages and v = --virtual-stages (2 for zbv and dualpipev), S / v devices;\n"
      "interleaved-1f1b puts stage s on device s mod (S / v), the V shapes put stage s and\n"
      "2 S / v - 1 - s together. Example, 8 chunks on 4 devices:\n"
      "  baton simulate --profile traces/gpt-1.3b_h100_mb1.json --topology topologies/a100_4x8.json \\\n"
      "      --stages 0-4,4-7,7-10,10-13,13-16,16-19,19-22,22-26 --schedule interleaved-1f1b,zbv,dualpipev\n"
      "The model behind the figures (links, all-reduce, memory, steady state): docs/SIMULATOR.md\n\n"
      "A GPT model trained as Megatron-LM trains it, in Megatron's own flags (no --profile):\n"
      "  baton simulate --topology topologies/a100_vtrain.json --num-layers 48 --hidden-size 8192 \\\n"
      "      --num-attention-heads 64 --seq-length 2048 --global-batch-size 1536 --micro-batch-size 2 \\\n"
      "      --tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 --data-parallel-size 32 \\\n"
      "      --recompute-granularity full\n"
      "prints the iteration time, model TFLOP/s per GPU, where the time goes and memory per GPU;\n"
      "the GPU's kernel model and the tensor-parallel collectives: docs/TRANSFORMERS.md");
  add_profile_option(*cmd, args->profile, args->megatron.not_modelled, "layer profile (baton.profile.v1 JSON)");
  cmd->add_option("--topology", args->topology, "cluster (baton.topology.v1 JSON)")->required();
  cmd->add_option("--stages", args->stages,
                  "stages as half-open layer ranges with replicas, e.g. 0-13x15,13-39x1;\n"
                  "devices are assigned in order unless given as 0-13x2@4+5");
  cmd->add_option("--plan", args->plan, "a plan file (baton.plan.v1) instead of --stages");
  cmd->add_option("--schedule", args->schedules,
                  fmt::format("{}, or a comma list to compare (default: the plan's, else 1f1b)", schedule_names()));
  cmd->add_option("--microbatches", args->microbatches,
                  "microbatches per iteration (flush schedules) or minibatches pushed through "
                  "(pipedream; raised to reach a steady state). Default 64")
      ->check(at_least(1));
  cmd->add_option("--microbatch-size", args->microbatch_size,
                  "samples per microbatch: the profile's (its default), as a check; another size is refused,\n"
                  "as is a plan file at another size: a profile's times hold at its own size only (get one\n"
                  "at N samples with baton profile analytic|measure --microbatch-size N)")
      ->check(at_least(1));
  cmd->add_flag("--vertical-sync", args->vertical_sync, "pipedream: every stage uses stage 0's weight version");
  cmd->add_option("--virtual-stages", args->virtual_stages,
                  "interleaved-1f1b: chunks (stages) per device, >= 2 (default: the plan's, else 2)")
      ->check(at_least(1));
  cmd->add_option("--optimizer", args->optimizer, "sgd | momentum | adam: optimizer state in memory (default adam)");
  cmd->add_option("--trace", args->trace, "write a Chrome trace-event JSON (open in ui.perfetto.dev)");
  cmd->add_option("--gantt", args->gantt, "write an SVG Gantt chart");
  cmd->add_option("--csv", args->csv, "write one CSV row per action");
  cmd->add_flag("--json", args->json, "print the metrics as JSON instead of text");
  cmd->add_option("--noise-samples", args->noise_samples,
                  "also simulate this many iterations on a noisy machine (the topology's device\n"
                  "compute_noise, allreduce_noise_us and transfer_noise_us, seeds 1..N) and print the\n"
                  "distribution of the iteration time (with --json: \"noise\": samples, q10_s, median_s,\n"
                  "mean_s, q90_s)")
      ->check(at_least(0));
  add_megatron_flags(*cmd, args->megatron);
  cmd->callback([args, cmd, &result] { result.exit_code = run_simulate(*args, *cmd); });
}

}  // namespace baton::cli
