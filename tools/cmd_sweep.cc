// `baton sweep`: what-if studies over bandwidth, servers, devices, memory,
// microbatches and schedules for a profile, or over Megatron layouts and
// clusters for a GPT model, simulated (or planned) on all cores; shards of a
// sweep for array jobs, and `sweep merge` to join them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "planner/gpt_sweep.h"
#include "planner/sweep.h"
#include "planner/sweep_chart.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/megatron_flags.h"
#include "tools/megatron_training_flags.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

struct SweepArgs {
  std::string profile;
  std::string topology;
  std::vector<std::string> vary;
  std::string schedules = "pipedream,1f1b,gpipe,dp";
  int microbatches = 64;
  std::string split = "plan";
  std::string stages;
  int threads = 0;
  std::string csv;
  std::string chart;
  bool quiet = false;
  std::string shard;  // "", "K/N", "slurm"
  bool plan = false;  // GPT: plan each point
  MegatronArgs megatron;
};

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string csv;
  std::string chart;
};

// "NAME=V1,V2,...": the axis' name and its values' texts.
GptSweepAxis split_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError(fmt::format("--vary: expected NAME=V1,V2,..., got \"{}\"", text));
  GptSweepAxis axis{text.substr(0, eq), {}};
  const std::string rest = text.substr(eq + 1);
  for (size_t begin = 0;;) {
    const size_t comma = rest.find(',', begin);
    axis.values.push_back(rest.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return axis;
}

// A profile sweep's axis: numbers only.
SweepAxis parse_axis(const std::string& text) {
  const GptSweepAxis split = split_axis(text);
  SweepAxis axis{split.name, {}};
  for (const std::string& item : split.values) {
    const std::optional<double> value = parse_number(item);
    if (!value) throw UsageError(fmt::format("--vary {}: \"{}\" is not a number", axis.name, item));
    axis.values.push_back(*value);
  }
  return axis;
}

void configure_split(const SweepArgs& args, SweepSpec& spec) {
  if (!args.stages.empty()) {
    spec.split = SplitStrategy::kFixed;
    spec.fixed_stages = take(parse_stages(args.stages));
  } else if (args.split == "plan") {
    spec.split = SplitStrategy::kPlan;
  } else if (args.split == "balanced") {
    spec.split = SplitStrategy::kBalanced;  // SweepSpec's balanced_stages
  } else if (args.split.rfind("balanced:", 0) == 0) {
    spec.split = SplitStrategy::kBalanced;
    const std::string count = args.split.substr(9);
    size_t used = 0;
    try {
      spec.balanced_stages = std::stoi(count, &used);
    } catch (const std::exception&) {
      spec.balanced_stages = 0;
    }
    if (used != count.size() || spec.balanced_stages < 1)
      throw UsageError(fmt::format("--split: balanced:S needs a whole stage count S >= 1, got \"{}\"", args.split));
  } else {
    throw UsageError(fmt::format("--split: expected plan, balanced or balanced:S, got \"{}\"", args.split));
  }
}

// balanced:S given: S stages need S layers. (A point with fewer than S
// devices runs as many stages as it has devices, and its rows say so.)
void check_balanced_stages(const SweepSpec& spec, const Profile& profile) {
  if (spec.balanced_stages > profile.num_layers())
    throw UsageError(fmt::format("--split balanced:{}: {} stages need as many layers, and the profile has {}",
                                 spec.balanced_stages, spec.balanced_stages, profile.num_layers()));
}

std::string split_name(const SweepSpec& spec) {
  switch (spec.split) {
    case SplitStrategy::kPlan: return "planned per point";
    case SplitStrategy::kBalanced: return fmt::format("up to {} balanced stages", spec.balanced_stages);
    case SplitStrategy::kFixed: return "fixed stages";
  }
  return "";
}

// The columns a terminal shows of a table: the axes, then `shown`.
std::string summary(const SweepTable& table, const std::vector<std::string>& shown, size_t limit) {
  const std::vector<int> axes = table.axis_columns();
  std::vector<int> columns = axes;
  for (const std::string& name : shown) {
    // A layout column an axis already shows (tensor_model_parallel_size, the
    // axis tensor-model-parallel-size) is left out; every other one is shown.
    std::string as_axis = name;
    std::replace(as_axis.begin(), as_axis.end(), '_', '-');
    const bool axis_shows_it = std::find(axes.begin(), axes.end(), table.column(as_axis)) != axes.end();
    if (table.column(name) >= 0 && !axis_shows_it) columns.push_back(table.column(name));
  }
  std::vector<std::vector<std::string>> rows{{}};
  for (int c : columns) rows[0].push_back(table.header[c]);
  const int error = table.column("error");
  for (size_t i = 0; i < table.rows.size() && i < limit; ++i) {
    const auto& row = table.rows[i];
    std::vector<std::string> line;
    for (int c : columns) line.push_back(row[c].substr(0, 32));
    if (!row[error].empty()) line.back() = "error: " + row[error].substr(0, 60);
    rows.push_back(line);
  }
  std::string out = render_table(rows);
  if (table.rows.size() > limit) out += fmt::format("... {} more points in the CSV\n", table.rows.size() - limit);
  return out;
}

std::function<void(size_t, size_t)> progress_bar(bool quiet, std::chrono::steady_clock::time_point started) {
  return [quiet, started](size_t done, size_t total) {
    if (quiet) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const int filled = total ? static_cast<int>(30 * done / total) : 30;
    std::fprintf(stderr, "\r[%s%s] %zu/%zu points, %.0f/s ", std::string(filled, '#').c_str(),
                 std::string(30 - filled, ' ').c_str(), done, total, seconds > 0 ? done / seconds : 0.0);
  };
}

Shard shard_of(const SweepArgs& args) {
  if (args.shard.empty()) return Shard{};
  if (!args.chart.empty())
    throw UsageError("--chart with --shard: a shard holds part of the grid; chart the merged CSV (baton sweep merge)");
  if (args.csv.empty()) throw UsageError("--shard needs --csv (the shard's CSV, for baton sweep merge)");
  return take(parse_shard(args.shard, [](const char* name) { return std::getenv(name); }));
}

// Writes the CSV and the chart (the chart drawn first, so a chart that
// cannot be drawn writes nothing).
void write_table(const std::string& csv_path, const std::string& chart_path, const SweepTable& table) {
  OutputFiles files;
  if (!csv_path.empty()) files.emplace_back(csv_path, sweep_csv(table));
  if (!chart_path.empty()) files.emplace_back(chart_path, take(sweep_chart_svg(table)));
  write_files_atomic(files);
}

// A whole grid of which no point could be computed was asked wrongly (a flag
// every point shares: --microbatches beyond what any split simulates, a
// schedule the split cannot run): refused, nothing written. A shard's points
// may all fail where others do not, and its CSV is part of the merge.
void check_some_point_computed(const SweepArgs& args, const SweepTable& table) {
  const int error = table.column("error");
  if (!args.shard.empty() || error < 0 || table.rows.empty()) return;
  for (const auto& row : table.rows)
    if (row[static_cast<size_t>(error)].empty()) return;
  throw UsageError(fmt::format("sweep: no point of the {} could be computed; the first: {}", table.rows.size(),
                               table.rows.front()[static_cast<size_t>(error)]));
}

// check_some_point_computed, write_table, then the summary of the points.
void write_outputs(const SweepArgs& args, const SweepTable& table, const std::vector<std::string>& shown) {
  check_some_point_computed(args, table);
  write_table(args.csv, args.chart, table);
  std::fputs(summary(table, shown, 60).c_str(), stdout);
}

void report_speed(const SweepArgs& args, size_t points, double seconds, const std::string& how, int threads) {
  if (args.quiet) return;
  std::fprintf(stderr, "\nbaton: %zu configurations (%s) in %.2f s (%.0f per second, %d threads)\n", points,
               how.c_str(), seconds, double(points) / std::max(seconds, 1e-9), threads);
}

int threads_of(const SweepArgs& args) {
  return args.threads > 0 ? args.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int run_profile_sweep(const SweepArgs& args) {
  if (args.profile.empty())
    throw UsageError("sweep: give --profile (a layer profile) or a GPT model (--num-layers, --hidden-size, ...)");
  if (args.plan) throw UsageError("--plan: profile sweeps choose the split with --split; --plan is for GPT models");
  const Profile profile = load_profile_file(args.profile);
  const Topology topology = load_topology_file(args.topology);
  SweepSpec spec;
  for (const std::string& text : args.vary) spec.axes.push_back(parse_axis(text));
  spec.schedules = parse_schedule_list(args.schedules);
  spec.microbatches = args.microbatches;
  configure_split(args, spec);
  if (args.split.starts_with("balanced:")) check_balanced_stages(spec, profile);
  spec.threads = threads_of(args);
  spec.shard = shard_of(args);
  const auto started = std::chrono::steady_clock::now();
  auto points = run_sweep(profile, topology, spec, progress_bar(args.quiet, started));
  if (!points) throw UsageError(points.error().message);
  report_speed(args, points->size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
               split_name(spec) + ", simulated", spec.threads);
  write_outputs(
      args, profile_sweep_table(*points, spec, profile.model, topology, split_name(spec)),
      {"schedule", "devices", "stages", "throughput_samples_per_s", "bubble_fraction", "peak_memory_bytes", "fits"});
  return 0;
}

int run_gpt_sweep_command(const SweepArgs& args, const CLI::App& cmd) {
  // A lone --profile is Megatron's profiler switch (add_profile_option); a path is baton's.
  if (!args.profile.empty())
    throw UsageError("--profile: not for a GPT model (its layout flags and --vary choose the schedule)");
  for (const char* flag : {"--schedule", "--microbatches", "--split", "--stages"})
    if (cmd.count(flag) > 0)
      throw UsageError(fmt::format("{}: not for a GPT model (its layout flags and --vary choose the schedule)", flag));
  const Topology topology = load_topology_file(args.topology);
  GptSweepSpec spec;
  const MegatronRun base = megatron_flags_unchecked(args.megatron);
  note_not_modelled("sweep", args.megatron.not_modelled);
  spec.model = base.model;
  spec.layout = base.layout;
  spec.plan = args.plan;
  if (args.plan) spec.pinned = pinned_megatron_axes(args.megatron, cmd);
  for (const std::string& text : args.vary) {
    spec.axes.push_back(split_axis(text));
    if (spec.axes.back().name == "topology")
      for (const std::string& file : spec.axes.back().values)
        if (!file.empty() && spec.topologies.count(file) == 0) spec.topologies.emplace(file, load_topology_file(file));
  }
  spec.threads = threads_of(args);
  spec.shard = shard_of(args);
  const auto started = std::chrono::steady_clock::now();
  const SweepTable table = take(run_gpt_sweep(spec, topology, progress_bar(args.quiet, started)));
  report_speed(args, table.rows.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
               args.plan ? "planned" : "simulated", spec.threads);
  write_outputs(
      args, table,
      {"tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size", "micro_batch_size",
       "recompute_granularity", "throughput_samples_per_s", "model_tflops_per_gpu", "peak_memory_bytes", "fits"});
  return 0;
}

int run_sweep_merge(const MergeArgs& args) {
  if (args.csv.empty() && args.chart.empty())
    throw UsageError("sweep merge: give --csv, --chart or both (what to write the merged sweep as)");
  std::vector<SweepPart> parts;
  for (const std::string& file : args.inputs)
    parts.push_back(SweepPart{file, take(parse_sweep_csv(read_file(file), file))});
  const SweepTable merged = take(merge_sweep_tables(parts));
  write_table(args.csv, args.chart, merged);
  std::fprintf(stdout, "merged %zu points from %zu files%s%s\n", merged.rows.size(), parts.size(),
               args.csv.empty() ? "" : (" into " + args.csv).c_str(),
               args.chart.empty() ? "" : (", chart " + args.chart).c_str());
  return 0;
}

}  // namespace

namespace {

constexpr const char* kSweepFooter =
    "Simulates every point of a grid (the product of the --vary axes, and for a profile the schedules)\n"
    "on all cores, writes a CSV and an SVG chart, and prints the points.\n\n"
    "With a profile (--profile): axes bandwidth_gbps.L, latency_us.L (L = level index or name), servers,\n"
    "  devices_per_server, memory_gib, microbatches, virtual_stages (interleaved-1f1b's chunks per device;\n"
    "  the schedules that run chunks need --split plan). Each point is split by --split: plan (the default:\n"
    "  the baton planner per point, as `baton plan` would split that cluster), balanced or balanced:S (S\n"
    "  compute-balanced stages, default 4, devices shared evenly: a few hundred times faster, but one shape\n"
    "  for every point, so it can show a cluster far slower than it is), or a fixed split with --stages.\n"
    "  The chart: throughput against the first axis, a colour per schedule, a dash per other axes' value.\n\n"
    "With a GPT model (Megatron's flags, as `baton simulate` takes them): axes in Megatron's flag names,\n"
    "  tensor-model-parallel-size (tp), pipeline-model-parallel-size (pp), context-parallel-size (cp),\n"
    "  expert-model-parallel-size (ep; with --num-experts), micro-batch-size (mbs), global-batch-size (gbs),\n"
    "  num-layers-per-virtual-pipeline-stage (vpp; 0 = not interleaved),\n"
    "  recompute-granularity (none,selective,full), sequence-parallel, use-distributed-optimizer,\n"
    "  overlap-grad-reduce, overlap-param-gather, tp-comm-overlap (yes,no; with --plan each goes on the layouts it\n"
    "  applies to), zero-bubble (1f1b,zb-h1,zb-h2), v-schedule (none,zbv,dualpipev),\n"
    "  moe-token-dispatcher-type (allgather,alltoall; with --num-experts), moe-shared-expert-overlap,\n"
    "  overlap-moe-expert-parallel-comm, delay-wgrad-compute (yes,no),\n"
    "  fp8-format (none,e4m3,hybrid: the model's --fp8-format), and\n"
    "  the cluster's: topology (files),\n"
    "  servers, devices_per_server, bandwidth_gbps.L, latency_us.L, memory_gib. Each point simulates\n"
    "  the flags' layout with the axes' values (data parallel: the GPUs / (t p c)), or with --plan gets\n"
    "  the best layout `baton plan` finds with the varied axes pinned. Varying both tp and pp charts a\n"
    "  heatmap of throughput and peak memory per (t, p), each cell the fastest of its points that fit;\n"
    "  otherwise a line chart.\n\n"
    "Array jobs: --shard K/N computes the K-th of N disjoint slices of the grid (--shard slurm: the slice\n"
    "of SLURM_ARRAY_TASK_ID of SLURM_ARRAY_TASK_COUNT) and writes its CSV; `baton sweep merge a.csv b.csv\n"
    "... --csv all.csv --chart all.svg` joins them into the CSV and chart of the unsharded run (it refuses\n"
    "a missing or repeated point). README, \"Sweeps on a cluster\", has a Slurm script.\n\n"
    "Examples:\n"
    "  baton sweep --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json \\\n"
    "      --vary bandwidth_gbps.1=1,10,25,100 --vary servers=1,2,4 --csv out/sweep.csv --chart out/sweep.svg\n"
    "  baton sweep --topology topologies/h100_32x8.json --num-layers 96 --hidden-size 12288 \\\n"
    "      --num-attention-heads 96 --seq-length 2048 --global-batch-size 1536 --recompute-granularity selective \\\n"
    "      --sequence-parallel --vary tp=2,4,8 --vary pp=4,8,16 --vary mbs=1,2 --chart out/tp_pp.svg";

void add_sweep_merge(CLI::App& sweep, CommandResult& result) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* merge = sweep.add_subcommand("merge", "Join the CSVs of a sharded sweep into one CSV and chart");
  merge->footer(
      "Checks that the files are shards of one sweep (one header, one grid), that no point is given twice\n"
      "and none is missing, and writes the rows in grid order: the same bytes as the unsharded run's CSV,\n"
      "and the same chart.\n\n"
      "Example: baton sweep merge out/shard-*.csv --csv out/sweep.csv --chart out/sweep.svg");
  merge->add_option("inputs", args->inputs, "the shards' CSV files")->required();
  merge->add_option("--csv", args->csv, "write the merged CSV");
  merge->add_option("--chart", args->chart, "write the merged sweep's SVG chart");
  merge->callback([args, &result] { result.exit_code = run_sweep_merge(*args); });
}

}  // namespace

