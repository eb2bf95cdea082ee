// The cost model (a rating of the plan's simulated Program, sim/rating.h) on
// tiny plans whose time is derived by hand from the generators' order
// (sim/schedules.cc) and the simulator's model (docs/SIMULATOR.md); the
// steady-state cases also measure the slope of two long runs as a cross-check.
// Times in milliseconds; a flat switch of 8 Gb/s = 1e9 bytes/s, so 1e6 bytes
// take 1 ms on the wire.
#include "tests/catch_compat.h"

#include "planner/baton_choose.h"
#include "planner/baton_model.h"
#include "sim/stage_costs.h"
#include "tests/planner/model_support.h"

using namespace baton;
using namespace baton::model_testing;

namespace {

constexpr double kGbps = 8.0;        // 1e9 bytes per second
constexpr int64_t kOneMs = 1000000;  // bytes that take 1 ms on the wire

PlanEstimate estimate(const Profile& profile, const Topology& topology, const Plan& plan) {
  return estimate_plan(profile, topology, plan, Optimizer::kAdam);
}

double ms(Seconds t) { return t.ms(); }

}  // namespace

TEST_CASE("pipedream, 2 stages, free communication: the slower stage's tF + tB", "[baton_model]") {
  // Stage 0: tF 1, tB 2; stage 1: tF 3, tB 4. Cycles: each worker's own
  // (tF + tB per minibatch) and the depth cycle F0 F1 B1 B0 back to F0 two
  // minibatches later ((1 + 3 + 4 + 2) / 2 = 5): the period is max(3, 7, 5) = 7.
  const Profile profile = chain_profile({{1, 2}, {3, 4}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds(0.0));
  const Plan plan = placed_plan("0-1,1-2", Schedule::kPipeDream, 1, topology);
  const PlanEstimate e = estimate(profile, topology, plan);
  CHECK(ms(e.iteration_time) == Approx(3.0 + 4.0));
  CHECK(e.bottleneck == "compute");
  CHECK(e.bottleneck_stage == 1);
  CHECK(e.exact);
  CHECK(ms(e.stages[1].period) == Approx(3.0 + 4.0));
  CHECK(ms(steady_state_time(plan, profile, topology)) == Approx(7.0));
}

TEST_CASE("pipedream, 2 stages with a transfer c on the cut: the depth cycle", "[baton_model]") {
  // tF = tB = 1 on both stages; c = latency 0.5 + 1e6 bytes / 1e9 B/s = 1.5.
  // Stage 0 (warm-up 1) runs F(k + 1), B(k), F(k + 2); stage 1 runs F(k), B(k).
  // The cycle F0(k) -c-> F1(k) -> B1(k) -c-> B0(k) -> F0(k + 2) spans two
  // minibatches: (tF0 + c + tF1 + tB1 + c + tB0) / 2 = (4 + 3) / 2 = 3.5 > 2.
  // Each directional link carries one 1 ms message per minibatch: no queueing.
  const Profile profile = chain_profile({{1, 1, kOneMs}, {1, 1}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds::from_ms(0.5));
  const Plan plan = placed_plan("0-1,1-2", Schedule::kPipeDream, 1, topology);
  const PlanEstimate e = estimate(profile, topology, plan);
  const double c = 0.5 + 1.0;
  CHECK(ms(e.iteration_time) == Approx((1 + c + 1 + 1 + c + 1) / 2.0));
  CHECK(e.bottleneck == "communication or pipeline depth");
  CHECK(ms(steady_state_time(plan, profile, topology)) == Approx((4 + 2 * c) / 2.0));
}

TEST_CASE("pipedream, one stage on 2 replicas: compute plus the all-reduce, halved", "[baton_model]") {
  // Each replica runs F, B, ALLREDUCE, STEP for its own minibatches, and the
  // all-reduce joins both: (tF + tB + AR) / 2 per minibatch. Ring of 2 on one
  // level: AR = 2 (2 - 1) / 2 x 4e6 bytes / 1e9 B/s = 4.
  const Profile profile = chain_profile({{1, 2, 0, 4 * kOneMs}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds(0.0));
  const Plan plan = placed_plan("0-1x2", Schedule::kPipeDream, 2, topology);
  const PlanEstimate e = estimate(profile, topology, plan);
  CHECK(ms(e.stages[0].allreduce) == Approx(4.0));
  CHECK(ms(e.iteration_time) == Approx((1 + 2 + 4) / 2.0));
  CHECK(e.bottleneck == "all-reduce");
  CHECK(ms(steady_state_time(plan, profile, topology)) == Approx(3.5));
}

TEST_CASE("pipedream, a replicated stage before a fast one: the all-reduce round", "[baton_model]") {
  // Stage 0 on 2 replicas (tF = tB = 1, AR = 4), stage 1 alone (tF = tB = 0.25),
  // free communication. Warm-up of stage 0: (3 - 1) / 2 = 1, so replica j runs
  // F(m + 2), B(m), AR, STEP. After a round's all-reduce ends at T both
  // replicas run one F and one B (their gradients came from stage 1 in the last
  // round) and the next all-reduce ends at T + 1 + 1 + 4: two minibatches per
  // 6, 3 per minibatch. Stage 1 needs 0.5 per minibatch: slack.
  const Profile profile = chain_profile({{1, 1, 0, 4 * kOneMs}, {0.25, 0.25}});
  const Topology topology = make_flat_topology(3, kGbps, Seconds(0.0));
  const Plan plan = placed_plan("0-1x2,1-2", Schedule::kPipeDream, 2, topology);
  const PlanEstimate e = estimate(profile, topology, plan);
  CHECK(ms(e.iteration_time) == Approx((1 + 1 + 4) / 2.0));
  CHECK(e.bottleneck_stage == 0);
  CHECK(ms(steady_state_time(plan, profile, topology)) == Approx(3.0));
}

TEST_CASE("pipedream, 2 replicas feeding one: the shared link sets the pace", "[baton_model]") {
  // Stage 0 on 2 replicas, stage 1 alone, every tF = tB = 0.1, 5e6 bytes per
  // message (5 ms on the wire), no latency, no parameters. Stage 1's downlink
  // receives every activation and its uplink sends every gradient, one after
  // the other (FIFO): 5 per minibatch. The depth cycle
  // F0(k) F1(k) B1(k) B0(k) F0(k + 4) weighs about 10.4 over 4 minibatches.
  const Profile profile = chain_profile({{0.1, 0.1, 5 * kOneMs}, {0.1, 0.1}});
  const Topology topology = make_flat_topology(3, kGbps, Seconds(0.0));
  const Plan plan = placed_plan("0-1x2,1-2", Schedule::kPipeDream, 2, topology);
  const PlanEstimate e = estimate(profile, topology, plan);
  CHECK(ms(e.iteration_time) == Approx(5.0));
  CHECK(e.bottleneck == "communication or pipeline depth");
  CHECK(ms(steady_state_time(plan, profile, topology)) == Approx(5.0));
}

TEST_CASE("memory: the simulator's peaks, per stage the largest of its workers", "[baton_model]") {
  // pipedream, stages x1 and x1, 4e6 parameter bytes and 1e6 stash bytes on
  // stage 0, Adam (2 x params of state): stage 0 warms up with 1 forward, so
  // it holds 2 microbatches and 2 weight versions at once:
  //   4e6 x 2 (versions) + 4e6 (gradients) + 8e6 (Adam) + 1e6 x 2 = 22e6 bytes.
  const Profile profile = chain_profile({{1, 1, kOneMs, 4 * kOneMs}, {1, 1}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds(0.0));
  const Plan plan = placed_plan("0-1,1-2", Schedule::kPipeDream, 1, topology);
  const PlanEstimate e = estimate(profile, topology, plan);
  CHECK(e.stages[0].weight_versions == 2);
  CHECK(e.stages[0].inflight == 2);
  CHECK(e.stages[0].memory.value == 4 * kOneMs * 2 + 4 * kOneMs + 8 * kOneMs + kOneMs * 2);
  CHECK(e.peak_memory == e.stages[0].memory);
}

TEST_CASE("flush schedules, uniform stages, free communication: (M + S - 1)(tF + tB)", "[baton_model]") {
  const Profile profile = chain_profile({{1, 1}, {1, 1}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds(0.0));
  const int m = 4, s = 2;
  for (Schedule schedule : {Schedule::kOneFOneB, Schedule::kGPipe}) {
    const Plan plan = placed_plan("0-1,1-2", schedule, m, topology);
    const PlanEstimate e = estimate(profile, topology, plan);
    CHECK(ms(e.iteration_time) == Approx((m + s - 1) * (1.0 + 1.0)));
    CHECK(e.bottleneck == "communication or pipeline depth");
  }
}

TEST_CASE("1f1b, one microbatch with a transfer c: down the pipeline and back", "[baton_model]") {
  // F0, c, F1, B1, c, B0 with tF0 = 1, tB0 = 2, tF1 = 3, tB1 = 4 and
  // c = 0.25 + 1e6 bytes / 1e9 B/s = 1.25.
  const Profile profile = chain_profile({{1, 2, kOneMs}, {3, 4}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds::from_ms(0.25));
  const Plan plan = placed_plan("0-1,1-2", Schedule::kOneFOneB, 1, topology);
  const double c = 1.25;
  CHECK(ms(estimate(profile, topology, plan).iteration_time) == Approx(1 + c + 3 + 4 + c + 2));
}

TEST_CASE("gpipe, two messages queue on each link: the FIFO order counts", "[baton_model]") {
  // S = 2, M = 2, tF = tB = 1, x = 5 ms on the wire, no latency. Stage 0 sends
  // act0 at 1 and act1 at 2; the link carries act0 over [1, 1 + x] and act1
  // over [1 + x, 1 + 2x]. Stage 1: F1(0), then F1(1) ends 2 + 2x, B1(0) 3 + 2x,
  // B1(1) 4 + 2x; grad0 is on the wire over [3 + 2x, 3 + 3x], grad1 waits for it
  // and ends 3 + 4x; stage 0's B0(1) ends 4 + 4x = 24. Without the queueing the
  // makespan would be 4 + 2x + 2 = 16.
  const double x = 5.0;
  const Profile profile = chain_profile({{1, 1, 5 * kOneMs}, {1, 1}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds(0.0));
  const Plan plan = placed_plan("0-1,1-2", Schedule::kGPipe, 2, topology);
  const PlanEstimate e = estimate(profile, topology, plan);
  CHECK(ms(e.iteration_time) == Approx(4 + 4 * x));
  CHECK(ms(e.iteration_time) == Approx(simulated_metrics(plan, profile, topology, 2).iteration_time.ms()));
}

TEST_CASE("data parallel: (M / W)(tF + tB) + all-reduce", "[baton_model]") {
  // W = 2, M = 4, tF = 1, tB = 2, AR = 4e6 bytes / 1e9 B/s = 4.
  const Profile profile = chain_profile({{1, 2, 0, 4 * kOneMs}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds(0.0));
  const Plan plan = placed_plan("0-1x2", Schedule::kDataParallel, 4, topology);
  const PlanEstimate e = estimate(profile, topology, plan);
  CHECK(ms(e.iteration_time) == Approx((4 / 2) * (1.0 + 2.0) + 4.0));
  CHECK(ms(e.iteration_time) == Approx(simulated_metrics(plan, profile, topology, 4).iteration_time.ms()));
}

TEST_CASE("choose_plan: the fastest estimate among candidates the model vouches for", "[baton_model]") {
  // Two straight splits of the same profile: [0, 1) | [1, 2) runs at the
  // slower stage's 7, [0, 2) on one device at 1 + 2 + 3 + 4 = 10.
  const Profile profile = chain_profile({{1, 2}, {3, 4}});
  const Topology topology = make_flat_topology(2, kGbps, Seconds(0.0));
  const std::vector<Plan> candidates{placed_plan("0-2", Schedule::kPipeDream, 1, topology),
                                     placed_plan("0-1,1-2", Schedule::kPipeDream, 1, topology)};
  const auto chosen = choose_plan(candidates, profile, topology, Optimizer::kAdam);
  REQUIRE(chosen);
  CHECK(chosen->index == 1);
  CHECK(chosen->estimate.iteration_time.ms() == Approx(7.0));
  CHECK(estimate_tier(chosen->estimate) == 0);
  CHECK_FALSE(choose_plan({}, profile, topology, Optimizer::kAdam));
}

TEST_CASE("the optimizer step: after every backward (pipedream), once at the end (flush)", "[baton_model]") {
  // Stage 0: tF 1, tB 2, u 0.5; stage 1: tF 3, tB 4, u 1 (ms).
  Profile profile = chain_profile({{1, 2}, {3, 4}});
  profile.layers[0].optimizer = Seconds::from_ms(0.5);
  profile.layers[1].optimizer = Seconds::from_ms(1.0);
  const Topology topology = make_flat_topology(2, kGbps, Seconds(0.0));
  SECTION("pipedream: each worker's cycle grows by its u, stage 1: 3 + 4 + 1") {
    // Depth cycle F0 F1 B1 B0 + u0 back to F0 two minibatches later: (1 + 3 + 4 + 2 + 0.5) / 2 < 8.
    const Plan plan = placed_plan("0-1,1-2", Schedule::kPipeDream, 1, topology);
    CHECK(ms(estimate(profile, topology, plan).iteration_time) == Approx(8.0));
    CHECK(ms(steady_state_time(plan, profile, topology)) == Approx(8.0));
  }
  SECTION("gpipe, 2 microbatches: the longest path ends with stage 0's STEP") {
    // Stage 0: F F at 0-1, 1-2; stage 1: F at 1-4, 4-7, B 7-11, 11-15; stage 0's
    // B(0)... gpipe runs backwards in order 0, 1: B0(0) 11-13 after B1(0),
    // B0(1) 15-17 after B1(1), STEP 17-17.5. Stage 1's STEP ends at 16.
    const Plan plan = placed_plan("0-1,1-2", Schedule::kGPipe, 2, topology);
    CHECK(ms(estimate(profile, topology, plan).iteration_time) == Approx(17.5));
    const Simulation sim = simulate_plan(plan, profile, topology, SimOptions{}).value();
    CHECK(ms(sim.metrics.iteration_time) == Approx(17.5));
  }
}
