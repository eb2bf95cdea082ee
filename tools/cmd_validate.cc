// `baton validate`: the whole loop on this machine's hardware. Measure the
// model's profile, calibrate the link between ranks (`baton calibrate`:
// point-to-point fit, ring all-reduce fit and all-reduce noise, and the
// receive noise of a loaded exchange computing as long as the model's stages:
// loaded_forward_ms), and per schedule:
// plan, measure a slice of the device's speed and noise under the run's
// conditions (every rank profiling at once, a sleep before each stage's work),
// and run it (`baton run --backend gloo`), again while the run's compute
// disagrees with its slice (run_with_slice). Then pool the slices' noise into
// the topology (compute_noise all samples; relative_speed their median, for
// the record), simulate each schedule's exact Program once per measured step
// at the speeds its workers had in it (predict_run: the slice's speed, each
// worker slowed by its compute in the step over the slice's expectation), and
// compare. Writes a Markdown report with the
// figures and, per schedule, both Gantt charts in one SVG; exits 1 when an
// iteration-time error exceeds --tolerance.
// With --device cuda the workers are --nproc threads of one process on that
// GPU (run --backend threads --device cuda), each on its own CUDA stream and
// timed with CUDA events; the profile is measured there, the link is the
// threads backend's hand-overs on the GPU (calibrate --device cuda, whose
// topology marks the workers shared_compute: they take turns on the GPU's
// compute), and no loaded slices are taken (relative_speed 1, no compute
// noise); the profile is measured with --streams max(nproc, 4) (the GPU
// saturated: validate_inputs.cc) and its shared_streams set as the
// topology's shared_speedup (sim/topology.h): how much more the GPU does with
// the workers' streams computing at once than in turns.
//
// What is compared (per schedule):
// - predicted: the --quantile q (default 0.5, the median) of the iteration
//   time over 200 simulations of one iteration of the Program built from the
//   plan (build_program), as the executor runs it (every step is a whole
//   Program, pipedream's warm-up and drain included), on a noisy machine:
//   every compute action takes its profiled time times per-layer factors drawn
//   from the topology's compute_noise (sim/topology.h), measured with the
//   loaded profile below; the deterministic makespan is reported beside it;
// - measured: the same quantile of the run's step wall times after the first
//   (barrier to barrier; step 0 pays allocations and first connections; at
//   least --steps, and --run-seconds by the prediction); the profile keeps the
//   same quantile of its steps per layer;
// - error = (measured - predicted) / predicted.
// Why noise: on the 2-core CI machines an operation's time varies from step
// to step (the 0.05-0.95 quantiles of a layer's time lie 0.8-1.2x apart, a
// rare one takes 2x), and a pipeline's iteration, coupled through its
// transfers, waits for the slow ones; the median of a run is then longer than
// the sum of median costs. The loaded profile, every rank at once, measures
// that spread; the simulator draws from it.
// Layout of --out DIR: topology.json (calibrated, with the pooled
// relative_speed and compute_noise), calibrate.log, profile.json, report.md,
// report.json (the summary figures in seconds), and per schedule S:
// S/profile-loaded.json and its log (the slice), S/plan.json,
// S/predicted.json, S/measured.json, S/run.json, S/run.log (what the ranks
// printed), S/compare.svg; an attempt not kept leaves its slice and run files
// in S/attempt-<n>/.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "exec/launcher.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/executor_handoff.h"
#include "tools/machine_load.h"
#include "tools/validate_report.h"

#if BATON_HAVE_EXEC
#include "exec/executor.h"
#include "planner/planner.h"
#include "sim/plan_layouts.h"
#include "sim/trace_compare.h"
#include "sim/trace_reader.h"
#include "sim/trace_writers.h"
#include "sim/validation_figures.h"
#include "tools/compare_report.h"
#include "tools/rank_launch.h"
#include "tools/report.h"
#include "tools/run_report.h"
#include "tools/validate_inputs.h"
#endif

