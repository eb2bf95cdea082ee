// The closed forms of docs/SIMULATOR.md ("Closed forms it reproduces"): uniform
// stages, free communication (zero activation bytes, zero latency), checked to
// 1e-9 relative.
#include "tests/catch_compat.h"

#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

const Seconds kForward = Seconds::from_ms(3.0);
const Seconds kBackward = Seconds::from_ms(5.0);

Profile uniform(int layers, Bytes params = Bytes(0)) {
  return make_uniform_profile(layers, kForward, kBackward, Bytes(0), params);
}

}  // namespace

TEST_CASE("gpipe and 1f1b makespan is (M + S - 1)(tF + tB)", "[sim][closed-form]") {
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB}) {
    for (int stages : {1, 2, 4, 7}) {
      for (int microbatches : {1, 3, 8, 32}) {
        const Topology topology = make_flat_topology(stages, 100.0, Seconds(0.0));
        const Plan plan = make_plan(one_layer_per_stage(stages), schedule, microbatches, topology);
        const Simulation sim = simulate_ok(plan, uniform(stages), topology);
        const double expected = (microbatches + stages - 1) * (kForward + kBackward).value;
        INFO(schedule_name(schedule) << " S=" << stages << " M=" << microbatches);
        CHECK(close_rel(sim.metrics.iteration_time.value, expected));
        const double bubble = double(stages - 1) / (microbatches + stages - 1);
        CHECK(std::abs(sim.metrics.bubble_fraction - bubble) <= 1e-9);
        const double throughput = microbatches / expected;  // microbatch_size 1
        CHECK(close_rel(sim.metrics.throughput_samples_per_s, throughput));
      }
    }
  }
}

TEST_CASE("activation stash: 1f1b holds min(S - s, M), gpipe holds M", "[sim][closed-form][memory]") {
  const int stages = 4;
  const Bytes output(1000);
  const Profile profile = make_uniform_profile(stages, kForward, kBackward, output, Bytes(0));
  // Stash per microbatch: input (output of the previous layer, none at stage 0) + own output.
  const auto stash = [&](int s) { return s == 0 ? output : output * 2; };
  const Topology topology = make_flat_topology(stages, 1e9, Seconds(0.0));
  for (int microbatches : {2, 4, 9}) {
    const Plan flush = make_plan(one_layer_per_stage(stages), Schedule::kOneFOneB, microbatches, topology);
    const Plan gpipe = make_plan(one_layer_per_stage(stages), Schedule::kGPipe, microbatches, topology);
    const Simulation one_f = simulate_ok(flush, profile, topology);
    const Simulation all_f = simulate_ok(gpipe, profile, topology);
    for (int s = 0; s < stages; ++s) {
      INFO("M=" << microbatches << " s=" << s);
      const int held_1f1b = std::min(stages - s, microbatches);
      CHECK(one_f.metrics.workers[s].peak_inflight_microbatches == held_1f1b);
      CHECK(one_f.metrics.workers[s].peak_activation_bytes == stash(s) * held_1f1b);
      CHECK(all_f.metrics.workers[s].peak_inflight_microbatches == microbatches);
      CHECK(all_f.metrics.workers[s].peak_activation_bytes == stash(s) * microbatches);
      CHECK(one_f.metrics.workers[s].weight_versions == 1);
    }
  }
}

