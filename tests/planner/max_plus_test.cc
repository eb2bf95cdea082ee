// The max-plus solvers on hand-made graphs whose answers are worked by hand
// (cycle weights over cycle tokens), and Howard's policy iteration against a
// brute-force enumeration of every simple cycle on random small graphs.
#include "tests/catch_compat.h"

#include <cmath>
#include <functional>
#include <random>

#include "planner/max_plus.h"

using namespace baton;

namespace {

TimedEventGraph graph_of(int nodes, const std::vector<TimedEdge>& edges) {
  TimedEventGraph graph;
  graph.num_nodes = nodes;
  for (const TimedEdge& e : edges) graph.add_edge(e.from, e.to, e.weight, e.tokens);
  return graph;
}

CriticalCycle solve(const TimedEventGraph& graph) {
  auto cycle = maximum_cycle_mean(graph);
  INFO((cycle ? std::string() : cycle.error().message));
  REQUIRE(cycle.ok());
  return *cycle;
}

// max over simple cycles of W / T, by depth-first enumeration from each
// cycle's smallest node (the reference for small graphs).
double brute_force_mean(const TimedEventGraph& graph) {
  double best = -INFINITY;
  std::vector<char> on_path(static_cast<size_t>(graph.num_nodes), 0);
  std::function<void(int, int, double, int)> walk = [&](int start, int node, double weight, int tokens) {
    for (const TimedEdge& e : graph.edges) {
      if (e.from != node || e.to < start) continue;
      if (e.to == start) {
        best = std::max(best, (weight + e.weight) / (tokens + e.tokens));
      } else if (!on_path[e.to]) {
        on_path[e.to] = 1;
        walk(start, e.to, weight + e.weight, tokens + e.tokens);
        on_path[e.to] = 0;
      }
    }
  };
  for (int start = 0; start < graph.num_nodes; ++start) {
    on_path[start] = 1;
    walk(start, start, 0.0, 0);
    on_path[start] = 0;
  }
  return best;
}

// A random graph whose cycles all hold tokens: edges that go up in node order
// hold 0 to 2 tokens, the others 1 to 3; then a random retiming
// t' = t + p(from) - p(to) moves tokens around (some negative) while every
// cycle keeps its count.
TimedEventGraph random_graph(std::mt19937& rng, int nodes, int edges) {
  std::uniform_int_distribution<int> node(0, nodes - 1), shift(-2, 2), few(0, 2);
  std::uniform_real_distribution<double> weight(0.0, 10.0);
  std::vector<int> potential(static_cast<size_t>(nodes));
  for (int& p : potential) p = shift(rng);
  TimedEventGraph graph;
  graph.num_nodes = nodes;
  for (int v = 0; v < nodes; ++v)  // a ring makes it strongly connected
    graph.add_edge(v, (v + 1) % nodes, weight(rng), (v + 1 == nodes ? 1 : 0) + potential[v] - potential[(v + 1) % nodes]);
  for (int i = 0; i < edges; ++i) {
    const int a = node(rng), b = node(rng);
    const int tokens = (a < b ? few(rng) : 1 + few(rng)) + potential[a] - potential[b];
    graph.add_edge(a, b, weight(rng), tokens);
  }
  return graph;
}

}  // namespace

TEST_CASE("max-plus: a self-loop's mean is its weight over its tokens", "[max_plus]") {
  const CriticalCycle one = solve(graph_of(1, {{0, 0, 3.0, 1}}));
  CHECK(one.mean == Approx(3.0));
  const CriticalCycle three = solve(graph_of(1, {{0, 0, 6.0, 3}}));
  CHECK(three.mean == Approx(6.0 / 3.0));
  CHECK(three.tokens == 3);
}

TEST_CASE("max-plus: the heavier of two cycles through one node", "[max_plus]") {
  // A: 0 -> 1 -> 0 weighs 2 + 4 over 1 token; B: 0 -> 2 -> 0 weighs 1 + 1 over 1.
  const TimedEventGraph graph = graph_of(3, {{0, 1, 2.0, 0}, {1, 0, 4.0, 1}, {0, 2, 1.0, 0}, {2, 0, 1.0, 1}});
  const CriticalCycle cycle = solve(graph);
  CHECK(cycle.mean == Approx((2.0 + 4.0) / 1));
  CHECK(cycle.weight == Approx(6.0));
  REQUIRE(cycle.edges.size() == 2);
  for (int e : cycle.edges) CHECK((e == 0 || e == 1));
  // The cycle's edges chain: each edge ends where the next begins.
  CHECK(graph.edges[cycle.edges[0]].to == graph.edges[cycle.edges[1]].from);
}

TEST_CASE("max-plus: multi-token edges divide the weight by the tokens", "[max_plus]") {
  // C1: 0 -> 1 -> 2 -> 0, W = 4 + 3 + 3 = 10, T = 3: mean 10/3.
  // C2: 0 -> 3 -> 0, W = 5 + 2 = 7, T = 0 + 2 = 2: mean 7/2, the larger.
  const TimedEventGraph graph =
      graph_of(4, {{0, 1, 4.0, 1}, {1, 2, 3.0, 1}, {2, 0, 3.0, 1}, {0, 3, 5.0, 0}, {3, 0, 2.0, 2}});
  const CriticalCycle cycle = solve(graph);
  CHECK(cycle.mean == Approx(7.0 / 2.0));
  CHECK(cycle.tokens == 2);
  // Make C1 heavier: 0 -> 1 now weighs 6, W = 12 over 3 tokens = 4 > 7/2.
  TimedEventGraph heavier = graph;
  heavier.edges[0].weight = 6.0;
  CHECK(solve(heavier).mean == Approx(12.0 / 3.0));
}

