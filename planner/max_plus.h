// Max-plus figures of a timed event graph: its maximum cycle mean (the period
// of a periodic schedule) and its longest paths (the makespan of one
// iteration). Pure solvers on plain numbers; planner/event_graph.h builds the
// graphs from a plan.
//
// The model. A timed event graph has nodes (events that happen once per
// period: "stage 2 finishes the forward of the 3rd microbatch of the period")
// and edges (u, v, w, t): the p-th occurrence of v happens at least w seconds
// after the (p - t)-th occurrence of u,
//     x_v(p) = max over edges (u, v, w, t) of  x_u(p - t) + w.
// t (tokens) is how many periods the edge spans; it may be negative (v's p-th
// event waits for a later-numbered u, as a backward waits for the forward that
// the 1F1B order runs before it) as long as every cycle holds a positive number
// of tokens; a cycle with T(C) <= 0 tokens is a deadlock.
//
// Theorem (Cohen, Dubois, Quadrat, Viot 1985; Baccelli et al., "Synchronization
// and Linearity", 1992): when the graph is strongly connected, x_v(p) / p tends
// to the maximum cycle mean
//     lambda = max over cycles C of  W(C) / T(C),
// W(C) the sum of the weights and T(C) the sum of the tokens on C; with several
// strongly connected components the largest component figure wins for the
// nodes it reaches. lambda is the steady-state time per period.
//
// Algorithm: Howard's policy iteration for the cycle ratio (Cochet-Terrasson,
// Cohen, Gaubert, McGettrick, Quadrat, 1998), run on every strongly connected
// component. A policy picks one incoming edge per node; the policy graph's
// cycles give candidate ratios, potentials h satisfy h(v) = h(u) + w - eta t
// along policy edges, and the policy improves first on eta, then on h, until no
// edge improves by more than a tolerance of 1e-12 relative. The answer is the
// exact ratio W(C) / T(C) of the final critical cycle, summed in floating point.
// Before it runs, tokens are retimed (t'(u, v) = t + d(u) - d(v), with d the
// shortest token distance, which leaves every cycle's T unchanged and makes all
// t' >= 0) and the zero-token subgraph is checked for cycles (deadlocks).
// Cost: O(E) per policy iteration; in practice a handful of iterations.
//
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "sim/result.h"

namespace baton {

struct TimedEdge {
  int from = 0;
  int to = 0;
  double weight = 0.0;  // seconds from `from`'s event to `to`'s
  int tokens = 0;       // periods the edge spans (see above)
};

struct TimedEventGraph {
  int num_nodes = 0;
  std::vector<TimedEdge> edges;

  int add_node() { return num_nodes++; }
  // Returns the edge's index.
  int add_edge(int from, int to, double weight, int tokens);
};

struct CriticalCycle {
  double mean = 0.0;       // W / T: seconds per period; 0 when the graph has no cycle
  double weight = 0.0;     // W
  int tokens = 0;          // T
  std::vector<int> edges;  // indices into graph.edges, in cycle order
  // Per node: a potential h with h(v) >= h(u) + w - mean t on every edge of the
  // cycle's strongly connected component (equality on a spanning tree of it);
  // -infinity outside that component.
  std::vector<double> potentials;
};

// The maximum cycle mean and one cycle that attains it. Fails (as a value)
// when some cycle holds no tokens (the schedule deadlocks) or on bad node ids.
Result<CriticalCycle> maximum_cycle_mean(const TimedEventGraph& graph);

// A steady-state periodic schedule of the graph: x with x_v(p) = x_v + p lambda
// satisfying x_v = max over edges (u, v, w, t) of x_u + w - lambda t, i.e. the
// eigenvector of the max-plus system rooted at the critical cycle:
//   x_v = longest path from c to v under weights w - lambda t,
// c = the source of the cycle's first edge, so x_c = 0. (When the critical
// graph has one class this eigenvector is unique up to a constant: it is the
// timing every run settles into.) Nodes not reachable from c get -infinity.
// Cost: Dijkstra on the weights reduced by the cycle's potentials (all <= 0)
// when the graph is strongly connected, O(E log V); else Bellman-Ford.
// Precondition: `cycle` is maximum_cycle_mean(graph).
std::vector<double> periodic_schedule(const TimedEventGraph& graph, const CriticalCycle& cycle);

struct LongestPaths {
  std::vector<double> finish;  // per node: longest path ending at it (0 at a source)
  std::vector<int> via;        // per node: the last edge of that path, -1 at a source
  int last = -1;               // the node with the largest finish (-1: empty graph)
};

// Longest paths of a graph whose edges all hold 0 tokens (one iteration of a
// flush schedule): x_v = max(0, max over (u, v, w) of x_u + w). Fails when the
// graph has a cycle or an edge holds tokens.
Result<LongestPaths> longest_paths(const TimedEventGraph& graph);

// The edges of the longest path ending at `node`, first edge first.
std::vector<int> critical_path(const TimedEventGraph& graph, const LongestPaths& paths, int node);

}  // namespace baton
