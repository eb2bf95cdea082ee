// The figures of `baton validate` (sim/validation_figures.h): loaded slices
// pooled into the device, the prediction as a quantile of noisy simulations,
// the measured step times, and how long a run is.
#include "tests/catch_compat.h"

#include "sim/validation_figures.h"
#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

const Seconds kForward = Seconds::from_ms(3.0);
const Seconds kBackward = Seconds::from_ms(5.0);

std::vector<Seconds> in_seconds(std::initializer_list<double> values) {
  std::vector<Seconds> out;
  for (double v : values) out.emplace_back(v);
  return out;
}

}  // namespace

TEST_CASE("validation: a slice's speed is compute alone over compute loaded", "[sim][validation]") {
  // Four layers of tF + tB alone; loaded, each takes 1.25x.
  const Profile alone = make_uniform_profile(4, kForward, kBackward, Bytes(0), Bytes(0));
  const Profile loaded = make_uniform_profile(4, kForward * 1.25, kBackward * 1.25, Bytes(0), Bytes(0));
  CHECK(close_rel(compute_per_microbatch(alone).value, 4 * (kForward + kBackward).value));
  CHECK(close_rel(loaded_speed(alone, loaded), 1.0 / 1.25));
  CHECK(close_rel(loaded_speed(alone, alone), 1.0));
}

TEST_CASE("validation: pooled slices give the median speed and every noise sample, sorted", "[sim][validation]") {
  DeviceType device;
  device.name = "cpu";
  device.memory = Bytes::from_gib(8);
  device.relative_speed = 1.0;
  device.compute_noise = {5.0};  // replaced, not kept
  device.allreduce_noise = {Seconds::from_us(40)};
  const std::vector<LoadedSlice> slices{{0.9, {1.2, 0.8}}, {0.5, {}}, {0.8, {1.0, 0.9, 1.5}}};
  const DeviceType pooled = pooled_device(device, slices);
  CHECK(pooled.relative_speed == Approx(0.8));  // the median of 0.9, 0.5, 0.8
  CHECK(pooled.compute_noise == std::vector<double>{0.8, 0.9, 1.0, 1.2, 1.5});
  CHECK(pooled.name == "cpu");
  CHECK(pooled.memory == Bytes::from_gib(8));
  CHECK(pooled.allreduce_noise == std::vector<Seconds>{Seconds::from_us(40)});
  // An even count: the mean of the middle two; no samples: no compute noise.
  const DeviceType two = pooled_device(device, {{0.6, {}}, {1.0, {}}});
  CHECK(two.relative_speed == Approx((0.6 + 1.0) / 2));
  CHECK(two.compute_noise.empty());
}

TEST_CASE("validation: without noise the prediction is the iteration's makespan", "[sim][validation]") {
  // Two one-layer stages, free transfers, M = 4 under gpipe: (M + S - 1)(tF + tB).
  const Topology topology = make_flat_topology(2, 100.0, Seconds(0.0));
  const Plan plan = make_plan("0-1,1-2", Schedule::kGPipe, 4, topology);
  const Profile profile = make_uniform_profile(2, kForward, kBackward, Bytes(0), Bytes(0));
  const double expected = (4 + 2 - 1) * (kForward + kBackward).value;
  auto plain = simulate_iteration(plan, profile, topology);
  REQUIRE(plain.ok());
  CHECK(close_rel(plain->metrics.makespan.value, expected));
  CHECK_FALSE(plain->trace.spans.empty());
  auto prediction = predict_iteration(plan, profile, topology, 0.5, 10);
  REQUIRE(prediction.ok());
  CHECK(close_rel(prediction->deterministic.metrics.makespan.value, expected));
  CHECK(prediction->at_quantile == prediction->deterministic.metrics.makespan);
}

