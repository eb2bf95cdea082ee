// Times `baton plan` (make_plan, baton cost model) on every shipped profile
// (traces/*.json) and topology (topologies/*.json) under two schedules: the
// asynchronous pipedream schedule and 1F1B with 16 microbatches, both within
// the topology's device memory; with --chunked instead the three schedules that
// run several chunks per device (interleaved-1f1b, zbv, dualpipev), 16
// microbatches each. Prints one row per (profile, topology,
// schedule): wall seconds of make_plan (profile loading excluded, one run),
// the chosen plan's predicted time per sample, then the totals per schedule
// and the slowest pair.
//
//   bench_planner_shipped <repository root> [filter] [--chunked]
//
// `filter`, when given, keeps the profiles whose file name contains it.
// Exit codes: 0 done, 2 bad usage or no shipped files under the root.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/planner.h"
#include "sim/profile.h"
#include "sim/topology.h"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> json_files(const fs::path& folder) {
  std::vector<fs::path> files;
  if (!fs::is_directory(folder)) return files;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Case {
  const char* name;
  baton::Schedule schedule;
  int microbatches;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_planner_shipped <repository root> [filter] [--chunked]\n");
    return 2;
  }
  const fs::path root = argv[1];
  std::string filter;
  bool chunked = false;
  for (int a = 2; a < argc; ++a) {
    if (std::string(argv[a]) == "--chunked") {
      chunked = true;
    } else {
      filter = argv[a];
    }
  }
  const auto traces = json_files(root / "traces");
  const auto topologies = json_files(root / "topologies");
  if (traces.empty() || topologies.empty()) {
    std::fprintf(stderr, "bench_planner_shipped: no traces/*.json or topologies/*.json under %s\n", argv[1]);
    return 2;
  }
  const std::vector<Case> cases =
      chunked ? std::vector<Case>{{"interleaved-1f1b-16", baton::Schedule::kInterleaved1F1B, 16},
                                  {"zbv-16", baton::Schedule::kZbV, 16},
                                  {"dualpipev-16", baton::Schedule::kDualPipeV, 16}}
              : std::vector<Case>{{"pipedream", baton::Schedule::kPipeDream, 0},
                                  {"1f1b-16", baton::Schedule::kOneFOneB, 16}};
  std::vector<double> totals(cases.size(), 0.0);
  double slowest = 0.0;
  std::string slowest_name;
  for (const fs::path& trace : traces) {
    if (!filter.empty() && trace.filename().string().find(filter) == std::string::npos) continue;
    auto profile = baton::parse_profile(read_text(trace), trace.string());
    if (!profile) continue;
    for (const fs::path& file : topologies) {
      auto topology = baton::parse_topology(read_text(file), file.string());
      if (!topology) continue;
      for (size_t c = 0; c < cases.size(); ++c) {
        baton::PlannerOptions options;
        options.schedule = cases[c].schedule;
        options.microbatches = cases[c].microbatches;
        const auto started = std::chrono::steady_clock::now();
        const auto outcome = baton::make_plan(*profile, *topology, options);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        totals[c] += seconds;
        const std::string name = fmt::format("{} {} {}", trace.stem().string(), file.stem().string(), cases[c].name);
        if (seconds > slowest) slowest = seconds, slowest_name = name;
        const std::string result =
            outcome ? fmt::format("{:.6f} ms/sample", 1e3 * outcome->best.time_per_sample_s()) : "no plan fits";
        fmt::print("{:58} {:8.3f} s  {}\n", name, seconds, result);
        std::fflush(stdout);
      }
    }
  }
  fmt::print("total");
  for (size_t c = 0; c < cases.size(); ++c) fmt::print("{} {} {:.2f} s", c == 0 ? "" : ",", cases[c].name, totals[c]);
  fmt::print("; slowest {} ({:.2f} s)\n", slowest_name, slowest);
  return 0;
}
