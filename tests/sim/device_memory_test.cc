// Memory per device (sim/metrics.h: DeviceMetrics): workers placed on one
// device share its memory, so a plan fits when every device holds what its
// workers hold at one instant. Uniform layers of `kOutput` output bytes and
// `kParams` parameter bytes; a worker holds params x (1 version + 1 gradient
// + the optimizer's factor) plus its stashed activations (sim/memory_tracker.h).
#include <algorithm>

#include "tests/catch_compat.h"

#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

const Seconds kForward = Seconds::from_ms(3.0);
const Seconds kBackward = Seconds::from_ms(5.0);
const Bytes kOutput(1000);
const Bytes kParams(1 << 20);

Profile uniform(int layers) { return make_uniform_profile(layers, kForward, kBackward, kOutput, kParams); }

const DeviceMetrics& device(const Metrics& metrics, int id) {
  const auto it = std::find_if(metrics.devices.begin(), metrics.devices.end(),
                               [&](const DeviceMetrics& d) { return d.device == id; });
  REQUIRE(it != metrics.devices.end());
  return *it;
}

}  // namespace

TEST_CASE("device memory: one worker per device, the device's peak is the worker's", "[sim][memory][devices]") {
  const Topology topology = make_flat_topology(4, 100.0, Seconds(0.0));
  const Plan plan = make_plan(one_layer_per_stage(4), Schedule::kOneFOneB, 8, topology);
  const Simulation sim = simulate_ok(plan, uniform(4), topology);
  REQUIRE(sim.metrics.devices.size() == 4);
  for (int d = 0; d < 4; ++d) {
    INFO("device " << d);
    CHECK(sim.metrics.devices[d].device == d);
    CHECK(sim.metrics.devices[d].workers == std::vector<int>{d});
    CHECK(sim.metrics.devices[d].peak_memory == sim.metrics.workers[d].peak_memory);
  }
}

TEST_CASE("device memory: two stages on one device hold the sum of what each holds", "[sim][memory][devices]") {
  // GPipe, M microbatches, 2 layers per stage, both stages on device 0. Every
  // forward precedes every backward, so at the last forward stage 0 holds M
  // stashes of its 2 layers' outputs (2 o each) and stage 1 M stashes of its
  // input and 2 outputs (3 o each), beside 2 p x (1 + 1 + 2) (Adam) each:
  // the device's peak is 2 x 4 x 2 p + M (2 o + 3 o), both workers' peaks at
  // the same instant.
  const int microbatches = 9;
  const Topology topology = make_flat_topology(2, 100.0, Seconds(0.0));
  const Plan shared = make_plan("0-2x1@0,2-4x1@0", Schedule::kGPipe, microbatches, topology);
  const Simulation sim = simulate_ok(shared, uniform(4), topology);
  const Bytes stage_static = kParams * 2 * 4;
  const Bytes stage0 = stage_static + kOutput * 2 * microbatches;
  const Bytes stage1 = stage_static + kOutput * 3 * microbatches;
  REQUIRE(sim.metrics.workers.size() == 2);
  CHECK(sim.metrics.workers[0].peak_memory == stage0);
  CHECK(sim.metrics.workers[1].peak_memory == stage1);
  REQUIRE(sim.metrics.devices.size() == 1);
  CHECK(sim.metrics.devices[0].device == 0);
  CHECK(sim.metrics.devices[0].workers == std::vector<int>{0, 1});
  CHECK(sim.metrics.devices[0].peak_memory == stage0 + stage1);

  // The same stages on devices 0 and 1: each device its own worker's.
  const Plan apart = make_plan("0-2x1@0,2-4x1@1", Schedule::kGPipe, microbatches, topology);
  const Simulation alone = simulate_ok(apart, uniform(4), topology);
  CHECK(device(alone.metrics, 0).peak_memory == stage0);
  CHECK(device(alone.metrics, 1).peak_memory == stage1);
}

