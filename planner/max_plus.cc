#include "planner/max_plus.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

#include <fmt/format.h>

namespace baton {

int TimedEventGraph::add_edge(int from, int to, double weight, int tokens) {
  edges.push_back(TimedEdge{from, to, weight, tokens});
  return static_cast<int>(edges.size()) - 1;
}

namespace {

constexpr double kRelativeTolerance = 1e-12;
constexpr int kMaxPolicyIterations = 100000;

// Edge indices grouped by their target (incoming) or source (outgoing) node.
struct Adjacency {
  std::vector<int> start;  // node v's edges are items[start[v] .. start[v + 1])
  std::vector<int> items;
};

Adjacency group_edges(int nodes, const std::vector<TimedEdge>& edges, bool by_target) {
  Adjacency adj;
  adj.start.assign(static_cast<size_t>(nodes) + 1, 0);
  for (const TimedEdge& e : edges) ++adj.start[(by_target ? e.to : e.from) + 1];
  for (int v = 0; v < nodes; ++v) adj.start[v + 1] += adj.start[v];
  adj.items.resize(edges.size());
  std::vector<int> next(adj.start.begin(), adj.start.end() - 1);
  for (int i = 0; i < static_cast<int>(edges.size()); ++i)
    adj.items[next[by_target ? edges[i].to : edges[i].from]++] = i;
  return adj;
}

Status check_nodes(const TimedEventGraph& graph) {
  for (const TimedEdge& e : graph.edges)
    if (e.from < 0 || e.to < 0 || e.from >= graph.num_nodes || e.to >= graph.num_nodes)
      return Error{fmt::format("timed event graph: edge {} -> {} names a node outside [0, {})",
                               e.from, e.to, graph.num_nodes)};
  return ok_status();
}

Error deadlock() {
  return Error{"timed event graph: a cycle holds no tokens (the schedule deadlocks)"};
}

// Tokens retimed to t' = t + d(from) - d(to) >= 0, with d the shortest token
// distance from a virtual source (Bellman-Ford, queue based; fast when few
// edges hold negative tokens). Every cycle keeps its token count.
struct Retiming {
  std::vector<int> tokens;       // t' per edge
  std::vector<int64_t> distance; // d per node
};

// Fails when a cycle holds a negative number of tokens.
Result<Retiming> retimed_tokens(const TimedEventGraph& graph) {
  const int n = graph.num_nodes;
  const Adjacency out = group_edges(n, graph.edges, /*by_target=*/false);
  std::vector<int64_t> distance(static_cast<size_t>(n), 0);
  std::vector<int> relaxed(static_cast<size_t>(n), 0);
  std::vector<char> queued(static_cast<size_t>(n), 1);
  std::deque<int> queue;
  for (int v = 0; v < n; ++v) queue.push_back(v);
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop_front();
    queued[u] = 0;
    for (int i = out.start[u]; i < out.start[u + 1]; ++i) {
      const TimedEdge& e = graph.edges[out.items[i]];
      if (distance[u] + e.tokens >= distance[e.to]) continue;
      distance[e.to] = distance[u] + e.tokens;
      if (++relaxed[e.to] > n) return deadlock();
      if (!queued[e.to]) queued[e.to] = 1, queue.push_back(e.to);
    }
  }
  Retiming retiming;
  retiming.tokens.reserve(graph.edges.size());
  for (const TimedEdge& e : graph.edges)
    retiming.tokens.push_back(static_cast<int>(e.tokens + distance[e.from] - distance[e.to]));
  retiming.distance = std::move(distance);
  return retiming;
}

// Kahn's algorithm on the edges selected by `keep`; true when they form a DAG.
// `order` receives a topological order of all nodes.
template <typename Keep>
bool topological_order(const TimedEventGraph& graph, Keep keep, std::vector<int>& order) {
  const Adjacency out = group_edges(graph.num_nodes, graph.edges, /*by_target=*/false);
  std::vector<int> indegree(static_cast<size_t>(graph.num_nodes), 0);
  for (int i = 0; i < static_cast<int>(graph.edges.size()); ++i)
    if (keep(i)) ++indegree[graph.edges[i].to];
  order.clear();
  for (int v = 0; v < graph.num_nodes; ++v)
    if (indegree[v] == 0) order.push_back(v);
  for (size_t next = 0; next < order.size(); ++next) {
    const int u = order[next];
    for (int i = out.start[u]; i < out.start[u + 1]; ++i)
      if (keep(out.items[i]) && --indegree[graph.edges[out.items[i]].to] == 0)
        order.push_back(graph.edges[out.items[i]].to);
  }
  return static_cast<int>(order.size()) == graph.num_nodes;
}

// Strongly connected components (Tarjan, iterative); returns the component id
// of every node and sets `count`.
std::vector<int> strong_components(const TimedEventGraph& graph, int& count) {
  const int n = graph.num_nodes;
  const Adjacency out = group_edges(n, graph.edges, /*by_target=*/false);
  std::vector<int> index(static_cast<size_t>(n), -1), low(static_cast<size_t>(n), 0);
  std::vector<int> component(static_cast<size_t>(n), -1), stack, cursor(static_cast<size_t>(n), 0);
  std::vector<char> on_stack(static_cast<size_t>(n), 0);
  std::vector<int> call;
  int next_index = 0;
  count = 0;
  for (int root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    call.push_back(root);
    while (!call.empty()) {
      const int v = call.back();
      if (index[v] < 0) {
        index[v] = low[v] = next_index++;
        cursor[v] = out.start[v];
        stack.push_back(v);
        on_stack[v] = 1;
      }
      if (cursor[v] < out.start[v + 1]) {
        const int w = graph.edges[out.items[cursor[v]++]].to;
        if (index[w] < 0) call.push_back(w);
        else if (on_stack[w]) low[v] = std::min(low[v], index[w]);
        continue;
      }
      call.pop_back();
      if (!call.empty()) low[call.back()] = std::min(low[call.back()], low[v]);
      if (low[v] != index[v]) continue;
      int w = -1;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = 0;
        component[w] = count;
      } while (w != v);
      ++count;
    }
  }
  return component;
}

