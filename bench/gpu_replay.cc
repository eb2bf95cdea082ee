// Replays the executor's runs recorded on a GPU (data/measured/h100-sxm5, or
// a call's folder in data/measured/h200):
// every schedule `baton validate --device cuda` ran there, predicted again by
// the current simulator from the run's own profile, calibrated topology and
// plan, as validate predicts it, against the run's measured iteration
// (tools/replay.h).
//
// Each run is predicted four ways:
// - "recorded": the profile as validate measured it (one call per layer);
// - "one call per pass": the same profile with the call_cost (sim/profile.h)
//   of its model and micro-batch measured from a run of one worker holding the
//   whole model (one-worker/<model>-<microbatch>: the profile measured in the
//   same session and the trace of that run's last step): per_call_cost with
//   the step's mean F, mean B and its STEP as the whole passes, never below
//   zero, as `profile measure --whole-pass` computes it from its own passes.
// - "saturated speedup": the profile with the GPU's throughput at the most
//   streams the call measured (saturated_speedups);
// - "at its workers' speeds": each step replayed at the speeds the run's
//   workers had in it, where the run recorded its compute per step
//   (validate's predicted_at_run_speeds_s; runs recorded before the executor
//   kept a step's compute, 2026-11-28, did not, and are predicted as
//   recorded).
//
// Usage: gpu_replay [DIR] [--table]
//   DIR      the recorded data (default data/measured/h100-sxm5, from the
//            repository root)
//   --table  every run's row; without it, the summary only
// Prints Markdown for bench/RESULTS.md. Exit 2 when a file cannot be read.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_support.h"
#include "tools/replay.h"

namespace {

namespace fs = std::filesystem;
using namespace baton;
using bench::must;

std::string stages_text(const Plan& plan) {
  std::string text;
  for (const StagePlan& stage : plan.stages)
    text += fmt::format("{}{}-{}x{}", text.empty() ? "" : ",", stage.layers.begin, stage.layers.end, stage.replicas);
  return text;
}

void summary_row(const char* label, const std::vector<ReplayedRun>& runs) {
  const ReplaySummary s = summarize(runs);
  std::printf("| %s | %d | %.1f%% | %d | %d | %+.1f%% .. %+.1f%% |\n", label, s.runs, s.mean_abs_error_pct, s.within_5,
              s.within_10, s.lowest_pct, s.highest_pct);
}

}  // namespace

int main(int argc, char** argv) {
  fs::path root = "data/measured/h100-sxm5";
  bool table = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--table") == 0)
      table = true;
    else
      root = argv[i];
  }
  ReplayOptions with_calls;
  if (fs::is_directory(root / "one-worker"))
    for (const auto& entry : fs::directory_iterator(root / "one-worker")) {
      if (!entry.is_directory()) continue;
      const fs::path profile_path = entry.path() / "profile.json";
      const Profile profile = must(parse_profile(bench::read_text(profile_path), profile_path.string()));
      with_calls.call_costs[fmt::format("{}-{}", profile.model, profile.microbatch_size)] =
          must(call_cost_of_run(profile, entry.path() / "trace.json"));
    }
  const std::vector<ReplayedRun> recorded = must(replay_validations(root / "validate", ReplayOptions{}));
  const std::vector<ReplayedRun> one_call = must(replay_validations(root / "validate", with_calls));
  ReplayOptions saturated;
  saturated.shared_speedups = must(saturated_speedups(root / "validate"));
  const std::vector<ReplayedRun> at_most_streams = must(replay_validations(root / "validate", saturated));
  ReplayOptions own_speeds;
  own_speeds.at_run_speeds = true;
  const std::vector<ReplayedRun> at_run_speeds = must(replay_validations(root / "validate", own_speeds));

  std::printf("Per call beyond the layers' work, from the one-worker runs:\n\n");
  std::printf("| model-microbatch | forward | backward | optimizer step |\n|---|---|---|---|\n");
  for (const auto& [name, call] : with_calls.call_costs)
    std::printf("| %s | %.3f ms | %.3f ms | %.3f ms |\n", name.c_str(), call.forward.ms(), call.backward.ms(),
                call.optimizer.ms());
  if (table) {
    std::printf(
        "\n| set | schedule | stages | measured | recorded profile | error | one call per pass | error | "
        "saturated speedup | error | at its workers' speeds | error |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < recorded.size(); ++i) {
      const ReplayedRun& a = recorded[i];
      const ReplayedRun& b = one_call[i];
      const ReplayedRun& c = at_most_streams[i];
      const ReplayedRun& d = at_run_speeds[i];
      std::printf(
          "| %s | %s | %s | %.3f ms | %.3f ms | %+.1f%% | %.3f ms | %+.1f%% | %.3f ms | %+.1f%% | %.3f ms | %+.1f%% "
          "|\n",
          a.set.c_str(), std::string(schedule_name(a.plan.schedule)).c_str(), stages_text(a.plan).c_str(),
          a.measured.ms(), a.predicted.ms(), a.error_pct(), b.predicted.ms(), b.error_pct(), c.predicted.ms(),
          c.error_pct(), d.predicted.ms(), d.error_pct());
    }
  }
  std::printf("\nError = (measured - predicted) / predicted.\n\n");
  std::printf(
      "| prediction | runs | mean abs. error | within 5%% | within 10%% | range |\n|---|---|---|---|---|---|\n");
  summary_row("the profiles as recorded", recorded);
  summary_row("one call per pass (call cost of the one-worker runs)", one_call);
  summary_row("saturated speedup (the most streams this call measured)", at_most_streams);
  summary_row("each step at its workers' speeds (runs that recorded their compute per step; else as recorded)",
              at_run_speeds);
  return 0;
}