TEST_CASE("pipedream steady state is max_s (tF_s + tB_s) / r_s", "[sim][closed-form][pipedream]") {
  SECTION("uniform stages, no replication") {
    const int stages = 4;
    const Topology topology = make_flat_topology(stages, 100.0, Seconds(0.0));
    const Plan plan = make_plan(one_layer_per_stage(stages), Schedule::kPipeDream, 64, topology);
    const Simulation sim = simulate_ok(plan, uniform(stages), topology);
    CHECK(close_rel(sim.metrics.iteration_time.value, (kForward + kBackward).value));
    CHECK(std::abs(sim.metrics.bubble_fraction) <= 1e-9);
    for (int s = 0; s < stages; ++s) {
      // warm-up = (S - s - 1) forwards; versions held = warm-up + 1.
      CHECK(sim.metrics.workers[s].weight_versions == stages - s);
      CHECK(sim.metrics.workers[s].peak_inflight_microbatches == stages - s);
    }
  }
  SECTION("replicated heavy stage: 4 layers on 2 replicas, then 1 layer") {
    // Stage 0: 4 layers, r = 2 -> 4 (tF + tB) / 2; stage 1: 1 layer, r = 1 -> tF + tB.
    const Topology topology = make_flat_topology(3, 100.0, Seconds(0.0));
    const Plan plan = make_plan("0-4x2,4-5x1", Schedule::kPipeDream, 64, topology);
    const Simulation sim = simulate_ok(plan, uniform(5), topology);
    const double expected = std::max(4 * (kForward + kBackward).value / 2, (kForward + kBackward).value);
    CHECK(close_rel(sim.metrics.iteration_time.value, expected));
    // Stage 0 replicas: warm-up = (3 - 1) / 2 = 1, versions = 2; stage 1: warm-up 0, 1 version.
    CHECK(sim.metrics.workers[0].weight_versions == 2);
    CHECK(sim.metrics.workers[1].weight_versions == 2);
    CHECK(sim.metrics.workers[2].weight_versions == 1);
  }
  SECTION("slowest stage bounds the rate") {
    // Layers: stage 1 holds 3 layers -> 3 (tF + tB).
    const Topology topology = make_flat_topology(3, 100.0, Seconds(0.0));
    const Plan plan = make_plan("0-1,1-4,4-5", Schedule::kPipeDream, 40, topology);
    const Simulation sim = simulate_ok(plan, uniform(5), topology);
    CHECK(close_rel(sim.metrics.iteration_time.value, 3 * (kForward + kBackward).value));
  }
}

TEST_CASE("data parallel: compute plus ring all-reduce 2 (W - 1)/W x P / B", "[sim][closed-form][dp]") {
  const Bytes params(64 << 20);
  const double bandwidth_gbps = 10.0;
  for (int workers : {1, 2, 4, 8}) {
    const int microbatches = 2 * workers;
    const Topology topology = make_flat_topology(workers, bandwidth_gbps, Seconds(0.0));
    const Plan plan = make_plan("0-1x" + std::to_string(workers), Schedule::kDataParallel, microbatches, topology);
    const Simulation sim = simulate_ok(plan, uniform(1, params), topology);
    const double bytes_per_s = bandwidth_gbps * 1e9 / 8;
    const double allreduce = 2.0 * (workers - 1) / workers * double(params.value) / bytes_per_s;
    const double expected = (microbatches / workers) * (kForward + kBackward).value + allreduce;
    INFO("W=" << workers);
    CHECK(close_rel(sim.metrics.iteration_time.value, expected));
  }
}

TEST_CASE("the optimizer step costs its profiled time on the compute stream", "[sim][closed-form][step]") {
  // Every layer: optimizer_ms u. A STEP of a stage of L layers lasts L u.
  const Seconds step = Seconds::from_ms(0.5);
  const auto with_step = [&](int layers) {
    Profile profile = uniform(layers);
    for (Layer& layer : profile.layers) layer.optimizer = step;
    return profile;
  };
  SECTION("flush: one STEP after the last backward, (M + S - 1)(tF + tB) + u") {
    for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB}) {
      const int stages = 3;
      const int microbatches = 5;
      const Topology topology = make_flat_topology(stages, 100.0, Seconds(0.0));
      const Plan plan = make_plan(one_layer_per_stage(stages), schedule, microbatches, topology);
      const Simulation sim = simulate_ok(plan, with_step(stages), topology);
      INFO(schedule_name(schedule));
      CHECK(close_rel(sim.metrics.iteration_time.value,
                      (microbatches + stages - 1) * (kForward + kBackward).value + step.value));
    }
  }
  SECTION("pipedream: a STEP after every backward, max_s (tF + tB + L_s u) / r_s") {
    // Stage 1 holds 3 layers: 3 (tF + tB) + 3 u per minibatch.
    const Topology topology = make_flat_topology(3, 100.0, Seconds(0.0));
    const Plan plan = make_plan("0-1,1-4,4-5", Schedule::kPipeDream, 40, topology);
    const Simulation sim = simulate_ok(plan, with_step(5), topology);
    CHECK(close_rel(sim.metrics.iteration_time.value, 3 * (kForward + kBackward + step).value));
  }
}