// Howard's policy iteration on one strongly connected graph whose tokens are
// >= 0 with no zero-token cycle (see the header).
class Howard {
 public:
  explicit Howard(const TimedEventGraph& graph);
  Result<CriticalCycle> solve();

 private:
  void evaluate();
  void value_cycle(int entry);
  bool improve_ratios();
  bool improve_potentials();

  const TimedEventGraph& graph_;
  Adjacency incoming_;
  std::vector<int> policy_;  // per node: the incoming edge it follows
  std::vector<double> eta_;  // per node: ratio of the policy cycle it reaches
  std::vector<double> h_;    // per node: potential
  std::vector<char> state_;  // 0 unvisited, 1 on the current walk, 2 valued
  double tolerance_ = 0.0;
  CriticalCycle best_;
};

Howard::Howard(const TimedEventGraph& graph)
    : graph_(graph), incoming_(group_edges(graph.num_nodes, graph.edges, /*by_target=*/true)) {
  const auto n = static_cast<size_t>(graph.num_nodes);
  policy_.assign(n, -1);
  eta_.assign(n, 0.0);
  h_.assign(n, 0.0);
  double largest = 0.0;
  for (const TimedEdge& e : graph.edges) largest = std::max(largest, std::abs(e.weight));
  tolerance_ = kRelativeTolerance * std::max(largest, std::numeric_limits<double>::min());
  for (int v = 0; v < graph.num_nodes; ++v)  // start from the heaviest incoming edge
    for (int i = incoming_.start[v]; i < incoming_.start[v + 1]; ++i) {
      const int e = incoming_.items[i];
      if (policy_[v] < 0 || graph.edges[e].weight > graph.edges[policy_[v]].weight) policy_[v] = e;
    }
}

