// Skipping the repeats of a run (SimOptions::skip_repeats, sim/engine_repeats.cc):
// the figures equal those of the full run (1e-9 relative), the closed forms of
// docs/SIMULATOR.md hold with it, and the repeats are really skipped.
#include <random>
#include <string>

#include "tests/catch_compat.h"

#include "sim/topology.h"
#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

SimOptions fast(bool skip) {
  SimOptions options;
  options.record_trace = false;
  options.skip_repeats = skip;
  return options;
}

// Layers of unequal cost: forward 1, 2 or 3 ms, backward twice that split
// 1 : 1 into I and W, outputs of 2 to 8 MB, 10 to 40 MB of parameters.
Profile uneven_profile(int layers) {
  Profile profile = make_uniform_profile(layers, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(0), Bytes(0));
  for (int i = 0; i < layers; ++i) {
    Layer& layer = profile.layers[i];
    layer.forward = Seconds::from_ms(1.0 + i % 3);
    layer.backward = layer.forward * 2.0;
    layer.backward_input = layer.forward;
    layer.backward_weight = layer.forward;
    layer.output_bytes = Bytes(int64_t{2'000'000} * (1 + i % 4));
    layer.param_bytes = Bytes(int64_t{10'000'000} * (1 + i % 4));
  }
  return profile;
}

// Two levels: 4 servers of 8 devices, 2400 Gb/s inside, 100 Gb/s between,
// with `latency` between servers (a long one keeps several transfers to a
// stage in flight at once).
Topology two_level(Seconds latency = Seconds::from_us(5.0)) {
  Topology topology = make_flat_topology(32, 100.0, latency);
  topology.levels = {Level{"server", 8, 2400.0, Seconds::from_us(2.0), {}, {}},
                     Level{"cluster", 4, 100.0, latency, {}, {}}};
  return topology;
}

// S stages of L / S layers each, on `replicas` pipelines.
Plan even_plan(Schedule schedule, int stages, int chunks, int layers, int microbatches, int replicas,
               const Topology& topology) {
  Plan plan;
  plan.schedule = schedule;
  plan.virtual_stages = chunks;
  plan.batches = microbatches;
  const int per = layers / stages;
  for (int s = 0; s < stages; ++s) plan.stages.push_back(StagePlan{LayerRange{s * per, (s + 1) * per}, replicas, {}});
  REQUIRE(assign_devices(plan, topology).ok());
  return plan;
}

void check_same(const Metrics& skipped, const Metrics& full) {
  CHECK(close_rel(skipped.makespan.value, full.makespan.value));
  CHECK(close_rel(skipped.iteration_time.value, full.iteration_time.value));
  CHECK(close_rel(skipped.throughput_samples_per_s, full.throughput_samples_per_s));
  CHECK(std::abs(skipped.bubble_fraction - full.bubble_fraction) <= 1e-9);
  REQUIRE(skipped.workers.size() == full.workers.size());
  for (size_t w = 0; w < full.workers.size(); ++w) {
    INFO("worker " << w);
    CHECK(close_rel(skipped.workers[w].busy.value, full.workers[w].busy.value));
    CHECK(skipped.workers[w].peak_memory == full.workers[w].peak_memory);
    CHECK(skipped.workers[w].peak_activation_bytes == full.workers[w].peak_activation_bytes);
    CHECK(skipped.workers[w].peak_inflight_microbatches == full.workers[w].peak_inflight_microbatches);
  }
  CHECK(skipped.actions == full.actions);
  CHECK(full.actions_skipped == 0);
}

}  // namespace

TEST_CASE("skip repeats: 1f1b keeps (M + S - 1)(tF + tB) and min(S - s, M) in flight, skipping most actions",
          "[sim][skip-repeats][closed-form]") {
  const Seconds forward = Seconds::from_ms(3.0), backward = Seconds::from_ms(5.0);
  for (int stages : {2, 4, 7}) {
    for (int microbatches : {64, 256}) {
      const Topology topology = make_flat_topology(stages, 100.0, Seconds(0.0));
      const Plan plan = make_plan(one_layer_per_stage(stages), Schedule::kOneFOneB, microbatches, topology);
      const Profile profile = make_uniform_profile(stages, forward, backward, Bytes(0), Bytes(0));
      const Simulation sim = simulate_ok(plan, profile, topology, fast(true));
      INFO("S=" << stages << " M=" << microbatches);
      CHECK(close_rel(sim.metrics.makespan.value, (microbatches + stages - 1) * (forward + backward).value));
      for (int s = 0; s < stages; ++s) CHECK(sim.metrics.workers[s].peak_inflight_microbatches == stages - s);
      // The warm-up, the cool-down and a few periods are simulated; at least
      // half of the actions are skipped.
      CHECK(sim.metrics.actions_skipped * 2 >= sim.metrics.actions);
    }
  }
}