namespace baton::cli {

namespace {

#if BATON_HAVE_EXEC

namespace fs = std::filesystem;

// The plan of one schedule: --stages as given, dp as the whole model on every
// rank, otherwise the planner's choice (baton cost model, SGD) for that schedule.
// A schedule that runs chunks takes the listed stages as its chunks: 2 per
// rank for zbv and dualpipev, stages / --nproc for interleaved-1f1b.
Plan plan_for(Schedule schedule, const ValidateArgs& args, const Profile& profile, const Topology& topology) {
  Plan plan;
  if (!args.stages.empty() && schedule != Schedule::kDataParallel) {
    plan.stages = take(parse_stages(args.stages));
    if (runs_chunks(schedule))
      plan.virtual_stages =
          schedule == Schedule::kInterleaved1F1B ? std::max(2, plan.num_stages() / std::max(args.nproc, 1)) : 2;
  } else if (schedule == Schedule::kDataParallel) {
    plan = data_parallel_plan(profile, args.nproc, args.microbatches);
  } else {
    PlannerOptions options;
    options.schedule = schedule;
    options.microbatches = args.microbatches;
    options.optimizer = Optimizer::kSgd;
    plan = take(make_plan(profile, topology, options)).best.plan;
    for (StagePlan& stage : plan.stages) stage.devices.clear();
  }
  plan.schedule = schedule;
  plan.model = profile.model;
  plan.microbatch_size = profile.microbatch_size;
  plan.batches = args.microbatches;
  if (schedule == Schedule::kPipeDream) {
    plan.batches = whole_pipedream_rounds(plan);  // what the executor runs
  }
  take(check_chunks(plan, "the plan"));  // before the devices, which chunks share
  take(assign_devices(plan, topology));
  take(check_plan(plan, profile, topology, "the plan"));
  return plan;
}

// A run's report read back.
RunRecord read_run_record(const std::string& path) { return take(parse_run_record(read_file(path), path)); }

// The quantile, median, min and max of the step wall times after the first.
void read_step_times(const RunRecord& run, double q, ValidationCase& c) {
  const StepTimes times = step_times_after_first(run.walls, q);
  c.measured = times.at_quantile;
  c.measured_median = times.median;
  c.measured_min = times.min;
  c.measured_max = times.max;
}

// Plans one schedule (saved as DIR/S/plan.json).
ValidationCase plan_case(Schedule schedule, const ValidateArgs& args, const Profile& profile, const Topology& topology,
                         const fs::path& out) {
  const fs::path dir = out / std::string(schedule_name(schedule));
  fs::create_directories(dir);
  ValidationCase c;
  c.schedule = schedule;
  c.plan = plan_for(schedule, args, profile, topology);
  write_file_atomic(path_in(dir, "plan.json"), plan_to_json(c.plan).dump(2) + "\n");
  return c;
}

// Runs a planned case; the prediction comes later (predict_case). The run's
// length is sized by the deterministic simulation on `topology`. Returns the
// run's compute per step (all workers).
Seconds run_case(ValidationCase& c, const ValidateArgs& args, const Profile& profile, const Topology& topology,
                 const fs::path& out) {
  const std::string name(schedule_name(c.schedule));
  const fs::path dir = out / name;
  const std::string plan_path = path_in(dir, "plan.json");
  const Seconds estimate = take(simulate_iteration(c.plan, profile, topology)).metrics.makespan;
  c.steps = steps_to_run(args.steps, Seconds(args.run_seconds), estimate);
  progress(fmt::format("{}: stages {}, {} microbatches: running {} steps on {} ranks", name,
                       stages_to_string(c.plan.stages), c.plan.batches, c.steps, c.plan.num_workers()));
  const std::string measured_path = path_in(dir, "measured.json");
  const std::string report_path = path_in(dir, "run.json");
  std::vector<std::string> arguments{"run",
                                     "--plan",
                                     plan_path,
                                     "--model",
                                     c.plan.model,
                                     "--steps",
                                     std::to_string(c.steps),
                                     "--threads",
                                     std::to_string(args.threads),
                                     "--timeout",
                                     fmt::format("{}", args.timeout_s),
                                     "--trace",
                                     measured_path,
                                     "--report",
                                     report_path};
  const std::vector<std::string> backend =
      on_gpu(args) ? std::vector<std::string>{"--backend", "threads", "--device", args.device}
                   : std::vector<std::string>{"--backend", "gloo"};
  arguments.insert(arguments.end(), backend.begin(), backend.end());
  launch_logged(arguments, on_gpu(args) ? 1 : c.plan.num_workers(), Seconds(args.timeout_s * (c.steps + 2)),
                path_in(dir, "run.log"), fmt::format("{} run", name));
  RunRecord run = read_run_record(report_path);
  read_step_times(run, args.quantile, c);
  c.step_compute = std::move(run.step_compute);
  c.action_overhead = std::move(run.action_overhead);
  c.measured_trace = take(parse_chrome_trace(read_file(measured_path), measured_path));
  progress(fmt::format("{}: measured {} (quantile {:g} of steps 1..{}; median {})", name, human_seconds(c.measured),
                       args.quantile, c.steps - 1, human_seconds(c.measured_median)));
  return run.compute_per_step;
}

// Moves an attempt's slice and run files from `dir` to dir/attempt-<n>/.
void set_aside(const fs::path& dir, int attempt) {
  const fs::path aside = dir / fmt::format("attempt-{}", attempt);
  fs::create_directories(aside);
  for (const char* name : {"profile-loaded.json", "profile-loaded.log", "run.json", "run.log", "measured.json"})
    if (fs::exists(dir / name)) fs::rename(dir / name, aside / name);
}

// Measures a case's slice and runs it; again (a new slice, a new run) while
// the run's compute per step is off the slice's expectation by more than
// --drift, at most --attempts times. Such a run met the machine at another
// speed than its slice did, so it does not test the prediction; the decision
// looks at compute alone, never at the iteration time. The last attempt is
// kept (earlier ones' files go to S/attempt-<n>/); returns its slice.
LoadedSlice run_with_slice(ValidationCase& c, const ValidateArgs& args, const Profile& profile,
                           const Topology& topology, const fs::path& out) {
  const std::string name(schedule_name(c.schedule));
  const fs::path dir = out / name;
  LoadedSlice slice;
  for (c.attempts = 1;; ++c.attempts) {
    slice = measure_loaded_slice(args, profile, c.plan, dir);
    const Seconds compute_per_step = run_case(c, args, profile, topology, out);
    const Seconds expected = take(expected_compute_per_step(c.plan, profile, topology, slice));
    if (c.step_compute.empty()) throw RunFailure(fmt::format("{}: the run recorded no compute per step", name));
    c.run_compute = compute_per_step / expected;
    c.slice_speed = slice.speed;
    c.relative_speed = take(run_speed(c.step_compute, expected, slice.speed, args.quantile));
    if (std::abs(c.run_compute - 1.0) <= args.drift || c.attempts >= args.attempts) return slice;
    progress(
        fmt::format("{}: the run's compute per step was {} off its slice's: the machine changed speed; "
                    "measuring again (attempt {} of {})",
                    name, signed_percent(c.run_compute - 1.0), c.attempts + 1, args.attempts));
    set_aside(dir, c.attempts);
  }
}

// The prediction of a case that ran, at its speed (c.relative_speed: its
// slice's, or the given topology's) with the topology's noise, and its
// comparison with the run.
void predict_case(ValidationCase& c, const ValidateArgs& args, const Profile& profile, const Topology& topology,
                  const fs::path& out) {
  const std::string name(schedule_name(c.schedule));
  const fs::path dir = out / name;
  Topology at_speed = topology;
  at_speed.device.relative_speed = c.relative_speed;
  // With a slice, the run's steps replayed at the speeds its workers had in
  // each stand for the noisy simulations.
  const bool replayed = c.slice_speed > 0.0;
  IterationPrediction prediction =
      take(predict_iteration(c.plan, profile, at_speed, args.quantile, replayed ? 0 : kNoiseSamples));
  if (!c.step_compute.empty()) {
    Topology at_slice = topology;
    if (replayed) at_slice.device.relative_speed = c.slice_speed;
    c.predicted_at_run_speeds =
        take(predict_run(c.plan, profile, at_slice, c.step_compute, args.quantile)) + prediction.step_barrier;
    if (replayed) prediction.at_quantile = c.predicted_at_run_speeds;
  }
  const Trace& predicted = prediction.deterministic.trace;
  c.predicted_plain = prediction.plain();
  c.step_barrier = prediction.step_barrier;
  c.predicted = prediction.at_quantile;
  write_file_atomic(path_in(dir, "predicted.json"), trace_to_chrome_json(predicted));
  c.comparison = compare_traces(predicted, c.measured_trace);
  GanttOptions gantt;
  gantt.title = fmt::format("{} {}: predicted (top) and measured (bottom)", c.plan.model, name);
  write_file_atomic(path_in(dir, "compare.svg"), traces_to_svg_compare(predicted, c.measured_trace, gantt));
  progress(fmt::format("{}: predicted {}, measured {}, error {}", name, human_seconds(c.predicted),
                       human_seconds(c.measured), signed_percent(c.error())));
  if (!replayed && c.predicted_at_run_speeds.value > 0.0)
    progress(fmt::format("{}: at the speeds its workers had in each step {}, error {} (report.json)", name,
                         human_seconds(c.predicted_at_run_speeds), signed_percent(c.error_at_run_speeds())));
}

int run_validate(const ValidateArgs& args) {
  if (rank_env_from_environment()) {
    throw UsageError(
        "validate: RANK/WORLD_SIZE are set; validate starts its ranks itself (run it once, not "
        "under torchrun)");
  }
  if (args.steps < 2) throw UsageError("validate: --steps must be >= 2 (step 0 is not measured)");
  if (on_gpu(args)) {
    if (auto info = exec::device_info(args.device); !info) {
      std::fprintf(stderr, "baton: validate: %s\n", info.error().message.c_str());
      return 1;
    }
  }
  const std::vector<Schedule> schedules = parse_schedule_list(args.schedules);
  const exec::ModelInfo model = take(exec::model_info(args.model));
  // Before anything of ours runs: what other work takes of the CPUs.
  const std::optional<MachineLoad> load = sample_machine_load();
  if (load && is_busy(*load)) progress("warning: " + busy_machine_warning(*load));
  const fs::path out(args.out);
  fs::create_directories(out);
  nlohmann::json calibration;
  std::vector<ValidationCase> cases;
  std::optional<Profile> profile;
  std::optional<Topology> topology;
  try {
    // Given files are checked before anything is measured. Gloo ranks'
    // link is calibrated after the profile is measured: its loaded exchange
    // computes as long as the model's stages do.
    if (!args.profile.empty() || (args.topology.empty() && !on_gpu(args))) profile = obtain_profile(args, model, out);
    topology = obtain_topology(args, out, calibration, profile ? &*profile : nullptr);
    // On a GPU the workers share one device and no CPU cores: no slices.
    const bool loaded = args.profile.empty() && args.topology.empty() && args.gap_us >= 0.0 && !on_gpu(args);
    if (!profile) profile = obtain_profile(args, model, out);
    // Workers sharing the GPU run at once (a given topology says so itself).
    if (args.topology.empty()) topology = shared_topology(*topology, *profile, out);
    // The device's speed under load is measured in slices, one just before
    // each schedule's run (run_with_slice); their noise is pooled, so every
    // schedule runs first and is predicted after the last slice.
    std::vector<LoadedSlice> slices;
    for (Schedule schedule : schedules) {
      ValidationCase c = plan_case(schedule, args, *profile, *topology, out);
      if (loaded) {
        slices.push_back(run_with_slice(c, args, *profile, *topology, out));
      } else {
        c.relative_speed = topology->device.relative_speed;
        run_case(c, args, *profile, *topology, out);
      }
      cases.push_back(std::move(c));
    }
    if (loaded) *topology = pooled_topology(args, *topology, slices, out);
    for (ValidationCase& c : cases) predict_case(c, args, *profile, *topology, out);
  } catch (const RunFailure& e) {
    std::fprintf(stderr, "baton: validate: %s\n", e.what());
    return 1;
  }
  const std::string report = path_in(out, "report.md");
  write_file_atomic(report, validation_markdown(args, *profile, *topology, calibration, cases, load));
  write_file_atomic(path_in(out, "report.json"),
                    validation_json(cases, args.tolerance, args.quantile, load).dump(2) + "\n");
  std::fputs(render_table(validation_summary_rows(cases, args.tolerance)).c_str(), stdout);
  std::printf("report: %s\n", report.c_str());
  const bool within = std::all_of(cases.begin(), cases.end(),
                                  [&](const ValidationCase& c) { return std::abs(c.error()) <= args.tolerance; });
  if (!within) std::fprintf(stderr, "baton: validate: an iteration-time error exceeds %g%%\n", 100.0 * args.tolerance);
  return within ? 0 : 1;
}

#else

int run_validate(const ValidateArgs&) { hand_to_executor("validate"); }

#endif  // BATON_HAVE_EXEC

}  // namespace

void add_validate_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* cmd = app.add_subcommand("validate", "Measure, calibrate, plan, simulate, run and compare, in one go");
  cmd->footer(
      "The loop on this machine: measure the model's profile (profile measure), calibrate the link between\n"
      "--nproc gloo ranks (calibrate, its loaded exchange computing as long as an even stage of the model:\n"
      "--loaded-forward-ms), then per schedule plan it, measure a slice of the device's speed\n"
      "and noise (--gap-us) and run it (run --backend gloo), again (--attempts) while the run's compute per\n"
      "step is off what the slice expects by more than --drift; pool the slices' noise, simulate each\n"
      "Program the executor ran once per measured step, at the speeds its workers had in it (the slice's\n"
      "speed, each worker slowed by its compute in that step over what the slice expects of it: a shared\n"
      "machine's cores change speed from second to second), the --quantile of those plus the\n"
      "two barriers each measured step holds) and compare predicted and measured iteration time. Writes\n"
      "DIR/report.md (figures, calibration, profile, per-stage and per-action errors) and\n"
      "DIR/<schedule>/compare.svg (both Gantt charts); exits 1 when an iteration-time error exceeds\n"
      "--tolerance. With --device cuda the workers are threads on that GPU (run --backend threads\n"
      "--device cuda), measured and calibrated there, without slices or barriers; they are predicted\n"
      "sharing the GPU's compute (the calibrated topology's shared_compute), with the\n"
      "throughput of the GPU's streams at once that the profile measures (profile measure --streams,\n"
      "--nproc of them and at least 4, the GPU saturated): the topology's shared_speedup. Without slices\n"
      "(a GPU, a given topology, --gap-us < 0) report.json also has each run replayed at the speeds its\n"
      "workers had against the topology's (predicted_at_run_speeds_s, error_at_run_speeds).\n"
      "Validate on an idle machine: the CPUs' load is sampled first (/proc/stat) and kept in report.md and\n"
      "report.json (machine_load); from half a CPU of other work on, it warns.\n\n"
      "Examples:\n"
      "  baton validate --model mlp --nproc 2 --microbatch-size 256 --out out/validate-mlp\n"
      "  baton validate --model gpt-mini --nproc 2 --schedule 1f1b,gpipe --stages 0-3,3-6 --tolerance 0.1\n"
      "  baton validate --model vgg-mini --device cuda --nproc 4 --schedule 1f1b,zb-h1 --tolerance 0.05\n"
      "Give --profile and --topology to skip measuring and calibrating.");
  cmd->add_option("--model", args->model, "mlp | vgg-mini | gpt-mini")->required();
  cmd->add_option("--backend", args->backend, "gloo (CPU processes over c10d Gloo)")->check(CLI::IsMember({"gloo"}));
  cmd->add_option("--nproc", args->nproc,
                  fmt::format("ranks on this machine (with --device cuda: workers on the GPU), 2 to {} (default 2)",
                              exec::kMaxLocalRanks))
      ->check(in_range(2, exec::kMaxLocalRanks));
  cmd->add_option("--device", args->device,
                  "cpu (default: gloo ranks), or cuda / cuda:N: --nproc workers of the threads backend on that GPU, "
                  "each on its own CUDA stream, timed with CUDA events; the profile and the link (calibrate "
                  "--device) are measured there, without the loaded slices of the CPU")
      ->check(check_device_name);
  cmd->add_option("--schedule", args->schedules,
                  fmt::format("comma list of {} (default: pipedream,1f1b,gpipe,dp)", schedule_names()));
  cmd->add_option("--stages", args->stages, "use these stages instead of the planner's (not for dp)");
  CLI::Option* microbatch_size =
      cmd->add_option("--microbatch-size", args->microbatch_size,
                      "samples per microbatch (default 32; with --profile, the profile's, and another is refused)")
          ->check(at_least(1))
          ->check(at_most(kMaxMicrobatchSize));
  cmd->add_option("--microbatches", args->microbatches,
                  "microbatches (pipedream: minibatches) per iteration "
                  "(default 8)")
      ->check(at_least(1));
  cmd->add_option("--steps", args->steps, "iterations run per schedule, >= 2 (default 30)");
  cmd->add_option("--run-seconds", args->run_seconds,
                  "and at least as many as the prediction says take this long (default 3): a run then spans the\n"
                  "speed changes of a shared machine")
      ->check(at_least(0));
  cmd->add_option("--profile-seconds", args->profile_seconds,
                  "measure the profile for at least this long (default 3): its steps then span the\n"
                  "speed changes of a shared machine, as the run's steps do")
      ->check(at_least(0));
  cmd->add_option("--gap-us", args->gap_us,
                  "before each schedule's run, profile again on every rank at once with this sleep before each\n"
                  "stage's forward and backward (profile measure --gap-at): its speed (alone / so), each worker\n"
                  "slowed in each step by its compute there over what the slice expects, is what a schedule is\n"
                  "predicted at, with the noise of all the slices' samples (default 300, at most 1 s;\n"
                  "< 0: skip, and predict at the topology's speed without compute noise)")
      ->check(at_most(1e6));
  cmd->add_option("--quantile", args->quantile,
                  "order statistic compared: of the profile's steps per layer, of the noisy simulations and of\n"
                  "the run's steps (default 0.5: the median)")
      ->check(in_range(0.0, 1.0));
  cmd->add_option("--tolerance", args->tolerance, "largest |iteration-time error| accepted (default 0.10)")
      ->check(more_than(0));
  cmd->add_option("--attempts", args->attempts,
                  "slice-and-run attempts per schedule (default 3): another while the run's compute per step is\n"
                  "off its slice's expectation by more than --drift (the machine changed speed); the last is kept")
      ->check(at_least(1));
  cmd->add_option("--drift", args->drift,
                  "largest |run compute / slice's expectation - 1| of a run kept before the last attempt (default "
                  "0.03)")
      ->check(more_than(0));
  cmd->add_option("--out", args->out, "directory for the report and its files (default out/validate)");
  cmd->add_option("--profile", args->profile, "use this profile instead of measuring one");
  cmd->add_option("--topology", args->topology, "use this topology instead of calibrating one");
  cmd->add_option("--threads", args->threads, "LibTorch intra-op threads per rank (1 to 1024, default 1)")
      ->check(in_range(1, 1024));
  cmd->add_option("--timeout", args->timeout_s, "seconds any single wait of a rank may take (default 30)")
      ->check(more_than(0));
  cmd->callback([args, microbatch_size, &result] {
    args->microbatch_size_given = microbatch_size->count() > 0;
    result.exit_code = run_validate(*args);
  });
}

}  // namespace baton::cli
