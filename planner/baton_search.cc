#include "planner/baton_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "planner/stage_demand.h"
#include "sim/network.h"
#include "sim/schedules.h"
#include "sim/stage_costs.h"

namespace baton {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Per-range quantities of the profile, O(1) to read.
struct RangeTables {
  // Seconds / relative speed. A stage's pass is one call (sim/stage_costs.h:
  // one_call): with a call cost, forward and backward apart (each never below
  // zero); without, their sum (the same figure, summed as it always was, so
  // that ties between splits break as they did).
  std::vector<double> compute_prefix;  // forward + backward
  std::vector<double> forward_prefix;
  std::vector<double> backward_prefix;
  double forward_call = 0.0;
  double backward_call = 0.0;
  // Bytes in floating point, as the search weighs them (exact to 2^53; a
  // profile of absurd sizes cannot overflow a sum).
  std::vector<double> params_prefix;
  std::vector<std::vector<double>> out;    // out[i][j]: bytes stage [i, j) sends on
  std::vector<std::vector<double>> stash;  // stash[i][j]: bytes per in-flight microbatch
};

std::vector<int> last_use(const Profile& profile) {
  std::vector<int> last(profile.layers.size(), -1);
  for (int c = 0; c < profile.num_layers(); ++c)
    for (int p : profile.layers[c].inputs) last[p] = std::max(last[p], c);
  return last;
}

RangeTables range_tables(const Profile& profile, double speed) {
  const int n = profile.num_layers();
  RangeTables t;
  t.compute_prefix.assign(n + 1, 0.0);
  t.forward_prefix.assign(n + 1, 0.0);
  t.backward_prefix.assign(n + 1, 0.0);
  t.forward_call = profile.call_cost.forward.value / speed;
  t.backward_call = profile.call_cost.backward.value / speed;
  t.params_prefix.assign(n + 1, 0.0);
  for (int i = 0; i < n; ++i) {
    const Layer& layer = profile.layers[i];
    t.compute_prefix[i + 1] = t.compute_prefix[i] + (layer.forward + layer.backward).value / speed;
    t.forward_prefix[i + 1] = t.forward_prefix[i] + layer.forward.value / speed;
    t.backward_prefix[i + 1] = t.backward_prefix[i] + layer.backward.value / speed;
    t.params_prefix[i + 1] = t.params_prefix[i] + double(layer.param_bytes.value);
  }
  const std::vector<int> last = last_use(profile);
  t.out.assign(n + 1, std::vector<double>(n + 1, 0.0));
  t.stash.assign(n + 1, std::vector<double>(n + 1, 0.0));
  for (int j = 1; j <= n; ++j) {  // out[i][j] = sum_{p in [i, j), last_use[p] >= j} bytes
    double sum = 0.0;
    for (int i = j - 1; i >= 0; --i) {
      if (last[i] >= j) sum += double(profile.layers[i].output_bytes.value);
      t.out[i][j] = sum;
    }
  }
  for (int i = 0; i < n; ++i) {  // stash = input bytes (producers < i used in [i, j)) + own outputs
    std::vector<double> enters(n + 1, 0.0);
    for (int p = 0; p < i; ++p) {
      int first = n;
      for (int c = i; c < n && first == n; ++c)
        for (int q : profile.layers[c].inputs)
          if (q == p) {
            first = c;
            break;
          }
      if (first < n) enters[first] += double(profile.layers[p].output_bytes.value);
    }
    double input = 0.0, own = 0.0;
    for (int j = i + 1; j <= n; ++j) {
      input += enters[j - 1];
      own += double(profile.layers[j - 1].output_bytes.value);
      t.stash[i][j] = input + own;
    }
  }
  return t;
}

// Above 32 devices: powers of two and multiples of a server. Under pipedream
// only counts of the form 2^a or 3 x 2^a (times the server size, or not) are
// tried, so that R = lcm of a plan's counts stays at most 3 x 2^a_max x (the
// server size's odd part), within kMaxSteadyStatePeriod (sim/simulator.h) for any cluster baton
// ships; "multiples of a server" such as 5, 7 or 11 servers would give plans
// whose R the simulator does not measure (e.g. 96, 136 and 160 replicas: R = 8160).
std::vector<int> replica_counts(const Topology& topology, bool straight, Schedule schedule) {
  const int devices = topology.num_devices();
  if (straight) return {1};
  std::vector<int> counts;
  if (devices <= 32) {
    for (int r = 1; r <= devices; ++r) counts.push_back(r);
    return counts;
  }
  const int unit = topology.devices_per_unit(0);
  if (runs_steady_state(schedule)) {
    for (int base : {1, unit})
      for (int factor : {1, 3})
        for (int r = base * factor; r <= devices; r *= 2) counts.push_back(r);
  } else {
    for (int r = 1; r <= devices; r *= 2) counts.push_back(r);
    for (int r = unit; r <= devices; r += unit) counts.push_back(r);
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

int64_t replica_lcm(const Plan& plan) {
  int64_t period = 1;
  for (const StagePlan& stage : plan.stages) period = std::lcm(period, int64_t{stage.replicas});
  return period;
}

std::vector<int> device_counts(const Topology& topology, bool straight, int layers) {
  const int devices = topology.num_devices();
  std::vector<int> counts;
  if (straight || devices <= 16) {
    for (int d = 1; d <= std::min(devices, straight ? layers : devices); ++d) counts.push_back(d);
    return counts;
  }
  for (int d = devices; d >= 1; d /= 2) counts.push_back(d);
  return counts;
}

// The search for one number of devices D; fills `found` with (value, plan).
class Search {
 public:
  Search(const Profile& profile, const Topology& topology, const SearchOptions& options, const RangeTables& tables,
         const std::vector<int>& replicas, bool minimize_memory)
      : profile_(profile),
        topology_(topology),
        options_(options),
        tables_(tables),
        replicas_(replicas),
        network_(topology),
        minimize_memory_(minimize_memory),
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

  void run(int devices, std::vector<std::pair<double, Plan>>& found);

 private:
  size_t index(int j, int u, int ri) const {
    return (static_cast<size_t>(j) * (devices_ + 1) + u) * (replicas_.size() + 1) + ri;
  }
  double stage_term(int i, int j, int start, int ri, const StageDemand& demand, double* memory) const;
  double cut_seconds_per_byte(int start, int ri, int next_ri);
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
  bool minimize_memory_;
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

// The stage's device time per microbatch and its peak memory, as its
// schedule's generator lays out its work (planner/stage_demand.h).
double Search::stage_term(int i, int j, int start, int ri, const StageDemand& demand, double* memory) const {
  const int r = replicas_[ri];
  const double params = tables_.params_prefix[j] - tables_.params_prefix[i];
  *memory = demand.peak_bytes(params, tables_.stash[i][j]);
  const auto [per_byte, fixed] = allreduce_coefficients(start, ri);
  const double allreduce = r > 1 ? per_byte * params + fixed : 0.0;
  const auto pass = [&](const std::vector<double>& prefix, double per_call) {
    return one_call(Seconds(prefix[j] - prefix[i]), j - i, Seconds(per_call)).value;
  };
  const double compute =
      tables_.forward_call == 0.0 && tables_.backward_call == 0.0
          ? tables_.compute_prefix[j] - tables_.compute_prefix[i]
          : pass(tables_.forward_prefix, tables_.forward_call) + pass(tables_.backward_prefix, tables_.backward_call);
  return compute * demand.forwards_per_microbatch() + allreduce * demand.allreduces_per_microbatch();
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

void Search::run(int devices, std::vector<std::pair<double, Plan>>& found) {
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
  // A stage's term and memory depend on (i, j, its devices), not on the
  // stage after it: computed once per (j, u, ri) for every i, then combined
  // with each tail. Each cell still sees its candidates (j, nri) in the same
  // order, so ties break as they always did.
  std::vector<double> terms(static_cast<size_t>(layers)), memories(static_cast<size_t>(layers));
  for (int j = layers; j >= 1; --j) {
    for (int u = 0; u < devices; ++u) {
      for (int ri = 0; ri < none; ++ri) {
        const int r = replicas_[ri];
        if (u + r > devices) break;
        const int start = devices - u - r;
        bool computed = false;
        for (int nri = 0; nri <= none; ++nri) {
          const double tail = best_[index(j, u, nri)];
          if (tail == kInfinity || (nri == none) != (u == 0)) continue;
          if (!computed) {
            const StageDemand& demand = this->demand(ri, u + r);
            for (int i = j - 1; i >= 0; --i) terms[i] = stage_term(i, j, start, ri, demand, &memories[i]);
            computed = true;
          }
          const double per_byte = nri == none ? 0.0 : cut_seconds_per_byte(start, ri, nri);
          for (int i = j - 1; i >= 0; --i) {
            const double memory = memories[i];
            // A stage grows (its parameters and stash) as i falls: none further fits.
            if (!minimize_memory_ && memory > limit) break;
            const double cut = per_byte * tables_.out[i][j];
            const double value = minimize_memory_ ? std::max(tail, memory) : std::max({tail, terms[i], cut});
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
    if (value < kInfinity) found.emplace_back(shared && !minimize_memory_ ? shared_bottleneck(ri) : value, rebuild(ri));
  }
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
    const double term = stage_term(i, j, start, stage_ri, demand(stage_ri, devices_ - start), &memory);
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

std::vector<std::pair<double, Plan>> run_all(const Profile& profile, const Topology& topology,
                                             const SearchOptions& options, bool minimize_memory) {
  const RangeTables tables = range_tables(profile, topology.device.relative_speed);
  const std::vector<int> replicas = replica_counts(topology, options.straight, options.schedule);
  Search search(profile, topology, options, tables, replicas, minimize_memory);
  std::vector<std::pair<double, Plan>> found;
  for (int devices : device_counts(topology, options.straight, profile.num_layers())) search.run(devices, found);
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return found;
}

}  // namespace

SearchResult search_plans(const Profile& profile, const Topology& topology, const SearchOptions& options) {
  SearchResult result;
  auto found = run_all(profile, topology, options, /*minimize_memory=*/false);
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
  if (result.candidates.empty()) {
    const auto smallest = run_all(profile, topology, options, /*minimize_memory=*/true);
    if (!smallest.empty()) result.smallest_feasible_memory = Bytes(static_cast<int64_t>(smallest.front().first));
  }
  return result;
}

}  // namespace baton
