// `baton run`: execute a plan's Program with the LibTorch executor and measure it.
//
// Backends: `threads` (every worker on a thread of this process; on the CPU
// or, --device cuda, on one GPU), `gloo` (one process per worker through c10d
// Gloo, on the CPU) and `nccl` (one process per worker on GPU LOCAL_RANK, data
// over NCCL, control over Gloo). With `gloo` or `nccl`, a process that
// finds RANK and WORLD_SIZE in its environment is one rank (as started by
// torchrun, Slurm or mpirun, or by this command); otherwise it is the local
// launcher: it checks the plan, then starts --nproc copies of itself on
// 127.0.0.1 and waits for them. Rank 0 prints the report and writes outputs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/executor_handoff.h"

#if BATON_HAVE_EXEC
#include "exec/executor.h"
#include "exec/launcher.h"
#include "sim/plan_layouts.h"
#include "sim/stats.h"
#include "sim/trace_writers.h"
#include "tools/rank_launch.h"
#include "tools/report.h"
#endif

namespace baton::cli {

namespace {

struct RunArgs {
  std::string plan;
  std::string profile;
  std::string topology;
  std::string stages;
  std::string schedule;
  std::string model;
  std::string backend = "threads";
  std::string device = "cpu";
  int nproc = 0;
  int steps = 3;
  int microbatches = 0;
  int microbatch_size = 0;
  bool vertical_sync = false;
  int virtual_stages = 0;  // interleaved-1f1b: chunks per worker (0: as plan_with_schedule gives it)
  bool no_stashing = false;
  double learning_rate = 0.05;
  uint64_t seed = 1;
  int threads = 1;
  double timeout_s = 30.0;
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  bool resume = false;
  std::string trace;
  std::string gantt;
  std::string save_weights;
  std::string report;
  bool json = false;
};

#if BATON_HAVE_EXEC

void check_profile_matches(const Profile& profile, const exec::ModelInfo& model, const std::string& path) {
  if (profile.num_layers() != static_cast<int>(model.layer_names.size())) {
    throw UsageError(fmt::format("{}: the profile has {} layers but model '{}' has {}", path, profile.num_layers(),
                                 model.name, model.layer_names.size()));
  }
  for (int l = 0; l < profile.num_layers(); ++l) {
    if (profile.layers[l].name != model.layer_names[static_cast<size_t>(l)]) {
      throw UsageError(fmt::format("{}: layers[{}].name is '{}' but layer {} of model '{}' is '{}'", path, l,
                                   profile.layers[l].name, l, model.name, model.layer_names[static_cast<size_t>(l)]));
    }
  }
}

// Refuses a plan that needs more devices (one per worker) than `topology`,
// read from `path`, has, or that lists a device the topology lacks. `source`
// names the plan.
void check_plan_fits_topology(const Plan& plan, const Topology& topology, const std::string& path,
                              const std::string& source) {
  take(check_plan_topology(plan, topology, source));
  if (plan.num_workers() > topology.num_devices()) {
    throw UsageError(fmt::format("{}: topology '{}' has {} devices but {} needs {} (stages {}, one device per worker)",
                                 path, topology.name, topology.num_devices(), source, plan.num_workers(),
                                 stages_to_string(plan.stages)));
  }
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    for (const int device : plan.stages[s].devices) {
      if (device < 0 || device >= topology.num_devices()) {
        throw UsageError(fmt::format("{}: topology '{}' has devices [0, {}) but {} puts stages[{}] on device {}", path,
                                     topology.name, topology.num_devices(), source, s, device));
      }
    }
  }
}

// The zoo model to run: --model, else the one `source` (the plan or profile) names.
exec::ModelInfo resolve_model(const RunArgs& args, const std::string& named, const std::string& source) {
  if (!args.model.empty()) return take(exec::model_info(args.model));
  if (named.empty()) throw UsageError(fmt::format("run: name the model with --model ({} does not)", source));
  auto model = exec::model_info(named);
  if (!model) throw UsageError(fmt::format("{}: {}", source, model.error().message));
  return std::move(model).value();
}

// --schedule and --virtual-stages applied to `plan` (both idempotent).
Plan with_schedule_flags(Plan plan, const RunArgs& args, int num_layers) {
  if (!args.schedule.empty()) plan = plan_with_schedule(plan, take(parse_schedule(args.schedule)), num_layers);
  if (args.virtual_stages > 0) {
    if (plan.schedule != Schedule::kInterleaved1F1B)
      throw UsageError("run: --virtual-stages applies to interleaved-1f1b (zbv and dualpipev run 2 chunks per worker)");
    plan.virtual_stages = args.virtual_stages;
  }
  return plan;
}

// --stages: the profile must be the model's (checked first, so that a profile
// of another model is reported as such, not as stages that miss its layers).
std::pair<Plan, exec::ModelInfo> plan_from_stages(const RunArgs& args) {
  if (args.profile.empty() || args.topology.empty())
    throw UsageError("run: --stages needs --profile and --topology (or give --plan)");
  const Profile profile = load_profile_file(args.profile);
  const exec::ModelInfo model = resolve_model(args, profile.model, args.profile);
  check_profile_matches(profile, model, args.profile);
  const Topology topology = load_topology_file(args.topology);
  Plan plan;
  plan.stages = take(parse_stages(args.stages));
  plan.batches = 8;
  plan.microbatch_size = profile.microbatch_size;
  // The schedule first: one that runs chunks puts several stages on one device.
  plan = with_schedule_flags(plan, args, profile.num_layers());
  take(check_chunks(plan, "--stages"));  // before the devices, which chunks share
  check_plan_fits_topology(plan, topology, args.topology, "--stages");
  take(assign_devices(plan, topology));
  take(check_plan(plan, profile, topology, "--stages"));
  return {plan, model};
}

// --plan FILE: a plan names the model it was made for, and only its layer
// ranges say how to split it, so a plan for another model is refused even
// where the layer counts agree (mlp and vgg-mini both have 6). With
// --topology, the plan must fit that cluster.
std::pair<Plan, exec::ModelInfo> plan_from_file(const RunArgs& args) {
  const Plan plan = load_plan_file(args.plan);
  if (!plan.megatron.is_null())
    throw UsageError(fmt::format(
        "{}: a GPT layout for Megatron-LM; `baton run` executes profile plans on its own models (mlp, vgg-mini, "
        "gpt-mini). Launch this one with Megatron-LM: `baton plan ... --emit torchrun` prints the line",
        args.plan));
  if (!args.model.empty() && !plan.model.empty() && plan.model != args.model) {
    throw UsageError(
        fmt::format("{}: the plan is for model '{}' but --model is '{}'", args.plan, plan.model, args.model));
  }
  if (!args.topology.empty())
    check_plan_fits_topology(plan, load_topology_file(args.topology), args.topology, args.plan);
  return {plan, resolve_model(args, plan.model, args.plan)};
}

// The plan to run and the model to run it on; every check that needs no torch.
std::pair<Plan, exec::ModelInfo> resolve_plan(const RunArgs& args) {
  if (args.plan.empty() == args.stages.empty())
    throw UsageError("run: give exactly one of --plan FILE or --stages RANGES");
  auto [plan, model] = args.plan.empty() ? plan_from_stages(args) : plan_from_file(args);
  plan.model = model.name;
  // dp runs the whole model as one stage on as many workers as the plan has.
  plan = with_schedule_flags(plan, args, static_cast<int>(model.layer_names.size()));
  if (args.microbatches > 0) plan.batches = args.microbatches;
  if (args.microbatch_size > 0) plan.microbatch_size = args.microbatch_size;
  if ((args.vertical_sync || args.no_stashing) && plan.schedule != Schedule::kPipeDream) {
    throw UsageError(
        fmt::format("run: {} is pipedream's (its stages hold several weight versions); {} flushes and holds one",
                    args.vertical_sync ? "--vertical-sync" : "--no-weight-stashing", schedule_name(plan.schedule)));
  }
  if (args.nproc > 0 && args.backend == "threads") {
    throw UsageError(
        fmt::format("run: --nproc starts a process per worker (--backend gloo or nccl); the threads "
                    "backend runs the plan's {} workers in this process",
                    plan.num_workers()));
  }
  if (args.vertical_sync) plan.vertical_sync = true;
  take(exec::check_plan_for_model(plan, model, args.plan.empty() ? "--stages" : args.plan));
  return {plan, model};
}

// Progress on stderr for runs that take a while: a line at most every
// BATON_PROGRESS_EVERY seconds (default 2; 0: after every step), none for
// the last step (the report follows), with the step reached and the last
// step's wall time.
double progress_every_s() {
  const char* text = std::getenv("BATON_PROGRESS_EVERY");
  if (text == nullptr || *text == '\0') return 2.0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (*end != '\0' || !std::isfinite(value) || value < 0)
    throw UsageError(fmt::format("environment: BATON_PROGRESS_EVERY={} is not a number of seconds >= 0", text));
  return value;
}

std::function<void(int, Seconds)> step_progress(int steps) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  return [every = progress_every_s(), start, last = start, steps](int step, Seconds wall) mutable {
    const Clock::time_point now = Clock::now();
    if (std::chrono::duration<double>(now - last).count() < every || step + 1 == steps) return;
    last = now;
    std::fprintf(stderr, "run: step %d of %d done after %.1f s (this one %s)\n", step + 1, steps,
                 std::chrono::duration<double>(now - start).count(), human_seconds(wall).c_str());
  };
}

