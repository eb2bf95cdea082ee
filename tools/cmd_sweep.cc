// `baton sweep`: what-if studies over bandwidth, servers, devices, memory,
// microbatches and schedules, simulated on all cores.
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "planner/sweep.h"
#include "sim/chart_svg.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
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
};

SweepAxis parse_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError(fmt::format("--vary: expected NAME=V1,V2,..., got \"{}\"", text));
  SweepAxis axis{text.substr(0, eq), {}};
  std::string rest = text.substr(eq + 1);
  size_t begin = 0;
  while (begin <= rest.size()) {
    const size_t comma = rest.find(',', begin);
    const std::string item = rest.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(value))
      throw UsageError(fmt::format("--vary {}: \"{}\" is not a number", axis.name, item));
    axis.values.push_back(value);
    if (comma == std::string::npos) break;
    begin = comma + 1;
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

std::string split_name(const SweepSpec& spec) {
  switch (spec.split) {
    case SplitStrategy::kPlan: return "planned per point";
    case SplitStrategy::kBalanced: return fmt::format("{} balanced stages", spec.balanced_stages);
    case SplitStrategy::kFixed: return "fixed stages";
  }
  return "";
}

std::string csv_of(const std::vector<SweepPoint>& points, const SweepSpec& spec) {
  std::string out;
  for (const SweepAxis& axis : spec.axes) out += axis.name + ",";
  out +=
      "schedule,devices,stages,throughput_samples_per_s,iteration_time_s,bubble_fraction,peak_memory_bytes,fits,"
      "error\n";
  for (const SweepPoint& p : points) {
    for (double v : p.axis_values) out += fmt::format("{:g},", v);
    std::string error = p.error;
    std::replace(error.begin(), error.end(), '"', '\'');
    std::replace(error.begin(), error.end(), '\n', ' ');
    out += fmt::format("{},{},\"{}\",{:.6f},{:.9f},{:.6f},{},{},\"{}\"\n", schedule_name(p.schedule), p.devices,
                       p.stages, p.throughput_samples_per_s, p.iteration_time_s, p.bubble_fraction, p.peak_memory.value,
                       p.fits ? "yes" : "no", error);
  }
  return out;
}

std::string summary(const std::vector<SweepPoint>& points, const SweepSpec& spec, size_t limit) {
  std::vector<std::vector<std::string>> rows{{}};
  for (const SweepAxis& axis : spec.axes) rows[0].push_back(axis.name);
  for (const char* h : {"schedule", "devices", "stages", "samples/s", "bubble", "peak memory", "fits"})
    rows[0].push_back(h);
  for (size_t i = 0; i < points.size() && i < limit; ++i) {
    const SweepPoint& p = points[i];
    std::vector<std::string> row;
    for (double v : p.axis_values) row.push_back(fmt::format("{:g}", v));
    row.push_back(std::string(schedule_name(p.schedule)));
    row.push_back(std::to_string(p.devices));
    if (!p.error.empty()) {
      row.push_back("error: " + p.error.substr(0, 60));
    } else {
      row.insert(row.end(), {p.stages.substr(0, 32), fmt::format("{:.1f}", p.throughput_samples_per_s),
                             percent(p.bubble_fraction), human_bytes(p.peak_memory), p.fits ? "yes" : "no"});
    }
    rows.push_back(row);
  }
  std::string out = render_table(rows);
  if (points.size() > limit) out += fmt::format("... {} more points in the CSV\n", points.size() - limit);
  return out;
}

