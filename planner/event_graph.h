// Timed event graphs of a placed plan: the simulator's model (docs/SIMULATOR.md)
// written as max-plus equations, built from the plan's structure and the
// schedule generators' order, never by running the engine. planner/max_plus.h
// solves them; planner/baton_model.h assembles the estimate.
//
// Notation: stage s has r_s replicas on devices D_s, tF_s and tB_s per
// microbatch, AR_s = Network::allreduce_time(D_s, params_s) (0 when r_s = 1).
// Microbatch k runs on replica k mod r_s. Every node is the END of an event; an
// edge's weight is the time from its source's end to its target's end, so it
// holds the target's duration plus any wait in between. A transfer from
// device a to device b costs c = latency_L + bytes / bandwidth_L on the level L
// = common_level(a, b) that it crosses (0 on one device); the gradient sent back
// across a cut has the activation's size.
//
// pipedream (one period = R = lcm_s r_s minibatches; node F(s, k) stands for
// every microbatch k + pR, p the period; the tokens of an edge are the periods
// between its ends, counted so that none is negative, see event_graph.cc):
//   worker order in steady state, w_s = (workers in stages s..S-1 minus 1) / r_s
//   (warmup_forwards without its cap):
//       ... F(m + w r), B(m), [ALLREDUCE, STEP], F(m + (w + 1) r), B(m + r) ...
//   program order    F(s, k + w_s r_s) -> B(s, k)            weight tB_s
//     r_s = 1:       B(s, k) -> F(s, k + w_s + 1)            weight tF_s
//     r_s > 1:       B(s, k) -> J(s, floor(k / r_s))         weight AR_s
//                    J(s, n) -> F(s, (n + w_s + 1) r_s + j)   weight tF_s, every replica j
//   (J(s, n) is the n-th all-reduce of stage s: it starts when the last replica
//   issues it, right after its n-th backward, and every replica's STEP, hence
//   its next forward, waits for its end.)
//   data             F(s, k) -> F(s + 1, k)                  weight c + tF_{s+1}
//                    B(s + 1, k) -> B(s, k)                  weight c + tB_s
//   The steady-state time per minibatch is (maximum cycle mean) / R.
//   Not in the graph: devices shared by several workers.
//
// Transfers. A data edge between two devices passes through a transfer node
// T, the end of the message's time on the wire (network.h):
//       sender -> T          weight bytes / bandwidth_L
//       T -> receiver        weight latency_L + the receiver's duration
// so that planner/link_servers.h can make each directional link a FIFO server
// (T waits for the previous transfer on each of its two links).
//
// flush schedules (1f1b, gpipe, dp; one iteration of M microbatches, no tokens):
//   the nodes are the F and B of every worker in the generator's order
//   (make_1f1b, make_gpipe, make_data_parallel), J(s) the flush all-reduce,
//   and a start node; program order edges carry the target's duration, data
//   edges c plus the target's duration, B -> J carries AR_s. The iteration
//   time is the longest path.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/max_plus.h"
#include "sim/plan.h"
#include "sim/stage_costs.h"
#include "sim/topology.h"
#include "sim/units.h"

namespace baton {

// a / b rounded toward minus infinity (b > 0): the period of a signed instance index.
inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

enum class EventKind : uint8_t { kStart, kForward, kBackward, kAllReduce, kTransfer, kStep };

struct Event {
  EventKind kind = EventKind::kStart;
  int stage = -1;
  int index = 0;  // microbatch (forward, backward, transfer) or round (all-reduce)
};

// What an edge's weight is made of; the parts add up to the weight.
struct EdgeCost {
  Seconds compute;
  Seconds transfer;
  Seconds allreduce;
};

// One message on the wire; its node is the end of its wire time.
struct TransferEvent {
  int node = 0;
  int sender = 0;         // the compute node whose end issues it
  int sender_worker = 0;  // equal issue times go in worker order, as in the engine
  int links[2] = {-1, -1};  // the sender's uplink and the receiver's downlink (link_id)
  Seconds wire;           // bytes / bandwidth
};

// What a pipedream run's first minibatches need beyond the periodic graph,
// so that planner/link_order.h can follow a run from its start. The instance
// of node v in period p exists when its microbatch (or round) index + p R (or
// p R / r_s) is >= 0; every worker starts at time 0.
//   first_period[v]  the first period whose instance of v exists
//   release[v]       v's end if it waited for nothing: tF_s for F(s, k) (a
//                    worker's first forward starts at 0), 0 for the others
//                    (each of their instances waits for one that exists)
//   edges            warm-up program order F(s, k - r_s) -> F(s, k), weight tF_s:
//                    a worker's warm-up forwards run back to back. Left out of
//                    the periodic graph, where the program order implies them
//                    (F(s, k - r_s) -> B -> [J] -> F(s, k) weighs more).
// Empty for flush graphs.
struct StartUp {
  std::vector<int64_t> first_period;
  std::vector<double> release;
  std::vector<TimedEdge> edges;
};

struct PlanEventGraph {
  TimedEventGraph graph;
  std::vector<Event> events;    // per node
  std::vector<EdgeCost> costs;  // per edge
  std::vector<TransferEvent> transfers;
  int num_links = 0;            // directional links of the topology
  int64_t minibatches_per_period = 1;  // pipedream: R (K R when unrolled K times); flush: M
  StartUp start_up;                    // pipedream only, and not kept by unroll_periods
};

// Dense id of the directional link of `level` that serves `child` (its
// uplink, or its downlink when `down`), in [0, number of links).
int link_id(const Topology& topology, int level, int child, bool down);

// The largest period the pipedream graph is built for; plans whose lcm of
// replica counts exceeds it are not modelled (the simulator caps R there too).
inline constexpr int64_t kMaxEventGraphPeriod = 4096;

// Time of one point-to-point message of `size` from device a to device b.
Seconds message_time(const Topology& topology, int from_device, int to_device, Bytes size);

// Precondition: plan.schedule == kPipeDream, devices assigned, costs from
// stage_costs(profile, plan, topology), lcm of replicas <= kMaxEventGraphPeriod.
PlanEventGraph pipedream_event_graph(const Plan& plan, const std::vector<StageCost>& costs,
                                     const Topology& topology);

// The same steady state written over K consecutive periods: node v of copy c
// (c in [0, K)) is v's instance in periods c, c + K, c + 2K, ...; an edge
// (u, v, w, t) becomes, for every c, (u of copy c) -> (v of copy (c + t) mod K)
// holding floor((c + t) / K) tokens. Its maximum cycle mean is K lambda; link
// orders that repeat only every K periods can be written on it. Node ids:
// c x num_nodes + v; edges, costs and transfers copy by copy.
// Precondition: periods >= 1.
PlanEventGraph unroll_periods(const PlanEventGraph& graph, int periods);

// Precondition: a flush schedule, devices assigned, costs as above.
PlanEventGraph flush_event_graph(const Plan& plan, const std::vector<StageCost>& costs,
                                 const Topology& topology);

}  // namespace baton
