// FIFO links as servers of a plan's timed event graph, and the solvers that
// find the order in which each link serves its transfers.
//
// The simulator's links (sim/network.h) carry one transfer at a time in the
// order the transfers are issued; a transfer holds the sender's uplink and the
// receiver's downlink for bytes / bandwidth. A link that serves its transfers
// in a known cyclic order is itself a timed event graph: with T_i the end of the
// i-th transfer's wire time,
//     T_{i-1} -> T_i    weight wire_i      (on each of T_i's two links)
// and T_i also waits for its issue (sender -> T_i, planner/event_graph.h), so
//     T_i = wire_i + max(issue_i, T_prev(uplink), T_prev(downlink)),
// the engine's rule. The order is the order of the issue times, which the
// graph's own solution gives:
//
// pipedream (periodic): the issue time of transfer X's period-p instance is
//   tau_X + p lambda, tau from the periodic schedule (max_plus.h). Split tau_X =
//   q_X lambda + phi_X with phi_X in [0, lambda); sorting a link's transfers by
//   phi (equal times: lower sender worker first, as the engine's event queue)
//   gives its cyclic order; consecutive X -> Y hold q_X - q_Y tokens and the
//   wrap from the last to the first one more. A link with one transfer gets a
//   self-loop of one token: its load per period bounds the period.
// flush (one iteration): the issue times are the DAG's longest paths (the
//   earliest schedule); chain edges hold no tokens.
//
// Order and timing depend on each other, so the solvers start from the graph
// without servers and re-solve with the order the last solution implies until
// the order repeats (a fixed point: the timing reproduces the order it was
// computed with), at most kMaxOrderRounds times, and stop early when the
// orders come back to one seen before (a cycle of orders, no fixed point). At a fixed point the flush
// longest paths are the engine's timeline exactly (devices not shared), and the
// pipedream cycle mean is the period of a steady state the engine can run.
//
// Limits (measured against the simulator on the shipped profiles and
// topologies, not derived): where links fed by several workers queue, a run
// may settle into another self-consistent order than the one found here,
// often one that repeats only every few periods, and its period then differs
// (by up to ~20% on 10 Gb/s Ethernet clusters). Without a fixed point (the
// orders cycle), the solution is the order with the smallest period among
// those visited; runs settle near it more often than near the others.
// Plans without such queueing are modelled exactly (0.14% worst case, from
// the simulator's own windowing).
//
// Thread safety: pure functions.
#pragma once

#include "planner/event_graph.h"
#include "planner/max_plus.h"
#include "sim/result.h"

namespace baton {

inline constexpr int kMaxOrderRounds = 12;

struct PeriodicSolution {
  PlanEventGraph graph;  // the base graph plus the link chains of the final order
  CriticalCycle cycle;   // its maximum cycle mean and critical cycle
  int rounds = 0;        // solves with link chains
  bool settled = false;  // the order reached a fixed point
  // Links fed by several sender workers on which some transfer waits for the
  // link in the steady state: there the order, and with it the period, depends
  // on how the run started (several self-consistent orders may exist).
  int contended_links = 0;
};

// Precondition: `base` from pipedream_event_graph. Fails when the base graph deadlocks.
Result<PeriodicSolution> solve_periodic(const PlanEventGraph& base);

struct FlushSolution {
  PlanEventGraph graph;
  LongestPaths paths;
  int rounds = 0;
  bool settled = false;
};

// Precondition: `base` from flush_event_graph. Fails when the base graph has a cycle.
Result<FlushSolution> solve_flush(const PlanEventGraph& base);

}  // namespace baton