TEST_CASE("validation: a multi-process step holds 2 ceil(log2 n) rounds of barrier", "[sim][validation]") {
  // Gloo's dissemination barrier: ceil(log2 n) rounds, the step's wall holds
  // the ending barrier's rounds and rank 0's lead out of the starting one.
  Topology flat = make_flat_topology(8, 100.0, Seconds::from_us(30.0));
  CHECK(close_rel(executor_step_barrier(flat, 2).value, 2 * 1 * 30e-6));  // without a calibrated ring: the latency
  flat.levels.front().allreduce_latency = Seconds::from_us(50.0);
  CHECK(close_rel(executor_step_barrier(flat, 2).value, 2 * 1 * 50e-6));
  CHECK(close_rel(executor_step_barrier(flat, 4).value, 2 * 2 * 50e-6));
  CHECK(close_rel(executor_step_barrier(flat, 5).value, 2 * 3 * 50e-6));
  CHECK(executor_step_barrier(flat, 1).value == 0.0);
  // Two servers of 4: 4 workers stay in a server, 8 span the second level.
  Topology two = make_flat_topology(4, 100.0, Seconds::from_us(10.0));
  Level across = two.levels.front();
  across.size = 2;
  across.latency = Seconds::from_us(40.0);
  two.levels.push_back(across);
  CHECK(close_rel(executor_step_barrier(two, 4).value, 2 * 2 * 10e-6));
  CHECK(close_rel(executor_step_barrier(two, 8).value, 2 * 3 * 40e-6));
  // Streams of one device (the threads backend): no barrier.
  two.levels.front().shared_compute = true;
  CHECK(executor_step_barrier(two, 4).value == 0.0);
}

TEST_CASE("validation: the prediction adds the step barrier to the makespan", "[sim][validation]") {
  // Two workers on links of latency L (no calibrated ring): the figure is
  // the makespan and then the barrier's 2 x 1 round x L.
  const Seconds latency = Seconds::from_us(100.0);
  const Topology topology = make_flat_topology(2, 100.0, latency);
  const Plan plan = make_plan("0-1,1-2", Schedule::kGPipe, 4, topology);
  const Profile profile = make_uniform_profile(2, kForward, kBackward, Bytes(0), Bytes(0));
  auto prediction = predict_iteration(plan, profile, topology, 0.5, 10);
  REQUIRE(prediction.ok());
  CHECK(close_rel(prediction->step_barrier.value, 2 * latency.value));
  CHECK(close_rel(prediction->plain().value, prediction->deterministic.metrics.makespan.value + 2 * latency.value));
  CHECK(prediction->at_quantile == prediction->plain());
}

TEST_CASE("validation: with a constant noise factor k every compute takes k times as long", "[sim][validation]") {
  Topology topology = make_flat_topology(2, 100.0, Seconds(0.0));
  topology.device.compute_noise = {2.0, 2.0};
  const Plan plan = make_plan("0-1,1-2", Schedule::kGPipe, 4, topology);
  const Profile profile = make_uniform_profile(2, kForward, kBackward, Bytes(0), Bytes(0));
  auto prediction = predict_iteration(plan, profile, topology, 0.5, 10);
  REQUIRE(prediction.ok());
  // The deterministic simulation ignores the noise; the noisy ones are 2x.
  CHECK(close_rel(prediction->deterministic.metrics.makespan.value, (4 + 2 - 1) * (kForward + kBackward).value));
  CHECK(close_rel(prediction->at_quantile.value, 2 * (4 + 2 - 1) * (kForward + kBackward).value));
}

TEST_CASE("validation: the prediction is the q-quantile of the noisy makespans", "[sim][validation]") {
  // One worker, one layer, one microbatch: makespan = tF a + tB b with a, b
  // drawn from {1, 3}. Over 200 seeds every pair is drawn, so q = 0 is the
  // fastest (a = b = 1) and q = 1 the slowest (a = b = 3).
  Topology topology = make_flat_topology(1, 100.0, Seconds(0.0));
  topology.device.compute_noise = {1.0, 3.0};
  const Plan plan = make_plan("0-1", Schedule::kGPipe, 1, topology);
  const Profile profile = make_uniform_profile(1, kForward, kBackward, Bytes(0), Bytes(0));
  auto fastest = predict_iteration(plan, profile, topology, 0.0, 200);
  auto slowest = predict_iteration(plan, profile, topology, 1.0, 200);
  REQUIRE(fastest.ok());
  REQUIRE(slowest.ok());
  CHECK(close_rel(fastest->at_quantile.value, (kForward + kBackward).value));
  CHECK(close_rel(slowest->at_quantile.value, 3 * (kForward + kBackward).value));
}

TEST_CASE("validation: step times leave out the first step", "[sim][validation]") {
  // Steps 1..4 are 1, 3, 2, 4 s (step 0's 10 s is dropped); sorted 1 2 3 4.
  const StepTimes times = step_times_after_first(in_seconds({10, 1, 3, 2, 4}), 0.25);
  CHECK(times.at_quantile.value == Approx(1 + 0.25 * 3 * (2 - 1)));  // position q (n - 1) = 0.75
  CHECK(times.median.value == Approx((2.0 + 3.0) / 2));
  CHECK(times.min.value == 1.0);
  CHECK(times.max.value == 4.0);
  // One step only: it is kept.
  const StepTimes one = step_times_after_first(in_seconds({7}), 0.5);
  CHECK(one.at_quantile.value == 7.0);
  CHECK(one.min.value == 7.0);
  CHECK(one.max.value == 7.0);
}

