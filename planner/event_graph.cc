#include "planner/event_graph.h"

#include <climits>
#include <numeric>

#include "sim/network.h"
#include "sim/schedules.h"

namespace baton {

Seconds message_time(const Topology& topology, int from_device, int to_device, Bytes size) {
  const int level = topology.common_level(from_device, to_device);
  if (level < 0) return Seconds(0.0);
  return topology.levels[level].latency + transfer_time(size, topology.levels[level].bandwidth());
}

int link_id(const Topology& topology, int level, int child, bool down) {
  int offset = 0;
  for (int l = 0; l < level; ++l) offset += 2 * topology.num_devices() / topology.devices_per_unit(l - 1);
  return offset + 2 * child + (down ? 1 : 0);
}

namespace {

// Appends nodes and edges with their cost parts.
class GraphWriter {
 public:
  explicit GraphWriter(const Topology& topology) : topology_(topology) {
    for (int level = 0; level < topology.num_levels(); ++level)
      out_.num_links += 2 * topology.num_devices() / topology.devices_per_unit(level - 1);
  }
  int node(Event event) {
    out_.events.push_back(event);
    return out_.graph.add_node();
  }
  void edge(int from, int to, EdgeCost cost, int64_t tokens) {
    const Seconds weight = cost.compute + cost.transfer + cost.allreduce;
    out_.graph.add_edge(from, to, weight.value, static_cast<int>(tokens));
    out_.costs.push_back(cost);
  }
  // A message from `from` (on from_device, run by sender_worker) that `to`
  // (on to_device, lasting `duration`) waits for.
  void transfer(int from, int to, Seconds duration, std::pair<int, int> devices, Bytes size,
                int sender_worker, int64_t tokens);
  PlanEventGraph take(int64_t minibatches) {
    out_.minibatches_per_period = minibatches;
    return std::move(out_);
  }

 private:
  const Topology& topology_;
  PlanEventGraph out_;
};

void GraphWriter::transfer(int from, int to, Seconds duration, std::pair<int, int> devices, Bytes size,
                           int sender_worker, int64_t tokens) {
  const auto [from_device, to_device] = devices;
  const int level = topology_.common_level(from_device, to_device);
  if (level < 0) {  // on one device: free and instantaneous
    edge(from, to, EdgeCost{duration, Seconds(0.0), Seconds(0.0)}, tokens);
    return;
  }
  TransferEvent t;
  t.node = node(Event{EventKind::kTransfer, out_.events[from].stage, out_.events[from].index});
  t.sender = from;
  t.sender_worker = sender_worker;
  t.links[0] = link_id(topology_, level, topology_.child_of(from_device, level), false);
  t.links[1] = link_id(topology_, level, topology_.child_of(to_device, level), true);
  t.wire = transfer_time(size, topology_.levels[level].bandwidth());
  edge(from, t.node, EdgeCost{Seconds(0.0), t.wire, Seconds(0.0)}, 0);
  edge(t.node, to, EdgeCost{duration, topology_.levels[level].latency, Seconds(0.0)}, tokens);
  out_.transfers.push_back(t);
}

EdgeCost compute(Seconds t) { return EdgeCost{t, Seconds(0.0), Seconds(0.0)}; }

// Devices of the replicas that run microbatch k on stages s and s + 1.
std::pair<int, int> cut_devices(const Plan& plan, int s, int64_t k) {
  const StagePlan& a = plan.stages[s];
  const StagePlan& b = plan.stages[s + 1];
  return {a.devices[k % a.replicas], b.devices[k % b.replicas]};
}

// The pipedream graph of one period (see the header). Every event instance
// has a clock g: g = m for B(s, m), g = k - w_s r_s for F(s, k) (the forward
// that runs just before B(k - w_s r_s)), g = n r_s for the n-th join. The
// instance lives in period floor(g / R) on node g mod R of its kind, so that
// every edge holds period(to) - period(from) >= 0 tokens (the order on a
// worker and the data flow both advance the clock).
class PipeDreamBuilder {
 public:
  PipeDreamBuilder(const Plan& plan, const std::vector<StageCost>& costs, const Topology& topology)
      : plan_(plan), costs_(costs), network_(topology), period_(1), writer_(topology) {
    for (int s = 0; s < plan.num_stages(); ++s) {
      const StagePlan& stage = plan.stages[s];
      period_ = std::lcm(period_, int64_t{stage.replicas});
      first_worker_.push_back(s == 0 ? 0 : first_worker_.back() + plan.stages[s - 1].replicas);
      lead_.push_back(int64_t{warmup_forwards(plan, s, INT_MAX)} * stage.replicas);
    }
  }