exec::TrainOptions train_options(const RunArgs& args, const std::string& model) {
  if (args.steps < 1) throw UsageError("run: --steps must be >= 1");
  exec::TrainOptions options;
  options.model = model;
  options.steps = args.steps;
  options.learning_rate = args.learning_rate;
  options.seed = args.seed;
  options.device = args.device;
  options.weight_stashing = !args.no_stashing;
  options.intra_op_threads = args.threads;
  options.timeout = Seconds(args.timeout_s);
  if ((args.checkpoint_every > 0 || args.resume) && args.checkpoint_dir.empty())
    throw UsageError("run: --checkpoint-every and --resume need --checkpoint-dir");
  options.checkpoint_dir = args.checkpoint_dir;
  options.checkpoint_every = args.checkpoint_every;
  options.resume = args.resume;
  options.on_step = step_progress(args.steps);
  return options;
}

std::string report_text(const exec::RunReport& report, const Plan& plan, const std::string& backend) {
  std::string out =
      fmt::format("run: {} with {} on {} worker(s), stages {}, {} microbatches of {}, backend {} on {}\n", plan.model,
                  schedule_name(plan.schedule), plan.num_workers(), stages_to_string(plan.stages), plan.batches,
                  plan.microbatch_size, backend, report.device);
  // Every step up to kShownSteps, else the first and last few (all of them
  // are in --json and --report) and the wall times' median and range.
  constexpr size_t kShownSteps = 12;
  constexpr size_t kEnds = 5;
  const size_t count = report.steps.size();
  std::vector<std::vector<std::string>> steps{{"step", "wall time", "mean loss"}};
  for (size_t s = 0; s < count; ++s) {
    if (count > kShownSteps && s >= kEnds && s + kEnds < count) {
      if (s == kEnds) steps.push_back({"...", "", ""});
      continue;
    }
    steps.push_back({std::to_string(report.first_step + static_cast<int>(s)), human_seconds(report.steps[s].wall),
                     fmt::format("{:.6f}", report.steps[s].mean_loss)});
  }
  out += "\n" + render_table(steps);
  if (count > kShownSteps) {
    std::vector<double> walls;
    for (const exec::StepReport& step : report.steps) walls.push_back(step.wall.value);
    out += fmt::format("{} steps: wall time median {}, {} to {} (every step: --json or --report)\n", count,
                       human_seconds(Seconds(quantile(walls, 0.5))), human_seconds(Seconds(quantile(walls, 0.0))),
                       human_seconds(Seconds(quantile(walls, 1.0))));
  }
  std::vector<std::vector<std::string>> workers{
      {"worker", "actions", "compute", "waiting", "overhead/action", "(cpu time)", "weight versions"}};
  for (size_t w = 0; w < report.workers.size(); ++w) {
    const exec::WorkerStats& st = report.workers[w];
    const double actions = std::max<double>(1.0, static_cast<double>(st.actions));
    workers.push_back({fmt::format("w{}", w), std::to_string(st.actions), human_seconds(st.compute),
                       human_seconds(st.waiting), human_seconds(st.overhead() / actions),
                       human_seconds(st.overhead_cpu() / actions), std::to_string(st.peak_weight_versions)});
  }
  return out + "\n" + render_table(workers);
}

