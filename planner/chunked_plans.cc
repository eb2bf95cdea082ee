#include "planner/chunked_plans.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <utility>

#include "planner/search_tables.h"

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

namespace {

// The rank of each of the plan's stages (chunks).
std::vector<int> ranks_of_stages(const Plan& plan) {
  std::vector<int> rank_of;
  for (int s = 0; s < plan.num_stages(); ++s) rank_of.push_back(plan.rank_of(s));
  return rank_of;
}

// The ranks' loads under `ranges` (then the links', with `links`), sorted
// largest first.
std::vector<double> sorted_loads(const std::vector<double>& prefix, const std::vector<LayerRange>& ranges,
                                 const std::vector<int>& rank_of, int ranks, const ChunkLinks* links) {
  std::vector<double> loads(static_cast<size_t>(ranks + (links ? links->links : 0)), 0.0);
  for (size_t c = 0; c < ranges.size(); ++c) {
    loads[static_cast<size_t>(rank_of[c])] += prefix[ranges[c].end] - prefix[ranges[c].begin];
    if (links && c + 1 < ranges.size() && links->link[c] >= 0)
      loads[static_cast<size_t>(ranks + links->link[c])] +=
          links->seconds_per_byte[c] * (*links->out)[ranges[c].begin][ranges[c].end];
  }
  std::sort(loads.begin(), loads.end(), std::greater<>());
  return loads;
}

// a < b lexicographically by more than rounding: the first load that differs
// by more than a relative 1e-12 decides.
bool lighter(const std::vector<double>& a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    const double tolerance = 1e-12 * std::max(std::abs(a[i]), std::abs(b[i]));
    if (a[i] < b[i] - tolerance) return true;
    if (a[i] > b[i] + tolerance) return false;
  }
  return false;
}

}  // namespace

std::vector<LayerRange> rank_balanced_split(const std::vector<double>& work, std::vector<LayerRange> start,
                                            const std::vector<int>& rank_of, int ranks, const ChunkLinks* links) {
  std::vector<double> prefix(work.size() + 1, 0.0);
  for (size_t i = 0; i < work.size(); ++i) prefix[i + 1] = prefix[i] + work[i];
  std::vector<LayerRange> ranges = std::move(start);
  std::vector<double> loads = sorted_loads(prefix, ranges, rank_of, ranks, links);
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t c = 0; c + 1 < ranges.size(); ++c) {  // the cut between chunks c and c + 1
      for (int step : {-1, 1}) {
        const int cut = ranges[c].end + step;
        if (cut <= ranges[c].begin || cut >= ranges[c + 1].end) continue;
        std::vector<LayerRange> trial = ranges;
        trial[c].end = cut;
        trial[c + 1].begin = cut;
        std::vector<double> trial_loads = sorted_loads(prefix, trial, rank_of, ranks, links);
        if (!lighter(trial_loads, loads)) continue;
        ranges = std::move(trial);
        loads = std::move(trial_loads);
        moved = true;
      }
    }
  }
  return ranges;
}

int most_chunked_workers(Schedule schedule, int microbatches) {
  return schedule == Schedule::kInterleaved1F1B ? microbatches : microbatches / 2;
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
  // The two splits of each (ranks, v), shared by every replica count.
  std::map<std::pair<int, int>, std::pair<std::vector<LayerRange>, std::vector<LayerRange>>> splits;
  auto splits_of = [&](const Plan& plan, int ranks, int v) -> const auto& {
    auto [at, added] = splits.try_emplace({ranks, v});
    if (added) {
      at->second.first = balanced_split(work, ranks * v);
      at->second.second = rank_balanced_split(work, at->second.first, ranks_of_stages(plan), ranks);
    }
    return at->second;
  };
  // The split that also evens out the links between ranks, for a plan whose
  // devices are assigned: each cut's bytes cross one rail of the level where
  // its two ranks' first devices meet, the compute at the device's speed.
  const RangeTables tables = range_tables(profile, topology.device.relative_speed);
  std::vector<double> seconds(work.size());
  for (size_t i = 0; i < work.size(); ++i) seconds[i] = tables.compute_prefix[i + 1] - tables.compute_prefix[i];
  const auto link_balanced = [&](const Plan& plan, const std::vector<LayerRange>& start) {
    const int ranks = plan.num_ranks();
    ChunkLinks links;
    links.out = &tables.out;
    std::map<std::pair<int, int>, int> ids;
    const std::vector<int> rank_of = ranks_of_stages(plan);
    for (int c = 0; c + 1 < plan.num_stages(); ++c) {
      const int a = std::min(rank_of[c], rank_of[c + 1]), b = std::max(rank_of[c], rank_of[c + 1]);
      const int level = topology.common_level(plan.stages[a].devices[0], plan.stages[b].devices[0]);
      if (a == b || level < 0) {
        links.link.push_back(-1);
        links.seconds_per_byte.push_back(0.0);
        continue;
      }
      links.link.push_back(ids.try_emplace({a, b}, static_cast<int>(ids.size())).first->second);
      links.seconds_per_byte.push_back(1.0 / topology.levels[level].rail_bandwidth().bytes_per_s);
    }
    links.links = static_cast<int>(ids.size());
    return rank_balanced_split(seconds, start, rank_of, ranks, &links);
  };
  const int layers = profile.num_layers();
  for (int used = topology.num_devices(); used >= 2; --used) {
    // What the schedule asks of the microbatches on `used` workers (check_chunks decides; this skips early).
    if (used > most_chunked_workers(schedule, microbatches) ||
        (schedule == Schedule::kInterleaved1F1B && microbatches % used != 0))
      continue;
    for (int ranks = 2; ranks <= used; ++ranks) {
      if (used % ranks != 0) continue;
      const int replicas = used / ranks;
      for (int v : chunk_counts) {
        if (ranks * v > layers) continue;
        Plan plan;
        plan.model = profile.model;
        plan.schedule = schedule;
        plan.microbatch_size = profile.microbatch_size;
        plan.batches = microbatches;
        plan.virtual_stages = v;
        plan.stages.assign(static_cast<size_t>(ranks * v), StagePlan{LayerRange{0, 0}, replicas, {}});
        if (!check_chunks(plan, "candidate")) continue;
        if (!assign_devices(plan, topology)) continue;  // devices by rank and replica, whatever the layers
        const auto& [balanced, even] = splits_of(plan, ranks, v);
        const std::vector<LayerRange> linked = link_balanced(plan, balanced);
        const auto add = [&](const std::vector<LayerRange>& ranges) {
          for (size_t s = 0; s < ranges.size(); ++s) plan.stages[s].layers = ranges[s];
          candidates.push_back(plan);
        };
        add(balanced);
        if (even != balanced) add(even);
        if (linked != balanced && linked != even) add(linked);
      }
    }
  }
  return candidates;
}

}  // namespace baton
