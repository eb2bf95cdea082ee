#include "planner/baton_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "planner/stage_demand.h"
#include "sim/network.h"
#include "sim/schedules.h"

namespace baton {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Per-range quantities of the profile, O(1) to read.
struct RangeTables {
  std::vector<double> compute_prefix;  // seconds, forward + backward, / relative speed
  std::vector<int64_t> params_prefix;
  std::vector<std::vector<int64_t>> out;    // out[i][j]: bytes stage [i, j) sends on
  std::vector<std::vector<int64_t>> stash;  // stash[i][j]: bytes per in-flight microbatch
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
  t.params_prefix.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    const Layer& layer = profile.layers[i];
    t.compute_prefix[i + 1] = t.compute_prefix[i] + (layer.forward + layer.backward).value / speed;
    t.params_prefix[i + 1] = t.params_prefix[i] + layer.param_bytes.value;
  }
  const std::vector<int> last = last_use(profile);
  t.out.assign(n + 1, std::vector<int64_t>(n + 1, 0));
  t.stash.assign(n + 1, std::vector<int64_t>(n + 1, 0));
  for (int j = 1; j <= n; ++j) {  // out[i][j] = sum_{p in [i, j), last_use[p] >= j} bytes
    int64_t sum = 0;
    for (int i = j - 1; i >= 0; --i) {
      if (last[i] >= j) sum += profile.layers[i].output_bytes.value;
      t.out[i][j] = sum;
    }
  }
  for (int i = 0; i < n; ++i) {  // stash = input bytes (producers < i used in [i, j)) + own outputs
    std::vector<int64_t> enters(n + 1, 0);
    for (int p = 0; p < i; ++p) {
      int first = n;
      for (int c = i; c < n && first == n; ++c)
        for (int q : profile.layers[c].inputs)
          if (q == p) {
            first = c;
            break;
          }
      if (first < n) enters[first] += profile.layers[p].output_bytes.value;
    }
    int64_t input = 0, own = 0;
    for (int j = i + 1; j <= n; ++j) {
      input += enters[j - 1];
      own += profile.layers[j - 1].output_bytes.value;
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
        demand_table_(static_cast<size_t>(topology.num_devices() + 1) * replicas.size(), nullptr) {}

  void run(int devices, std::vector<std::pair<double, Plan>>& found);

 private:
  size_t index(int j, int u, int ri) const {
    return (static_cast<size_t>(j) * (devices_ + 1) + u) * (replicas_.size() + 1) + ri;
  }
  double stage_term(int i, int j, int start, int ri, const StageDemand& demand, double* memory) const;
  double cut_seconds_per_byte(int start, int ri, int next_ri);
  // all-reduce time over devices [start, start + r) = per_byte x bytes + fixed.
  std::pair<double, double> allreduce_coefficients(int start, int ri) const;
  Plan rebuild(int ri) const;

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
  const Bytes params(tables_.params_prefix[j] - tables_.params_prefix[i]);
  *memory = demand.peak_bytes(double(params.value), double(tables_.stash[i][j]));
  const auto [per_byte, fixed] = allreduce_coefficients(start, ri);
  const double allreduce = r > 1 ? per_byte * double(params.value) + fixed : 0.0;
  const double compute = tables_.compute_prefix[j] - tables_.compute_prefix[i];
  return compute * demand.forwards_per_microbatch() + allreduce * demand.allreduces_per_microbatch();
}

double Search::cut_seconds_per_byte(int start, int ri, int next_ri) {
  double& memo = cut_memo_[cut_index(start, ri, next_ri)];
  if (!std::isnan(memo)) return memo;
  const int r = replicas_[ri];
  const int next = replicas_[next_ri];
  const int64_t period = std::lcm(int64_t{r}, int64_t{next});
  // (level, child, rail, direction) -> s per byte; every device sends and
  // receives on its own rail of its child unit's link (sim/network.h).
  std::map<std::tuple<int, int, int, int>, double> load;
  for (int64_t k = 0; k < period; ++k) {
    const int from = start + static_cast<int>(k % r);
    const int to = start + r + static_cast<int>(k % next);
    const int level = topology_.common_level(from, to);
    if (level < 0) continue;
    const double share = 1.0 / topology_.levels[level].rail_bandwidth().bytes_per_s / double(period);
    for (auto [a, b] : {std::pair{from, to}, std::pair{to, from}}) {  // activation, gradient
      load[{level, topology_.child_of(a, level), topology_.rail_of(a, level), 0}] += share;
      load[{level, topology_.child_of(b, level), topology_.rail_of(b, level), 1}] += share;
    }
  }
  double busiest = 0.0;
  for (const auto& [link, value] : load) busiest = std::max(busiest, value);
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
  for (int j = layers; j >= 1; --j) {
    for (int u = 0; u < devices; ++u) {
      for (int nri = 0; nri <= none; ++nri) {
        const double tail = best_[index(j, u, nri)];
        if (tail == kInfinity || (nri == none) != (u == 0)) continue;
        for (int ri = 0; ri < none; ++ri) {
          const int r = replicas_[ri];
          if (u + r > devices) break;
          const int start = devices - u - r;
          const double per_byte = nri == none ? 0.0 : cut_seconds_per_byte(start, ri, nri);
          const StageDemand& demand = this->demand(ri, u + r);
          for (int i = j - 1; i >= 0; --i) {
            double memory = 0.0;
            const double term = stage_term(i, j, start, ri, demand, &memory);
            if (!minimize_memory_ && memory > limit) continue;
            const double cut = per_byte * double(tables_.out[i][j]);
            const double value = minimize_memory_ ? std::max(tail, memory) : std::max({tail, term, cut});
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
  for (int ri = 0; ri < none; ++ri)
    if (best_[index(0, devices, ri)] < kInfinity) found.emplace_back(best_[index(0, devices, ri)], rebuild(ri));
}

Plan Search::rebuild(int ri) const {
  Plan plan;
  plan.model = profile_.model;
  plan.schedule = options_.schedule;
  plan.batches = options_.microbatches;
  plan.microbatch_size = options_.microbatch_size;
  int i = 0, u = devices_, device = 0;
  const int none = static_cast<int>(replicas_.size());
  while (ri != none && i < profile_.num_layers()) {
    const int j = next_j_[index(i, u, ri)];
    const int r = replicas_[ri];
    StagePlan stage{LayerRange{i, j}, r, {}};
    for (int k = 0; k < r; ++k) stage.devices.push_back(device++);
    plan.stages.push_back(stage);
    const int next = next_ri_[index(i, u, ri)];
    u -= r;
    i = j;
    ri = next;
  }
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