nlohmann::json seconds_list(const std::vector<Seconds>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (Seconds value : values) out.push_back(value.value);
  return out;
}

nlohmann::json report_json(const exec::RunReport& report, const Plan& plan) {
  nlohmann::json steps = nlohmann::json::array();
  for (const exec::StepReport& step : report.steps)
    steps.push_back({{"wall_s", step.wall.value}, {"mean_loss", step.mean_loss}});
  nlohmann::json workers = nlohmann::json::array();
  for (const exec::WorkerStats& st : report.workers) {
    workers.push_back({{"actions", st.actions},
                       {"loop_s", st.loop.value},
                       {"compute_s", st.compute.value},
                       {"step_compute_s", seconds_list(st.step_compute)},
                       {"waiting_s", st.waiting.value},
                       {"overhead_s", st.overhead().value},
                       {"loop_cpu_s", st.loop_cpu.value},
                       {"compute_cpu_s", st.compute_cpu.value},
                       {"overhead_cpu_s", st.overhead_cpu().value},
                       {"peak_weight_versions", st.peak_weight_versions},
                       {"threads", st.threads}});
  }
  return {{"plan", plan_to_json(plan)}, {"device", report.device}, {"steps", steps}, {"workers", workers}};
}

void write_outputs(const RunArgs& args, const exec::RunReport& report, const Plan& plan) {
  if (!args.trace.empty()) write_file_atomic(args.trace, trace_to_chrome_json(report.trace));
  if (!args.gantt.empty()) {
    GanttOptions gantt;
    gantt.title = fmt::format("{}: {} ({} stages, {} microbatches), measured", plan.model, schedule_name(plan.schedule),
                              plan.num_stages(), plan.batches);
    write_file_atomic(args.gantt, trace_to_svg(report.trace, gantt));
  }
  if (!args.save_weights.empty())
    write_file_atomic(args.save_weights, exec::weights_to_json(report.weights).dump() + "\n");
  if (!args.report.empty()) write_file_atomic(args.report, report_json(report, plan).dump(2) + "\n");
  std::fputs(
      args.json ? (report_json(report, plan).dump(2) + "\n").c_str() : report_text(report, plan, args.backend).c_str(),
      stdout);
}

