// Noisy simulations (SimOptions::noise_seed, DeviceType::compute_noise,
// noisy_makespans): every compute action takes its cost times the mean of one
// factor per layer of its stage, drawn from the device's compute_noise; and
// workers slowed one by one (SimOptions::worker_slowdown).
#include <numeric>
#include <string>

#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "sim/stage_costs.h"
#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

const Seconds kForward = Seconds::from_ms(3.0);
const Seconds kBackward = Seconds::from_ms(5.0);

// Two stages on a 10 Gb/s link with latency, so transfers are part of the makespan.
Topology linked(std::vector<double> noise, double speed = 1.0) {
  Topology topology = make_flat_topology(2, 10.0, Seconds::from_us(50), Bytes::from_gib(16));
  topology.device.relative_speed = speed;
  topology.device.compute_noise = std::move(noise);
  return topology;
}

std::vector<Seconds> samples_of(const Plan& plan, const Profile& profile, const Topology& topology, int samples,
                                uint64_t first_seed = 1) {
  SimOptions options;
  auto result = noisy_makespans(build_program(plan), stage_costs(profile, plan, topology), topology,
                                plan.microbatch_size, options, samples, first_seed);
  if (!result) FAIL(result.error().message);
  return *result;
}

// Each of `bad` (JSON) as device.`field` is refused, with a message naming the field.
void check_refused(const Topology& topology, const std::string& field, std::initializer_list<const char*> bad) {
  for (const char* value : bad) {
    nlohmann::json document = topology_to_json(topology);
    document["device"][field] = nlohmann::json::parse(value);
    auto parsed = topology_from_json(document, "t.json");
    INFO(field << " = " << value);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().message.find(field) != std::string::npos);
  }
}

double variance(const std::vector<double>& values) {
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  double sum = 0.0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return sum / double(values.size() - 1);
}

// Two one-layer stages on free links under gpipe with `microbatches`
// microbatches (tF, tB as above; nothing sent, the step free): its Program and
// stage costs, simulated with the options given.
struct FreeTwoStages {
  explicit FreeTwoStages(int microbatches)
      : topology(make_flat_topology(2, 100.0, Seconds(0.0))),
        plan(make_plan("0-1,1-2", Schedule::kGPipe, microbatches, topology)),
        program(build_program(plan)),
        costs(stage_costs(make_uniform_profile(2, kForward, kBackward, Bytes(0), Bytes(0)), plan, topology)) {}
  Result<Simulation> simulate(const SimOptions& options) const {
    return simulate_program(program, costs, topology, plan.microbatch_size, options);
  }
  double makespan(const SimOptions& options) const {
    auto result = simulate(options);
    if (!result) FAIL(result.error().message);
    return result->metrics.makespan.value;
  }
  // The simulation refuses `options` with an error naming `message`.
  void check_refused(const SimOptions& options, const std::string& message) const {
    auto refused = simulate(options);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message.find(message) != std::string::npos);
  }
  Topology topology;
  Plan plan;
  Program program;
  std::vector<StageCost> costs;
};

// Whether `options` (one_replica asked for) would simulate one replica of two
// two-stage replicas on four devices.
bool simulates_one_of_two_replicas(SimOptions options) {
  const Topology four = make_flat_topology(4, 100.0, Seconds(0.0));
  const Plan replicated = make_plan("0-1x2,1-2x2", Schedule::kGPipe, 4, four);
  options.record_trace = false;
  options.one_replica = true;
  return simulates_one_replica(replicated, four, options);
}

}  // namespace

TEST_CASE("a constant noise factor k is a device k times slower", "[sim][noise]") {
  // Every draw is 2: each compute action takes twice its cost, which is what
  // relative_speed 0.5 means; transfers are unchanged in both.
  const Profile profile = make_uniform_profile(4, kForward, kBackward, Bytes(1 << 20), Bytes(0));
  for (Schedule schedule : {Schedule::kOneFOneB, Schedule::kGPipe}) {
    const Topology noisy = linked({2.0, 2.0, 2.0});
    const Plan plan = make_plan("0-1,1-4", schedule, 6, noisy);
    const Simulation slow = simulate_ok(plan, profile, linked({}, 0.5));
    for (Seconds makespan : samples_of(plan, profile, noisy, 5)) {
      INFO(schedule_name(schedule));
      CHECK(close_rel(makespan.value, slow.metrics.makespan.value, 1e-12));
    }
  }
}

