#include "tools/replay.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/topology.h"
#include "sim/trace_reader.h"
#include "sim/validation_figures.h"
#include "tools/run_report.h"

namespace baton {

namespace fs = std::filesystem;

namespace {

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Error{fmt::format("{}: cannot be read", path.string())};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<fs::path> subfolders(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory()) found.push_back(entry.path());
  std::sort(found.begin(), found.end());
  return found;
}

Result<RunRecord> read_run(const fs::path& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  return parse_run_record(*text, path.string());
}

// Each schedule's slice speed in a validate folder's report.json (validate
// measured slices: the CPU), or none where it has no report or no slices.
Result<std::map<std::string, double>> slice_speeds(const fs::path& set) {
  std::map<std::string, double> speeds;
  const fs::path path = set / "report.json";
  if (!fs::exists(path)) return speeds;
  auto text = read_text(path);
  if (!text) return text.error();
  try {
    const nlohmann::json report = nlohmann::json::parse(*text);
    for (const auto& c : report.at("cases"))
      if (c.value("slice_speed", 0.0) > 0.0) speeds[c.at("schedule").get<std::string>()] = c.at("slice_speed");
  } catch (const nlohmann::json::exception& e) {
    return Error{fmt::format("{}: not a validate report with cases[] ({})", path.string(), e.what())};
  }
  return speeds;
}

Result<Profile> read_profile(const fs::path& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  return parse_profile(*text, path.string());
}

// "<model>-<microbatch size>": how ReplayOptions' maps name a profile.
std::string model_key(const Profile& profile) { return fmt::format("{}-{}", profile.model, profile.microbatch_size); }

}  // namespace

Result<std::vector<ReplayedRun>> replay_validations(const fs::path& root, const ReplayOptions& options) {
  if (!fs::is_directory(root)) return Error{fmt::format("{}: not a folder", root.string())};
  std::vector<ReplayedRun> runs;
  for (const fs::path& set : subfolders(root)) {
    if (!fs::exists(set / "profile.json")) continue;
    auto profile = read_profile(set / "profile.json");
    if (!profile) return profile.error();
    if (auto it = options.call_costs.find(model_key(*profile)); it != options.call_costs.end())
      profile->call_cost = it->second;
    auto topology_text = read_text(set / "topology.json");
    if (!topology_text) return topology_text.error();
    auto topology = parse_topology(*topology_text, (set / "topology.json").string());
    if (!topology) return topology.error();
    const auto speeds = slice_speeds(set);
    if (!speeds) return speeds.error();
    if (auto it = options.shared_speedups.find(model_key(*profile));
        it != options.shared_speedups.end() && topology->levels.front().shared_compute)
      topology->levels.front().shared_speedup = it->second;
    for (const fs::path& dir : subfolders(set)) {
      auto plan_text = read_text(dir / "plan.json");
      if (!plan_text) return plan_text.error();
      auto plan = parse_plan(*plan_text, (dir / "plan.json").string());
      if (!plan) return plan.error();
      auto run = read_run(dir / "run.json");
      if (!run) return run.error();
      const auto slice = speeds->find(dir.filename().string());
      const bool sliced = slice != speeds->end();
      const bool replayed = (sliced || options.at_run_speeds) && !run->step_compute.empty();
      Seconds prediction;
      if (replayed) {  // as validate predicts a run it measured a slice for
        Topology at_slice = *topology;
        if (sliced) at_slice.device.relative_speed = slice->second;
        auto steps = predict_run(*plan, *profile, at_slice, run->step_compute, 0.5,
                                 options.executor_overhead ? run->action_overhead : std::vector<Seconds>{});
        if (!steps) return Error{fmt::format("{}: {}", dir.string(), steps.error().message)};
        prediction = *steps + executor_step_barrier(*topology, plan->num_workers());
      } else {
        auto predicted = predict_iteration(*plan, *profile, *topology, 0.5, options.noise_samples);
        if (!predicted) return Error{fmt::format("{}: {}", dir.string(), predicted.error().message)};
        prediction = predicted->at_quantile;
      }
      const Seconds measured = step_times_after_first(run->walls, 0.5).median;
      runs.push_back(ReplayedRun{set.filename().string(), std::move(*plan), measured, prediction});
    }
  }
  return runs;
}

Result<std::map<std::string, double>> saturated_speedups(const fs::path& root) {
  if (!fs::is_directory(root)) return Error{fmt::format("{}: not a folder", root.string())};
  std::map<std::string, SharedStreams> most;
  for (const fs::path& set : subfolders(root)) {
    if (!fs::exists(set / "profile.json")) continue;
    auto profile = read_profile(set / "profile.json");
    if (!profile) return profile.error();
    if (!profile->shared_streams) continue;
    const SharedStreams& streams = *profile->shared_streams;
    auto [it, fresh] = most.emplace(model_key(*profile), streams);
    if (!fresh && (streams.streams > it->second.streams ||
                   (streams.streams == it->second.streams && streams.speedup > it->second.speedup)))
      it->second = streams;
  }
  std::map<std::string, double> speedups;
  for (const auto& [name, streams] : most) speedups[name] = streams.speedup;
  return speedups;
}

Result<CallCost> call_cost_of_run(const Profile& profile, const fs::path& trace_path) {
  auto text = read_text(trace_path);
  if (!text) return text.error();
  auto trace = parse_chrome_trace(*text, trace_path.string());
  if (!trace) return trace.error();
  Seconds forward, backward, step;
  int forwards = 0, backwards = 0;
  for (const Span& span : trace->spans) {
    const Seconds length = span.end - span.start;
    if (span.action.kind == ActionKind::kForward) {
      forward += length;
      ++forwards;
    } else if (span.action.kind == ActionKind::kBackward) {
      backward += length;
      ++backwards;
    } else if (span.action.kind == ActionKind::kStep) {
      step += length;
    }
  }
  if (forwards == 0 || backwards == 0)
    return Error{fmt::format("{}: no forward or no backward to time the whole passes by", trace_path.string())};
  if (trace->num_stages != 1)
    return Error{fmt::format("{}: {} stages; the whole passes need one stage holding every layer", trace_path.string(),
                             trace->num_stages)};
  return call_cost_from(profile, WholePass{forward / forwards, backward / backwards, step});
}

ReplaySummary summarize(const std::vector<ReplayedRun>& runs) {
  ReplaySummary summary;
  if (runs.empty()) return summary;
  summary.runs = static_cast<int>(runs.size());
  summary.lowest_pct = summary.highest_pct = runs.front().error_pct();
  double sum = 0.0, signed_sum = 0.0;
  for (const ReplayedRun& run : runs) {
    const double error = run.error_pct();
    sum += std::abs(error);
    signed_sum += error;
    summary.within_5 += std::abs(error) <= 5.0;
    summary.within_10 += std::abs(error) <= 10.0;
    summary.lowest_pct = std::min(summary.lowest_pct, error);
    summary.highest_pct = std::max(summary.highest_pct, error);
  }
  summary.mean_abs_error_pct = sum / summary.runs;
  summary.mean_error_pct = signed_sum / summary.runs;
  return summary;
}

}  // namespace baton
