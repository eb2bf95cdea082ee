// The zero-bubble schedules (sim/schedules.h: make_zb_h1, make_zb_h2) against
// the numbers of Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism",
// ICLR 2024 (arXiv 2401.10241): their bubble rates (Table 5) computed from
// their measured per-stage times (Table 6), and the closed forms of their
// section 3.1.
#include <algorithm>
#include <map>

#include "tests/catch_compat.h"

#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

struct StageTimes {
  double forward_ms;
  double input_ms;   // T_B: the gradient of the input
  double weight_ms;  // T_W: the gradient of the weights
  double comm_ms;    // one transfer between neighbouring stages
};

// One layer per stage, every stage alike: tF, a backward of tI + tW split into
// I and W, nothing sent but a transfer of `comm_ms` (the link's latency).
Simulation simulate_uniform(Schedule schedule, int stages, int microbatches, const StageTimes& t) {
  Profile profile = make_uniform_profile(stages, Seconds::from_ms(t.forward_ms),
                                         Seconds::from_ms(t.input_ms + t.weight_ms), Bytes(0), Bytes(0));
  for (Layer& layer : profile.layers) {
    layer.backward_input = Seconds::from_ms(t.input_ms);
    layer.backward_weight = Seconds::from_ms(t.weight_ms);
  }
  const Topology topology = make_flat_topology(stages, 100.0, Seconds::from_ms(t.comm_ms));
  const Plan plan = make_plan(one_layer_per_stage(stages), schedule, microbatches, topology);
  return simulate_ok(plan, profile, topology);
}

// Bubble rate = (cost - m (tF + tI + tW)) / cost.
double bubble_rate(const Simulation& sim, int microbatches, const StageTimes& t) {
  const double cost = longest_stage_span(sim);
  return (cost - microbatches * (t.forward_ms + t.input_ms + t.weight_ms) * 1e-3) / cost;
}

}  // namespace

TEST_CASE("zero bubble: the paper's bubble rates of 1F1B, ZB-H1 and ZB-H2 from its measured stage times",
          "[sim][zero-bubble][published]") {
  // Qi et al., ICLR 2024: inputs from Table 6 (model 1.5B, p = 8), expected
  // bubble rates from Table 5. 1F1B runs the backward unsplit (tI + tW).
  struct Row {
    int microbatches;
    StageTimes times;
    double one_f_one_b, zb_h1, zb_h2;
  };
  const Row rows[] = {
      {24, {18.522, 18.086, 9.337, 0.601}, 0.2431, 0.1585, 0.1083},
      {32, {18.513, 18.086, 9.331, 0.626}, 0.1985, 0.1242, 0.0837},
      {64, {18.546, 18.097, 9.321, 0.762}, 0.1240, 0.0674, 0.0444},
  };
  const int stages = 8;
  for (const Row& row : rows) {
    INFO("p = 8, m = " << row.microbatches);
    const auto rate = [&](Schedule schedule) {
      return bubble_rate(simulate_uniform(schedule, stages, row.microbatches, row.times), row.microbatches, row.times);
    };
    const double one_f_one_b = rate(Schedule::kOneFOneB);
    const double zb_h1 = rate(Schedule::kZbH1);
    const double zb_h2 = rate(Schedule::kZbH2);
    // The tolerances ...
    CHECK(std::abs(one_f_one_b - row.one_f_one_b) <= 0.002);
    CHECK(std::abs(zb_h1 - row.zb_h1) <= 0.005);
    CHECK(std::abs(zb_h2 - row.zb_h2) <= 0.005);
    // ... and what the simulator reaches: the table's four decimals.
    CHECK(std::abs(one_f_one_b - row.one_f_one_b) <= 5e-5);
    CHECK(std::abs(zb_h1 - row.zb_h1) <= 5e-5);
    CHECK(std::abs(zb_h2 - row.zb_h2) <= 5e-5);
  }
}

TEST_CASE("zero bubble: ZB-H1's bubble is (S - 1)(tF + tI - tW), ZB-H2's (S - 1)(tF + tI - 2 tW)",
          "[sim][zero-bubble][closed-form]") {
  // Free communication; tW <= tF, tI, where the paper's forms hold (ZB-H2's
  // bubble is zero once tW >= (tF + tI) / 2).
  const StageTimes cases[] = {{1.0, 1.0, 1.0, 0.0}, {1.0, 1.0, 0.5, 0.0}, {2.0, 1.5, 1.0, 0.0}, {1.0, 1.2, 0.7, 0.0}};
  for (int stages : {2, 4, 8}) {
    for (int microbatches : {2 * stages, 3 * stages + 1}) {
      for (const StageTimes& t : cases) {
        INFO("S = " << stages << " M = " << microbatches << " tF " << t.forward_ms << " tI " << t.input_ms << " tW "
                    << t.weight_ms);
        const double work = microbatches * (t.forward_ms + t.input_ms + t.weight_ms) * 1e-3;
        const Simulation h1 = simulate_uniform(Schedule::kZbH1, stages, microbatches, t);
        const Simulation h2 = simulate_uniform(Schedule::kZbH2, stages, microbatches, t);
        const Simulation flush = simulate_uniform(Schedule::kOneFOneB, stages, microbatches, t);
        CHECK(longest_stage_span(h1) - work ==
              Approx((stages - 1) * (t.forward_ms + t.input_ms - t.weight_ms) * 1e-3).epsilon(1e-9).margin(1e-12));
        CHECK(longest_stage_span(h2) - work ==
              Approx(std::max(0.0, (stages - 1) * (t.forward_ms + t.input_ms - 2 * t.weight_ms) * 1e-3))
                  .epsilon(1e-9)
                  .margin(1e-12));
        // 1F1B's bubble, for comparison: (S - 1)(tF + tI + tW).
        CHECK(longest_stage_span(flush) - work ==
              Approx((stages - 1) * (t.forward_ms + t.input_ms + t.weight_ms) * 1e-3).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("zero bubble: ZB-H1 holds S microbatches on every stage, ZB-H2 2S - 1", "[sim][zero-bubble][memory]") {
  // A microbatch is held from its F to its W (the W needs the stage's input and
  // output gradient); 1F1B holds S - s on stage s, so ZB-H1's peak is 1F1B's
  // stage-0 peak, the figure the paper keeps.
  const StageTimes t{1.0, 1.0, 1.0, 0.0};
  for (int stages : {2, 4, 6}) {
    const int microbatches = 3 * stages;
    const Simulation h1 = simulate_uniform(Schedule::kZbH1, stages, microbatches, t);
    const Simulation h2 = simulate_uniform(Schedule::kZbH2, stages, microbatches, t);
    const Simulation flush = simulate_uniform(Schedule::kOneFOneB, stages, microbatches, t);
    for (int s = 0; s < stages; ++s) {
      INFO("S = " << stages << " stage " << s);
      CHECK(h1.metrics.workers[s].peak_inflight_microbatches == stages);
      CHECK(h2.metrics.workers[s].peak_inflight_microbatches == 2 * stages - 1);
      CHECK(flush.metrics.workers[s].peak_inflight_microbatches == stages - s);
    }
  }
}