TEST_CASE("without a seed, or without compute noise, a simulation is deterministic", "[sim][noise]") {
  const Profile profile = make_uniform_profile(4, kForward, kBackward, Bytes(1 << 20), Bytes(0));
  const Topology noisy = linked({0.5, 1.0, 4.0});
  const Plan plan = make_plan("0-2,2-4", Schedule::kOneFOneB, 8, noisy);
  const double plain = simulate_ok(plan, profile, linked({})).metrics.makespan.value;
  // Seed 0 (the default) ignores the device's noise.
  CHECK(close_rel(simulate_ok(plan, profile, noisy).metrics.makespan.value, plain, 1e-12));
  // No noise: every seed gives the deterministic makespan.
  for (Seconds makespan : samples_of(plan, profile, linked({}), 4)) CHECK(close_rel(makespan.value, plain, 1e-12));
  // With noise: the same seeds give the same samples, and they differ between seeds.
  const std::vector<Seconds> first = samples_of(plan, profile, noisy, 20);
  const std::vector<Seconds> again = samples_of(plan, profile, noisy, 20);
  bool spread = false;
  for (size_t i = 0; i < first.size(); ++i) {
    CHECK(first[i].value == again[i].value);
    spread = spread || std::abs(first[i].value - first[0].value) > 1e-9;
  }
  CHECK(spread);
}

TEST_CASE("a stage's factor is the mean of one draw per layer", "[sim][noise]") {
  // One worker, one microbatch, SGD step free: makespan = F * a + B * b, a and
  // b the means of L draws from {1, 3} (mean 2, variance 1 per draw). With the
  // stage's total F and B fixed, the makespan's mean is 2 (F + B) and its
  // variance (F^2 + B^2) / L: four layers give a quarter of one layer's.
  const Seconds forward = Seconds::from_ms(4.0);
  const Seconds backward = Seconds::from_ms(8.0);
  const double f = forward.value;
  const double b = backward.value;
  const int samples = 4000;
  for (int layers : {1, 4}) {
    const Profile profile =
        make_uniform_profile(layers, forward / double(layers), backward / double(layers), Bytes(0), Bytes(0));
    const Topology topology = linked({1.0, 3.0});
    const Plan plan = make_plan("0-" + std::to_string(layers), Schedule::kGPipe, 1, topology);
    std::vector<double> values;
    for (Seconds makespan : samples_of(plan, profile, topology, samples)) values.push_back(makespan.value);
    const double mean = std::accumulate(values.begin(), values.end(), 0.0) / samples;
    INFO("layers " << layers);
    // Standard error of the mean: sqrt((f^2 + b^2) / L / samples), under 0.15 ms here.
    CHECK(std::abs(mean - 2.0 * (f + b)) < 4.0 * std::sqrt((f * f + b * b) / layers / samples));
    const double expected = (f * f + b * b) / layers;
    CHECK(std::abs(variance(values) - expected) < 0.1 * expected);
    CHECK(*std::min_element(values.begin(), values.end()) >= f + b - 1e-12);
    CHECK(*std::max_element(values.begin(), values.end()) <= 3.0 * (f + b) + 1e-12);
  }
}

TEST_CASE("compute_noise round-trips through the topology format and bad values are refused", "[sim][noise]") {
  Topology topology = linked({0.8, 1.0, 1.5});
  auto back = topology_from_json(topology_to_json(topology), "t.json");
  REQUIRE(back.ok());
  CHECK(back->device.compute_noise == std::vector<double>{0.8, 1.0, 1.5});
  CHECK_FALSE(topology_to_json(linked({}))["device"].contains("compute_noise"));
  check_refused(topology, "compute_noise", {"[]", "[1.0, 0]", "[-1]", "[\"x\"]", "1.5"});
}

TEST_CASE("an all-reduce takes one drawn extra time, never less than zero in total", "[sim][noise]") {
  // Data parallelism on 2 devices: every microbatch's F and B, then one
  // all-reduce of the gradients and the STEP, so the makespan is the
  // deterministic one plus whatever the all-reduce gains or loses.
  const Profile profile = make_uniform_profile(3, kForward, kBackward, Bytes(0), Bytes(64 << 20));
  Topology topology = linked({});
  const Plan plan = make_plan("0-3x2", Schedule::kDataParallel, 4, topology);
  const Simulation plain = simulate_ok(plan, profile, topology);
  const auto allreduce_span = [&](const Simulation& sim) {
    for (const Span& span : sim.trace.spans)
      if (span.action.kind == ActionKind::kAllReduce) return span.end - span.start;
    FAIL("no all-reduce");
    return Seconds(0.0);
  };
  const Seconds ring = allreduce_span(plain);
  REQUIRE(ring.value > 0.0);
  const Seconds extra = Seconds::from_ms(4.0);
  topology.device.allreduce_noise = {extra};
  for (Seconds makespan : samples_of(plan, profile, topology, 3))
    CHECK(close_rel(makespan.value, (plain.metrics.makespan + extra).value, 1e-12));
  // An extra below -ring leaves a free all-reduce, not a negative one.
  topology.device.allreduce_noise = {Seconds(-10.0)};
  for (Seconds makespan : samples_of(plan, profile, topology, 3))
    CHECK(close_rel(makespan.value, (plain.metrics.makespan - ring).value, 1e-12));
  // Compute noise leaves all-reduce times alone, and the other way round.
  topology.device.allreduce_noise = {};
  topology.device.compute_noise = {1.0};
  for (Seconds makespan : samples_of(plan, profile, topology, 3))
    CHECK(close_rel(makespan.value, plain.metrics.makespan.value, 1e-12));
}

