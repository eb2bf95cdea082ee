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
// pipedream (periodic): the order is the one a run of the engine from its
//   start settles into (planner/link_order.h follows the run on the graph
//   itself). It often repeats only every K > 1 periods; the graph is then
//   unrolled over K periods (unroll_periods), each link's K-period order made
//   a cycle of chain edges (consecutive X -> Y hold the periods between their
//   instances, the wrap from the last to the first one more; a link with one
//   transfer gets a self-loop of one token: its load per period bounds the
//   period), and lambda = (maximum cycle mean) / K. With the order fixed, that
//   is exact: the run's timeline is that timed event graph's.
//   When the run's order does not repeat within kMaxRepeat periods over runs
//   of up to kMaxRunPeriods periods (and kMaxRunMinibatches minibatches), the
//   model falls back to a fixed point on one period: the issue time of
//   transfer X's period-p instance is tau_X + p lambda, tau from the periodic
//   schedule (max_plus.h); tau_X = q_X lambda + phi_X with phi_X in
//   [0, lambda); sorting a link's transfers by phi (equal times: lower sender
//   worker first, as the engine's event queue) gives its cyclic order, with
//   q_X - q_Y tokens on X -> Y. Order and timing depend on each other, so it
//   starts from the graph without servers and re-solves with the order the
//   last solution implies until the order repeats (a fixed point), at most
//   kMaxOrderRounds times, and stops early when the orders come back to one
//   seen before (a cycle of orders: it keeps the fastest one visited).
// flush (one iteration): the issue times are the DAG's longest paths (the
//   earliest schedule); chain edges hold no tokens; the same fixed point from
//   the DAG without servers, which at a fixed point is the engine's timeline
//   exactly (devices not shared).
//
// Why a run and not the fixed point alone (measured against the simulator on
// the shipped profiles and topologies): where links fed by several workers
// queue (10 Gb/s Ethernet of cluster A), several self-consistent orders exist;
// the fixed point found one 2-13% off the engine's (bert-large, gpt-1.3b,
// gnmt16, uniform_16 on cluster A), whose order repeats every 1, 3 or 4
// periods. Following the run, every pair the agreement test checks is within
// 0.1% (the rest is the simulator's measurement window).
// Not modelled: devices shared by several workers (not in the graph).
//
// Thread safety: pure functions.
#pragma once

#include "planner/event_graph.h"
#include "planner/max_plus.h"
#include "sim/result.h"

namespace baton {

inline constexpr int kMaxOrderRounds = 12;
// Following a run (planner/link_order.h): orders that repeat every K <=
// kMaxRepeat periods (12: the longest seen on the shipped data), runs of
// kFirstRunPeriods periods, then twice as many while they stay within
// kMaxRunPeriods periods or kMaxRunMinibatches minibatches (the run's cost
// grows with the minibatches it plays; plans of large R rarely repeat within
// them and fall back).
inline constexpr int kMaxRepeat = 12;
inline constexpr int64_t kFirstRunPeriods = 32;
inline constexpr int64_t kMaxRunPeriods = 256;
inline constexpr int64_t kMaxRunMinibatches = 8192;

struct PeriodicSolution {
  // The base graph (unrolled over `repeat` periods) plus the link chains of the
  // final order; graph.minibatches_per_period = repeat x R.
  PlanEventGraph graph;
  CriticalCycle cycle;   // its maximum cycle mean (seconds per `repeat` periods) and critical cycle
  int rounds = 0;        // solves with link chains
  // The order is one the engine runs: the run's repeating order, or a fixed
  // point of the one-period iteration.
  bool settled = false;
  // Links fed by several sender workers on which some transfer waits for the
  // link in the steady state: there the order, and with it the period, depends
  // on how the run started (several self-consistent orders may exist).
  int contended_links = 0;
  int repeat = 1;        // K: `graph` is the base graph unrolled over K periods
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