void add_sweep_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd =
      app.add_subcommand("sweep", "What-if studies: simulate a model over cluster, schedule and layout variations");
  cmd->footer(kSweepFooter);
  add_profile_option(*cmd, args->profile, args->megatron.not_modelled,
                     "layer profile (baton.profile.v1 JSON), or a GPT model's flags below");
  cmd->add_option("--topology", args->topology, "the base cluster (baton.topology.v1 JSON)");
  cmd->add_option("--vary", args->vary, "an axis: NAME=V1,V2,... (repeatable)");
  cmd->add_option("--schedule", args->schedules,
                  fmt::format("profiles: comma list of {} (default pipedream,1f1b,gpipe,dp)", schedule_names()));
  cmd->add_option("--microbatches", args->microbatches, "profiles: microbatches per iteration (default 64)")
      ->check(at_least(1));
  cmd->add_option("--split", args->split, "profiles: plan (default: plan each point), balanced or balanced:S");
  cmd->add_option("--stages", args->stages, "profiles: a fixed split for every point instead of --split");
  cmd->add_flag("--plan", args->plan, "GPT models: plan each point's layout (the varied axes pinned)");
  cmd->add_option("--shard", args->shard, "compute only slice K/N of the grid, or slurm (an array job's task)");
  cmd->add_option("--threads", args->threads, "worker threads, 1 to 1024 (default: all cores)")
      ->check(in_range(1, 1024));
  cmd->add_option("--csv", args->csv, "write every point as CSV");
  cmd->add_option("--chart", args->chart, "write an SVG chart");
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  add_megatron_flags(*cmd, args->megatron);
  add_sweep_merge(*cmd, result);
  cmd->callback([args, cmd, &result] {
    if (cmd->got_subcommand("merge")) return;
    if (args->topology.empty()) throw UsageError("sweep: --topology is required");
    if (!args->megatron.given()) refuse_megatron_flags(*cmd, "sweep");
    result.exit_code = args->megatron.given() ? run_gpt_sweep_command(*args, *cmd) : run_profile_sweep(*args);
  });
}

}  // namespace baton::cli
