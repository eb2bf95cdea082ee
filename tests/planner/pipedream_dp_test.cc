// The PipeDream-compatible DP on small hand-derived cases (expected values are
// the recurrence worked by hand), and the fast solver against a plain
// transcription of the reference on random small DAGs.
#include "tests/catch_compat.h"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "planner/pipedream_dp.h"
#include "planner/pipedream_states.h"
#include "tests/planner/plain_pipedream_dp.h"

using namespace baton;

namespace {

struct Spec {
  double ms;           // forward + backward, milliseconds
  int64_t params = 0;  // bytes
  int64_t out = 0;     // activation bytes
};

Profile chain(const std::vector<Spec>& specs) {
  Profile p;
  p.model = "chain";
  for (size_t i = 0; i < specs.size(); ++i) {
    Layer l;
    l.name = fmt::format("l{}", i);
    l.forward = Seconds::from_ms(specs[i].ms / 2);
    l.backward = Seconds::from_ms(specs[i].ms / 2);
    l.param_bytes = Bytes(specs[i].params);
    l.output_bytes = Bytes(specs[i].out);
    if (i > 0) l.inputs = {static_cast<int>(i) - 1};
    p.layers.push_back(l);
  }
  return p;
}

PipeDreamOptions one_level(int machines, double bandwidth) {
  PipeDreamOptions options;
  options.levels = {{machines, Bandwidth{bandwidth}}};
  return options;
}

PipeDreamPlan plan_ok(const Profile& profile, const PipeDreamOptions& options) {
  auto plan = plan_pipedream(profile, options);
  INFO((plan ? std::string() : plan.error().message));
  REQUIRE(plan.ok());
  return *plan;
}

double objective(const Profile& profile, const PipeDreamOptions& options) {
  return plan_ok(profile, options).time_per_minibatch.value;
}

constexpr double kB = 1e9;  // bytes per second

}  // namespace

TEST_CASE("one layer on M machines is data parallel", "[planner][pipedream][dp]") {
  // (C + 4 (M-1) P / (M B)) / M
  const Profile p = chain({{10.0, 1'000'000}});
  const double expected = (0.010 + 4.0 * 3 * 1e6 / (4 * kB)) / 4;
  CHECK(objective(p, one_level(4, kB)) == Approx(expected).epsilon(1e-12));
}

TEST_CASE("two layers on two machines: replicate or split", "[planner][pipedream][dp]") {
  SECTION("no parameters: one stage on both machines wins") {
    // min((C1 + C2) / 2, max(C1, C2))
    const Profile p = chain({{6.0}, {4.0}});
    CHECK(objective(p, one_level(2, kB)) == Approx((0.006 + 0.004) / 2).epsilon(1e-12));
  }
  SECTION("large parameters: the all-reduce makes the split win") {
    // single = (C1 + C2 + 4 (P1 + P2) / (2 B)) / 2 = (0.010 + 0.020) / 2 > max(C1, C2)
    const Profile p = chain({{6.0, 5'000'000}, {4.0, 5'000'000}});
    const PipeDreamPlan plan = plan_ok(p, one_level(2, kB));
    CHECK(plan.time_per_minibatch.value == Approx(0.006).epsilon(1e-12));
    REQUIRE(plan.stages.size() == 2);
    CHECK(plan.stages[0].layers == LayerRange{0, 1});
    CHECK(plan.stages[1].layers == LayerRange{1, 2});
    CHECK(plan.stages[0].replicas == 1);
    CHECK(plan.stages[0].compute.value == Approx(0.006));
    CHECK(plan.keeps_profile_order());
  }
  SECTION("straight pipeline: no replication even when it would win") {
    const Profile p = chain({{6.0}, {4.0}});
    PipeDreamOptions options = one_level(2, kB);
    options.straight_pipeline = true;
    CHECK(objective(p, options) == Approx(0.006).epsilon(1e-12));
  }
}

TEST_CASE("activation transfers count only with a compression ratio", "[planner][pipedream][dp]") {
  // Split wins (single = 0.015). Transfer into the last stage: 2 out0 / (B r') / R;
  // none out of it (it ends at the final state).
  const Profile p = chain({{6.0, 5'000'000, 5'000'000}, {4.0, 5'000'000, 1}});
  PipeDreamOptions options = one_level(2, kB);
  CHECK(objective(p, options) == Approx(0.006).epsilon(1e-12));
  options.activation_compression = 1.0;  // max(0.006, 0.004, 2 * 5e6 / 1e9 = 0.010)
  CHECK(objective(p, options) == Approx(0.010).epsilon(1e-12));
  options.activation_compression = 2.0;  // transfer 0.005
  CHECK(objective(p, options) == Approx(0.006).epsilon(1e-12));
}

