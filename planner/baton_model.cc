#include "planner/baton_model.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

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

struct Cut {
  Bytes bytes;
  Seconds single;        // one message, replica 0 to replica 0: latency + bytes / bandwidth
  double busiest = 0.0;  // seconds per minibatch on the busiest link of this cut
};

void book(std::map<LinkKey, double>& load, const Topology& topology, int from, int to, double seconds_per_byte_share,
          Bytes bytes) {
  const int level = topology.common_level(from, to);
  if (level < 0) return;
  const double seconds = double(bytes.value) / topology.levels[level].bandwidth().bytes_per_s * seconds_per_byte_share;
  load[{level, topology.child_of(from, level), 0}] += seconds;
  load[{level, topology.child_of(to, level), 1}] += seconds;
}

// Books every transfer of every cut on its links; returns per-cut figures.
std::vector<Cut> book_cuts(const Topology& topology, const Plan& plan, const std::vector<StageCost>& costs,
                           std::map<LinkKey, double>& load) {
  std::vector<Cut> cuts;
  for (int s = 0; s + 1 < plan.num_stages(); ++s) {
    const StagePlan& a = plan.stages[s];
    const StagePlan& b = plan.stages[s + 1];
    const int64_t period = std::lcm(int64_t{a.replicas}, int64_t{b.replicas});
    Cut cut;
    cut.bytes = costs[s].activation_out;
    std::map<LinkKey, double> own;
    for (int64_t k = 0; k < period; ++k) {
      const int from = a.devices[k % a.replicas];
      const int to = b.devices[k % b.replicas];
      book(own, topology, from, to, 1.0 / double(period), cut.bytes);  // activation
      book(own, topology, to, from, 1.0 / double(period), cut.bytes);  // gradient
    }
    for (const auto& [key, seconds] : own) {
      cut.busiest = std::max(cut.busiest, seconds);
      load[key] += seconds;
    }
    const int level = topology.common_level(a.devices[0], b.devices[0]);
    if (level >= 0)
      cut.single = topology.levels[level].latency + transfer_time(cut.bytes, topology.levels[level].bandwidth());
    cuts.push_back(cut);
  }
  return cuts;
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

// path_s: one microbatch from stage s's forward down the pipeline and back.
std::vector<Seconds> paths(const std::vector<StageCost>& costs, const std::vector<Cut>& cuts) {
  std::vector<Seconds> path(costs.size() + 1, Seconds(0.0));
  for (int s = static_cast<int>(costs.size()) - 1; s >= 0; --s) {
    path[s] = path[s + 1] + costs[s].forward + costs[s].backward;
    if (s < static_cast<int>(cuts.size())) path[s] += cuts[s].single * 2.0;
  }
  return path;
}

void pick_bottleneck(PlanEstimate& estimate, Seconds link_load) {
  Seconds worst;
  for (size_t s = 0; s < estimate.stages.size(); ++s) {
    const StageEstimate& st = estimate.stages[s];
    const bool allreduce_heavy = st.allreduce > st.forward + st.backward;
    if (st.period > worst) {
      worst = st.period;
      estimate.bottleneck_stage = static_cast<int>(s);
      estimate.bottleneck = allreduce_heavy ? "all-reduce" : "compute";
    }
    if (st.depth > worst) {
      worst = st.depth;
      estimate.bottleneck_stage = static_cast<int>(s);
      estimate.bottleneck = "pipeline depth";
    }
  }
  if (link_load > worst) estimate.bottleneck = "link";
}

}  // namespace

PlanEstimate estimate_plan(const Profile& profile, const Topology& topology, const Plan& plan,
                           Optimizer optimizer) {
  const std::vector<StageCost> costs = stage_costs(profile, plan, topology);
  const Network network(topology);
  std::map<LinkKey, double> load;
  const std::vector<Cut> cuts = book_cuts(topology, plan, costs, load);
  PlanEstimate estimate;
  for (const auto& [key, seconds] : load) estimate.link_load = max(estimate.link_load, Seconds(seconds));
  const std::vector<Seconds> path = paths(costs, cuts);
  int downstream = 0;
  estimate.stages.resize(costs.size());
  for (int s = plan.num_stages() - 1; s >= 0; --s) {
    downstream += plan.stages[s].replicas;
    StageEstimate& e = estimate.stages[s];
    e = estimate_stage(plan, s, costs[s], network, downstream, optimizer);
    if (s < static_cast<int>(cuts.size())) e.link_time = Seconds(cuts[s].busiest);
    if (plan.schedule == Schedule::kPipeDream)
      e.depth = path[s] / double(e.inflight * plan.stages[s].replicas);
    estimate.peak_memory = max(estimate.peak_memory, e.memory);
  }
  pick_bottleneck(estimate, estimate.link_load);
  Seconds period = estimate.link_load;
  for (const StageEstimate& e : estimate.stages) period = max(period, max(e.period, e.depth));
  if (plan.schedule == Schedule::kPipeDream) {
    estimate.iteration_time = period;
    estimate.samples_per_iteration = plan.microbatch_size;
  } else {
    // The busiest replica runs ceil(M / r_s) microbatches back to back; the
    // pipeline adds one microbatch's path to fill and drain.
    Seconds steady = estimate.link_load * double(plan.microbatches - 1);
    for (int s = 0; s < plan.num_stages(); ++s) {
      const int local = (plan.microbatches + plan.stages[s].replicas - 1) / plan.stages[s].replicas;
      steady = max(steady, (costs[s].forward + costs[s].backward) * double(local - 1));
    }
    Seconds back;  // backward path from stage s down to stage 0
    for (int s = 0; s < plan.num_stages(); ++s) {
      const Seconds end = steady + path[0] - back + estimate.stages[s].allreduce;
      estimate.iteration_time = max(estimate.iteration_time, end);
      back += costs[s].backward + (s < static_cast<int>(cuts.size()) ? cuts[s].single : Seconds(0.0));
    }
    estimate.samples_per_iteration = double(plan.microbatches) * plan.microbatch_size;
  }
  estimate.throughput_samples_per_s = estimate.samples_per_iteration / estimate.iteration_time.value;
  return estimate;
}

}  // namespace baton