  PlanEventGraph build() {
    add_nodes();
    for (int s = 0; s < plan_.num_stages(); ++s) {
      add_program_order(s);
      if (s + 1 < plan_.num_stages()) add_data(s);
    }
    PlanEventGraph out = writer_.take(period_);
    add_start_up(out);
    return out;
  }

 private:
  struct Instance {
    int node;
    int64_t period;
  };
  int64_t wrap(int64_t g) const { return g - floor_div(g, period_) * period_; }
  Instance forward(int s, int64_t k) const {
    const int64_t g = k - lead_[s];
    return {static_cast<int>(2 * (s * period_ + wrap(g))), floor_div(g, period_)};
  }
  Instance backward(int s, int64_t m) const {
    return {static_cast<int>(2 * (s * period_ + wrap(m)) + 1), floor_div(m, period_)};
  }
  Instance join(int s, int64_t n) const {
    const int64_t rounds = period_ / plan_.stages[s].replicas;
    return {first_join_[s] + static_cast<int>(n - floor_div(n, rounds) * rounds), floor_div(n, rounds)};
  }
  void edge(Instance from, Instance to, EdgeCost cost) {
    writer_.edge(from.node, to.node, cost, to.period - from.period);
  }
  void add_nodes();
  void add_program_order(int s);
  void add_all_reduce(int s);
  void add_data(int s);
  void add_start_up(PlanEventGraph& out) const;