int run_sweep_command(const SweepArgs& args) {
  const Profile profile = load_profile_file(args.profile);
  const Topology topology = load_topology_file(args.topology);
  SweepSpec spec;
  for (const std::string& text : args.vary) spec.axes.push_back(parse_axis(text));
  spec.schedules.clear();
  spec.schedules = parse_schedule_list(args.schedules);
  spec.microbatches = args.microbatches;
  configure_split(args, spec);
  spec.threads = args.threads > 0 ? args.threads : std::max(1u, std::thread::hardware_concurrency());
  const auto started = std::chrono::steady_clock::now();
  const auto progress = [&](size_t done, size_t total) {
    if (args.quiet) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const int filled = total ? static_cast<int>(30 * done / total) : 30;
    std::fprintf(stderr, "\r[%s%s] %zu/%zu points, %.0f/s ", std::string(filled, '#').c_str(),
                 std::string(30 - filled, ' ').c_str(), done, total, seconds > 0 ? done / seconds : 0.0);
  };
  auto points = run_sweep(profile, topology, spec, progress);
  if (!points) throw UsageError(points.error().message);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!args.quiet)
    std::fprintf(stderr, "\nbaton: %zu configurations (%s) simulated in %.2f s (%.0f per second, %d threads)\n",
                 points->size(), split_name(spec).c_str(), seconds, double(points->size()) / seconds, spec.threads);
  if (!args.csv.empty()) write_file_atomic(args.csv, csv_of(*points, spec));
  if (!args.chart.empty()) {
    const std::string title = fmt::format("{} on {}: throughput ({})", profile.model, topology.name, split_name(spec));
    write_file_atomic(args.chart, line_chart_svg(sweep_chart_series(*points, spec), sweep_chart_options(spec, title)));
  }
  std::fputs(summary(*points, spec, 60).c_str(), stdout);
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "What-if studies: simulate a model over cluster and schedule variations");
  cmd->footer(
      "Simulates every point of the grid (the product of the --vary axes and the schedules) on all cores\n"
      "and writes a CSV and an SVG chart (throughput against the first axis, one line per schedule and\n"
      "value of the other axes).\n"
      "Axes: bandwidth_gbps.L, latency_us.L (L = level index or name), servers, devices_per_server,\n"
      "      memory_gib, microbatches, virtual_stages (interleaved-1f1b's chunks per device; the\n"
      "      schedules that run chunks need --split plan).\n"
      "Each point is split by --split: plan (the default: the baton planner per point, as `baton plan`\n"
      "would split that cluster), balanced or balanced:S (S compute-balanced stages, default 4, devices\n"
      "shared evenly: a few hundred times faster, but one shape for every point, so it can show a\n"
      "cluster far slower than it is), or a fixed split for every point with --stages.\n"
      "The chart gives each schedule a colour and each value of the other axes a dash and marker.\n\n"
      "Example (\"16 GPUs on 10 Gb/s or 8 on NVLink?\"):\n"
      "  baton sweep --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json \\\n"
      "      --vary bandwidth_gbps.1=1,10,25,100 --vary servers=1,2,4 --csv out/sweep.csv --chart out/sweep.svg");
  cmd->add_option("--profile", args->profile, "layer profile (baton.profile.v1 JSON)")->required();
  cmd->add_option("--topology", args->topology, "the base cluster (baton.topology.v1 JSON)")->required();
  cmd->add_option("--vary", args->vary, "an axis: NAME=V1,V2,... (repeatable)");
  cmd->add_option("--schedule", args->schedules,
                  fmt::format("comma list of {} (default pipedream,1f1b,gpipe,dp)", schedule_names()));
  cmd->add_option("--microbatches", args->microbatches, "microbatches per iteration (default 64)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--split", args->split, "plan (default: plan each point), balanced or balanced:S (faster)");
  cmd->add_option("--stages", args->stages, "a fixed split for every point instead of --split");
  cmd->add_option("--threads", args->threads, "worker threads (default: all cores)")->check(CLI::PositiveNumber);
  cmd->add_option("--csv", args->csv, "write every point as CSV");
  cmd->add_option("--chart", args->chart, "write an SVG chart");
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  cmd->callback([args, &result] { result.exit_code = run_sweep_command(*args); });
}

}  // namespace baton::cli
