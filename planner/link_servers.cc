#include "planner/link_servers.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include "planner/link_order.h"

namespace baton {

namespace {

// Issue times are compared on a grid this fine (relative to the period or the
// makespan; in a run, to the period of the graph without servers), so that
// times equal up to rounding count as equal.
constexpr double kTimeGrid = 1e-9;

// `period` > 0: cyclic order by phase; 0: plain order by time. Equal phases
// go to the lower sender worker, then the lower transfer.
LinkOrder order_links(const PlanEventGraph& graph, const std::vector<double>& time, double period) {
  const auto issue = [&](const TransferEvent& t) {  // unreachable senders count as 0
    return std::isfinite(time[t.sender]) ? time[t.sender] : 0.0;
  };
  double scale = std::abs(period);
  for (const TransferEvent& t : graph.transfers) scale = std::max(scale, std::abs(issue(t)));
  const double grid = std::max(scale, 1e-300) * kTimeGrid;
  const int64_t cycle = period > 0 ? std::llround(period / grid) : 0;
  using Keyed = std::pair<std::tuple<int64_t, int, int>, LinkSlot>;  // (phase, sender worker, transfer)
  std::vector<std::vector<Keyed>> keyed(static_cast<size_t>(graph.num_links));
  for (int i = 0; i < static_cast<int>(graph.transfers.size()); ++i) {
    const TransferEvent& t = graph.transfers[i];
    const int64_t at = std::llround(issue(t) / grid);
    const int64_t shift = cycle > 0 ? floor_div(at, cycle) : 0;
    for (int link : t.links) keyed[link].push_back({{at - shift * cycle, t.sender_worker, i}, LinkSlot{i, shift}});
  }
  LinkOrder order(keyed.size());
  for (size_t link = 0; link < keyed.size(); ++link) {
    std::sort(keyed[link].begin(), keyed[link].end(),
              [](const Keyed& a, const Keyed& b) { return a.first < b.first; });
    for (const Keyed& k : keyed[link]) order[link].push_back(k.second);
  }
  return order;
}

bool same_order(const LinkOrder& a, const LinkOrder& b) {
  if (a.size() != b.size()) return false;
  for (size_t l = 0; l < a.size(); ++l) {
    if (a[l].size() != b[l].size()) return false;
    for (size_t i = 0; i < a[l].size(); ++i)
      if (a[l][i].transfer != b[l][i].transfer || a[l][i].shift != b[l][i].shift) return false;
  }
  return true;
}

// A fingerprint of an order, to notice when the iteration comes back to one.
size_t order_hash(const LinkOrder& order) {
  size_t hash = order.size();
  for (const std::vector<LinkSlot>& slots : order)
    for (const LinkSlot& slot : slots)
      hash = hash * 1000003u ^ (static_cast<size_t>(slot.transfer) * 31u + static_cast<size_t>(slot.shift));
  return hash;
}

void add_chain_edge(PlanEventGraph& graph, const LinkSlot& previous, const LinkSlot& next, int64_t tokens) {
  const TransferEvent& from = graph.transfers[previous.transfer];
  const TransferEvent& to = graph.transfers[next.transfer];
  graph.graph.add_edge(from.node, to.node, to.wire.value, static_cast<int>(tokens));
  graph.costs.push_back(EdgeCost{Seconds(0.0), to.wire, Seconds(0.0)});
}

// The base graph plus, on every link, T_prev -> T_next in `order`.
PlanEventGraph with_chains(const PlanEventGraph& base, const LinkOrder& order, bool periodic) {
  PlanEventGraph graph = base;
  for (const std::vector<LinkSlot>& slots : order) {
    const size_t n = slots.size();
    for (size_t i = periodic ? 0 : 1; i < n; ++i) {
      const LinkSlot& previous = slots[(i + n - 1) % n];
      const int64_t tokens = periodic ? previous.shift - slots[i].shift + (i == 0 ? 1 : 0) : 0;
      add_chain_edge(graph, previous, slots[i], tokens);
    }
  }
  return graph;
}

// Links with transfers from several sender workers where some transfer waits
// for its predecessor (time[] of an instance p is time + p period).
int count_contended(const PlanEventGraph& graph, const LinkOrder& order, const std::vector<double>& time,
                    double period) {
  int contended = 0;
  for (const std::vector<LinkSlot>& slots : order) {
    const size_t n = slots.size();
    bool waits = false;
    for (size_t i = (period > 0 ? 0 : 1); i < n && !waits; ++i) {
      const TransferEvent& t = graph.transfers[slots[i].transfer];
      const LinkSlot& previous = slots[(i + n - 1) % n];
      const TransferEvent& p = graph.transfers[previous.transfer];
      if (p.sender_worker == t.sender_worker) continue;
      const int64_t tokens = period > 0 ? previous.shift - slots[i].shift + (i == 0 ? 1 : 0) : 0;
      const double previous_end = time[p.node] - double(tokens) * period;
      const double tolerance = kTimeGrid * std::max(std::abs(previous_end), period);
      waits = previous_end > time[t.sender] + tolerance;
    }
    if (waits) ++contended;
  }
  return contended;
}

// The fixed point of the order iteration started from the graph without servers.
PeriodicSolution fixed_point(const PlanEventGraph& base, CriticalCycle first) {
  PeriodicSolution current{base, std::move(first), 0, false, 0};
  PeriodicSolution fastest;  // among the orders visited, when none settles
  LinkOrder previous, fastest_order;
  std::vector<size_t> visited;
  for (int round = 0; round < kMaxOrderRounds; ++round) {
    const std::vector<double> schedule = periodic_schedule(current.graph.graph, current.cycle);
    LinkOrder order = order_links(base, schedule, current.cycle.mean);
    if (round > 0 && same_order(order, previous)) {
      current.settled = true;
      current.contended_links = count_contended(base, order, schedule, current.cycle.mean);
      return current;
    }
    const size_t hash = order_hash(order);
    if (std::find(visited.begin(), visited.end(), hash) != visited.end()) break;  // the orders cycle
    visited.push_back(hash);
    PlanEventGraph graph = with_chains(base, order, /*periodic=*/true);
    auto next = maximum_cycle_mean(graph.graph);
    if (!next) break;  // an order no steady state produces
    current = PeriodicSolution{std::move(graph), std::move(*next), round + 1, false, 0};
    if (fastest.rounds == 0 || current.cycle.mean < fastest.cycle.mean) {
      fastest = current;
      fastest_order = order;
    }
    previous = std::move(order);
  }
  if (fastest.rounds == 0) return current;
  const std::vector<double> schedule = periodic_schedule(fastest.graph.graph, fastest.cycle);
  fastest.contended_links = count_contended(base, fastest_order, schedule, fastest.cycle.mean);
  return fastest;
}

// The order a run from the start settles into (planner/link_order.h), with the
// links as servers on the graph unrolled over the K periods it repeats in.
// Runs of kFirstRunPeriods, then twice as many, up to kMaxRunPeriods, until the
// order repeats; nullopt when it never does.
std::optional<PeriodicSolution> run_solution(const PlanEventGraph& base, double period) {
  const double grid = std::max(period, 1e-300) * kTimeGrid;
  const int64_t longest = std::clamp(kMaxRunMinibatches / std::max<int64_t>(base.minibatches_per_period, 1),
                                     kFirstRunPeriods, kMaxRunPeriods);
  for (int64_t periods = kFirstRunPeriods; periods <= longest; periods *= 2) {
    const RunOrder run = follow_run(base, periods, kMaxRepeat, grid);
    if (run.repeat == 0) continue;
    const PlanEventGraph unrolled = unroll_periods(base, run.repeat);
    PlanEventGraph graph = with_chains(unrolled, run.order, /*periodic=*/true);
    auto cycle = maximum_cycle_mean(graph.graph);
    if (!cycle) return std::nullopt;
    const std::vector<double> schedule = periodic_schedule(graph.graph, *cycle);
    const int contended = count_contended(unrolled, run.order, schedule, cycle->mean);
    return PeriodicSolution{std::move(graph), std::move(*cycle), 1, true, contended, run.repeat};
  }
  return std::nullopt;
}

}  // namespace

Result<PeriodicSolution> solve_periodic(const PlanEventGraph& base) {
  auto first = maximum_cycle_mean(base.graph);
  if (!first) return first.error();
  if (base.transfers.empty()) return PeriodicSolution{base, std::move(*first), 0, true, 0};  // nothing on the wire
  if (!base.start_up.first_period.empty())
    if (auto run = run_solution(base, first->mean)) return std::move(*run);
  return fixed_point(base, std::move(*first));
}

Result<FlushSolution> solve_flush(const PlanEventGraph& base) {
  FlushSolution solution;
  auto paths = longest_paths(base.graph);
  if (!paths) return paths.error();
  solution.graph = base;
  solution.paths = std::move(*paths);
  LinkOrder previous;
  for (int round = 0; round < kMaxOrderRounds; ++round) {
    LinkOrder order = order_links(base, solution.paths.finish, 0.0);
    if (round > 0 && same_order(order, previous)) {
      solution.settled = true;
      break;
    }
    PlanEventGraph graph = with_chains(base, order, /*periodic=*/false);
    auto next = longest_paths(graph.graph);
    if (!next) break;
    solution.graph = std::move(graph);
    solution.paths = std::move(*next);
    solution.rounds = round + 1;
    previous = std::move(order);
  }
  return solution;
}

}  // namespace baton