TEST_CASE("validation: a run's speed is its slice's times the expected compute over its steps' compute",
          "[sim][validation]") {
  // Two workers; steps 0..4. Step 0 (a warm-up, 1 s each) is left out. Steps
  // 1..4 sum over the workers to 0.30, 0.20, 0.45, 0.25 s, sorted 0.20 0.25
  // 0.30 0.45: median (0.25 + 0.30) / 2 = 0.275 s. At speed 0.8 a step is
  // expected to compute 0.22 s, so the run ran at 0.8 x 0.22 / 0.275 = 0.64.
  const std::vector<std::vector<Seconds>> compute{in_seconds({1.0, 0.10, 0.12, 0.20, 0.05}),
                                                  in_seconds({1.0, 0.20, 0.08, 0.25, 0.20})};
  auto median = run_speed(compute, Seconds(0.22), 0.8, 0.5);
  REQUIRE(median.ok());
  CHECK(*median == Approx(0.8 * 0.22 / 0.275));
  // The 0.0 quantile of the wall times is the fastest step's: it is matched
  // with the least compute (0.20 s): 0.8 x 0.22 / 0.20.
  auto fastest = run_speed(compute, Seconds(0.22), 0.8, 0.0);
  REQUIRE(fastest.ok());
  CHECK(*fastest == Approx(0.8 * 0.22 / 0.20));
  // Workers with fewer steps than others: the steps all of them have count.
  auto shorter = run_speed({in_seconds({1.0, 0.1, 0.3}), in_seconds({1.0, 0.1})}, Seconds(0.1), 1.0, 0.5);
  REQUIRE(shorter.ok());
  CHECK(*shorter == Approx(0.1 / 0.2));
  CHECK_FALSE(run_speed({}, Seconds(0.1), 1.0, 0.5).ok());
  CHECK_FALSE(run_speed({in_seconds({})}, Seconds(0.1), 1.0, 0.5).ok());
  CHECK_FALSE(run_speed({in_seconds({1.0, 0.1})}, Seconds(0.0), 1.0, 0.5).ok());
}

TEST_CASE("validation: a run is predicted step by step at the speeds its workers had", "[sim][validation]") {
  // Two one-layer stages, free transfers, M = 4 under gpipe: each worker is
  // expected to compute M (tF + tB) = 32 ms per step; unslowed the iteration
  // takes (M + S - 1)(tF + tB) = 40 ms.
  const Topology topology = make_flat_topology(2, 100.0, Seconds(0.0));
  const Plan plan = make_plan("0-1,1-2", Schedule::kGPipe, 4, topology);
  const Profile profile = make_uniform_profile(2, kForward, kBackward, Bytes(0), Bytes(0));
  const double step = (kForward + kBackward).value;
  const double expected = 4 * step;
  // Step 0 is left out. Step 1: worker 1 computed twice its expectation, the
  // bottleneck: tF + 2 M (tF + tB) + tB = 72 ms; step 2: both as expected,
  // 40 ms; step 3: both twice, 80 ms.
  const std::vector<std::vector<Seconds>> compute{
      {Seconds(1.0), Seconds(expected), Seconds(expected), Seconds(2 * expected)},
      {Seconds(1.0), Seconds(2 * expected), Seconds(expected), Seconds(2 * expected)}};
  const double slowed_last = kForward.value + 4 * 2 * step + kBackward.value;
  auto median = predict_run(plan, profile, topology, compute, 0.5);
  REQUIRE(median.ok());
  CHECK(median->value == Approx(slowed_last));
  auto fastest = predict_run(plan, profile, topology, compute, 0.0);
  REQUIRE(fastest.ok());
  CHECK(fastest->value == Approx((4 + 2 - 1) * step));
  auto slowest = predict_run(plan, profile, topology, compute, 1.0);
  REQUIRE(slowest.ok());
  CHECK(slowest->value == Approx(2 * (4 + 2 - 1) * step));
  // With noise the expectation is the mean draw: every draw 2, so a worker
  // that computed 2 x 32 ms ran at the expected speed, and the iteration takes
  // the noisy 2 x 40 ms.
  Topology noisy = topology;
  noisy.device.compute_noise = {2.0};
  auto drawn =
      predict_run(plan, profile, noisy, {in_seconds({1.0, 2 * expected}), in_seconds({1.0, 2 * expected})}, 0.5);
  REQUIRE(drawn.ok());
  CHECK(drawn->value == Approx(2 * (4 + 2 - 1) * step));
  // The executor's own time per action, o on each worker, is in every
  // replayed step: one microbatch, both workers at their expected compute
  // (tF + tB each), 2 (tF + tB) + 7 o (tests/sim/noise_test.cc works out which
  // seven of the ten actions' overheads lie on the path).
  const Plan single = make_plan("0-1,1-2", Schedule::kGPipe, 1, topology);
  const Seconds o = Seconds::from_us(400);
  const std::vector<Seconds> overhead{o, o};
  auto with_overhead = predict_run(single, profile, topology,
                                   {in_seconds({1.0, step, step}), in_seconds({1.0, step, step})}, 0.5, overhead);
  REQUIRE(with_overhead.ok());
  CHECK(with_overhead->value == Approx(2 * step + 7 * o.value));
  CHECK_FALSE(predict_run(single, profile, topology, {in_seconds({1.0}), in_seconds({1.0})}, 0.5, {o}).ok());
  // One list per worker, none empty.
  CHECK_FALSE(predict_run(plan, profile, topology, {in_seconds({1.0, 0.1})}, 0.5).ok());
  CHECK_FALSE(predict_run(plan, profile, topology, {in_seconds({}), in_seconds({})}, 0.5).ok());
}