int fail(const std::string& message) {
  std::fprintf(stderr, "baton: %s\n", message.c_str());
  return 1;
}

#endif  // BATON_HAVE_EXEC

int run_command(const RunArgs& args);

}  // namespace

void add_run_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Execute a plan with LibTorch and record a measured trace");
  cmd->footer(
      "Execute a plan's Program with the LibTorch executor on synthetic data and measure it: time per\n"
      "step, loss, a measured trace with the simulator's action ids (compare it with `baton compare`).\n"
      "A run that takes more than 2 s reports its progress on stderr every 2 s (BATON_PROGRESS_EVERY=S:\n"
      "every S s); the text shows up to 12 steps (else the first and last 5 and the wall times' median\n"
      "and range), --json every one.\n\n"
      "Examples:\n"
      "  baton run --plan plan.json --model mlp --backend threads --steps 5 --trace out/measured.json\n"
      "  baton profile measure --model mlp --microbatch-size 32 -o out/mlp.json\n"
      "  baton run --profile out/mlp.json --topology topologies/cpu_2core.json --stages 0-3,3-6 \\\n"
      "      --schedule 1f1b --model mlp --backend gloo --nproc 2\n"
      "With --backend gloo and RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set (torchrun, Slurm, mpirun),\n"
      "the process runs as that one rank. A rank that dies or goes silent ends the run within --timeout,\n"
      "with a message naming it. Ranks started here (--nproc) each run on their own share of this\n"
      "machine's CPUs when every rank can have one (BATON_PIN_RANKS=0: left to the scheduler); their\n"
      "Gloo I/O threads run under SCHED_IDLE, or in the normal class when other work keeps half a CPU or\n"
      "more busy as they start (/proc/stat; BATON_GLOO_IO=idle|normal decides instead).\n"
      "Checkpoints: add --checkpoint-dir out/ckpt --checkpoint-every 2 to save every stage's state every 2\n"
      "steps; after a failure, the same command with --resume continues from the latest complete one and\n"
      "ends with the weights of an uninterrupted run.");
  cmd->add_option("--plan", args->plan, "a plan file (baton.plan.v1)");
  cmd->add_option("--profile", args->profile, "with --stages: the layer profile");
  cmd->add_option("--topology", args->topology,
                  "the cluster: with --stages, where the stages go; with --plan, checked to have its devices");
  cmd->add_option("--stages", args->stages, "stages as half-open layer ranges with replicas, e.g. 0-3,3-6x2");
  cmd->add_option("--schedule", args->schedule, fmt::format("{} (default: the plan's)", schedule_names()));
  cmd->add_option("--virtual-stages", args->virtual_stages,
                  "interleaved-1f1b: chunks (listed stages) per worker, >= 2 (default: the plan's, else 2)")
      ->check(at_least(1));
  cmd->add_option("--model", args->model, "mlp | vgg-mini | gpt-mini (default: the plan's)");
  cmd->add_option("--backend", args->backend,
                  "threads (default) | gloo (a CPU process per worker) | nccl (a process per worker on GPU "
                  "LOCAL_RANK, activations, gradients and all-reduces over NCCL)")
      ->check(CLI::IsMember({"threads", "gloo", "nccl"}));
  cmd->add_option("--device", args->device,
                  "threads backend: cpu (default), or cuda / cuda:N: every worker on that GPU, each on its own CUDA "
                  "stream; on a GPU actions are timed with CUDA events (a build against a LibTorch with CUDA)")
      ->check(check_device_name);
  cmd->add_option("--nproc", args->nproc,
                  "gloo, nccl: ranks to start here (default and only value: the plan's workers)");
  cmd->add_option("--steps", args->steps, "iterations: times the whole Program runs (default 3)");
  cmd->add_option("--microbatches", args->microbatches, "microbatches per iteration (default: the plan's, else 8)")
      ->check(at_least(1));
  cmd->add_option("--microbatch-size", args->microbatch_size, "samples per microbatch")
      ->check(at_least(1))
      ->check(at_most(kMaxMicrobatchSize));
  cmd->add_flag("--vertical-sync", args->vertical_sync, "pipedream: every stage uses stage 0's weight version");
  cmd->add_flag("--no-weight-stashing", args->no_stashing, "pipedream: backward with the live weights (a study mode)");
  cmd->add_option("--lr", args->learning_rate, "SGD learning rate, > 0 (default 0.05)")->check(more_than(0));
  cmd->add_option("--seed", args->seed, "seed of weights and data (default 1)");
  cmd->add_option("--threads", args->threads, "LibTorch intra-op threads per process (1 to 1024, default 1)")
      ->check(in_range(1, 1024));
  cmd->add_option("--timeout", args->timeout_s,
                  "seconds any single wait may take; a silent rank is noticed after this long (default 30)")
      ->check(more_than(0));
  cmd->add_option("--checkpoint-dir", args->checkpoint_dir, "folder of the run's checkpoints (step-<n>/)");
  cmd->add_option("--checkpoint-every", args->checkpoint_every, "write a checkpoint every N completed steps")
      ->check(at_least(1));
  cmd->add_flag("--resume", args->resume,
                "continue from the latest complete checkpoint in --checkpoint-dir (same model, plan and seed)");
  cmd->add_option("--trace", args->trace, "write the last step's measured trace (Chrome trace JSON)");
  cmd->add_option("--gantt", args->gantt, "write the last step's Gantt chart (SVG)");
  cmd->add_option("--save-weights", args->save_weights, "write the final weights (JSON)");
  cmd->add_option("--report", args->report, "also write the report as JSON to this file (what --json prints)");
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->callback([args, &result] { result.exit_code = run_command(*args); });
}