Result<CriticalCycle> Howard::solve() {
  for (int iteration = 0; iteration < kMaxPolicyIterations; ++iteration) {
    best_ = CriticalCycle{};
    best_.mean = -std::numeric_limits<double>::infinity();
    evaluate();
    if (!improve_ratios() && !improve_potentials()) {
      best_.potentials = h_;
      return best_;
    }
  }
  return Error{"timed event graph: policy iteration did not converge"};
}

// Value determination: every policy cycle gets its ratio; every node the ratio
// of the cycle it reaches and h(v) = h(u) + w - eta t along its policy edge.
void Howard::evaluate() {
  state_.assign(policy_.size(), 0);
  std::vector<int> walk;
  for (int v = 0; v < graph_.num_nodes; ++v) {
    if (state_[v] == 2) continue;
    walk.clear();
    int x = v;
    for (; state_[x] == 0; x = graph_.edges[policy_[x]].from) {
      state_[x] = 1;
      walk.push_back(x);
    }
    if (state_[x] == 1) value_cycle(x);
    for (auto it = walk.rbegin(); it != walk.rend(); ++it) {
      if (state_[*it] == 2) continue;
      const TimedEdge& e = graph_.edges[policy_[*it]];
      eta_[*it] = eta_[e.from];
      h_[*it] = h_[e.from] + e.weight - eta_[e.from] * e.tokens;
      state_[*it] = 2;
    }
  }
}

// Values the policy cycle through `entry`, rooted at its smallest node so that
// potentials depend on the cycle only.
void Howard::value_cycle(int entry) {
  CriticalCycle cycle;
  int root = entry;
  for (int x = graph_.edges[policy_[entry]].from;; x = graph_.edges[policy_[x]].from) {
    root = std::min(root, x);
    if (x == entry) break;
  }
  for (int x = root;;) {
    const TimedEdge& e = graph_.edges[policy_[x]];
    cycle.weight += e.weight;
    cycle.tokens += e.tokens;
    cycle.edges.push_back(policy_[x]);
    x = e.from;
    if (x == root) break;
  }
  cycle.mean = cycle.weight / cycle.tokens;
  std::reverse(cycle.edges.begin(), cycle.edges.end());  // walked backwards
  h_[root] = 0.0;
  eta_[root] = cycle.mean;
  state_[root] = 2;
  for (int x = root;;) {
    const TimedEdge& e = graph_.edges[policy_[x]];
    if (e.from == root) break;
    h_[e.from] = h_[x] - e.weight + cycle.mean * e.tokens;
    eta_[e.from] = cycle.mean;
    state_[e.from] = 2;
    x = e.from;
  }
  if (cycle.mean > best_.mean) best_ = std::move(cycle);
}

// First improvement: follow an edge from a node that reaches a larger ratio.
bool Howard::improve_ratios() {
  bool changed = false;
  for (int v = 0; v < graph_.num_nodes; ++v) {
    double best = eta_[v] + tolerance_;
    for (int i = incoming_.start[v]; i < incoming_.start[v + 1]; ++i) {
      const int e = incoming_.items[i];
      if (eta_[graph_.edges[e].from] > best) {
        best = eta_[graph_.edges[e].from];
        policy_[v] = e;
        changed = true;
      }
    }
  }
  return changed;
}

// Second improvement: among edges from nodes of the same ratio, follow one
// that raises the potential.
bool Howard::improve_potentials() {
  bool changed = false;
  for (int v = 0; v < graph_.num_nodes; ++v) {
    double best = h_[v] + tolerance_ + kRelativeTolerance * std::abs(h_[v]);
    for (int i = incoming_.start[v]; i < incoming_.start[v + 1]; ++i) {
      const TimedEdge& e = graph_.edges[incoming_.items[i]];
      if (std::abs(eta_[e.from] - eta_[v]) > tolerance_) continue;
      const double value = h_[e.from] + e.weight - eta_[v] * e.tokens;
      if (value > best) {
        best = value;
        policy_[v] = incoming_.items[i];
        changed = true;
      }
    }
  }
  return changed;
}

