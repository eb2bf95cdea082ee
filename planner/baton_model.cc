#include "planner/baton_model.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "planner/event_graph.h"
#include "planner/link_servers.h"
#include "planner/max_plus.h"
#include "sim/network.h"
#include "sim/stage_costs.h"

namespace baton {

int inflight_microbatches(Schedule schedule, int downstream_workers, int replicas, int microbatches) {
  const int local = (microbatches + replicas - 1) / replicas;  // replica 0 has the most
  const int warmup = (downstream_workers - 1) / replicas;
  switch (schedule) {
    case Schedule::kPipeDream: return warmup + 1;
    case Schedule::kOneFOneB: return std::min(std::min(warmup, local) + 1, local);
    case Schedule::kGPipe: return local;
    case Schedule::kDataParallel: return 1;
  }
  return 1;
}

Bytes stage_memory(Schedule schedule, Bytes params, Bytes stash, int downstream_workers, int replicas,
                   int microbatches, Optimizer optimizer) {
  const int inflight = inflight_microbatches(schedule, downstream_workers, replicas, microbatches);
  const int versions = schedule == Schedule::kPipeDream ? inflight : 1;
  const auto optimizer_bytes =
      static_cast<int64_t>(static_cast<double>(params.value) * optimizer_state_factor(optimizer));
  return params * versions + params + Bytes(optimizer_bytes) + stash * inflight;
}

namespace {

using LinkKey = std::tuple<int, int, int>;  // level, child, direction (0 up, 1 down)

// Seconds per microbatch each directional link carries, and per cut the
// busiest link's share, averaged over microbatches [0, count).
struct LinkLoads {
  std::map<LinkKey, double> seconds;
  std::vector<double> cut_busiest;  // per cut s (after stage s)
};

void book(std::map<LinkKey, double>& load, const Topology& topology, int from, int to, double seconds) {
  const int level = topology.common_level(from, to);
  if (level < 0) return;
  load[{level, topology.child_of(from, level), 0}] += seconds;
  load[{level, topology.child_of(to, level), 1}] += seconds;
}

LinkLoads link_loads(const Topology& topology, const Plan& plan, const std::vector<StageCost>& costs,
                     int64_t count) {
  LinkLoads loads;
  for (int s = 0; s + 1 < plan.num_stages(); ++s) {
    const StagePlan& a = plan.stages[s];
    const StagePlan& b = plan.stages[s + 1];
    std::map<LinkKey, double> own;
    for (int64_t k = 0; k < count; ++k) {
      const int from = a.devices[k % a.replicas];
      const int to = b.devices[k % b.replicas];
      const int level = topology.common_level(from, to);
      if (level < 0) continue;
      const double seconds =
          transfer_time(costs[s].activation_out, topology.levels[level].bandwidth()).value / double(count);
      book(own, topology, from, to, seconds);  // activation
      book(own, topology, to, from, seconds);  // gradient
    }
    double busiest = 0.0;
    for (const auto& [key, seconds] : own) {
      busiest = std::max(busiest, seconds);
      loads.seconds[key] += seconds;
    }
    loads.cut_busiest.push_back(busiest);
  }
  return loads;
}

// Compute per microbatch of the busiest device (workers sharing a device add up).
Seconds device_load(const Plan& plan, const std::vector<StageCost>& costs) {
  std::map<int, Seconds> load;
  for (int s = 0; s < plan.num_stages(); ++s)
    for (int device : plan.stages[s].devices)
      load[device] += (costs[s].forward + costs[s].backward) / plan.stages[s].replicas;
  Seconds busiest;
  for (const auto& [device, seconds] : load) busiest = max(busiest, seconds);
  return busiest;
}

StageEstimate estimate_stage(const Plan& plan, int s, const StageCost& cost, const Network& network,
                             int downstream, Optimizer optimizer) {
  const StagePlan& stage = plan.stages[s];
  StageEstimate e;
  e.forward = cost.forward;
  e.backward = cost.backward;
  e.allreduce = stage.replicas > 1 ? network.allreduce_time(stage.devices, cost.params) : Seconds(0.0);
  const Seconds compute = cost.forward + cost.backward;
  e.period = plan.schedule == Schedule::kPipeDream ? (compute + e.allreduce) / stage.replicas
                                                   : compute / stage.replicas;
  e.inflight = inflight_microbatches(plan.schedule, downstream, stage.replicas, plan.microbatches);
  e.weight_versions = plan.schedule == Schedule::kPipeDream ? e.inflight : 1;
  e.weights = cost.params;
  e.activations = cost.stash * e.inflight;
  e.memory = stage_memory(plan.schedule, cost.params, cost.stash, downstream, stage.replicas,
                          plan.microbatches, optimizer);
  return e;
}

// What the critical cycle (or path) is made of, and the stage carrying most of it.
struct CriticalSummary {
  EdgeCost parts;
  Seconds queueing;  // the part of parts.transfer spent waiting behind other transfers on a link
  int stage = 0;
  bool spans_stages = false;
  std::string kind;
};

std::string kind_of(const CriticalSummary& summary) {
  const EdgeCost& p = summary.parts;
  if (p.allreduce > p.compute && p.allreduce > p.transfer) return "all-reduce";
  if (p.transfer > p.compute) return summary.queueing * 2.0 >= p.transfer ? "link" : "transfer";
  return summary.spans_stages ? "pipeline depth" : "compute";
}

CriticalSummary summarize(const PlanEventGraph& graph, const std::vector<int>& edges, int stages) {
  CriticalSummary summary;
  std::vector<Seconds> per_stage(static_cast<size_t>(std::max(stages, 1)));
  int first_stage = -1;
  for (int e : edges) {
    const EdgeCost& cost = graph.costs[e];
    const Event& target = graph.events[graph.graph.edges[e].to];
    summary.parts.compute += cost.compute;
    summary.parts.transfer += cost.transfer;
    summary.parts.allreduce += cost.allreduce;
    if (target.kind == EventKind::kTransfer && graph.events[graph.graph.edges[e].from].kind == EventKind::kTransfer)
      summary.queueing += cost.transfer;  // a link chain: one transfer after another
    if (target.stage < 0) continue;
    per_stage[target.stage] += cost.compute + cost.transfer + cost.allreduce;
    if (first_stage < 0) first_stage = target.stage;
    summary.spans_stages = summary.spans_stages || target.stage != first_stage;
  }
  summary.stage = static_cast<int>(std::max_element(per_stage.begin(), per_stage.end()) - per_stage.begin());
  summary.kind = kind_of(summary);
  return summary;
}

void mark_depth(PlanEstimate& estimate, const PlanEventGraph& graph, const std::vector<int>& edges,
                const CriticalSummary& summary) {
  if (!summary.spans_stages) return;
  for (int e : edges) {
    const int stage = graph.events[graph.graph.edges[e].to].stage;
    if (stage >= 0) estimate.stages[stage].depth = estimate.critical_time;
  }
}

// The largest of the critical time and the bounds becomes the iteration time
// (`scale` turns per-microbatch bounds into per-iteration ones) and names the bottleneck.
void apply_bounds(PlanEstimate& estimate, const LinkLoads& loads, Seconds devices, double scale) {
  estimate.iteration_time = estimate.critical_time;
  if (devices * scale > estimate.iteration_time) {
    estimate.iteration_time = devices * scale;
    estimate.bottleneck = "device";
  }
  if (estimate.link_load * scale > estimate.iteration_time) {
    estimate.iteration_time = estimate.link_load * scale;
    estimate.bottleneck = "link";
    const auto& cuts = loads.cut_busiest;
    estimate.bottleneck_stage = static_cast<int>(std::max_element(cuts.begin(), cuts.end()) - cuts.begin());
  }
}

void estimate_pipedream(PlanEstimate& estimate, const Plan& plan, const std::vector<StageCost>& costs,
                        const Topology& topology) {
  int64_t period = 1;
  for (const StagePlan& stage : plan.stages) period = std::lcm(period, int64_t{stage.replicas});
  if (period > kMaxEventGraphPeriod) {
    estimate.modelled = false;
    return;
  }
  const auto solution = solve_periodic(pipedream_event_graph(plan, costs, topology));
  if (!solution) {
    estimate.bottleneck = "deadlock";
    estimate.modelled = false;
    estimate.critical_time = Seconds(std::numeric_limits<double>::infinity());
    return;
  }
  const CriticalCycle& cycle = solution->cycle;
  estimate.link_order_settled = solution->settled;
  estimate.contended_links = solution->contended_links;
  estimate.critical_time = Seconds(cycle.mean / double(solution->graph.minibatches_per_period));
  const CriticalSummary summary = summarize(solution->graph, cycle.edges, plan.num_stages());
  estimate.bottleneck = summary.kind;
  estimate.bottleneck_stage = summary.stage;
  mark_depth(estimate, solution->graph, cycle.edges, summary);
}

void estimate_flush(PlanEstimate& estimate, const Plan& plan, const std::vector<StageCost>& costs,
                    const Topology& topology) {
  const auto solution = solve_flush(flush_event_graph(plan, costs, topology));
  if (!solution || solution->paths.last < 0) {
    estimate.bottleneck = "deadlock";
    estimate.modelled = false;
    estimate.critical_time = Seconds(std::numeric_limits<double>::infinity());
    return;
  }
  const LongestPaths& paths = solution->paths;
  estimate.critical_time = Seconds(paths.finish[paths.last]);
  const std::vector<int> edges = critical_path(solution->graph.graph, paths, paths.last);
  const CriticalSummary summary = summarize(solution->graph, edges, plan.num_stages());
  estimate.bottleneck = summary.kind;
  estimate.bottleneck_stage = summary.stage;
  mark_depth(estimate, solution->graph, edges, summary);
}

}  // namespace

PlanEstimate estimate_plan(const Profile& profile, const Topology& topology, const Plan& plan,
                           Optimizer optimizer) {
  const std::vector<StageCost> costs = stage_costs(profile, plan, topology);
  const Network network(topology);
  const bool pipedream = plan.schedule == Schedule::kPipeDream;
  int64_t count = pipedream ? 1 : std::max(plan.microbatches, 1);
  for (const StagePlan& stage : plan.stages)
    if (pipedream) count = std::min(std::lcm(count, int64_t{stage.replicas}), kMaxEventGraphPeriod);
  const LinkLoads loads = link_loads(topology, plan, costs, count);
  PlanEstimate estimate;
  for (const auto& [key, seconds] : loads.seconds) estimate.link_load = max(estimate.link_load, Seconds(seconds));
  int downstream = 0;
  estimate.stages.resize(costs.size());
  for (int s = plan.num_stages() - 1; s >= 0; --s) {
    downstream += plan.stages[s].replicas;
    StageEstimate& e = estimate.stages[s];
    e = estimate_stage(plan, s, costs[s], network, downstream, optimizer);
    if (s + 1 < plan.num_stages()) e.link_time = Seconds(loads.cut_busiest[s]);
    estimate.peak_memory = max(estimate.peak_memory, e.memory);
  }
  if (pipedream) estimate_pipedream(estimate, plan, costs, topology);
  else estimate_flush(estimate, plan, costs, topology);
  apply_bounds(estimate, loads, device_load(plan, costs), pipedream ? 1.0 : double(count));
  estimate.samples_per_iteration =
      pipedream ? double(plan.microbatch_size) : double(plan.microbatches) * plan.microbatch_size;
  estimate.throughput_samples_per_s = estimate.samples_per_iteration / estimate.iteration_time.value;
  return estimate;
}

}  // namespace baton