TEST_CASE("allreduce_noise_us round-trips through the topology format, negative values included", "[sim][noise]") {
  Topology topology = linked({});
  topology.device.allreduce_noise = {Seconds::from_us(-150.0), Seconds(0.0), Seconds::from_us(3900.0)};
  auto back = topology_from_json(topology_to_json(topology), "t.json");
  REQUIRE(back.ok());
  REQUIRE(back->device.allreduce_noise.size() == 3);
  for (size_t i = 0; i < 3; ++i)
    CHECK(close_rel(back->device.allreduce_noise[i].value, topology.device.allreduce_noise[i].value, 1e-12));
  CHECK_FALSE(topology_to_json(linked({}))["device"].contains("allreduce_noise_us"));
  check_refused(topology, "allreduce_noise_us", {"[]", "[\"x\"]", "[1, null]", "{}"});
}

TEST_CASE("a receive completes one drawn extra time after the later of its data and its worker", "[sim][noise]") {
  // GPipe on 2 stages, M = 4 microbatches, forward 3 ms and backward 5 ms per
  // layer. The first receive of each stage (activation 0 on stage 1, gradient
  // 0 on stage 0) waits for its data: it draws from transfer_noise. Once an
  // extra e > 0 has held one up, every later receive of that stage finds its
  // data there (its stage runs e behind the sender) and draws from
  // transfer_noise_ready. Each drawn e is on the critical path, so
  // makespan = deterministic + 2 e (late only), + (2 M - 2) e (ready only),
  // + 2 M e (both).
  const int microbatches = 4;
  const Profile profile = make_uniform_profile(2, kForward, kBackward, Bytes(1 << 20), Bytes(0));
  Topology topology = linked({});
  const Plan plan = make_plan("0-1,1-2", Schedule::kGPipe, microbatches, topology);
  const Simulation plain = simulate_ok(plan, profile, topology);
  const Seconds extra = Seconds::from_us(700);
  const auto check_makespans = [&](double extras) {
    for (Seconds makespan : samples_of(plan, profile, topology, 3))
      CHECK(close_rel(makespan.value, (plain.metrics.makespan + extra * extras).value, 1e-12));
  };
  topology.device.transfer_noise = {extra};
  check_makespans(2.0);
  topology.device.transfer_noise_ready = {extra};
  check_makespans(2.0 * microbatches);
  topology.device.transfer_noise = {};
  check_makespans(2.0 * microbatches - 2.0);
  topology.device.transfer_noise_ready = {};
  topology.device.transfer_noise = {extra};
  // An extra below minus the transfer's time makes the data usable when they
  // were sent, never earlier: only the two transfers on the deterministic
  // critical path (the first activation, the first gradient) leave it.
  Seconds transfer;
  for (const Span& span : plain.trace.spans)
    if (span.action.kind == ActionKind::kSendAct) transfer = span.end - span.start;
  REQUIRE(transfer.value > 0.0);
  topology.device.transfer_noise = {Seconds(-10.0)};
  for (Seconds makespan : samples_of(plan, profile, topology, 3))
    CHECK(close_rel(makespan.value, (plain.metrics.makespan - transfer * 2.0).value, 1e-12));
  // Transfer noise leaves a simulation without a noise seed alone.
  CHECK(close_rel(simulate_ok(plan, profile, topology).metrics.makespan.value, plain.metrics.makespan.value, 1e-12));
}

