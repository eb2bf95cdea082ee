// `baton plan`: choose the split, replication, schedule and microbatch count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "exec/model_names.h"
#include "planner/pipedream_dp.h"
#include "planner/planner.h"
#include "sim/plan.h"
#include "sim/topology.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/megatron_plan.h"
#include "tools/megatron_training_flags.h"
#include "tools/plan_report.h"

namespace baton::cli {

namespace {

struct PlanArgs {
  std::string profile;
  std::string topology;
  std::string output;
  bool json = false;
  std::string cost_model = "baton";
  bool straight = false;
  double activation_compression = 0.0;
  double memory_limit_gib = 0.0;
  std::string schedule = "auto";
  std::string microbatches = "auto";
  int virtual_stages = 0;
  std::string optimizer = "adam";
  MegatronArgs megatron;
  std::string emit;
  int keep = 5;
  int gpus = 0;  // GPT: plan for this many of the topology's GPUs (0: all)
};

// PipeDream's optimizer plans its own schedule (pipedream) with its own
// minibatch count; a schedule, microbatch count or chunk count asked of it
// would be silently dropped.
void refuse_for_pipedream(const PlanArgs& args, const PlannerOptions& options) {
  if (options.schedule && *options.schedule != Schedule::kPipeDream)
    throw UsageError(fmt::format(
        "--schedule {} with --cost-model pipedream: PipeDream's optimizer plans the pipedream schedule only; "
        "use --cost-model baton (the default) for {}",
        args.schedule, args.schedule));
  if (options.microbatches > 0)
    throw UsageError("--microbatches with --cost-model pipedream: PipeDream's optimizer keeps its own minibatch count");
  if (args.virtual_stages > 0)
    throw UsageError("--virtual-stages with --cost-model pipedream: PipeDream's optimizer plans no interleaving");
}

PlannerOptions planner_options(const PlanArgs& args) {
  PlannerOptions options;
  options.cost_model = take(parse_cost_model(args.cost_model));
  options.straight = args.straight;
  options.activation_compression = args.activation_compression;
  if (args.memory_limit_gib > 0) options.memory_limit = Bytes::from_gib(args.memory_limit_gib);
  if (args.schedule != "auto") {
    auto schedule = parse_schedule(args.schedule);
    if (!schedule)
      throw UsageError(
          fmt::format("--schedule: expected auto or one of {}, got \"{}\"", schedule_names(), args.schedule));
    options.schedule = *schedule;
  }
  if (args.microbatches != "auto") {
    try {
      size_t used = 0;
      options.microbatches = std::stoi(args.microbatches, &used);
      if (used != args.microbatches.size() || options.microbatches < 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw UsageError(
          fmt::format("--microbatches: expected auto or a positive whole number, got \"{}\"", args.microbatches));
    }
  }
  options.optimizer = take(parse_optimizer(args.optimizer));
  if (options.cost_model == CostModel::kPipeDream) refuse_for_pipedream(args, options);
  if (args.virtual_stages > 0) {
    if (options.schedule && *options.schedule != Schedule::kInterleaved1F1B)
      throw UsageError("--virtual-stages applies to interleaved-1f1b (zbv and dualpipev run 2 chunks per device)");
    if (args.virtual_stages < 2)
      throw UsageError("--virtual-stages: interleaved-1f1b needs >= 2 chunks per device (1 is --schedule 1f1b)");
    options.virtual_stages = args.virtual_stages;
  }
  return options;
}

// interleaved-1f1b cuts p v chunks from the layers, with p >= 2 ranks per
// pipeline that divide the devices: a v the layers cannot give is refused
// here rather than reported as no split fitting the memory.
void check_virtual_stages(int virtual_stages, const Profile& profile, const Topology& topology) {
  if (virtual_stages == 0) return;
  int ranks = 2;
  while (ranks < topology.num_devices() && topology.num_devices() % ranks != 0) ++ranks;
  if (ranks * virtual_stages <= profile.num_layers()) return;
  throw UsageError(fmt::format(
      "--virtual-stages {}: interleaved-1f1b cuts p x {} chunks from the model's layers (p >= {} devices per "
      "pipeline), and the profile has {} layers: at most {} chunks per device",
      virtual_stages, virtual_stages, ranks, profile.num_layers(), profile.num_layers() / ranks));
}

void write_plan(const PlanArgs& args, const PlannerOutcome& outcome, const Profile& profile, const Topology& topology) {
  Plan plan = outcome.best.plan;
  plan.prediction = prediction_json(outcome);
  plan.made_for = plan_topology_of(topology);
  OutputFiles files{{args.output, plan_to_json(plan).dump(2) + "\n"}};
  bool reordered = false;
  for (size_t i = 0; i < outcome.layer_order.size(); ++i) reordered |= outcome.layer_order[i] != int(i);
  const std::string path = args.output + ".profile.json";
  if (reordered)
    files.emplace_back(path, profile_to_json(take(reorder_layers(profile, outcome.layer_order))).dump(2) + "\n");
  write_files_atomic(files);
  if (!reordered) return;
  std::fprintf(stderr,
               "baton: the plan's stages refer to a topological order of the DAG that differs from the "
               "profile's; wrote that order as %s\n",
               path.c_str());
}

// The options of the profile search that a GPT layout search has no use for:
// its layout flags pin the schedule (--num-layers-per-virtual-pipeline-stage,
// --enable-zero-bubble, ...) and the batch, and its optimizer is Adam.
void refuse_profile_options(const CLI::App& cmd) {
  std::vector<std::string> given;
  for (const char* flag : {"--cost-model", "--straight", "--activation-compression", "--schedule", "--microbatches",
                           "--optimizer", "--virtual-stages"})
    if (cmd.count(flag) > 0) given.push_back(flag);
  if (given.empty()) return;
  throw UsageError(
      fmt::format("plan: {} {} with --profile; with Megatron's flags the layout flags pin the schedule and the batch "
                  "(--num-layers-per-virtual-pipeline-stage, --enable-zero-bubble, --micro-batch-size, ...)",
                  fmt::join(given, ", "), given.size() == 1 ? "goes" : "go"));
}

int run_plan(const PlanArgs& args, const CLI::App& cmd) {
  if (args.megatron.given()) {
    if (!args.profile.empty()) throw UsageError("plan: a GPT model given by Megatron's flags replaces --profile");
    refuse_profile_options(cmd);
    return run_megatron_plan(
        args.megatron,
        MegatronPlanArgs{args.topology, args.json, args.emit, args.keep, args.output, args.gpus, args.memory_limit_gib},
        cmd);
  }
  if (cmd.count("--gpus") > 0) throw UsageError("plan: --gpus goes with a GPT model given by Megatron's flags");
  refuse_megatron_flags(cmd, "plan");
  if (args.profile.empty())
    throw UsageError("plan: give --profile, or a GPT model with Megatron's flags (--num-layers, --hidden-size, ...)");
  if (args.emit == "megatron")
    throw UsageError("plan: --emit megatron goes with a GPT model given by Megatron's flags");
  if (args.emit == "torchrun" && args.output.empty())
    throw UsageError("plan: --emit torchrun needs -o plan.json (the line runs `baton run --plan` on that file)");
  const Profile profile = load_profile_file(args.profile);
  if (args.emit == "torchrun" && !is_zoo_model(profile.model))
    throw UsageError(fmt::format(
        "plan: --emit torchrun prints a line that runs `baton run --plan`, whose executor runs the models of its "
        "zoo ({}); {} holds \"{}\", which it cannot run (plan and simulate it; run it with a framework of your own)",
        fmt::join(kZooModelNames, ", "), args.profile, profile.model));
  const Topology topology = load_topology_file(args.topology);
  PlannerOptions options = planner_options(args);
  check_virtual_stages(options.virtual_stages, profile, topology);
  check_planner_microbatches(options.microbatches, profile, "--microbatches");
  std::fprintf(stderr, "baton: planning %s (%d layers) on %s (%d devices)...\n", profile.model.c_str(),
               profile.num_layers(), topology.name.c_str(), topology.num_devices());
  // A line per schedule and microbatch count once planning has taken a second.
  const auto started = std::chrono::steady_clock::now();
  options.progress = [started](std::string_view searched, int done, int total) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (elapsed >= 1.0)
      std::fprintf(stderr, "baton: plan: %.*s searched and rated (%d of %d), %.1f s\n",
                   static_cast<int>(searched.size()), searched.data(), done, total, elapsed);
  };
  auto outcome = make_plan(profile, topology, options);
  if (!outcome) throw UsageError(outcome.error().message);
  if (!args.output.empty()) write_plan(args, *outcome, profile, topology);
  if (args.emit == "torchrun") {
    const std::string program = fmt::format("--no-python baton run --plan {} --backend gloo", args.output);
    std::fputs((torchrun_line(topology, outcome->best.plan.num_workers(), program) + "\n").c_str(), stdout);
    return 0;
  }
  const std::string text =
      args.json ? outcome_json(*outcome).dump(2) + "\n" : outcome_text(*outcome, profile, topology, options);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "Choose stages, replication, schedule and microbatches for a cluster");
  cmd->footer(
      "Searches the splits of the model into pipeline stages (contiguous layer ranges), the replication\n"
      "of each stage and, with --schedule auto, the schedule and microbatch count; every stage must\n"
      "fit the device memory (weights x versions held, gradients, optimizer state, stashed activations).\n"
      "Prints per stage the layers, replicas, devices, compute, communication and all-reduce time and\n"
      "memory, names the bottleneck, and compares with one device and with data parallelism.\n"
      "interleaved-1f1b, zbv and dualpipev (several chunks per device) are laid out apart: p devices\n"
      "per pipeline times r whole-pipeline replicas on the first p r devices, as many as the\n"
      "microbatches can feed (interleaved: p r divides them; V shapes: 2 p r at most), v chunks per\n"
      "device (interleaved: 2, 3, 4 or --virtual-stages; V shapes: 2), the layers split into p v\n"
      "chunks of the least largest chunk, of the most even compute per device, and of that with the\n"
      "links' transfers between devices counted, every layout rated by simulating it. A stage's pass\n"
      "is priced as the simulator prices it: one call (the profile's call_cost_ms); on a topology\n"
      "whose devices share one GPU (shared_compute) the workers on it take turns, or with level 0's\n"
      "shared_speedup S compute at once: a GPU is then valued at the longest of its work over S,\n"
      "what its workers issue (one host's launching) and its largest stage. Once planning has run a\n"
      "second, a line per schedule and microbatch count searched goes to standard error.\n\n"
      "Cost models:\n"
      "  baton      (default) placement-aware search rated with baton's model and the simulator\n"
      "  pipedream  PipeDream's hierarchical optimizer, same objective as its reference code\n\n"
      "Example:\n"
      "  baton plan --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json -o plan.json\n"
      "  baton simulate --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json \\\n"
      "      --plan plan.json --gantt out/plan.svg\n\n"
      "A GPT model in Megatron-LM's flags (no --profile) plans the whole layout: tensor, pipeline and data\n"
      "parallelism, micro-batch, interleaving, recomputation, sequence parallelism, the distributed\n"
      "optimizer, and with experts their parallelism and token dispatcher; a layout flag given pins its\n"
      "axis (--data-parallel-size d: any t x p x d up to the topology's GPUs; --gpus N: t x p x d = N).\n"
      "--overlap-grad-reduce, --overlap-param-gather, --tp-comm-overlap, --moe-shared-expert-overlap and\n"
      "--overlap-moe-expert-parallel-comm are not searched: given, each goes on every layout it applies to\n"
      "(--overlap-param-gather: with the distributed optimizer; --tp-comm-overlap: with sequence\n"
      "parallelism; the two MoE overlaps: with the alltoall dispatcher, the second with interleaving and\n"
      "ep >= 2) and into the emitted flags; those not given that apply to the chosen layout are simulated\n"
      "on it and listed after its flags (\"overlaps not asked for\"; in --json, overlaps_not_asked; with\n"
      "--emit, the faster ones on stderr). Every reported time is simulated; --emit megatron\n"
      "prints the chosen layout as Megatron-LM flags, --emit torchrun the torchrun line for Megatron-LM's\n"
      "pretrain_gpt.py, and -o plan.json keeps the plan (model, layout, schedule, the topology it was made\n"
      "for) for `baton simulate --plan plan.json --topology ...`, which refuses it on another topology.\n"
      "--memory-limit-gib applies to both searches; --cost-model, --straight, --activation-compression,\n"
      "--schedule, --microbatches, --optimizer and --virtual-stages only to --profile (refused here).\n"
      "Example:\n"
      "  baton plan --topology topologies/h100_32x8.json --num-layers 96 --hidden-size 12288 \\\n"
      "      --num-attention-heads 96 --seq-length 2048 --global-batch-size 1536 --bf16");
  add_profile_option(*cmd, args->profile, args->megatron.not_modelled, "layer profile (baton.profile.v1 JSON)");
  cmd->add_option("--topology", args->topology, "cluster (baton.topology.v1 JSON)")->required();
  cmd->add_option("-o,--output", args->output, "write the chosen plan (baton.plan.v1 JSON)");
  cmd->add_flag("--json", args->json, "print the result as JSON");
  cmd->add_option("--cost-model", args->cost_model,
                  "baton (default) or pipedream (plans the pipedream schedule only: refuses --schedule, "
                  "--microbatches and --virtual-stages)");
  cmd->add_flag("--straight", args->straight, "no stage replication");
  cmd->add_option("--activation-compression", args->activation_compression,
                  "R >= 1: activations and gradients cross cuts compressed R times (1: as they are)")
      ->check(at_least(1));
  cmd->add_option("--memory-limit-gib", args->memory_limit_gib,
                  "memory per device (default: the topology's device memory)")
      ->check(above_and_at_most(0, kMaxDeviceMemoryGib));
  cmd->add_option(
      "--schedule", args->schedule,
      fmt::format("auto (default: every schedule but dp, which is weighed on its own), {}", schedule_names()));
  cmd->add_option("--microbatches", args->microbatches,
                  "auto (default: tries 8, 16, 32, 64) or N microbatches per iteration (flush schedules)");
  cmd->add_option("--optimizer", args->optimizer, "sgd | momentum | adam: optimizer state in memory (default adam)");
  cmd->add_option("--virtual-stages", args->virtual_stages,
                  "interleaved-1f1b: chunks per device (default: tries 2, 3 and 4)")
      ->check(at_least(1));
  add_megatron_flags(*cmd, args->megatron);
  cmd->add_option("--emit", args->emit,
                  "megatron: the chosen layout as Megatron-LM flags; torchrun: the line that launches it "
                  "(Megatron-LM's pretrain_gpt.py for a GPT model, `baton run --plan` on -o's file for a profile)")
      ->check(CLI::IsMember({"megatron", "torchrun"}));
  cmd->add_option("--keep", args->keep, "GPT: how many of the best layouts to report (default 5)")->check(at_least(1));
  cmd->add_option("--gpus", args->gpus,
                  "GPT: lay the model out on this many of the topology's GPUs, the first ones (default: all; "
                  "t x p x d must equal it, d divide the batch, p split the layers)")
      ->check(at_least(1));
  cmd->callback([args, cmd, &result] { result.exit_code = run_plan(*args, *cmd); });
}

}  // namespace baton::cli
