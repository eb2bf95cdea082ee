// Schedule generators: pure functions from a Plan to a Program.
//
// Contract shared by every generator:
// - workers are `workers_of(plan)` (stage by stage, replica by replica);
// - microbatch k (0 <= k < plan.batches) runs at stage s on replica
//   k mod r_s, where r_s = plan.stages[s].replicas; a worker's "local"
//   microbatches are those assigned to it, in increasing order;
// - the generated Program holds compute, ALLREDUCE and STEP actions only;
//   `lower_communication` adds the sends and receives (`build_program` does both);
// - the Program copies schedule, num_stages, microbatches and vertical_sync
//   from the plan;
// - ALLREDUCE and STEP carry the round number (0, 1, 2, ... per worker);
// - `only`, when given, is a Program skeleton holding some of workers_of(plan)
//   (one_replica_program(empty_program) in build_replica0_program): the
//   generator writes those workers' actions only, each exactly what it writes
//   for that worker in the whole Program (every worker's list depends only on
//   the plan and the worker).
// Each generator's order is drawn in sim/schedules.cc as a timeline with equal
// forward and backward times and free communication.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include "sim/plan.h"
#include "sim/program.h"
#include "sim/zb_heuristic.h"

namespace baton {

// GPipe: per worker all its F in microbatch order, then all its B in
// microbatch order, then ALLREDUCE(0) if its stage has > 1 replica, then STEP(0).
Program make_gpipe(const Plan& plan, const Program* only = nullptr);

// PipeDream-Flush / Megatron's non-interleaved 1F1B: `warmup_forwards` forwards,
// then alternate F,B while forwards remain, then the remaining B's, then
// ALLREDUCE(0) if the stage has > 1 replica, then STEP(0) (the flush). With
// Plan::paired_steady_state (one stage) each steady-state F and the B after
// it are an overlapped pair (sim/program.h).
Program make_1f1b(const Plan& plan, const Program* only = nullptr);

// PipeDream's asynchronous 1F1B (weight stashing, no flush): the 1F1B order,
// but after every backward ALLREDUCE(round) if the stage has > 1 replica, then
// STEP(round), where round counts that worker's backwards from 0.
// Replicas of a stage run the same number of ALLREDUCEs only when
// plan.batches is a multiple of the stage's replica count; otherwise the
// program fails `validate_program` (the collective would never complete).
Program make_pipedream(const Plan& plan, const Program* only = nullptr);

// Data parallelism. Precondition: the plan has one stage with W replicas.
// Each worker runs F,B for each of its local microbatches, then ALLREDUCE(0)
// if W > 1, then STEP(0). (Given more stages, every stage's workers follow the
// same order, which is valid but never overlaps stages.)
Program make_data_parallel(const Plan& plan, const Program* only = nullptr);

// Zero bubble, handcrafted (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR 2024, section 3.1): every backward is split into I (the gradient of the
// stage's input, sent upstream at once) and W (the gradient of its weights,
// which nothing waits for), and the W passes are moved into the bubbles; the
// iteration ends with a flush as 1f1b's does.
// With w_s = the uncapped 1F1B warm-up of stage s ((workers in stages s..S-1,
// minus 1) / r_s, which is S - s - 1 without replication) and u_s = the
// workers before stage s:
// - zb-h1: 1F1B's order of F and I (warm-up w_s); after each I the oldest due
//   W, except that stage s holds back u_s / r_s of them (s without
//   replication), which run after the last I. A stage then holds at most
//   w_s + 1 + u_s / r_s microbatches (F run, W not yet): S on every stage
//   without replication, 1F1B's peak on stage 0; with equal stage times and
//   free communication the bubble is (S - 1)(tF + tI - tW).
// - zb-h2: warm-up 2 w_s, holding back 2 u_s / r_s: up to 2S - 1 microbatches
//   without replication, and the bubble is (S - 1)(tF + tI - 2 tW) while that
//   is >= 0 (zero when tW >= (tF + tI) / 2).
// Warm-ups and hold-backs are capped at the worker's local microbatches; the
// order of F and I alone is 1F1B's with a longer warm-up, so no program deadlocks.
Program make_zb_h1(const Plan& plan, const Program* only = nullptr);
Program make_zb_h2(const Plan& plan, const Program* only = nullptr);

// ZB-H1 and ZB-H2 replaced by the Zero Bubble authors' greedy order for the
// plan's stage times (sim/zb_heuristic.h): stage s's workers run the order's
// stage s, its microbatch i being the worker's i-th local microbatch, then
// ALLREDUCE(0) if the stage has > 1 replica and STEP(0). The Program keeps the
// plan's schedule (zb-h1 or zb-h2, whose memory limit the order was made
// under). Precondition: the order has the plan's stages, and each replica
// runs as many microbatches as each of the order's stages.
Program make_zb_heuristic(const Plan& plan, const ZbHeuristicOrder& order, const Program* only = nullptr);

// The schedules that run several chunks per worker (plan.h: runs_chunks;
// the plan must pass check_chunks). Workers are (rank, replica); a worker's
// actions name the chunk (stage) they run; a chunk's ALLREDUCE and STEP come
// at the end as for every flush schedule (all ALLREDUCEs first).
// - interleaved-1f1b: Megatron-LM's order (virtual microbatches in groups of
//   p; warm-up 2 (p - d - 1) + (v - 1) p forwards); with equal stages and
//   free communication the bubble is (p - 1) / v of one microbatch's work.
// - zbv: the V-shaped zero-bubble order for equal F, I and W times.
// - dualpipev: DeepSeek's DualPipeV order; its overlapped F&B pairs run one
//   after the other, hiding each pass's overlappable communication (a mixture
//   of experts' all-to-alls) behind the other's compute (sim/program.h).
Program make_interleaved_1f1b(const Plan& plan, const Program* only = nullptr);
Program make_zbv(const Plan& plan, const Program* only = nullptr);
Program make_dualpipev(const Plan& plan, const Program* only = nullptr);

// Warm-up forwards of a worker of `stage` that owns `local_microbatches`
// microbatches: (workers in stages stage..S-1, minus 1) / r_stage, capped at
// `local_microbatches`. Without replication this is min(S - stage - 1, M).
// 1f1b with Plan::paired_steady_state (one stage): one more, F0 before the
// pairs F1&B0, F2&B1, ... (Megatron-core's no-pipelining schedule with
// --overlap-moe-expert-parallel-comm).
int warmup_forwards(const Plan& plan, int stage, int local_microbatches);

// Inserts the point-to-point transfers that the compute actions need; a
// transfer's Action.stage is the stage of the compute action it serves (one of
// the worker's stages) and Action.peer the other worker. With w(s, k) = the
// worker that runs stage s for microbatch k (replica k mod r_s):
//   F(k) at s > 0:      RECV_ACT k <w(s-1, k) immediately before it;
//   F(k) at s < S-1:    SEND_ACT k >w(s+1, k) immediately after it;
//   B(k) or I(k) at s < S-1: RECV_GRAD k <w(s+1, k) immediately before it;
//   B(k) or I(k) at s > 0:   SEND_GRAD k >w(s-1, k) immediately after it.
// except where w(s +- 1, k) is the worker itself (it runs both sides of the
// cut, as at a V's turn): then nothing moves. W, ALLREDUCE and STEP need no
// transfer. Sends and receives already in the input are dropped first, so
// lowering is idempotent.
Program lower_communication(Program program);

// The generator named by plan.schedule: compute, ALLREDUCE and STEP actions.
Program generate_program(const Plan& plan, const Program* only = nullptr);

// generate_program followed by lower_communication.
Program build_program(const Plan& plan);

// The lowered Program of replica 0 of every stage, with allreduce_devices set
// to all replicas' devices: the generators run for those workers only, so it
// equals one_replica_program(build_program(plan)) in a fraction of the time
// (SimOptions::one_replica). generate_replica0_program: the same before
// lowering.
Program build_replica0_program(const Plan& plan);
Program generate_replica0_program(const Plan& plan);

// Whether a stage's actions depend on the workers before it (the zero-bubble
// schedules' held-back W's); for the others they depend only on the stage's
// replicas, the workers after it and the microbatch count.
bool sees_upstream(Schedule schedule);

// Whether the schedule runs without a flush: its Program repeats minibatch
// after minibatch, and what it achieves is the steady state's time per
// minibatch (pipedream). The others run one iteration of plan.batches
// microbatches and end with a flush; their figure is that iteration.
bool runs_steady_state(Schedule schedule);

}  // namespace baton