// The subgraph of component `id`, with local node numbers and retimed tokens;
// `global_edge` maps its edges back.
TimedEventGraph component_graph(const TimedEventGraph& graph, const std::vector<int>& tokens,
                                const std::vector<int>& component, int id,
                                std::vector<int>& global_edge) {
  std::vector<int> local(static_cast<size_t>(graph.num_nodes), -1);
  TimedEventGraph sub;
  for (int v = 0; v < graph.num_nodes; ++v)
    if (component[v] == id) local[v] = sub.add_node();
  global_edge.clear();
  for (int i = 0; i < static_cast<int>(graph.edges.size()); ++i) {
    const TimedEdge& e = graph.edges[i];
    if (component[e.from] != id || component[e.to] != id) continue;
    sub.add_edge(local[e.from], local[e.to], e.weight, tokens[i]);
    global_edge.push_back(i);
  }
  return sub;
}

}  // namespace

Result<CriticalCycle> maximum_cycle_mean(const TimedEventGraph& graph) {
  if (auto ok = check_nodes(graph); !ok) return ok.error();
  auto retiming = retimed_tokens(graph);
  if (!retiming) return retiming.error();
  const std::vector<int>& tokens = retiming->tokens;
  std::vector<int> order;
  if (!topological_order(graph, [&](int e) { return tokens[e] == 0; }, order)) return deadlock();
  int count = 0;
  const std::vector<int> component = strong_components(graph, count);
  CriticalCycle best;
  std::vector<int> global_edge;
  for (int id = 0; id < count; ++id) {
    const TimedEventGraph sub = component_graph(graph, tokens, component, id, global_edge);
    if (sub.edges.empty()) continue;  // a single node without a self-loop
    auto cycle = Howard(sub).solve();
    if (!cycle) return cycle.error();
    if (!best.edges.empty() && cycle->mean <= best.mean) continue;
    best = std::move(*cycle);
    std::vector<double> local = std::move(best.potentials);
    best.potentials.assign(static_cast<size_t>(graph.num_nodes), -std::numeric_limits<double>::infinity());
    for (int v = 0, next = 0; v < graph.num_nodes; ++v)  // back to the original tokens
      if (component[v] == id) best.potentials[v] = local[next++] - best.mean * double(retiming->distance[v]);
    best.tokens = 0;
    for (int& e : best.edges) {
      e = global_edge[e];
      best.tokens += graph.edges[e].tokens;  // original tokens: the same sum
    }
  }
  return best;
}

