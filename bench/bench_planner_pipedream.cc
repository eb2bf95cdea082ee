// Times the PipeDream-compatible planner (planner/pipedream_dp.h) on every
// profile of a folder of PipeDream profiles (<folder>/<model>/graph.txt) over
// five cluster layouts, each with and without --straight_pipeline, all with
// activation compression ratio 1 (as the reference values in the planner's
// tests). Prints one row per case: profile, layout, states, T, wall and CPU
// time of plan_pipedream (state enumeration included, file import excluded;
// best of 3 runs; CPU time shows how much of the wall time a loaded machine
// added), then the slowest case and why cases without a plan have none.
//
//   bench_planner_pipedream <profiles folder>
//
// Exit codes: 0 done, 2 bad usage or a folder without profiles.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/pipedream_dp.h"
#include "planner/pipedream_import.h"

namespace {

using baton::Bandwidth;
using baton::PipeDreamLevel;

struct Layout {
  std::string name;
  std::string reference_arguments;  // the reference optimizer's -n / -b
  std::vector<PipeDreamLevel> levels;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"flat-16", "-n 16", {{16, Bandwidth{1e9}}}},
      {"1x4", "-n 4 -b 1e10", {{4, Bandwidth{1e10}}}},
      {"4x4", "-n 4 4 -b 1e10 1.25e9", {{4, Bandwidth{1e10}}, {4, Bandwidth{1.25e9}}}},
      {"2x8", "-n 8 2 -b 2.5e10 3.125e9", {{8, Bandwidth{2.5e10}}, {2, Bandwidth{3.125e9}}}},
      {"3x4", "-n 4 3 -b 1e10 1.25e9", {{4, Bandwidth{1e10}}, {3, Bandwidth{1.25e9}}}}};
  return all;
}

struct Row {
  std::string profile;
  std::string layout;
  int states = 0;
  std::string objective;  // T in seconds, or "none"
  std::string error;      // why there is none
  double wall_ms = 0.0;
  double cpu_ms = 0.0;
};

Row run_case(const baton::Profile& profile, const std::string& name, const Layout& layout,
             bool straight) {
  baton::PipeDreamOptions options;
  options.levels = layout.levels;
  options.straight_pipeline = straight;
  options.activation_compression = 1.0;
  Row row{name, layout.name + (straight ? " straight" : ""), 0, "", "", 1e300, 1e300};
  for (int repeat = 0; repeat < 3; ++repeat) {
    const std::clock_t cpu_start = std::clock();
    const auto start = std::chrono::steady_clock::now();
    auto plan = baton::plan_pipedream(profile, options);
    const auto stop = std::chrono::steady_clock::now();
    const std::clock_t cpu_stop = std::clock();
    row.wall_ms =
        std::min(row.wall_ms, std::chrono::duration<double, std::milli>(stop - start).count());
    row.cpu_ms =
        std::min(row.cpu_ms, 1e3 * static_cast<double>(cpu_stop - cpu_start) / CLOCKS_PER_SEC);
    if (plan) {
      row.states = plan->num_states;
      row.objective = fmt::format("{:.17g}", plan->time_per_minibatch.value);
    } else {
      row.objective = "none";
      row.error = plan.error().message;
    }
  }
  return row;
}

std::vector<std::filesystem::path> profile_files(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error))
    if (std::filesystem::exists(entry.path() / "graph.txt"))
      files.push_back(entry.path() / "graph.txt");
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: bench_planner_pipedream <folder of <model>/graph.txt>\n";
    return 2;
  }
  const auto files = profile_files(argv[1]);
  if (files.empty()) {
    std::cerr << argv[1] << ": no <model>/graph.txt profiles found\n";
    return 2;
  }
  fmt::print(
      "| profile | layout | states | T (s) | wall ms | cpu ms |\n|---|---|---:|---:|---:|---:|\n");
  Row slowest;
  std::vector<std::string> errors;  // distinct in a row
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string name = file.parent_path().filename().string();
    auto profile = baton::import_pipedream_graph(text.str(), file.string());
    if (!profile) {
      std::cerr << profile.error().message << "\n";
      return 2;
    }
    profile->model = name;
    for (const Layout& layout : layouts()) {
      for (bool straight : {false, true}) {
        const Row row = run_case(*profile, name, layout, straight);
        fmt::print("| {} | {} | {} | {} | {:.2f} | {:.2f} |\n", row.profile, row.layout, row.states,
                   row.objective, row.wall_ms, row.cpu_ms);
        if (row.wall_ms > slowest.wall_ms) slowest = row;
        if (!row.error.empty() && (errors.empty() || errors.back() != row.error))
          errors.push_back(row.error);
      }
    }
  }
  fmt::print("\nslowest: {} {} ({} states): {:.2f} ms wall, {:.2f} ms cpu\n", slowest.profile,
             slowest.layout, slowest.states, slowest.wall_ms, slowest.cpu_ms);
  for (const std::string& error : errors) fmt::print("none: {}\n", error);
  return 0;
}