TEST_CASE("max-plus: negative tokens on an edge are fine when the cycle holds tokens", "[max_plus]") {
  // 0 -> 1 holds -1 token, 1 -> 0 holds 2: the cycle holds 1; W = 1 + 2.
  const CriticalCycle cycle = solve(graph_of(2, {{0, 1, 1.0, -1}, {1, 0, 2.0, 2}}));
  CHECK(cycle.mean == Approx(3.0));
  CHECK(cycle.tokens == 1);
}

TEST_CASE("max-plus: a cycle without tokens is a deadlock", "[max_plus]") {
  CHECK_FALSE(maximum_cycle_mean(graph_of(2, {{0, 1, 1.0, 0}, {1, 0, 1.0, 0}})).ok());
  CHECK_FALSE(maximum_cycle_mean(graph_of(2, {{0, 1, 1.0, -1}, {1, 0, 1.0, 0}})).ok());
  CHECK_FALSE(maximum_cycle_mean(graph_of(2, {{0, 1, 1.0, -2}, {1, 0, 1.0, 1}})).ok());
  CHECK_FALSE(maximum_cycle_mean(graph_of(2, {{0, 5, 1.0, 1}})).ok());  // node out of range
}

TEST_CASE("max-plus: the largest component wins and a graph without cycles has mean 0", "[max_plus]") {
  // Two rings: {0, 1} with W = 4 over 2 tokens (2), {2, 3} with W = 5 over 1 (5),
  // joined by one edge 1 -> 2 that lies on no cycle.
  const TimedEventGraph graph =
      graph_of(4, {{0, 1, 1.0, 1}, {1, 0, 3.0, 1}, {2, 3, 2.0, 0}, {3, 2, 3.0, 1}, {1, 2, 100.0, 0}});
  CHECK(solve(graph).mean == Approx(5.0));
  const CriticalCycle none = solve(graph_of(3, {{0, 1, 1.0, 0}, {1, 2, 1.0, 0}}));
  CHECK(none.mean == 0.0);
  CHECK(none.edges.empty());
}

TEST_CASE("max-plus: Howard agrees with enumerating every cycle", "[max_plus]") {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 300; ++trial) {
    const int nodes = 2 + trial % 6;
    const TimedEventGraph graph = random_graph(rng, nodes, nodes + trial % 9);
    const double expected = brute_force_mean(graph);
    const CriticalCycle cycle = solve(graph);
    INFO("trial " << trial);
    CHECK(cycle.mean == Approx(expected).epsilon(1e-9));
    double weight = 0.0;
    int tokens = 0;
    for (int e : cycle.edges) weight += graph.edges[e].weight, tokens += graph.edges[e].tokens;
    CHECK(weight / tokens == Approx(cycle.mean).epsilon(1e-12));
  }
}

TEST_CASE("max-plus: the periodic schedule satisfies the eigen-equation", "[max_plus]") {
  // x_v = max over edges (u, v, w, t) of x_u + w - lambda t, with x = 0 at the
  // critical cycle's first node.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const TimedEventGraph graph = random_graph(rng, 6, 10);
    const CriticalCycle cycle = solve(graph);
    const std::vector<double> x = periodic_schedule(graph, cycle);
    CHECK(x[graph.edges[cycle.edges.front()].from] == Approx(0.0).margin(1e-12));
    std::vector<double> best(x.size(), -INFINITY);
    for (const TimedEdge& e : graph.edges)
      best[e.to] = std::max(best[e.to], x[e.from] + e.weight - cycle.mean * e.tokens);
    for (size_t v = 0; v < x.size(); ++v) CHECK(x[v] == Approx(best[v]).margin(1e-9));
  }
}

TEST_CASE("max-plus: longest paths of a DAG and its critical path", "[max_plus]") {
  // 0 -> 1 (2), 0 -> 2 (5), 1 -> 3 (4), 2 -> 3 (0.5): to 3 the longest is
  // max(2 + 4, 5 + 0.5) = 6 through 0 -> 1 -> 3.
  const TimedEventGraph dag = graph_of(4, {{0, 1, 2.0, 0}, {0, 2, 5.0, 0}, {1, 3, 4.0, 0}, {2, 3, 0.5, 0}});
  auto paths = longest_paths(dag);
  REQUIRE(paths.ok());
  CHECK(paths->finish[0] == 0.0);
  CHECK(paths->finish[2] == Approx(5.0));
  CHECK(paths->finish[3] == Approx(2.0 + 4.0));
  CHECK(paths->last == 3);
  CHECK(critical_path(dag, *paths, 3) == std::vector<int>{0, 2});
  CHECK_FALSE(longest_paths(graph_of(2, {{0, 1, 1.0, 0}, {1, 0, 1.0, 0}})).ok());  // a cycle
  CHECK_FALSE(longest_paths(graph_of(2, {{0, 1, 1.0, 1}})).ok());                  // tokens
}
