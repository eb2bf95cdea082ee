// `baton run`: execute a plan's Program with the LibTorch executor and measure it.
//
// Backends: `threads` (every worker on a thread of this process) and `gloo`
// (one process per worker through c10d Gloo). With `gloo`, a process that
// finds RANK and WORLD_SIZE in its environment is one rank (as started by
// torchrun, Slurm or mpirun, or by this command); otherwise it is the local
// launcher: it checks the plan, then starts --nproc copies of itself on
// 127.0.0.1 and waits for them. Rank 0 prints the report and writes outputs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "tools/cli_support.h"
#include "tools/commands.h"

#if BATON_HAVE_EXEC
#include "exec/executor.h"
#include "exec/launcher.h"
#include "sim/trace_writers.h"
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
  int nproc = 0;
  int steps = 3;
  int microbatches = 0;
  int microbatch_size = 0;
  bool vertical_sync = false;
  bool no_stashing = false;
  double learning_rate = 0.05;
  uint64_t seed = 1;
  int threads = 1;
  double timeout_s = 120.0;
  std::string trace;
  std::string gantt;
  std::string save_weights;
  bool json = false;
};

#if BATON_HAVE_EXEC

// dp runs the whole model as one stage on as many workers as the plan has.
void apply_schedule(Plan& plan, const std::string& schedule, int num_layers) {
  if (schedule.empty()) return;
  plan.schedule = take(parse_schedule(schedule));
  if (plan.schedule == Schedule::kDataParallel && plan.num_stages() > 1) {
    const int workers = plan.num_workers();
    plan.stages = {StagePlan{LayerRange{0, num_layers}, workers, {}}};
    for (int d = 0; d < workers; ++d) plan.stages[0].devices.push_back(d);
  }
}

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

Plan plan_from_stages(const RunArgs& args, Profile& profile) {
  if (args.profile.empty() || args.topology.empty())
    throw UsageError("run: --stages needs --profile and --topology (or give --plan)");
  profile = load_profile_file(args.profile);
  const Topology topology = load_topology_file(args.topology);
  Plan plan;
  plan.stages = take(parse_stages(args.stages));
  plan.microbatches = 8;
  plan.microbatch_size = profile.microbatch_size;
  plan.model = profile.model;
  take(assign_devices(plan, topology));
  take(check_plan(plan, profile, topology, "--stages"));
  return plan;
}

// The plan to run and the model to run it on; every check that needs no torch.
std::pair<Plan, exec::ModelInfo> resolve_plan(const RunArgs& args) {
  if (args.plan.empty() == args.stages.empty()) throw UsageError("run: give exactly one of --plan FILE or --stages RANGES");
  Profile profile;
  Plan plan = args.plan.empty() ? plan_from_stages(args, profile) : load_plan_file(args.plan);
  const std::string model_name = !args.model.empty() ? args.model : plan.model;
  if (model_name.empty()) throw UsageError("run: name the model with --model (the plan does not)");
  const exec::ModelInfo model = take(exec::model_info(model_name));
  if (!args.profile.empty() && !args.stages.empty()) check_profile_matches(profile, model, args.profile);
  plan.model = model.name;
  apply_schedule(plan, args.schedule, static_cast<int>(model.layer_names.size()));
  if (args.microbatches > 0) plan.microbatches = args.microbatches;
  if (args.microbatch_size > 0) plan.microbatch_size = args.microbatch_size;
  if (args.vertical_sync) plan.vertical_sync = true;
  take(exec::check_plan_for_model(plan, model, args.plan.empty() ? "--stages" : args.plan));
  return {plan, model};
}

exec::TrainOptions train_options(const RunArgs& args, const std::string& model) {
  if (args.steps < 1) throw UsageError("run: --steps must be >= 1");
  exec::TrainOptions options;
  options.model = model;
  options.steps = args.steps;
  options.learning_rate = args.learning_rate;
  options.seed = args.seed;
  options.weight_stashing = !args.no_stashing;
  options.intra_op_threads = args.threads;
  options.timeout = Seconds(args.timeout_s);
  return options;
}