TEST_CASE("transfer_noise_us and transfer_noise_ready_us round-trip through the topology format", "[sim][noise]") {
  Topology topology = linked({});
  topology.device.transfer_noise = {Seconds::from_us(-20.0), Seconds(0.0), Seconds::from_us(1900.0)};
  topology.device.transfer_noise_ready = {Seconds::from_us(3.0), Seconds::from_us(250.0)};
  auto back = topology_from_json(topology_to_json(topology), "t.json");
  REQUIRE(back.ok());
  REQUIRE(back->device.transfer_noise.size() == 3);
  for (size_t i = 0; i < 3; ++i)
    CHECK(close_rel(back->device.transfer_noise[i].value, topology.device.transfer_noise[i].value, 1e-12));
  REQUIRE(back->device.transfer_noise_ready.size() == 2);
  CHECK(close_rel(back->device.transfer_noise_ready[1].value, 250e-6, 1e-12));
  CHECK_FALSE(topology_to_json(linked({}))["device"].contains("transfer_noise_us"));
  CHECK_FALSE(topology_to_json(linked({}))["device"].contains("transfer_noise_ready_us"));
  for (const char* field : {"transfer_noise_us", "transfer_noise_ready_us"})
    check_refused(topology, field, {"[]", "[\"x\"]", "[1, null]", "{}"});
}

TEST_CASE("a worker slowed by k computes like a device k times slower, the others unchanged", "[sim][noise]") {
  // Two one-layer stages, free transfers, M = 4 under gpipe; one microbatch's
  // forward and backward take tF + tB = 8 ms. Unslowed: (M + S - 1)(tF + tB).
  const FreeTwoStages two(4);
  const auto makespan = [&](std::vector<double> slowdown) {
    SimOptions options;
    options.worker_slowdown = std::move(slowdown);
    return two.makespan(options);
  };
  const double step = (kForward + kBackward).value;
  CHECK(makespan({1.0, 1.0}) == Approx((4 + 2 - 1) * step));
  // Both twice as slow: twice the makespan.
  CHECK(makespan({2.0, 2.0}) == Approx(2 * (4 + 2 - 1) * step));
  // The last stage twice as slow is the bottleneck and never waits after its
  // first input: stage 0's first forward, its M forwards and backwards, then
  // stage 0's last backward.
  CHECK(makespan({1.0, 2.0}) == Approx(kForward.value + 4 * 2 * step + kBackward.value));
  // One factor per worker, each positive.
  SimOptions wrong;
  wrong.worker_slowdown = {1.0};
  two.check_refused(wrong, "1 factors for 2 workers");
  wrong.worker_slowdown = {1.0, 0.0};
  CHECK_FALSE(two.simulate(wrong).ok());
  // Replicas slowed differently are not interchangeable: one_replica is ignored.
  SimOptions one;
  CHECK(simulates_one_of_two_replicas(one));
  one.worker_slowdown = {1.0, 1.0, 1.0, 3.0};
  CHECK_FALSE(simulates_one_of_two_replicas(one));
}

TEST_CASE("a worker's overhead per action delays each of its actions, and hides where it waits", "[sim][noise]") {
  // Two one-layer stages, free transfers, one microbatch under gpipe, the step
  // free. Worker 0 runs F, SEND_ACT, RECV_GRAD, B, STEP; worker 1 RECV_ACT, F,
  // B, SEND_GRAD, STEP. Each action starts its worker's overhead o after the
  // worker is free to start it.
  const FreeTwoStages two(1);
  REQUIRE(two.program.actions[0].size() == 5);
  REQUIRE(two.program.actions[1].size() == 5);
  const auto makespan = [&](std::vector<Seconds> overhead) {
    SimOptions options;
    options.worker_action_overhead = std::move(overhead);
    return two.makespan(options);
  };
  const double f = kForward.value;
  const double b = kBackward.value;
  const Seconds o = Seconds::from_us(500);
  CHECK(makespan({}) == Approx(2 * f + 2 * b));
  CHECK(makespan({Seconds(0.0), Seconds(0.0)}) == Approx(2 * f + 2 * b));
  // Both: worker 0's F (o), its SEND (o), worker 1's F, B, SEND_GRAD (3 o),
  // worker 0's B and STEP (2 o) lie on the path; worker 0's RECV_GRAD's and
  // worker 1's RECV_ACT's overheads pass while they wait, its STEP's after
  // worker 0's B has begun: 2 tF + 2 tB + 7 o.
  CHECK(makespan({o, o}) == Approx(2 * f + 2 * b + 7 * o.value));
  // Worker 1 alone: its RECV_ACT's overhead passes during worker 0's forward,
  // its STEP's during worker 0's backward; its F, B and SEND_GRAD's do not.
  CHECK(makespan({Seconds(0.0), o}) == Approx(2 * f + 2 * b + 3 * o.value));
  // One time >= 0 per worker.
  SimOptions wrong;
  wrong.worker_action_overhead = {o};
  two.check_refused(wrong, "1 times for 2 workers");
  wrong.worker_action_overhead = {o, Seconds(-1e-6)};
  CHECK_FALSE(two.simulate(wrong).ok());
  // Replicas with overheads are not taken as interchangeable.
  SimOptions one;
  one.worker_action_overhead.assign(4, o);
  CHECK_FALSE(simulates_one_of_two_replicas(one));
}
