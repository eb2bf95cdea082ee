#include "planner/baton_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "planner/baton_search_detail.h"
#include "sim/schedules.h"
#include "sim/stage_costs.h"

namespace baton {

namespace search_detail {

std::pair<double, double> Search::allreduce_coefficients(int start, int ri) const {
  auto& memo = allreduce_memo_[static_cast<size_t>(start) * replicas_.size() + ri];
  if (memo) return *memo;
  std::vector<int> group(static_cast<size_t>(replicas_[ri]));
  std::iota(group.begin(), group.end(), start);
  const Bytes probe(int64_t{1} << 30);
  const double fixed = network_.allreduce_time(group, Bytes(0)).value;  // the time is linear in bytes
  const double per_byte = (network_.allreduce_time(group, probe).value - fixed) / double(probe.value);
  memo = std::make_pair(per_byte, fixed);
  return *memo;
}

double Search::compute(int i, int j) const {
  const auto pass = [&](const std::vector<double>& prefix, double per_call) {
    return one_call(Seconds(prefix[j] - prefix[i]), j - i, Seconds(per_call)).value;
  };
  return tables_.forward_call == 0.0 && tables_.backward_call == 0.0
             ? tables_.compute_prefix[j] - tables_.compute_prefix[i]
             : pass(tables_.forward_prefix, tables_.forward_call) +
                   pass(tables_.backward_prefix, tables_.backward_call);
}

// The stage's device time per microbatch and its peak memory, as its
// schedule's generator lays out its work (planner/stage_demand.h).
StageTerm Search::stage_term(int i, int j, int start, int ri, const StageDemand& demand, double* memory) const {
  const int r = replicas_[ri];
  const double params = tables_.params_prefix[j] - tables_.params_prefix[i];
  *memory = demand.peak_bytes(params, tables_.stash[i][j]);
  const auto [per_byte, fixed] = allreduce_coefficients(start, ri);
  const double allreduce = r > 1 ? per_byte * params + fixed : 0.0;
  const double pass = compute(i, j);
  return {pass * demand.forwards_per_microbatch() + allreduce * demand.allreduces_per_microbatch(), pass};
}

std::pair<double, double> Search::cut_latency(int start, int ri) const {
  const int level = topology_.common_level(start, start + replicas_[ri]);
  if (level < 0) return {0.0, 0.0};
  const Level& link = topology_.levels[level];
  return {2.0 / link.rail_bandwidth().bytes_per_s, 2.0 * link.latency.value};
}

double Search::cut_seconds_per_byte(int start, int ri, int next_ri) {
  // Moved by a whole unit of the level below the top, the devices keep which
  // level each pair meets at and which rail each uses (Topology::common_level,
  // rail_of), and the loads only move to other children: the same cut.
  start %= cut_alignment_;
  double& memo = cut_memo_[cut_index(start, ri, next_ri)];
  if (!std::isnan(memo)) return memo;
  const int r = replicas_[ri];
  const int next = replicas_[next_ri];
  const int64_t period = std::lcm(int64_t{r}, int64_t{next});
  // (level, child, rail, direction) -> s per byte; every device sends and
  // receives on its own rail of its child unit's link (sim/network.h). Summed
  // in k's order into link_load_ (Search::link_index), which is left zero.
  touched_.clear();
  for (int64_t k = 0; k < period; ++k) {
    const int from = start + static_cast<int>(k % r);
    const int to = start + r + static_cast<int>(k % next);
    const int level = topology_.common_level(from, to);
    if (level < 0) continue;
    const double share = 1.0 / topology_.levels[level].rail_bandwidth().bytes_per_s / double(period);
    for (auto [a, b] : {std::pair{from, to}, std::pair{to, from}}) {  // activation, gradient
      for (const size_t link : {link_index(level, a, 0), link_index(level, b, 1)}) {
        if (link_load_[link] == 0.0) touched_.push_back(link);
        link_load_[link] += share;
      }
    }
  }
  double busiest = 0.0;
  for (const size_t link : touched_) {
    busiest = std::max(busiest, link_load_[link]);
    link_load_[link] = 0.0;
  }
  return memo = busiest;
}

void Search::run(int devices, Objective objective, std::vector<std::pair<double, Plan>>& found) {
  devices_ = devices;
  if (sees_upstream(options_.schedule)) std::fill(demand_table_.begin(), demand_table_.end(), nullptr);
  const int layers = profile_.num_layers();
  const int none = static_cast<int>(replicas_.size());
  const size_t cells = index(layers, devices, none) + 1;
  best_.assign(cells, kInfinity);
  next_j_.assign(cells, -1);
  next_ri_.assign(cells, -1);
  best_[index(layers, 0, none)] = 0.0;
  const double limit = double(options_.memory_limit.value);
  const bool memory_only = objective.kind == Objective::kMemory;
  const bool fill = objective.kind == Objective::kFill;
  const double microbatches = options_.microbatches;
  // A stage's term and memory depend on (i, j, its devices), not on the
  // stage after it: computed once per (j, u, ri) for every i, then combined
  // with each tail. Each cell still sees its candidates (j, nri) in the same
  // order, so ties break as they always did.
  std::vector<StageTerm> terms(static_cast<size_t>(layers));
  std::vector<double> memories(static_cast<size_t>(layers));
  for (int j = layers; j >= 1; --j) {
    for (int u = 0; u < devices; ++u) {
      for (int ri = 0; ri < none; ++ri) {
        const int r = replicas_[ri];
        // Under kFill no stage has more replicas than microbatches: the rest
        // would idle, and the same split with fewer is as fast (a smaller
        // all-reduce) on fewer devices, another count of this search.
        if (u + r > devices || (fill && r > options_.microbatches)) break;
        const int start = devices - u - r;
        bool computed = false;
        std::pair<double, double> crossing;  // cut_latency of the stage, under kFill
        int lowest = 0;                      // the stage's first layer is at least this
        for (int nri = 0; nri <= none; ++nri) {
          const double tail = best_[index(j, u, nri)];
          if (tail == kInfinity || (nri == none) != (u == 0)) continue;
          if (!computed) {
            const StageDemand& demand = this->demand(ri, u + r);
            // Under kFill, where a stage's latency grows with its layers and its
            // steady part with its latency (its worker runs at least one
            // microbatch's passes per iteration), the stages [i, j) within the
            // ceiling and the memory are those with i >= lowest.
            const bool prune =
                fill && tables_.latency_grows && demand.forwards_per_microbatch() * options_.microbatches >= 1.0;
            for (int i = j - 1; i >= 0; --i) {
              terms[i] = stage_term(i, j, start, ri, demand, &memories[i]);
              if (prune && (memories[i] > limit || steady(terms[i]) > objective.ceiling)) {
                lowest = i + 1;
                break;
              }
            }
            if (fill) crossing = cut_latency(start, ri);
            computed = true;
          }
          const double per_byte = nri == none ? 0.0 : cut_seconds_per_byte(start, ri, nri);
          for (int i = j - 1; i >= lowest; --i) {
            const double memory = memories[i];
            // A stage grows (its parameters and stash) as i falls: none further fits.
            if (!memory_only && memory > limit) break;
            const double cut = per_byte * tables_.out[i][j];
            double value = 0.0;
            if (memory_only) {
              value = std::max(tail, memory);
            } else if (fill) {
              if (steady(terms[i]) > objective.ceiling || microbatches * cut > objective.ceiling) continue;
              value = tail + terms[i].latency;
              if (nri != none) value += crossing.first * tables_.out[i][j] + crossing.second;
            } else {
              value = std::max({tail, terms[i].period, cut});
            }
            double& cell = best_[index(i, u + r, ri)];
            if (value < cell) {
              cell = value;
              next_j_[index(i, u + r, ri)] = j;
              next_ri_[index(i, u + r, ri)] = nri;
            }
          }
        }
      }
    }
  }
  const bool shared = topology_.levels.front().shared_compute;
  for (int ri = 0; ri < none; ++ri) {
    const double value = best_[index(0, devices, ri)];
    if (value == kInfinity) continue;
    if (fill)
      found.emplace_back(fill_estimate(ri), rebuild(ri));
    else
      found.emplace_back(shared && !memory_only ? shared_bottleneck(ri) : value, rebuild(ri));
  }
}

Plan Search::rebuild(int ri) const {
  Plan plan;
  plan.model = profile_.model;
  plan.schedule = options_.schedule;
  plan.batches = options_.microbatches;
  plan.microbatch_size = options_.microbatch_size;
  walk(ri, [&](int i, int j, int stage_ri, int, int start) {
    StagePlan stage{LayerRange{i, j}, replicas_[stage_ri], {}};
    for (int k = 0; k < stage.replicas; ++k) stage.devices.push_back(start + k);
    plan.stages.push_back(std::move(stage));
  });
  return plan;
}

}  // namespace search_detail

namespace {

using namespace search_detail;

int64_t replica_lcm(const Plan& plan) {
  int64_t period = 1;
  for (const StagePlan& stage : plan.stages) period = std::lcm(period, int64_t{stage.replicas});
  return period;
}

Found run_all(Search& search, const std::vector<int>& device_counts, Objective objective) {
  Found found;
  for (int devices : device_counts) search.run(devices, objective, found);
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return found;
}

}  // namespace

SearchResult search_plans(const Profile& profile, const Topology& topology, const SearchOptions& options) {
  SearchResult result;
  const RangeTables tables = range_tables(profile, topology.device.relative_speed);
  const std::vector<int> replicas = replica_counts(topology, options.straight, options.schedule);
  Search search(profile, topology, options, tables, replicas);
  const std::vector<int> counts = device_counts(topology, options.straight, profile.num_layers());
  auto found = run_all(search, counts, Objective{});
  // Up to 32 devices every replica count is tried, and a rare partition (3, 4, 5,
  // 7, 11 replicas) has a pipedream period beyond what the model builds: such a
  // plan is proposed only when nothing else fits.
  std::vector<Plan> unrated;
  for (auto& [value, plan] : found) {
    if (static_cast<int>(result.candidates.size()) >= options.max_candidates) break;
    if (runs_steady_state(options.schedule) && replica_lcm(plan) > kMaxSteadyStatePeriod)
      unrated.push_back(std::move(plan));
    else
      result.candidates.push_back(std::move(plan));
  }
  if (result.candidates.empty() && !unrated.empty()) result.candidates = std::move(unrated);
  if (!result.candidates.empty() && !runs_steady_state(options.schedule) && options.microbatches > 1 &&
      !topology.levels.front().shared_compute)
    add_fill_candidates(search, counts, options, found.front().first, result.candidates);
  if (result.candidates.empty()) {
    const auto smallest = run_all(search, counts, Objective{Objective::kMemory});
    if (!smallest.empty()) result.smallest_feasible_memory = Bytes(static_cast<int64_t>(smallest.front().first));
  }
  return result;
}

}  // namespace baton