  const Plan& plan_;
  const std::vector<StageCost>& costs_;
  Network network_;
  int64_t period_;
  std::vector<int> first_worker_;  // per stage (workers numbered as workers_of)
  std::vector<int64_t> lead_;      // per stage: w_s r_s
  std::vector<int> first_join_;    // per stage
  GraphWriter writer_;
};

void PipeDreamBuilder::add_nodes() {
  for (int s = 0; s < plan_.num_stages(); ++s)
    for (int64_t g = 0; g < period_; ++g) {
      writer_.node(Event{EventKind::kForward, s, static_cast<int>(g + lead_[s])});
      writer_.node(Event{EventKind::kBackward, s, static_cast<int>(g)});
    }
  for (int s = 0; s < plan_.num_stages(); ++s) {
    const int replicas = plan_.stages[s].replicas;
    first_join_.push_back(-1);
    if (replicas == 1) continue;
    for (int64_t n = 0; n < period_ / replicas; ++n) {
      const int id = writer_.node(Event{EventKind::kAllReduce, s, static_cast<int>(n)});
      if (n == 0) first_join_[s] = id;
    }
  }
}

// F(m + w r), B(m), [ALLREDUCE, STEP], F(m + (w + 1) r) on every worker of s;
// the STEP's compute time is charged to the edge into that next F.
void PipeDreamBuilder::add_program_order(int s) {
  const int64_t r = plan_.stages[s].replicas;
  const StageCost& cost = costs_[s];
  for (int64_t m = 0; m < period_; ++m) {
    edge(forward(s, m + lead_[s]), backward(s, m), compute(cost.backward));
    if (r == 1) edge(backward(s, m), forward(s, m + lead_[s] + 1), compute(cost.step + cost.forward));
  }
  if (r > 1) add_all_reduce(s);
}

// Replica j's n-th backward is B(n r + j); every replica's next forward,
// F((n + w + 1) r + j), waits for the n-th all-reduce's end.
void PipeDreamBuilder::add_all_reduce(int s) {
  const StagePlan& stage = plan_.stages[s];
  const int64_t r = stage.replicas;
  const EdgeCost allreduce{Seconds(0.0), Seconds(0.0), network_.allreduce_time(stage.devices, costs_[s].params)};
  for (int64_t m = 0; m < period_; ++m) edge(backward(s, m), join(s, m / r), allreduce);
  for (int64_t n = 0; n < period_ / r; ++n)
    for (int64_t j = 0; j < r; ++j)
      edge(join(s, n), forward(s, (n + 1) * r + j + lead_[s]), compute(costs_[s].step + costs_[s].forward));
}

// Activations down the cut after stage s, gradients back up.
void PipeDreamBuilder::add_data(int s) {
  const Bytes size = costs_[s].activation_out;
  const int up = plan_.stages[s].replicas;
  const int down = plan_.stages[s + 1].replicas;
  for (int64_t k = 0; k < period_; ++k) {
    const auto [from, to] = cut_devices(plan_, s, k);
    const Instance f0 = forward(s, k), f1 = forward(s + 1, k);
    writer_.transfer(f0.node, f1.node, costs_[s + 1].forward, {from, to}, size,
                     first_worker_[s] + static_cast<int>(k % up), f1.period - f0.period);
    const Instance b1 = backward(s + 1, k), b0 = backward(s, k);
    writer_.transfer(b1.node, b0.node, costs_[s].backward, {to, from}, size,
                     first_worker_[s + 1] + static_cast<int>(k % down), b0.period - b1.period);
  }
}

// An F, B or transfer node's index is its microbatch in period 0 (a join's
// is its round, < R / r_s), so its first instance is in period -floor(index / R).
void PipeDreamBuilder::add_start_up(PlanEventGraph& out) const {
  StartUp& start = out.start_up;
  for (const Event& event : out.events) {
    start.first_period.push_back(event.kind == EventKind::kAllReduce ? 0 : -floor_div(event.index, period_));
    start.release.push_back(event.kind == EventKind::kForward ? costs_[event.stage].forward.value : 0.0);
  }
  for (int s = 0; s < plan_.num_stages(); ++s) {
    const int64_t r = plan_.stages[s].replicas;
    for (int64_t g = 0; g < period_; ++g) {
      const Instance from = forward(s, g + lead_[s] - r), to = forward(s, g + lead_[s]);
      start.edges.push_back(TimedEdge{from.node, to.node, costs_[s].forward.value,
                                      static_cast<int>(to.period - from.period)});
    }
  }
}

// The flush graph: one iteration in the generator's order (see the header).
class FlushBuilder {
 public:
  FlushBuilder(const Plan& plan, const std::vector<StageCost>& costs, const Topology& topology)
      : plan_(plan), costs_(costs), network_(topology), writer_(topology) {}

  PlanEventGraph build() {
    const Program program = plan_.schedule == Schedule::kGPipe ? make_gpipe(plan_)
                            : plan_.schedule == Schedule::kDataParallel ? make_data_parallel(plan_)
                                                                         : make_1f1b(plan_);
    const size_t cells = static_cast<size_t>(plan_.num_stages()) * plan_.microbatches;
    forward_.assign(cells, -1);
    worker_.assign(cells, -1);
    backward_.assign(cells, -1);
    joins_.assign(static_cast<size_t>(plan_.num_stages()), -1);
    start_ = writer_.node(Event{});
    for (int w = 0; w < program.num_workers(); ++w) add_worker(program.actions[w], w);
    for (int s = 0; s + 1 < plan_.num_stages(); ++s) add_data(s);
    return writer_.take(plan_.microbatches);
  }

 private:
  size_t cell(int s, int k) const { return static_cast<size_t>(s) * plan_.microbatches + k; }
  void add_worker(const std::vector<Action>& actions, int worker);
  void add_data(int s);