namespace {

#if BATON_HAVE_EXEC

// Starts the ranks, after refusing a resume that no checkpoint allows (before
// any rank starts). The launcher's deadline follows from --timeout: ranks
// notice a dead or silent peer within one timeout themselves; the deadline
// only ends a run whose ranks are all stuck, allowing the rendezvous and
// every step one timeout each.
int launch(const RunArgs& args, const Plan& plan, const exec::TrainOptions& options) {
  if (plan.num_workers() > exec::kMaxLocalRanks) {
    throw UsageError(fmt::format(
        "run: the plan has {} workers, and at most {} ranks start on one machine; start them with torchrun, Slurm "
        "or mpirun (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in each rank's environment)",
        plan.num_workers(), exec::kMaxLocalRanks));
  }
  const int nproc = args.nproc > 0 ? args.nproc : plan.num_workers();
  if (nproc != plan.num_workers()) {
    throw UsageError(
        fmt::format("run: --nproc {} but the plan has {} workers; the {} backend runs one rank "
                    "per worker",
                    nproc, plan.num_workers(), args.backend));
  }
  if (options.resume) {
    if (auto checkpoint = exec::resumable_checkpoint(plan, options); !checkpoint)
      return fail("run: " + checkpoint.error().message);
  }
  const Status launched = launch_self_ranks(own_arguments(), nproc, Seconds(args.timeout_s * (args.steps + 2)));
  return launched ? 0 : fail("run: " + launched.error().message);
}

int run_command(const RunArgs& args) {
  const auto [plan, model] = resolve_plan(args);
  exec::TrainOptions options = train_options(args, model.name);
  if (args.backend == "gloo" && args.device != "cpu") {
    throw UsageError(fmt::format(
        "run: --device {}: the gloo backend computes on the CPU; GPUs run with --backend threads (every worker "
        "on one GPU) or nccl (a GPU per rank)",
        args.device));
  }
  if (args.backend == "nccl") {
    if (args.device != "cpu" && args.device != "cuda")
      throw UsageError(fmt::format("run: --device {}: with --backend nccl rank r runs on GPU LOCAL_RANK", args.device));
    options.device = "cuda";
  }
  if (args.backend == "threads") {
    if (plan.num_workers() > exec::kMaxLocalRanks) {
      throw UsageError(fmt::format("run: the plan has {} workers; the threads backend runs at most {} in one process",
                                   plan.num_workers(), exec::kMaxLocalRanks));
    }
    auto report = exec::run_threads(plan, options);
    if (!report) return fail("run: " + report.error().message);
    write_outputs(args, *report, plan);
    return 0;
  }
  const std::optional<exec::RankEnv> env = rank_env_from_environment();
  if (!env) return launch(args, plan, options);
  if (env->world_size != plan.num_workers()) {
    throw UsageError(
        fmt::format("run: WORLD_SIZE is {} but the plan has {} workers; the {} backend runs one "
                    "rank per worker",
                    env->world_size, plan.num_workers(), args.backend));
  }
  auto report = exec::run_gloo_rank(plan, options, *env);
  if (!report) return fail(fmt::format("run: rank {}: {}", env->rank, report.error().message));
  if (env->rank == 0) write_outputs(args, *report, plan);
  return 0;
}

#else

int run_command(const RunArgs&) { hand_to_executor("run"); }

#endif  // BATON_HAVE_EXEC

}  // namespace

}  // namespace baton::cli
