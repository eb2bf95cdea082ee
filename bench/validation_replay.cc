// Replays the CPU validations `bench/validation_table.sh` recorded: every
// schedule of every model folder under each ROOT (OUT/<model>/, as validate
// wrote it) predicted again by the current simulator as validate predicts it
// (tools/replay.h: each run's steps replayed at its workers' speeds), against
// the run's measured iteration, twice: as validate predicts it, and with each
// worker's executor overhead per action as the run recorded it
// (SimOptions::worker_action_overhead; bench/RESULTS.md, "The executor's own
// time per action"). One recording per ROOT, so a change of the model is held
// against the same runs.
//
// Usage: validation_replay ROOT... [--table]
//   --table  every run's row; without it, the summary only
// Prints Markdown for bench/RESULTS.md. Exit 2 when a file cannot be read.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "tools/replay.h"

namespace {

namespace fs = std::filesystem;
using namespace baton;
using bench::must;

void summary_row(const std::string& label, const std::vector<ReplayedRun>& runs) {
  const ReplaySummary s = summarize(runs);
  std::printf("| %s | %d | %d | %.2f%% | %+.2f%% | %+.1f%% .. %+.1f%% |\n", label.c_str(), s.runs, s.within_10,
              s.mean_abs_error_pct, s.mean_error_pct, s.lowest_pct, s.highest_pct);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> roots;
  bool table = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--table") == 0)
      table = true;
    else
      roots.emplace_back(argv[i]);
  }
  if (roots.empty()) {
    std::fprintf(stderr, "usage: validation_replay ROOT... [--table]\n");
    return 2;
  }
  ReplayOptions without;
  ReplayOptions with;
  with.executor_overhead = true;
  std::vector<ReplayedRun> all_without, all_with;
  std::printf("| recording | runs | within 10%% | mean abs. error | mean error | range |\n|---|---|---|---|---|---|\n");
  for (const fs::path& root : roots) {
    const std::vector<ReplayedRun> a = must(replay_validations(root, without));
    const std::vector<ReplayedRun> b = must(replay_validations(root, with));
    if (table)
      for (size_t i = 0; i < a.size(); ++i)
        std::printf("| %s %s | | | %.3f ms measured | %.3f ms: %+.1f%% | %.3f ms: %+.1f%% |\n", a[i].set.c_str(),
                    std::string(schedule_name(a[i].plan.schedule)).c_str(), a[i].measured.ms(), a[i].predicted.ms(),
                    a[i].error_pct(), b[i].predicted.ms(), b[i].error_pct());
    summary_row(root.filename().string() + ", as validate predicts", a);
    summary_row(root.filename().string() + ", with the executor's overhead", b);
    all_without.insert(all_without.end(), a.begin(), a.end());
    all_with.insert(all_with.end(), b.begin(), b.end());
  }
  summary_row("all, as validate predicts", all_without);
  summary_row("all, with the executor's overhead per action", all_with);
  return 0;
}