TEST_CASE("validation: a run takes at least min_steps, and 1 + ceil(run time / estimate)", "[sim][validation]") {
  CHECK(steps_to_run(30, Seconds(3.0), Seconds(0.05)) == 1 + 60);  // 3 / 0.05 = 60
  CHECK(steps_to_run(30, Seconds(3.0), Seconds(1.0)) == 30);       // 1 + 3 < 30
  CHECK(steps_to_run(2, Seconds(1.0), Seconds(0.3)) == 1 + 4);     // ceil(3.33) = 4
  CHECK(steps_to_run(2, Seconds(0.0), Seconds(0.3)) == 2);         // no run time asked
}

TEST_CASE("validation: pipedream microbatches round up to the lcm of the replicas", "[sim][validation]") {
  Plan plan;
  plan.schedule = Schedule::kPipeDream;
  plan.stages = {StagePlan{LayerRange{0, 1}, 2, {0, 1}}, StagePlan{LayerRange{1, 2}, 3, {2, 3, 4}}};
  plan.batches = 8;
  CHECK(whole_pipedream_rounds(plan) == 12);  // lcm(2, 3) = 6; ceil(8 / 6) x 6
  plan.batches = 12;
  CHECK(whole_pipedream_rounds(plan) == 12);
  plan.stages = {StagePlan{LayerRange{0, 2}, 1, {0}}};
  plan.batches = 7;
  CHECK(whole_pipedream_rounds(plan) == 7);  // period 1
}

TEST_CASE("validation: a run's expected compute per step is its compute actions at the slice's speed and mean noise",
          "[sim][validation]") {
  // Two one-layer stages under gpipe, M = 4, SGD: each worker runs 4 F, 4 B
  // and one STEP of its layer's optimizer time. At speed s every compute
  // takes its time / s, and a noise of factors {1.0, 1.5} draws 1.25 on
  // average: 2 (4 (tF + tB) + tO) / s x 1.25.
  const Topology topology = make_flat_topology(2, 100.0, Seconds(0.0));
  const Plan plan = make_plan("0-1,1-2", Schedule::kGPipe, 4, topology);
  Profile profile = make_uniform_profile(2, kForward, kBackward, Bytes(0), Bytes(0));
  const Seconds optimizer = Seconds::from_ms(1.0);
  for (Layer& layer : profile.layers) layer.optimizer = optimizer;
  const double per_worker = 4 * (kForward + kBackward).value + optimizer.value;
  auto plain = expected_compute_per_step(plan, profile, topology, LoadedSlice{1.0, {}});
  REQUIRE(plain.ok());
  CHECK(close_rel(plain->value, 2 * per_worker));
  auto slow_noisy = expected_compute_per_step(plan, profile, topology, LoadedSlice{0.5, {1.0, 1.5}});
  REQUIRE(slow_noisy.ok());
  CHECK(close_rel(slow_noisy->value, 2 * per_worker / 0.5 * 1.25));
  // The topology's own speed is replaced by the slice's, not compounded.
  Topology fast = topology;
  fast.device.relative_speed = 4.0;
  auto replaced = expected_compute_per_step(plan, profile, fast, LoadedSlice{0.5, {1.0, 1.5}});
  REQUIRE(replaced.ok());
  CHECK(close_rel(replaced->value, slow_noisy->value));
}