TEST_CASE("the memory limit rejects a stage", "[planner][pipedream][dp]") {
  // First stage on 1 of 2 machines keeps ceil((2 - 1) / 1) = 1 copy of
  // (activations + parameters) = 1e6 + 5e6 bytes; the replicated single stage
  // keeps ceil(0 / 2) = 0.
  const Profile p = chain({{6.0, 5'000'000, 1'000'000}, {4.0, 5'000'000, 1}});
  PipeDreamOptions options = one_level(2, kB);
  options.memory_size = Bytes(6'000'000);  // fits (the test is "> S")
  CHECK(objective(p, options) == Approx(0.006).epsilon(1e-12));
  options.memory_size = Bytes(5'999'999);  // the split's first stage no longer fits
  CHECK(objective(p, options) == Approx(0.015).epsilon(1e-12));
  options.straight_pipeline = true;  // and nothing else is allowed
  auto plan = plan_pipedream(p, options);
  REQUIRE_FALSE(plan.ok());
  CHECK_THAT(plan.error().message, Catch::Contains("memory"));
}

TEST_CASE("two levels: the upper all-reduce is divided by the machines per unit", "[planner][pipedream][dp]") {
  // Inner: (C + 4 (2-1) P / (2 B1)) / 2; outer: (inner + 4 (2-1) P / (2 B2) / 2) / 2.
  const Profile p = chain({{10.0, 1'000'000}});
  PipeDreamOptions options;
  options.levels = {{2, Bandwidth{1e9}}, {2, Bandwidth{1e8}}};
  const double inner = (0.010 + 4.0 * 1e6 / (2 * 1e9)) / 2;
  const double outer = (inner + 4.0 * 1e6 / (2 * 1e8) / 2) / 2;
  const PipeDreamPlan plan = plan_ok(p, options);
  CHECK(plan.time_per_minibatch.value == Approx(outer).epsilon(1e-12));
  REQUIRE(plan.stages.size() == 1);
  CHECK(plan.stages[0].replicas == 4);
  CHECK(plan.stages[0].replicas_per_level == std::vector<int>{2, 2});
}