  const Plan& plan_;
  const std::vector<StageCost>& costs_;
  Network network_;
  std::vector<int> forward_, backward_, joins_;
  std::vector<int> worker_;  // per (stage, microbatch) cell: the worker that runs it
  int start_ = 0;
  GraphWriter writer_;
};

void FlushBuilder::add_worker(const std::vector<Action>& actions, int worker) {
  int previous = start_;
  for (const Action& action : actions) {
    const int s = action.stage;
    const int k = action.microbatch;
    if (action.kind == ActionKind::kForward || action.kind == ActionKind::kBackward) {
      const bool is_forward = action.kind == ActionKind::kForward;
      const int id = writer_.node(Event{is_forward ? EventKind::kForward : EventKind::kBackward, s, k});
      (is_forward ? forward_ : backward_)[cell(s, k)] = id;
      worker_[cell(s, k)] = worker;
      writer_.edge(previous, id, compute(is_forward ? costs_[s].forward : costs_[s].backward), 0);
      previous = id;
    } else if (action.kind == ActionKind::kAllReduce) {
      if (joins_[s] < 0) joins_[s] = writer_.node(Event{EventKind::kAllReduce, s, k});
      const Seconds allreduce = network_.allreduce_time(plan_.stages[s].devices, costs_[s].params);
      writer_.edge(previous, joins_[s], EdgeCost{Seconds(0.0), Seconds(0.0), allreduce}, 0);
      previous = joins_[s];  // the STEP after it, and anything later, waits for it
    } else if (action.kind == ActionKind::kStep && costs_[s].step.value > 0.0) {
      const int id = writer_.node(Event{EventKind::kStep, s, k});
      writer_.edge(previous, id, compute(costs_[s].step), 0);
      previous = id;
    }
  }
}

void FlushBuilder::add_data(int s) {
  const Bytes size = costs_[s].activation_out;
  for (int k = 0; k < plan_.microbatches; ++k) {
    const auto [from, to] = cut_devices(plan_, s, k);
    writer_.transfer(forward_[cell(s, k)], forward_[cell(s + 1, k)], costs_[s + 1].forward, {from, to},
                     size, worker_[cell(s, k)], 0);
    writer_.transfer(backward_[cell(s + 1, k)], backward_[cell(s, k)], costs_[s].backward, {to, from},
                     size, worker_[cell(s + 1, k)], 0);
  }
}

}  // namespace

PlanEventGraph unroll_periods(const PlanEventGraph& graph, int periods) {
  const int n = graph.graph.num_nodes;
  PlanEventGraph out;
  out.num_links = graph.num_links;
  out.minibatches_per_period = graph.minibatches_per_period * periods;
  out.graph.num_nodes = n * periods;
  for (int c = 0; c < periods; ++c) {
    for (Event event : graph.events) {
      if (event.kind != EventKind::kAllReduce) event.index += static_cast<int>(c * graph.minibatches_per_period);
      out.events.push_back(event);
    }
    for (const TimedEdge& e : graph.graph.edges) {
      const int64_t to = c + int64_t{e.tokens};
      const int64_t copy = to - floor_div(to, periods) * periods;
      out.graph.add_edge(c * n + e.from, static_cast<int>(copy) * n + e.to, e.weight,
                         static_cast<int>(floor_div(to, periods)));
    }
    out.costs.insert(out.costs.end(), graph.costs.begin(), graph.costs.end());
    for (TransferEvent t : graph.transfers) {
      t.node += c * n;
      t.sender += c * n;
      out.transfers.push_back(t);
    }
  }
  return out;
}

PlanEventGraph pipedream_event_graph(const Plan& plan, const std::vector<StageCost>& costs,
                                     const Topology& topology) {
  return PipeDreamBuilder(plan, costs, topology).build();
}

PlanEventGraph flush_event_graph(const Plan& plan, const std::vector<StageCost>& costs,
                                 const Topology& topology) {
  return FlushBuilder(plan, costs, topology).build();
}

}  // namespace baton