TEST_CASE("device memory: the peak of the sum at one instant, between the largest peak and the sum of peaks",
          "[sim][memory][devices]") {
  // Stages 0 and 2 of a 1F1B pipeline on device 0, stage 1 on device 1 (a
  // plan has no more workers than the topology has devices: 3).
  const Topology topology = make_flat_topology(3, 100.0, Seconds(0.0));
  for (int microbatches : {1, 2, 4, 16}) {
    INFO("M=" << microbatches);
    const Plan plan = make_plan("0-1x1@0,1-2x1@1,2-3x1@0", Schedule::kOneFOneB, microbatches, topology);
    const Simulation sim = simulate_ok(plan, uniform(3), topology);
    const WorkerMetrics& first = sim.metrics.workers[0];
    const WorkerMetrics& last = sim.metrics.workers[2];
    const DeviceMetrics& shared = device(sim.metrics, 0);
    CHECK(shared.workers == std::vector<int>{0, 2});
    CHECK(shared.peak_memory >= max(first.peak_memory, last.peak_memory));
    CHECK(shared.peak_memory <= first.peak_memory + last.peak_memory);
    CHECK(device(sim.metrics, 1).peak_memory == sim.metrics.workers[1].peak_memory);
  }
}

TEST_CASE("device memory: metrics_to_json lists every device with its workers and peak", "[sim][memory][devices]") {
  const Topology topology = make_flat_topology(2, 100.0, Seconds(0.0));
  const Plan plan = make_plan("0-2x1@1,2-4x1@1", Schedule::kGPipe, 3, topology);
  const Simulation sim = simulate_ok(plan, uniform(4), topology);
  const nlohmann::json json = metrics_to_json(sim.metrics);
  REQUIRE(json["devices"].size() == 1);
  CHECK(json["devices"][0]["device"] == 1);
  CHECK(json["devices"][0]["workers"] == nlohmann::json::array({0, 1}));
  // 2 stages x 2 p x 4 (Adam), plus 3 microbatches of 2 o (stage 0) and 3 o (stage 1).
  CHECK(json["devices"][0]["peak_memory_bytes"] == (kParams * 16 + kOutput * (3 * 5)).value);
}

TEST_CASE("device memory: the streams of a shared_compute unit share its one device's memory",
          "[sim][memory][devices]") {
  // Two devices in one shared_compute unit are two streams of one physical
  // device (the threads backend's workers on one GPU): stages on devices 0 and
  // 1 hold their data in the same memory, as the GPipe case above on one
  // device: 2 p x 4 (Adam) per stage, plus M stashes of 2 o and 3 o.
  const int microbatches = 9;
  Topology topology = make_flat_topology(2, 100.0, Seconds(0.0));
  topology.levels.front().shared_compute = true;
  CHECK(topology.memory_device(0) == 0);
  CHECK(topology.memory_device(1) == 0);
  const Plan plan = make_plan("0-2x1@0,2-4x1@1", Schedule::kGPipe, microbatches, topology);
  const Simulation sim = simulate_ok(plan, uniform(4), topology);
  const Bytes stage_static = kParams * 2 * 4;
  REQUIRE(sim.metrics.devices.size() == 1);
  CHECK(sim.metrics.devices[0].device == 0);
  CHECK(sim.metrics.devices[0].workers == std::vector<int>{0, 1});
  CHECK(sim.metrics.devices[0].peak_memory == stage_static * 2 + kOutput * (2 + 3) * microbatches);
}

TEST_CASE("Bytes: sums, differences and multiples saturate at int64's ends instead of wrapping",
          "[sim][memory][units]") {
  constexpr int64_t top = INT64_MAX, bottom = INT64_MIN;
  const Bytes half(int64_t{1} << 62);
  CHECK((half + half).value == top);  // 2^63 does not fit: held at 2^63 - 1
  CHECK((half * 2).value == top);
  CHECK((half * -2).value == bottom);
  CHECK((Bytes(bottom) - Bytes(1)).value == bottom);
  CHECK((Bytes(top) - Bytes(-1)).value == top);
  Bytes sum(top - 5);
  sum += Bytes(10);
  CHECK(sum.value == top);
  sum -= Bytes(top);
  CHECK(sum.value == 0);
  // Within range the arithmetic is exact.
  CHECK((Bytes(3) + Bytes(4)).value == 7);
  CHECK((Bytes(3) - Bytes(4)).value == -1);
  CHECK((Bytes(3) * 5).value == 15);
  static_assert((Bytes(int64_t{1} << 62) * 4).value == INT64_MAX, "constexpr, saturated");
}
