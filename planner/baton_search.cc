#include "planner/baton_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "planner/search_tables.h"
#include "planner/stage_demand.h"
#include "sim/network.h"
#include "sim/schedules.h"
#include "sim/stage_costs.h"

namespace baton {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

int64_t replica_lcm(const Plan& plan) {
  int64_t period = 1;
  for (const StagePlan& stage : plan.stages) period = std::lcm(period, int64_t{stage.replicas});
  return period;
}

// What a run of the program minimizes (baton_search.h).
struct Objective {
  enum Kind {
    kBottleneck,  // the busiest stage's time per microbatch, or its busiest cut
    kMemory,      // the largest stage's peak memory (when nothing fits)
    kFill,        // the sum of the stages' latencies, each stage's period and cut within `ceiling`
  };
  Kind kind = kBottleneck;
  double ceiling = kInfinity;
};

// A stage's device time per microbatch (its period, what bounds the rate) and
// the time one microbatch spends in it, forward and backward on one replica
// (what the fill and drain of a flush schedule add up).
struct StageTerm {
  double period = 0.0;
  double latency = 0.0;
};

// The search for one number of devices D; fills `found` with (value, plan).
class Search {
 public:
  Search(const Profile& profile, const Topology& topology, const SearchOptions& options, const RangeTables& tables,
         const std::vector<int>& replicas)
      : profile_(profile),
        topology_(topology),
        options_(options),
        tables_(tables),
        replicas_(replicas),
        network_(topology),
        cut_memo_(static_cast<size_t>(topology.num_devices()) * replicas.size() * replicas.size(),
                  std::numeric_limits<double>::quiet_NaN()),
        allreduce_memo_(static_cast<size_t>(topology.num_devices()) * replicas.size()),
        demands_(options.schedule, options.microbatches, optimizer_state_factor(options.optimizer)),
        demand_table_(static_cast<size_t>(topology.num_devices() + 1) * replicas.size(), nullptr) {
    size_t slots = 0;
    for (int level = 0; level < topology.num_levels(); ++level) {
      const size_t links = static_cast<size_t>(topology.num_devices() / topology.devices_per_unit(level - 1)) *
                           static_cast<size_t>(topology.levels[level].rails);
      for (int direction = 0; direction < 2; ++direction) {
        link_offset_.push_back(slots);
        slots += links;
      }
    }
    link_load_.assign(slots, 0.0);
    cut_alignment_ = topology.devices_per_unit(topology.num_levels() - 2);
  }

  // kFill's found values are the flush estimate of each plan (fill_estimate).
  void run(int devices, Objective objective, std::vector<std::pair<double, Plan>>& found);
  // One microbatch's forward and backward through the whole model on one
  // device, one call each: no split's latency is less.
  double whole_latency() const { return compute(0, profile_.num_layers()); }

 private:
  size_t index(int j, int u, int ri) const {
    return (static_cast<size_t>(j) * (devices_ + 1) + u) * (replicas_.size() + 1) + ri;
  }
  // Forward and backward of layers [i, j) on one device, each pass one call.
  double compute(int i, int j) const;
  StageTerm stage_term(int i, int j, int start, int ri, const StageDemand& demand, double* memory) const;
  double cut_seconds_per_byte(int start, int ri, int next_ri);
  // One microbatch's activation there and its gradient back across the cut
  // after a stage at `start` with ri's replicas, its first device to the next
  // stage's first on one rail of the level they meet at: per byte of the
  // activation (RangeTables::out) and fixed.
  std::pair<double, double> cut_latency(int start, int ri) const;
  double fill_estimate(int ri);
  // A stage's busiest worker's time per iteration beyond one microbatch's latency.
  double steady(const StageTerm& term) const { return options_.microbatches * term.period - term.latency; }

  // all-reduce time over devices [start, start + r) = per_byte x bytes + fixed.
  std::pair<double, double> allreduce_coefficients(int start, int ri) const;
  // Calls visit(i, j, ri, next_ri, start) for each stage [i, j) of the split
  // whose first stage has replica index ri, in order (next_ri: none at the last).
  template <typename Visit>
  void walk(int ri, Visit&& visit) const;
  Plan rebuild(int ri) const;
  double shared_bottleneck(int ri);

  const Profile& profile_;
  const Topology& topology_;
  const SearchOptions& options_;
  const RangeTables& tables_;
  const std::vector<int>& replicas_;
  Network network_;
  int devices_ = 0;
  std::vector<double> best_;
  std::vector<int> next_j_;
  std::vector<int> next_ri_;
  // Memos indexed densely by device position and replica-count indices (the
  // search reads them in its innermost loops); NaN / unset until computed.
  size_t cut_index(int start, int ri, int next_ri) const {
    return (static_cast<size_t>(start) * replicas_.size() + ri) * replicas_.size() + next_ri;
  }
  std::vector<double> cut_memo_;
  // One slot per (level, direction, child unit, rail): link_offset_[2 level +
  // direction] + child x rails + rail; the loads of one cut, zero between cuts.
  size_t link_index(int level, int device, int direction) const {
    const int per_child = topology_.devices_per_unit(level - 1);
    const int rails = topology_.levels[level].rails;
    return link_offset_[static_cast<size_t>(2 * level + direction)] + static_cast<size_t>(device / per_child) * rails +
           topology_.rail_of(device, level);
  }
  int cut_alignment_ = 1;  // devices of a unit of the level below the top
  std::vector<size_t> link_offset_;
  std::vector<double> link_load_;
  std::vector<size_t> touched_;
  mutable std::vector<std::optional<std::pair<double, double>>> allreduce_memo_;
  StageDemands demands_;
  // [downstream x replica index], filled on use; a schedule that sees the
  // workers upstream (devices_ - downstream) starts it afresh in every run.
  std::vector<const StageDemand*> demand_table_;
  const StageDemand& demand(int ri, int downstream) {
    const StageDemand*& entry = demand_table_[static_cast<size_t>(downstream) * replicas_.size() + ri];
    if (!entry) entry = &demands_.of(replicas_[ri], downstream, devices_ - downstream);
    return *entry;
  }
};

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

template <typename Visit>
void Search::walk(int ri, Visit&& visit) const {
  int i = 0, u = devices_;
  const int none = static_cast<int>(replicas_.size());
  while (ri != none && i < profile_.num_layers()) {
    const int j = next_j_[index(i, u, ri)];
    const int next = next_ri_[index(i, u, ri)];
    visit(i, j, ri, next, devices_ - u);
    u -= replicas_[ri];
    i = j;
    ri = next;
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

using Found = std::vector<std::pair<double, Plan>>;

Found run_all(Search& search, const std::vector<int>& device_counts, Objective objective) {
  Found found;
  for (int devices : device_counts) search.run(devices, objective, found);
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return found;
}

bool same_split(const Plan& a, const Plan& b) {
  if (a.stages.size() != b.stages.size()) return false;
  for (size_t s = 0; s < a.stages.size(); ++s)
    if (a.stages[s].layers != b.stages[s].layers || a.stages[s].devices != b.stages[s].devices) return false;
  return true;
}

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