TEST_CASE("skip repeats: every flush schedule gives the full run's figures on uneven stages and two link levels",
          "[sim][skip-repeats]") {
  const auto latency = GENERATE(Seconds::from_us(5.0), Seconds::from_ms(7.0));
  const Topology topology = two_level(latency);
  const Profile profile = uneven_profile(24);
  struct Case {
    Schedule schedule;
    int stages, chunks, replicas;
    bool skips;  // whether its steady state repeats (gpipe's memory grows all along)
  };
  const Case cases[] = {
      {Schedule::kOneFOneB, 4, 1, 1, true},
      {Schedule::kOneFOneB, 8, 1, 4, true},
      {Schedule::kGPipe, 4, 1, 2, false},
      {Schedule::kZbH1, 4, 1, 2, true},
      {Schedule::kZbH2, 4, 1, 1, true},
      {Schedule::kInterleaved1F1B, 8, 2, 2, true},
      {Schedule::kInterleaved1F1B, 12, 3, 1, true},
      {Schedule::kZbV, 8, 2, 1, true},
      {Schedule::kDualPipeV, 8, 2, 2, true},
  };
  for (const Case& c : cases) {
    for (int microbatches : {8, 12, 16, 20, 96}) {
      const int m = microbatches * c.replicas;
      const Plan plan = even_plan(c.schedule, c.stages, c.chunks, 24, m, c.replicas, topology);
      INFO(schedule_name(c.schedule) << " latency " << latency.value << " S=" << c.stages << " v=" << c.chunks
                                     << " d=" << c.replicas << " M=" << m);
      const Simulation full = simulate_ok(plan, profile, topology, fast(false));
      const Simulation skipped = simulate_ok(plan, profile, topology, fast(true));
      check_same(skipped.metrics, full.metrics);
      if (microbatches == 96) CHECK((skipped.metrics.actions_skipped > 0) == c.skips);
    }
  }
}

TEST_CASE("skip repeats: a trace, noise or pipedream's steady state simulate every action", "[sim][skip-repeats]") {
  const Topology topology = two_level();
  const Profile profile = uneven_profile(24);
  const Plan plan = even_plan(Schedule::kOneFOneB, 4, 1, 24, 64, 1, topology);
  SimOptions traced = fast(true);
  traced.record_trace = true;
  const Simulation with_trace = simulate_ok(plan, profile, topology, traced);
  CHECK(with_trace.metrics.actions_skipped == 0);
  CHECK(with_trace.trace.spans.size() == static_cast<size_t>(with_trace.metrics.actions));
  const Plan pipedream = even_plan(Schedule::kPipeDream, 4, 1, 24, 64, 1, topology);
  CHECK(simulate_ok(pipedream, profile, topology, fast(true)).metrics.actions_skipped == 0);
}

TEST_CASE("skip repeats: random plans, costs and links give the full run's figures", "[sim][skip-repeats][random]") {
  // 400 draws (fixed seed): schedule, ranks, chunks, replicas, microbatches,
  // per-layer times and sizes, bandwidths and latencies. Plans the loader
  // refuses (a chunk count a schedule cannot run) are drawn again.
  std::mt19937_64 random(20261124);
  const auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(random); };
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
  const Schedule schedules[] = {Schedule::kOneFOneB,        Schedule::kGPipe, Schedule::kZbH1,     Schedule::kZbH2,
                                Schedule::kInterleaved1F1B, Schedule::kZbV,   Schedule::kDualPipeV};
  int compared = 0, skipping = 0;
  for (int draw = 0; draw < 400; ++draw) {
    const Schedule schedule = schedules[pick(0, 6)];
    const int ranks = pick(2, 5);
    const int chunks = schedule == Schedule::kInterleaved1F1B                           ? pick(2, 3)
                       : schedule == Schedule::kZbV || schedule == Schedule::kDualPipeV ? 2
                                                                                        : 1;
    const int replicas = pick(1, 3);
    const int stages = ranks * chunks;
    const int layers = stages * pick(1, 2);
    Profile profile = make_uniform_profile(layers, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(0), Bytes(0));
    for (Layer& layer : profile.layers) {
      layer.forward = Seconds::from_ms(uniform(0.3, 3.0));
      const Seconds input = layer.forward * uniform(0.8, 1.2), weight = layer.forward * uniform(0.5, 1.2);
      layer.backward_input = input;
      layer.backward_weight = weight;
      layer.backward = input + weight;
      layer.output_bytes = Bytes(static_cast<int64_t>(uniform(1e5, 2e7)));
      layer.param_bytes = Bytes(static_cast<int64_t>(uniform(1e6, 1e8)));
    }
    const Topology topology = two_level(Seconds::from_us(uniform(1.0, 3000.0)));
    const int microbatches = ranks * pick(2, 12) * replicas;
    Plan plan = even_plan(schedule, stages, chunks, layers, microbatches, replicas, topology);
    SimOptions full = fast(false), skipped = fast(true);
    full.one_replica = skipped.one_replica = pick(0, 1) == 1;
    auto full_run = simulate_plan(plan, profile, topology, full);
    if (!full_run) continue;  // refused: drawn again
    INFO("draw " << draw << ": " << schedule_name(schedule) << " p " << ranks << " v " << chunks << " d " << replicas
                 << " M " << microbatches);
    const Simulation skipping_run = simulate_ok(plan, profile, topology, skipped);
    check_same(skipping_run.metrics, full_run->metrics);
    ++compared;
    skipping += skipping_run.metrics.actions_skipped > 0 ? 1 : 0;
  }
  CHECK(compared >= 300);
  CHECK(skipping >= compared / 2);
}
