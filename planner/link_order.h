// The order in which FIFO links serve their transfers, and the order a run of
// the engine settles into from its start.
//
// Why a run. A link fed by several workers can serve its transfers in more than
// one self-consistent order (an order whose periodic timing reproduces it), and
// their periods differ. The engine (sim/engine.cc) has no choice: it starts
// every worker at 0, runs the warm-up forwards back to back and serves each link
// in issue order, so the order it settles into is decided by its start-up, and
// it may repeat only every K > 1 periods. The one-period fixed point of
// planner/link_servers.h, started from the graph without servers, finds
// another order: on cluster A's 10 Gb/s links its period was off by 2-13%
// (bert-large, gpt-1.3b, gnmt16, uniform_16), where the runs repeat every 1,
// 3 or 4 periods (and every 12 on some plans on cluster B).
//
// The run. follow_run plays the pipedream event graph forward from period
// first_period (planner/event_graph.h: StartUp) with the engine's rules: an
// instance ends at the largest of its predecessors' ends plus the edge weights
// (and its release), and a transfer instance, taken in the order of its issue
// time (the end of its sender; equal times on a grid of `grid` seconds: lower
// sender worker first, as the engine's event queue), ends at
//     wire + max(issue, free(uplink), free(downlink)),
// after which both links are free at that end. That is the engine's timeline
// event for event, as long as no device runs several workers (the graph leaves
// those out). After `periods` periods it looks for the smallest K in
// 1..max_repeat such that on every link the serving order of the last
// max(2K, max_repeat) periods is the one K periods before, shifted by K.
//
// The order found is written on unroll_periods(base, K): slot (i, c) is
// transfer i of copy c, and its shift is minus the unrolled period of the
// instance that stands for it, so that consecutive slots X -> Y hold
// shift_X - shift_Y tokens and the wrap from the last to the first one more
// (the convention of planner/link_servers.cc).
//
// Cost: O(periods x (edges + transfers log transfers)) time, O(periods x
// nodes) memory.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/event_graph.h"

namespace baton {

struct LinkSlot {
  int transfer = 0;   // index into PlanEventGraph::transfers
  int64_t shift = 0;  // see above: tokens between slots come from shift differences
};

// Per directional link, its transfers in cyclic serving order.
using LinkOrder = std::vector<std::vector<LinkSlot>>;

// No transfer twice on one link (a cyclic order serves each once per period).
bool each_once(const LinkOrder& order);

struct RunOrder {
  int repeat = 0;         // K; 0 when no order repeated within max_repeat periods
  LinkOrder order;        // on unroll_periods(base, repeat)
};

// Precondition: `base` from pipedream_event_graph (start_up filled), grid > 0,
// periods >= 1, max_repeat >= 1.
RunOrder follow_run(const PlanEventGraph& base, int64_t periods, int max_repeat, double grid);

}  // namespace baton