namespace {

// Longest paths from `source` under w - mean t, every edge's weight reduced
// by the potentials to w' = w - mean t + h(u) - h(v) <= 0: Dijkstra on -w'.
std::vector<double> schedule_by_potentials(const TimedEventGraph& graph, const CriticalCycle& cycle,
                                           int source) {
  const int n = graph.num_nodes;
  const Adjacency out = group_edges(n, graph.edges, /*by_target=*/false);
  const std::vector<double>& h = cycle.potentials;
  std::vector<double> distance(static_cast<size_t>(n), std::numeric_limits<double>::infinity());
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  distance[source] = 0.0;
  queue.emplace(0.0, source);
  while (!queue.empty()) {
    const auto [d, u] = queue.top();
    queue.pop();
    if (d > distance[u]) continue;
    for (int i = out.start[u]; i < out.start[u + 1]; ++i) {
      const TimedEdge& e = graph.edges[out.items[i]];
      const double reduced = std::max(0.0, -(e.weight - cycle.mean * e.tokens + h[u] - h[e.to]));
      if (d + reduced >= distance[e.to]) continue;
      distance[e.to] = d + reduced;
      queue.emplace(distance[e.to], e.to);
    }
  }
  std::vector<double> x(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v) x[v] = h[v] - h[source] - distance[v];
  return x;
}

// The same by Bellman-Ford, for graphs that are not strongly connected.
std::vector<double> schedule_by_relaxation(const TimedEventGraph& graph, const CriticalCycle& cycle,
                                           int source) {
  const int n = graph.num_nodes;
  std::vector<double> x(static_cast<size_t>(n), -std::numeric_limits<double>::infinity());
  const Adjacency out = group_edges(n, graph.edges, /*by_target=*/false);
  double largest = 0.0;
  for (const TimedEdge& e : graph.edges) largest = std::max(largest, std::abs(e.weight));
  const double tolerance = kRelativeTolerance * largest;
  std::vector<char> queued(static_cast<size_t>(n), 0);
  std::deque<int> queue{source};
  x[source] = 0.0;
  while (!queue.empty()) {  // cycles weigh <= 0 under w - lambda t
    const int u = queue.front();
    queue.pop_front();
    queued[u] = 0;
    for (int i = out.start[u]; i < out.start[u + 1]; ++i) {
      const TimedEdge& e = graph.edges[out.items[i]];
      const double value = x[u] + e.weight - cycle.mean * e.tokens;
      if (value <= x[e.to] + tolerance) continue;
      x[e.to] = value;
      if (!queued[e.to]) queued[e.to] = 1, queue.push_back(e.to);
    }
  }
  return x;
}

}  // namespace

std::vector<double> periodic_schedule(const TimedEventGraph& graph, const CriticalCycle& cycle) {
  if (cycle.edges.empty())
    return std::vector<double>(static_cast<size_t>(graph.num_nodes), -std::numeric_limits<double>::infinity());
  const int source = graph.edges[cycle.edges.front()].from;
  const bool connected = static_cast<int>(cycle.potentials.size()) == graph.num_nodes &&
                         std::all_of(cycle.potentials.begin(), cycle.potentials.end(),
                                     [](double h) { return std::isfinite(h); });
  return connected ? schedule_by_potentials(graph, cycle, source)
                   : schedule_by_relaxation(graph, cycle, source);
}

Result<LongestPaths> longest_paths(const TimedEventGraph& graph) {
  if (auto ok = check_nodes(graph); !ok) return ok.error();
  for (const TimedEdge& e : graph.edges)
    if (e.tokens != 0)
      return Error{fmt::format("longest paths: edge {} -> {} holds {} tokens, expected 0", e.from,
                               e.to, e.tokens)};
  std::vector<int> order;
  if (!topological_order(graph, [](int) { return true; }, order))
    return Error{"longest paths: the graph has a cycle"};
  const Adjacency in = group_edges(graph.num_nodes, graph.edges, /*by_target=*/true);
  LongestPaths paths;
  paths.finish.assign(static_cast<size_t>(graph.num_nodes), 0.0);
  paths.via.assign(static_cast<size_t>(graph.num_nodes), -1);
  for (const int v : order) {
    for (int i = in.start[v]; i < in.start[v + 1]; ++i) {
      const TimedEdge& e = graph.edges[in.items[i]];
      const double value = paths.finish[e.from] + e.weight;
      if (value > paths.finish[v] || (paths.via[v] < 0 && value >= paths.finish[v])) {
        paths.finish[v] = value;
        paths.via[v] = in.items[i];
      }
    }
    if (paths.last < 0 || paths.finish[v] > paths.finish[paths.last]) paths.last = v;
  }
  return paths;
}

std::vector<int> critical_path(const TimedEventGraph& graph, const LongestPaths& paths, int node) {
  std::vector<int> edges;
  for (int v = node; v >= 0 && paths.via[v] >= 0; v = graph.edges[paths.via[v]].from)
    edges.push_back(paths.via[v]);
  std::reverse(edges.begin(), edges.end());
  return edges;
}

}  // namespace baton