TEST_CASE("heavy parameters give one stage per machine", "[planner][pipedream][dp]") {
  const Profile p = chain({{3.0, 1'000'000'000}, {5.0, 1'000'000'000}, {2.0, 1'000'000'000}});
  const PipeDreamPlan plan = plan_ok(p, one_level(3, kB));
  CHECK(plan.time_per_minibatch.value == Approx(0.005).epsilon(1e-12));
  REQUIRE(plan.stages.size() == 3);
  for (int s = 0; s < 3; ++s) {
    CHECK(plan.stages[s].layers == LayerRange{s, s + 1});
    CHECK(plan.stages[s].replicas == 1);
  }
}

TEST_CASE("a DAG plan is a topological order with contiguous stages", "[planner][pipedream][dp]") {
  //   a(1) -> b(8) -> d(1),  a -> c(8) -> d; two straight stages: {a, one branch}
  //   and {other branch, d}, 9 ms each.
  Profile p = chain({{1.0}, {8.0}, {8.0}, {1.0}});
  p.layers[2].inputs = {0};
  p.layers[3].inputs = {1, 2};
  PipeDreamOptions options = one_level(2, kB);
  options.straight_pipeline = true;
  const PipeDreamPlan plan = plan_ok(p, options);
  CHECK(plan.time_per_minibatch.value == Approx(0.009).epsilon(1e-12));
  REQUIRE(plan.stages.size() == 2);
  CHECK(plan.stages[0].compute.value == Approx(0.009));
  CHECK(plan.stages[1].compute.value == Approx(0.009));
  auto reordered = reorder_layers(p, plan.layer_order);
  REQUIRE(reordered.ok());  // every layer after its inputs
  const std::vector<StagePlan> stages = stage_plans(plan);
  CHECK(stages[0].layers.begin == 0);
  CHECK(stages[0].layers.end == stages[1].layers.begin);
  CHECK(stages[1].layers.end == 4);
  Seconds total;
  for (int l = stages[1].layers.begin; l < stages[1].layers.end; ++l)
    total += reordered->layers[l].forward + reordered->layers[l].backward;
  CHECK(total.value == Approx(0.009));
}

TEST_CASE("Input layers join the first stage, dropped sinks their producer's", "[planner][pipedream][dp]") {
  // Input (ignored, 50 ms) -> a (3 ms) -> b (5 ms) -> __getitem__ (unused sink).
  Profile p = chain({{50.0}, {3.0, 1'000'000'000}, {5.0, 1'000'000'000}, {0.0}});
  p.layers[0].description = "Input0";
  p.layers[3].description = "__getitem__(1)";
  PipeDreamOptions options = one_level(2, kB);
  options.straight_pipeline = true;
  const PipeDreamPlan plan = plan_ok(p, options);
  CHECK(plan.time_per_minibatch.value == Approx(0.005).epsilon(1e-12));  // max(a, b)
  CHECK(plan.num_states == 2);
  REQUIRE(plan.stages.size() == 2);
  CHECK(plan.keeps_profile_order());
  CHECK(plan.stages[0].layers == LayerRange{0, 2});  // Input0, a
  CHECK(plan.stages[1].layers == LayerRange{2, 4});  // b, __getitem__
}

TEST_CASE("reorder_layers refuses an order that is not topological", "[planner][pipedream][dp]") {
  const Profile p = chain({{1.0}, {1.0}, {1.0}});
  CHECK(reorder_layers(p, {0, 1, 2}).ok());
  CHECK_FALSE(reorder_layers(p, {1, 0, 2}).ok());  // l1 before its input l0
  CHECK_FALSE(reorder_layers(p, {0, 0, 2}).ok());  // not a permutation
  CHECK_FALSE(reorder_layers(p, {0, 1}).ok());
}

TEST_CASE("invalid options are errors", "[planner][pipedream][dp]") {
  const Profile p = chain({{1.0}});
  CHECK_FALSE(plan_pipedream(p, PipeDreamOptions{}).ok());
  CHECK_FALSE(plan_pipedream(p, one_level(0, kB)).ok());
  CHECK_FALSE(plan_pipedream(p, one_level(2, 0.0)).ok());
  PipeDreamOptions options = one_level(2, kB);
  options.activation_compression = 0.0;
  CHECK_FALSE(plan_pipedream(p, options).ok());
}

namespace {

// A random DAG: each layer after the first reads one or two earlier layers.
Profile random_dag(std::mt19937& rng, int layers) {
  std::uniform_real_distribution<double> ms(0.1, 10.0);
  std::uniform_int_distribution<int64_t> bytes(0, 50'000'000);
  Profile p = chain(std::vector<Spec>(static_cast<size_t>(layers), Spec{1.0}));
  for (int i = 0; i < layers; ++i) {
    Layer& l = p.layers[i];
    l.forward = Seconds::from_ms(ms(rng));
    l.backward = Seconds::from_ms(ms(rng));
    l.param_bytes = Bytes(bytes(rng));
    l.output_bytes = Bytes(bytes(rng));
    if (i < 2) continue;
    std::uniform_int_distribution<int> pick(0, i - 1);
    l.inputs = {pick(rng)};
    if (rng() % 2 == 0) {
      const int second = pick(rng);
      if (second != l.inputs[0]) l.inputs.push_back(second);
    }
  }
  return p;
}

}  // namespace

TEST_CASE("the fast solver equals the plain recurrence on random DAGs", "[planner][pipedream][dp]") {
  std::mt19937 rng(20190601);
  const std::vector<std::vector<PipeDreamLevel>> layouts = {
      {{3, Bandwidth{1e10}}},
      {{2, Bandwidth{1e10}}, {2, Bandwidth{1e9}}},
      {{3, Bandwidth{2.5e10}}, {2, Bandwidth{3e9}}},
      {{2, Bandwidth{1e10}}, {2, Bandwidth{1e9}}, {2, Bandwidth{1e8}}}};
  for (int trial = 0; trial < 40; ++trial) {
    const Profile p = random_dag(rng, 4 + trial % 9);
    auto space = build_state_space(p, 10000);
    REQUIRE(space.ok());
    for (const auto& levels : layouts) {
      for (int variant = 0; variant < 6; ++variant) {
        PipeDreamOptions options;
        options.levels = levels;
        options.straight_pipeline = variant % 2 == 1;
        if (variant >= 2) options.activation_compression = 1.0;
        if (variant >= 4) options.memory_size = Bytes(200'000'000);
        const double plain = testing::plain_pipedream_objective(*space, options);
        auto plan = plan_pipedream(p, options);
        INFO("trial " << trial << " levels " << levels.size() << " variant " << variant);
        if (std::isinf(plain)) {
          CHECK_FALSE(plan.ok());
          continue;
        }
        REQUIRE(plan.ok());
        CHECK(plan->time_per_minibatch.value == Approx(plain).epsilon(1e-12));
        if (levels.size() == 1)  // the read-back reproduces T
          CHECK(testing::replay_one_level(*space, *plan, options) == plan->time_per_minibatch.value);
        int machines = 1;
        for (const auto& level : levels) machines *= level.machines;
        int used = 0;
        for (const auto& stage : plan->stages) used += stage.replicas;
        CHECK(used == machines);
      }
    }
  }
}