std::string report_text(const exec::RunReport& report, const Plan& plan, const std::string& backend) {
  std::string out = fmt::format("run: {} with {} on {} worker(s), stages {}, {} microbatches of {}, backend {}\n",
                                plan.model, schedule_name(plan.schedule), plan.num_workers(),
                                stages_to_string(plan.stages), plan.microbatches, plan.microbatch_size, backend);
  std::vector<std::vector<std::string>> steps{{"step", "wall time", "mean loss"}};
  for (size_t s = 0; s < report.steps.size(); ++s) {
    steps.push_back({std::to_string(s), human_seconds(report.steps[s].wall), fmt::format("{:.6f}", report.steps[s].mean_loss)});
  }
  out += "\n" + render_table(steps);
  std::vector<std::vector<std::string>> workers{{"worker", "actions", "compute", "waiting", "overhead/action",
                                                 "(cpu time)", "weight versions"}};
  for (size_t w = 0; w < report.workers.size(); ++w) {
    const exec::WorkerStats& st = report.workers[w];
    const double actions = std::max<double>(1.0, static_cast<double>(st.actions));
    workers.push_back({fmt::format("w{}", w), std::to_string(st.actions), human_seconds(st.compute),
                       human_seconds(st.waiting), human_seconds(st.overhead() / actions),
                       human_seconds(st.overhead_cpu() / actions), std::to_string(st.peak_weight_versions)});
  }
  return out + "\n" + render_table(workers);
}

nlohmann::json report_json(const exec::RunReport& report, const Plan& plan) {
  nlohmann::json steps = nlohmann::json::array();
  for (const exec::StepReport& step : report.steps) steps.push_back({{"wall_s", step.wall.value}, {"mean_loss", step.mean_loss}});
  nlohmann::json workers = nlohmann::json::array();
  for (const exec::WorkerStats& st : report.workers) {
    workers.push_back({{"actions", st.actions}, {"loop_s", st.loop.value}, {"compute_s", st.compute.value},
                       {"waiting_s", st.waiting.value}, {"overhead_s", st.overhead().value},
                       {"loop_cpu_s", st.loop_cpu.value}, {"compute_cpu_s", st.compute_cpu.value},
                       {"overhead_cpu_s", st.overhead_cpu().value},
                       {"peak_weight_versions", st.peak_weight_versions}});
  }
  return {{"plan", plan_to_json(plan)}, {"steps", steps}, {"workers", workers}};
}

void write_outputs(const RunArgs& args, const exec::RunReport& report, const Plan& plan) {
  if (!args.trace.empty()) write_file_atomic(args.trace, trace_to_chrome_json(report.trace));
  if (!args.gantt.empty()) {
    GanttOptions gantt;
    gantt.title = fmt::format("{}: {} ({} stages, {} microbatches), measured", plan.model,
                              schedule_name(plan.schedule), plan.num_stages(), plan.microbatches);
    write_file_atomic(args.gantt, trace_to_svg(report.trace, gantt));
  }
  if (!args.save_weights.empty()) write_file_atomic(args.save_weights, exec::weights_to_json(report.weights).dump() + "\n");
  std::fputs(args.json ? (report_json(report, plan).dump(2) + "\n").c_str()
                       : report_text(report, plan, args.backend).c_str(),
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
      "step, loss, a measured trace with the simulator's action ids (compare it with `baton compare`).\n\n"
      "Examples:\n"
      "  baton run --plan plan.json --model mlp --backend threads --steps 5 --trace out/measured.json\n"
      "  baton run --profile traces/mlp.json --topology topologies/cpu_2core.json --stages 0-3,3-6 \\\n"
      "      --schedule 1f1b --model mlp --backend gloo --nproc 2\n"
      "With --backend gloo and RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set (torchrun, Slurm, mpirun),\n"
      "the process runs as that one rank.");
  cmd->add_option("--plan", args->plan, "a plan file (baton.plan.v1)");
  cmd->add_option("--profile", args->profile, "with --stages: the layer profile");
  cmd->add_option("--topology", args->topology, "with --stages: the cluster");
  cmd->add_option("--stages", args->stages, "stages as half-open layer ranges with replicas, e.g. 0-3,3-6x2");
  cmd->add_option("--schedule", args->schedule, "pipedream | 1f1b | gpipe | dp (default: the plan's)");
  cmd->add_option("--model", args->model, "mlp | vgg-mini | gpt-mini (default: the plan's)");
  cmd->add_option("--backend", args->backend, "threads (default) | gloo")->check(CLI::IsMember({"threads", "gloo"}));
  cmd->add_option("--nproc", args->nproc, "gloo: ranks to start here (default and only value: the plan's workers)");
  cmd->add_option("--steps", args->steps, "iterations: times the whole Program runs (default 3)");
  cmd->add_option("--microbatches", args->microbatches, "microbatches per iteration (default: the plan's, else 8)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--microbatch-size", args->microbatch_size, "samples per microbatch")->check(CLI::PositiveNumber);
  cmd->add_flag("--vertical-sync", args->vertical_sync, "pipedream: every stage uses stage 0's weight version");
  cmd->add_flag("--no-weight-stashing", args->no_stashing, "pipedream: backward with the live weights (a study mode)");
  cmd->add_option("--lr", args->learning_rate, "SGD learning rate (default 0.05)");
  cmd->add_option("--seed", args->seed, "seed of weights and data (default 1)");
  cmd->add_option("--threads", args->threads, "LibTorch intra-op threads per process (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--timeout", args->timeout_s, "seconds any single wait may take (default 120)")->check(CLI::PositiveNumber);
  cmd->add_option("--trace", args->trace, "write the last step's measured trace (Chrome trace JSON)");
  cmd->add_option("--gantt", args->gantt, "write the last step's Gantt chart (SVG)");
  cmd->add_option("--save-weights", args->save_weights, "write the final weights (JSON)");
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->callback([args, &result] { result.exit_code = run_command(*args); });
}

