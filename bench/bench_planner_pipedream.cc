// Times the PipeDream-compatible planner (planner/pipedream_dp.h) on every
// profile of a folder of PipeDream profiles (<folder>/<model>/graph.txt) over
// five cluster layouts, each with and without --straight_pipeline. By default
// all cases use activation compression ratio 1 (as the reference values in the
// planner's tests); with --all, every case also runs without activation
// transfers (no --activation_compression_ratio) and with the reference tests'
// memory limit (--use_memory_constraint -s 16e9), four variants per case.
// Prints one row per case: profile, layout, variant, states, T, wall and CPU
// time of plan_pipedream (state enumeration included, file import excluded;
// best of 3 runs; CPU time shows how much of the wall time a loaded machine
// added), then the slowest case, the cases over one second, and why cases
// without a plan have none.
//
//   bench_planner_pipedream [--all] <profiles folder>
//
// Exit codes: 0 done, 2 bad usage or a folder without profiles.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
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

// Activation transfers and the memory limit, as the reference's arguments.
struct Variant {
  std::string name;
  std::optional<double> compression;
  std::optional<int64_t> memory_bytes;
};

const std::vector<Variant>& variants(bool all) {
  static const std::vector<Variant> reference = {{"R=1", 1.0, std::nullopt}};
  static const std::vector<Variant> every = {{"R=1", 1.0, std::nullopt},
                                             {"R=1 16GB", 1.0, 16'000'000'000},
                                             {"no R", std::nullopt, std::nullopt},
                                             {"no R 16GB", std::nullopt, 16'000'000'000}};
  return all ? every : reference;
}

struct Row {
  std::string profile;
  std::string layout;
  std::string variant;
  int states = 0;
  std::string objective;  // T in seconds, or "none"
  std::string error;      // why there is none
  double wall_ms = 0.0;
  double cpu_ms = 0.0;
};

Row run_case(const baton::Profile& profile, const std::string& name, const Layout& layout, bool straight,
             const Variant& variant) {
  baton::PipeDreamOptions options;
  options.levels = layout.levels;
  options.straight_pipeline = straight;
  options.activation_compression = variant.compression;
  if (variant.memory_bytes) options.memory_size = baton::Bytes{*variant.memory_bytes};
  Row row{name, layout.name + (straight ? " straight" : ""), variant.name, 0, "", "", 1e300, 1e300};
  for (int repeat = 0; repeat < 3; ++repeat) {
    const std::clock_t cpu_start = std::clock();
    const auto start = std::chrono::steady_clock::now();
    auto plan = baton::plan_pipedream(profile, options);
    const auto stop = std::chrono::steady_clock::now();
    const std::clock_t cpu_stop = std::clock();
    row.wall_ms = std::min(row.wall_ms, std::chrono::duration<double, std::milli>(stop - start).count());
    row.cpu_ms = std::min(row.cpu_ms, 1e3 * static_cast<double>(cpu_stop - cpu_start) / CLOCKS_PER_SEC);
    if (plan) {
      row.states = plan->num_states;
      row.objective = fmt::format("{:.17g}", plan->time_per_minibatch.value);
    } else {
      row.objective = "none";
      row.error = plan.error().message;
    }
    if (row.wall_ms > 1e4) break;  // one run says enough
  }
  return row;
}

std::vector<std::filesystem::path> profile_files(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error))
    if (std::filesystem::exists(entry.path() / "graph.txt")) files.push_back(entry.path() / "graph.txt");
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  const bool all = argc == 3 && std::string(argv[1]) == "--all";
  if (argc != 2 && !all) {
    std::cerr << "usage: bench_planner_pipedream [--all] <folder of <model>/graph.txt>\n";
    return 2;
  }
  const std::string folder = argv[argc - 1];
  const auto files = profile_files(folder);
  if (files.empty()) {
    std::cerr << folder << ": no <model>/graph.txt profiles found\n";
    return 2;
  }
  fmt::print(
      "| profile | layout | variant | states | T (s) | wall ms | cpu ms |\n"
      "|---|---|---|---:|---:|---:|---:|\n");
  Row slowest;
  std::vector<Row> over_one_second;
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
        for (const Variant& variant : variants(all)) {
          const Row row = run_case(*profile, name, layout, straight, variant);
          fmt::print("| {} | {} | {} | {} | {} | {:.2f} | {:.2f} |\n", row.profile, row.layout, row.variant, row.states,
                     row.objective, row.wall_ms, row.cpu_ms);
          std::fflush(stdout);
          if (row.wall_ms > slowest.wall_ms) slowest = row;
          if (row.wall_ms > 1e3) over_one_second.push_back(row);
          if (!row.error.empty() && (errors.empty() || errors.back() != row.error)) errors.push_back(row.error);
        }
      }
    }
  }
  fmt::print("\nslowest: {} {} {} ({} states): {:.2f} ms wall, {:.2f} ms cpu\n", slowest.profile, slowest.layout,
             slowest.variant, slowest.states, slowest.wall_ms, slowest.cpu_ms);
  fmt::print("over one second: {}\n", over_one_second.size());
  for (const Row& row : over_one_second)
    fmt::print("  {} {} {}: {:.2f} ms wall\n", row.profile, row.layout, row.variant, row.wall_ms);
  for (const std::string& error : errors) fmt::print("none: {}\n", error);
  return 0;
}
