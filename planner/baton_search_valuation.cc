// A split the program found, valued beyond its busiest stage: a flush
// schedule's iteration with its fill and drain (Search::fill_estimate, and the
// candidates of least fill under ceilings, add_fill_candidates), and stages
// that share one device's compute (Search::shared_bottleneck).
#include <algorithm>
#include <functional>
#include <vector>

#include "planner/baton_search_detail.h"
#include "sim/stage_costs.h"

namespace baton::search_detail {

// A flush schedule's iteration of M microbatches, estimated from the split's
// stages: the most any stage's busiest worker is busy beyond the time one
// microbatch spends in it (Search::steady), or M times a cut's busiest link's
// time, plus the time one microbatch takes through every stage and cut and back
// (the fill and drain around it). For p equal stages of one replica, period
// and latency t: (M - 1) t + p t = (M + p - 1) t, 1F1B's and GPipe's iteration.
double Search::fill_estimate(int ri) {
  double busiest = 0.0, through = 0.0;
  const int none = static_cast<int>(replicas_.size());
  const double microbatches = options_.microbatches;
  walk(ri, [&](int i, int j, int stage_ri, int next, int start) {
    double memory = 0.0;
    const StageTerm term = stage_term(i, j, start, stage_ri, demand(stage_ri, devices_ - start), &memory);
    busiest = std::max(busiest, steady(term));
    through += term.latency;
    if (next != none) {
      busiest = std::max(busiest, microbatches * cut_seconds_per_byte(start, stage_ri, next) * tables_.out[i][j]);
      const auto [per_byte, fixed] = cut_latency(start, stage_ri);
      through += per_byte * tables_.out[i][j] + fixed;
    }
  });
  return busiest + through;
}

// Where level 0's devices are streams of one device (Level::shared_compute),
// the stages on one compute unit take turns on its compute: the split the
// program found (the best under its max over stages) is valued by its busiest
// unit, the sum of the per-microbatch demands of the workers on it, or its
// busiest cut. So one worker per unit, with no hand-over and one call per
// pass, ranks first where it fits, as the simulator would rank it. Where the
// unit's streams compute at once (Level::shared_speedup S > 1) a unit is
// valued as the simulator bounds it: its summed demand over S, the part of it
// its workers issue (each stage's host share, sim/stage_costs.h: one host's
// issuing, shared call by call), and its largest single demand (an action
// runs at rate 1 at most), whichever is longest.
double Search::shared_bottleneck(int ri) {
  const size_t units = static_cast<size_t>(topology_.num_compute_units());
  const double capacity = topology_.levels.front().shared_speedup;
  std::vector<double> load(units, 0.0);
  std::vector<double> issued(units, 0.0);
  std::vector<double> largest(units, 0.0);
  double worst = 0.0;
  const int none = static_cast<int>(replicas_.size());
  walk(ri, [&](int i, int j, int stage_ri, int next, int start) {
    double memory = 0.0;
    const double term = stage_term(i, j, start, stage_ri, demand(stage_ri, devices_ - start), &memory).period;
    double share = 1.0;
    if (capacity > 1.0) {
      const StageCost cost = stage_cost(profile_, LayerRange{i, j}, topology_.device.relative_speed);
      const Seconds both = cost.forward + cost.backward;
      if (both.value > 0.0)
        share = (cost.forward * cost.host_forward_share + cost.backward * cost.host_backward_share) / both;
    }
    for (int d = start; d < start + replicas_[stage_ri]; ++d) {
      const size_t unit = static_cast<size_t>(topology_.compute_unit(d));
      load[unit] += term;
      issued[unit] += term * share;
      largest[unit] = std::max(largest[unit], term);
    }
    if (next != none) worst = std::max(worst, cut_seconds_per_byte(start, stage_ri, next) * tables_.out[i][j]);
  });
  for (size_t unit = 0; unit < units; ++unit)
    worst =
        std::max(worst, capacity > 1.0 ? std::max({load[unit] / capacity, issued[unit], largest[unit]}) : load[unit]);
  return worst;
}

namespace {

bool same_split(const Plan& a, const Plan& b) {
  if (a.stages.size() != b.stages.size()) return false;
  for (size_t s = 0; s < a.stages.size(); ++s)
    if (a.stages[s].layers != b.stages[s].layers || a.stages[s].devices != b.stages[s].devices) return false;
  return true;
}

}  // namespace

// A flush schedule's fill and drain count too, which the smallest bottleneck
// ignores. Search::fill_estimate values a split at its busiest stage's steady
// part plus its latency through all stages; for ceilings on the steady part,
// the program finds the split of least latency within each, and the best
// estimates not already among the candidates are added to them. The ceilings
// run evenly from M B - S_min, under which no split's steady part lies (B the
// smallest bottleneck, S_min the whole model's latency as one stage, which no
// stage's latency exceeds), to E - S_min, past which no split beats the best
// estimate E found at M B (no split's latency through all stages is under
// S_min). Device counts run from the most down, while they can still win.
void add_fill_candidates(Search& search, const std::vector<int>& device_counts, const SearchOptions& options,
                         double bottleneck, std::vector<Plan>& candidates) {
  constexpr int kCeilings = 12;
  const double whole = search.whole_latency();
  const double microbatches = options.microbatches;
  std::vector<int> counts = device_counts;
  std::sort(counts.begin(), counts.end(), std::greater<>());
  Found found;
  double best = kInfinity;
  // On D devices some stage's period is at least whole / D (a stage of
  // latency l on r replicas has a period of at least l / r, and the stages'
  // latencies sum to at least whole), so every split's estimate is at least
  // M whole / D: no count from where that reaches the best found can beat it.
  const auto run_ceiling = [&](double ceiling) {
    for (int devices : counts) {
      if (microbatches * whole / devices >= best) break;
      const size_t before = found.size();
      search.run(devices, Objective{Objective::kFill, ceiling}, found);
      for (size_t k = before; k < found.size(); ++k) best = std::min(best, found[k].first);
    }
  };
  run_ceiling(microbatches * bottleneck);
  if (found.empty()) return;
  const double lowest = microbatches * bottleneck - whole;
  const double highest = best - whole;
  for (int k = 0; k < kCeilings && highest > lowest; ++k)
    run_ceiling(lowest + (highest - lowest) * k / (kCeilings - 1));
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  int added = 0;
  for (auto& [value, plan] : found) {
    if (added >= options.max_candidates) break;
    const auto known = [&](const Plan& other) { return same_split(plan, other); };
    if (std::any_of(candidates.begin(), candidates.end(), known)) continue;
    candidates.push_back(std::move(plan));
    ++added;
  }
}

}  // namespace baton::search_detail
