// Test helpers for the PipeDream-compatible planner.
//
// plain_pipedream_objective: a plain transcription of the reference optimizer's
// recurrence: full tables A[i][j][m] at every level, every split tried, no
// pruning, no laziness. O(N^3 M^2) per non-final level; only for small
// profiles. The fast solver (planner/pipedream_level.h) must agree with it
// value for value.
// replay_one_level: T recomputed from a one-level plan's stages (read-back check).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "planner/pipedream_dp.h"
#include "planner/pipedream_states.h"

namespace baton::testing {

inline double plain_pipedream_objective(const StateSpace& s, const PipeDreamOptions& options) {
  const double inf = std::numeric_limits<double>::infinity();
  const int n = s.num_states();
  auto diff = [](const std::vector<double>& v, int i, int j) { return i > 0 ? v[j] - v[i - 1] : v[j]; };
  // below[i][j]: the level below's A(i..j, all machines); C(i..j) at first.
  std::vector<std::vector<double>> below(n, std::vector<double>(n, inf));
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) below[i][j] = diff(s.cum_seconds, i, j);
  const bool straight = options.straight_pipeline;
  const auto& ratio = options.activation_compression;
  int within = 1;
  double answer = inf;
  for (size_t level = 0; level < options.levels.size(); ++level) {
    const int big_m = options.levels[level].machines;
    const double b = options.levels[level].bandwidth.bytes_per_s;
    const bool final_level = level + 1 == options.levels.size();
    auto rejects = [&](int first, int last, int r_stage, int r_total) {
      if (!options.memory_size) return false;
      const double stash = diff(s.cum_activation_bytes, first, last) + diff(s.cum_param_bytes, first, last);
      return stash * std::ceil(double(big_m - r_total) / r_stage) > double(options.memory_size->value);
    };
    // a[i][j][m], m + 1 machines.
    std::vector<std::vector<std::vector<double>>> a(
        n, std::vector<std::vector<double>>(n, std::vector<double>(big_m, inf)));
    for (int i = 0; i < n; ++i)
      for (int j = i; j < n; ++j)
        for (int m = 0; m < (straight ? 1 : big_m); ++m) {
          if (rejects(i, j, m + 1, m + 1)) continue;
          double dp = (4.0 * m * diff(s.cum_param_bytes, i, j)) / (b * (m + 1));
          dp /= within;
          a[i][j][m] = (below[i][j] + dp) / (m + 1);
        }
    for (int i = 0; i < (final_level ? 1 : n); ++i)
      for (int m = 1; m < big_m; ++m)
        for (int j = i + 1; j < n; ++j) {
          double best = a[i][j][m];
          for (int k = 0; k < j; ++k) {
            if (!s.is_ancestor(k, j)) continue;
            if (i > 0 && s.is_ancestor(k, i - 1)) continue;
            for (int mp = 1; mp < (straight ? 2 : m + 1); ++mp) {
              double last = below[k + 1][j];
              const double lp = diff(s.cum_param_bytes, k + 1, j);
              if (rejects(k + 1, j, mp, m + 1)) continue;
              last = (last + (4.0 * (mp - 1) * lp) / (b * mp)) / mp;
              double t = std::max(a[i][k][m - mp], last);
              if (ratio) {
                t = std::max(t, (2.0 * s.output_bytes[k]) / (b * mp) / *ratio);
                if (j < n - 1) t = std::max(t, (2.0 * s.output_bytes[j]) / (b * mp) / *ratio);
              }
              if (t < best) best = t;
            }
          }
          a[i][j][m] = best;
        }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) below[i][j] = a[i][j][big_m - 1];
    within = big_m;
    answer = a[0][n - 1][big_m - 1];
  }
  return answer;
}

// T of a one-level plan recomputed from its stages: every stage's compute plus
// all-reduce over its replicas, and the transfers around every stage but the
// first, as the recurrence charges them.
inline double replay_one_level(const StateSpace& s, const PipeDreamPlan& plan, const PipeDreamOptions& options) {
  const double b = options.levels[0].bandwidth.bytes_per_s;
  auto diff = [](const std::vector<double>& v, int i, int j) { return i > 0 ? v[j] - v[i - 1] : v[j]; };
  double t = -1.0;
  for (size_t index = 0; index < plan.stages.size(); ++index) {
    const PipeDreamStage& stage = plan.stages[index];
    const int r = stage.replicas;
    const double params = diff(s.cum_param_bytes, stage.first_state, stage.last_state);
    const double compute = diff(s.cum_seconds, stage.first_state, stage.last_state);
    t = std::max(t, (compute + (4.0 * (r - 1) * params) / (b * r)) / r);
    if (index == 0 || !options.activation_compression) continue;
    const double ratio = *options.activation_compression;
    t = std::max(t, (2.0 * s.output_bytes[stage.first_state - 1]) / (b * r) / ratio);
    if (stage.last_state < s.num_states() - 1)
      t = std::max(t, (2.0 * s.output_bytes[stage.last_state]) / (b * r) / ratio);
  }
  return t;
}

}  // namespace baton::testing
