#include "planner/chunked_plans.h"

#include <algorithm>
#include <limits>

namespace baton {

std::vector<LayerRange> balanced_split(const std::vector<double>& work, int chunks) {
  const int layers = static_cast<int>(work.size());
  if (chunks < 1 || chunks > layers) return {};
  std::vector<double> prefix(static_cast<size_t>(layers) + 1, 0.0);
  for (int i = 0; i < layers; ++i) prefix[i + 1] = prefix[i] + work[i];
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  // best[c][j]: the least largest range when layers [0, j) form c ranges.
  std::vector<std::vector<double>> best(static_cast<size_t>(chunks) + 1,
                                        std::vector<double>(static_cast<size_t>(layers) + 1, kInfinity));
  std::vector<std::vector<int>> cut(best.size(), std::vector<int>(best[0].size(), -1));
  best[0][0] = 0.0;
  for (int c = 1; c <= chunks; ++c) {
    for (int j = c; j <= layers - (chunks - c); ++j) {
      for (int i = c - 1; i < j; ++i) {
        if (best[c - 1][i] == kInfinity) continue;
        const double value = std::max(best[c - 1][i], prefix[j] - prefix[i]);
        if (value < best[c][j]) {
          best[c][j] = value;
          cut[c][j] = i;
        }
      }
    }
  }
  std::vector<LayerRange> ranges(static_cast<size_t>(chunks));
  int end = layers;
  for (int c = chunks; c >= 1; --c) {
    const int begin = cut[c][end];
    ranges[static_cast<size_t>(c - 1)] = LayerRange{begin, end};
    end = begin;
  }
  return ranges;
}

std::vector<Plan> chunked_candidates(const Profile& profile, const Topology& topology, Schedule schedule,
                                     int microbatches, int virtual_stages) {
  std::vector<Plan> candidates;
  if (!runs_chunks(schedule)) return candidates;
  std::vector<double> work;
  for (const Layer& layer : profile.layers) work.push_back((layer.forward + layer.backward).value);
  std::vector<int> chunk_counts;
  if (schedule != Schedule::kInterleaved1F1B) {
    chunk_counts = {2};
  } else if (virtual_stages > 0) {
    chunk_counts = {virtual_stages};
  } else {
    chunk_counts = {2, 3, 4};
  }
  const int devices = topology.num_devices();
  for (int ranks = 2; ranks <= devices; ++ranks) {
    if (devices % ranks != 0) continue;
    const int replicas = devices / ranks;
    for (int v : chunk_counts) {
      const std::vector<LayerRange> ranges = balanced_split(work, ranks * v);
      if (ranges.empty()) continue;
      Plan plan;
      plan.model = profile.model;
      plan.schedule = schedule;
      plan.microbatch_size = profile.microbatch_size;
      plan.batches = microbatches;
      plan.virtual_stages = v;
      for (const LayerRange& range : ranges) plan.stages.push_back(StagePlan{range, replicas, {}});
      if (!check_chunks(plan, "candidate")) continue;
      if (!assign_devices(plan, topology)) continue;
      candidates.push_back(std::move(plan));
    }
  }
  return candidates;
}

}  // namespace baton