namespace {

#if BATON_HAVE_EXEC

std::optional<exec::RankEnv> rank_env_from_environment() {
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  if (rank == nullptr || world == nullptr) return std::nullopt;
  const auto number = [](const char* name, int fallback) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return fallback;
    char* end = nullptr;
    const long parsed = std::strtol(value, &end, 10);
    if (*end != '\0') throw UsageError(fmt::format("environment: {}={} is not a number", name, value));
    return static_cast<int>(parsed);
  };
  exec::RankEnv env;
  env.rank = number("RANK", 0);
  env.world_size = number("WORLD_SIZE", 1);
  env.local_rank = number("LOCAL_RANK", env.rank);
  env.master_port = number("MASTER_PORT", 29500);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') env.master_addr = addr;
  return env;
}

// argv of this process, without argv[0] (to start the ranks with the same command).
std::vector<std::string> own_arguments() {
  const std::string text = read_file("/proc/self/cmdline");
  std::vector<std::string> args;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\0', begin);
    args.push_back(text.substr(begin, end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());
  return args;
}

int launch(const RunArgs& args, const Plan& plan) {
  const int nproc = args.nproc > 0 ? args.nproc : plan.num_workers();
  if (nproc != plan.num_workers()) {
    throw UsageError(fmt::format("run: --nproc {} but the plan has {} workers; the gloo backend runs one rank "
                                 "per worker",
                                 nproc, plan.num_workers()));
  }
  exec::LaunchSpec spec;
  spec.executable = "/proc/self/exe";
  spec.arguments = own_arguments();
  spec.nproc = nproc;
  spec.timeout = Seconds(args.timeout_s * 2 + 60.0 * args.steps);
  auto outcome = exec::launch_local_ranks(spec);
  if (!outcome) return fail("run: " + outcome.error().message);
  if (outcome->ok()) return 0;
  std::string codes;
  for (size_t r = 0; r < outcome->exit_codes.size(); ++r) codes += fmt::format(" rank {}: {};", r, outcome->exit_codes[r]);
  return fail("run: a rank failed (exit codes:" + codes + " -1 = stopped by the launcher)");
}

int run_command(const RunArgs& args) {
  const auto [plan, model] = resolve_plan(args);
  const exec::TrainOptions options = train_options(args, model.name);
  if (args.backend == "threads") {
    auto report = exec::run_threads(plan, options);
    if (!report) return fail("run: " + report.error().message);
    write_outputs(args, *report, plan);
    return 0;
  }
  const std::optional<exec::RankEnv> env = rank_env_from_environment();
  if (!env) return launch(args, plan);
  if (env->world_size != plan.num_workers()) {
    throw UsageError(fmt::format("run: WORLD_SIZE is {} but the plan has {} workers; the gloo backend runs one "
                                 "rank per worker",
                                 env->world_size, plan.num_workers()));
  }
  auto report = exec::run_gloo_rank(plan, options, *env);
  if (!report) return fail(fmt::format("run: rank {}: {}", env->rank, report.error().message));
  if (env->rank == 0) write_outputs(args, *report, plan);
  return 0;
}

#else

int run_command(const RunArgs&) {
  throw UsageError("run: this baton was built without LibTorch (the executor); rebuild with BATON_TORCH=ON");
}

#endif  // BATON_HAVE_EXEC

}  // namespace

}  // namespace baton::cli
