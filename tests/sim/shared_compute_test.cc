// Level 0's shared_compute (sim/topology.h): the devices of one unit are
// streams of one physical device, as the threads backend's workers on one GPU
// are, and their compute takes turns on its one compute stream
// (sim/simulator.h). Free communication throughout (zero latency, zero
// activation and parameter bytes), so every expected time below is a sum of
// compute times.
#include "tests/catch_compat.h"

#include <nlohmann/json.hpp>

#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;
using nlohmann::json;

namespace {

const Seconds kForward = Seconds::from_ms(3.0);
const Seconds kBackward = Seconds::from_ms(5.0);

Topology streams_of_one_device(int workers) {
  Topology topology = make_flat_topology(workers, 1e6, Seconds(0.0));
  topology.levels.front().shared_compute = true;
  return topology;
}

std::string refusal(const Result<Topology>& result) { return result ? "" : result.error().message; }

}  // namespace

TEST_CASE("shared_compute: the compute units of a topology", "[sim][shared-compute]") {
  Topology two_servers = make_flat_topology(4, 100.0, Seconds(0.0));
  two_servers.levels.push_back(Level{"eth", 2, 10.0, Seconds(0.0), {}, {}});
  CHECK(two_servers.num_compute_units() == 8);
  CHECK(two_servers.compute_unit(5) == 5);
  two_servers.levels.front().shared_compute = true;
  // Each server's 4 devices are one device's streams: 2 compute units.
  CHECK(two_servers.num_devices() == 8);
  CHECK(two_servers.num_compute_units() == 2);
  CHECK(two_servers.compute_unit(3) == 0);
  CHECK(two_servers.compute_unit(4) == 1);
}

TEST_CASE("shared_compute: read, written and refused where it means nothing", "[sim][shared-compute][loaders]") {
  const json written = topology_to_json(streams_of_one_device(2));
  CHECK(written["levels"][0]["shared_compute"] == true);
  const auto read = topology_from_json(written, "t.json");
  REQUIRE(read.ok());
  CHECK(read->levels.front().shared_compute);
  // Not written when false: files without it mean what they meant.
  CHECK_FALSE(topology_to_json(make_flat_topology(2, 1.0, Seconds(0.0)))["levels"][0].contains("shared_compute"));

  json outer = written;
  outer["levels"].push_back({{"name", "eth"}, {"size", 2}, {"bandwidth_gbps", 1}, {"latency_us", 0},
                             {"shared_compute", true}});
  CHECK(refusal(topology_from_json(outer, "t.json")) ==
        "t.json: levels[1].shared_compute is for level 0 only (the streams of one device), got true");
  json text = written;
  text["levels"][0]["shared_compute"] = "yes";
  CHECK(refusal(topology_from_json(text, "t.json")) ==
        R"(t.json: levels[0].shared_compute must be true or false, got "yes")");
}

TEST_CASE("shared_compute: data-parallel replicas on one device take turns", "[sim][shared-compute]") {
  const Profile profile = make_uniform_profile(1, kForward, kBackward, Bytes(0), Bytes(0));
  for (int replicas : {2, 4}) {
    for (int microbatches : {4, 8}) {
      INFO("d=" << replicas << " M=" << microbatches);
      const Plan plan = make_plan("0-1x" + std::to_string(replicas), Schedule::kGPipe, microbatches,
                                  streams_of_one_device(replicas));
      // Own devices: each replica computes its M / d microbatches at once.
      const Topology own = make_flat_topology(replicas, 1e6, Seconds(0.0));
      CHECK(close_rel(simulate_ok(plan, profile, own).metrics.iteration_time.value,
                      double(microbatches) / replicas * (kForward + kBackward).value));
      // One device: all M microbatches one after another, and the one-replica
      // shortcut, asked for, is not taken (the replicas are not independent).
      SimOptions one_replica;
      one_replica.one_replica = true;
      one_replica.record_trace = false;
      CHECK_FALSE(replicas_interchangeable(plan, streams_of_one_device(replicas)));
      for (const SimOptions& options : {SimOptions{}, one_replica}) {
        const Simulation sim = simulate_ok(plan, profile, streams_of_one_device(replicas), options);
        CHECK_FALSE(sim.one_replica);
        CHECK(close_rel(sim.metrics.iteration_time.value, microbatches * (kForward + kBackward).value));
      }
    }
  }
}

TEST_CASE("shared_compute: a pipeline on one device takes its total work", "[sim][shared-compute]") {
  // Stages on one compute stream with free hand-overs: some worker always has
  // an action ready (a stage waiting for a gradient has a successor that holds
  // the forward it needs, one waiting for an activation a predecessor that
  // can run it), so the stream never idles and the iteration is the sum of
  // every forward and backward: S M (tF + tB), whatever the order.
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB, Schedule::kZbH1}) {
    for (int stages : {2, 4}) {
      const int microbatches = 8;
      INFO(schedule_name(schedule) << " S=" << stages);
      const Profile profile = make_uniform_profile(stages, kForward, kBackward, Bytes(0), Bytes(0));
      const Plan plan =
          make_plan(one_layer_per_stage(stages), schedule, microbatches, streams_of_one_device(stages));
      const Simulation sim = simulate_ok(plan, profile, streams_of_one_device(stages));
      CHECK(close_rel(sim.metrics.iteration_time.value, stages * microbatches * (kForward + kBackward).value));
      // Against (M + S - 1)(tF + tB) on devices of their own (docs/SIMULATOR.md).
      const Topology own = make_flat_topology(stages, 1e6, Seconds(0.0));
      if (schedule != Schedule::kZbH1) {
        CHECK(close_rel(simulate_ok(plan, profile, own).metrics.iteration_time.value,
                        (microbatches + stages - 1) * (kForward + kBackward).value));
      }
    }
  }
}

// shared_speedup (sim/topology.h): the unit does that much more work per second
// with its streams computing at once than with one; an action that starts on
// an idle unit runs at rate 1 (as profiled), one that starts while others run
// gets min(1, capacity - their rates) and keeps it, then rate 1 once they end.
// Its workers share the host's issuing call by call: an action issues its
// stage's host share of its time (StageCost; 1 without host times), at rate r
// r x share, and the running actions hold at most all of it.

namespace {

Topology streams_at_once(int workers, double speedup) {
  Topology topology = streams_of_one_device(workers);
  topology.levels.front().shared_speedup = speedup;
  return topology;
}

// Every layer's host issuing takes `share` of its device time.
Profile issued_in(double share, int layers) {
  Profile profile = make_uniform_profile(layers, kForward, kBackward, Bytes(0), Bytes(0));
  for (Layer& layer : profile.layers) {
    layer.host_forward = layer.forward * share;
    layer.host_backward = layer.backward * share;
  }
  return profile;
}

}  // namespace

TEST_CASE("shared_speedup: read, written and refused where it means nothing", "[sim][shared-compute][loaders]") {
  const json written = topology_to_json(streams_at_once(2, 1.25));
  CHECK(written["levels"][0]["shared_speedup"] == 1.25);
  const auto read = topology_from_json(written, "t.json");
  REQUIRE(read.ok());
  CHECK(read->levels.front().shared_speedup == 1.25);
  // Not written at 1 (taking turns): files without it mean what they meant.
  CHECK_FALSE(topology_to_json(streams_of_one_device(2))["levels"][0].contains("shared_speedup"));

  json below = written;
  below["levels"][0]["shared_speedup"] = 0.9;
  CHECK(refusal(topology_from_json(below, "t.json")) == "t.json: levels[0].shared_speedup must be >= 1, got 0.9");
  json alone = written;
  alone["levels"][0].erase("shared_compute");
  CHECK(refusal(topology_from_json(alone, "t.json")) ==
        R"(t.json: levels[0].shared_speedup needs "shared_compute": true (the streams of one device), got 1.25)");
}

TEST_CASE("shared_speedup: as many times the work as streams is a device each", "[sim][shared-compute]") {
  // Every action then gets rate 1 whatever else runs and, issued in no time,
  // never waits for the issuer: the unit is `workers` devices of their own.
  const Profile one_layer = issued_in(0.0, 1);
  for (int replicas : {2, 4}) {
    const int microbatches = 8;
    INFO("d=" << replicas);
    const Plan plan = make_plan("0-1x" + std::to_string(replicas), Schedule::kGPipe, microbatches,
                                streams_at_once(replicas, replicas));
    CHECK(close_rel(simulate_ok(plan, one_layer, streams_at_once(replicas, replicas)).metrics.iteration_time.value,
                    double(microbatches) / replicas * (kForward + kBackward).value));
  }
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB}) {
    const int stages = 4;
    const int microbatches = 8;
    INFO(schedule_name(schedule));
    const Profile profile = issued_in(0.0, stages);
    const Plan plan = make_plan(one_layer_per_stage(stages), schedule, microbatches, streams_at_once(stages, stages));
    CHECK(close_rel(simulate_ok(plan, profile, streams_at_once(stages, stages)).metrics.iteration_time.value,
                    (microbatches + stages - 1) * (kForward + kBackward).value));
  }
}

TEST_CASE("shared_speedup: a later action gets what the earlier ones leave", "[sim][shared-compute]") {
  // Two replicas, one microbatch each, capacity 1.5 (tF = 3 ms, tB = 5 ms),
  // issued in no time; ties go to the lower worker.
  //   r0 F: [0, 3] at rate 1.
  //   r1 F: from 0 at 0.5 (1.5 ms of work by 3), the other 1.5 at rate 1: ends 4.5.
  //   r0 B: from 3; r1's F holds 1 until 4.5, so 0.5 (0.75 ms by 4.5), the other
  //         4.25 at 1: ends 8.75.
  //   r1 B: from 4.5; r0's B holds 1 until 8.75, so 0.5 (2.125 ms by 8.75), the
  //         other 2.875 at 1: ends 11.625.
  const Profile profile = issued_in(0.0, 1);
  const Plan plan = make_plan("0-1x2", Schedule::kGPipe, 2, streams_at_once(2, 1.5));
  const Simulation sim = simulate_ok(plan, profile, streams_at_once(2, 1.5));
  CHECK(close_rel(sim.metrics.iteration_time.value, 11.625e-3));
  // Between taking turns (2 (tF + tB) = 16 ms) and devices of their own (8 ms).
  CHECK(close_rel(simulate_ok(plan, profile, streams_at_once(2, 1.0)).metrics.iteration_time.value, 16e-3));
}

TEST_CASE("shared_speedup: the workers' launches share the host's issuing", "[sim][shared-compute]") {
  const Plan plan = make_plan("0-1x2", Schedule::kGPipe, 2, streams_at_once(2, 1.5));
  // Issuing as long as computing (a profile without host times, or passes of
  // small kernels the host launches as fast as the device runs them): one
  // action at a time whatever the capacity, 2 (tF + tB).
  for (const Profile& profile : {make_uniform_profile(1, kForward, kBackward, Bytes(0), Bytes(0)), issued_in(1.0, 1)})
    CHECK(close_rel(simulate_ok(plan, profile, streams_at_once(2, 1.5)).metrics.iteration_time.value, 16e-3));
  // Half of each action's time issuing: an action at rate 1 leaves half the
  // issuing, as much as a second one at the 0.5 of capacity left needs, so
  // the timeline is that of issuing in no time (11.625 ms, above).
  CHECK(close_rel(simulate_ok(plan, issued_in(0.5, 1), streams_at_once(2, 1.5)).metrics.iteration_time.value,
                  11.625e-3));
  // 0.8 of each action's time issuing: one at rate 1 leaves 0.2 of the
  // issuing, a rate of 0.2 / 0.8 = 0.25 for a second (capacity would allow 0.5):
  //   r0 F: [0, 3] at rate 1.
  //   r1 F: from 0 at 0.25 (0.75 ms by 3), the other 2.25 at 1: ends 5.25.
  //   r0 B: from 3 at 0.25 until 5.25 (0.5625 ms), the other 4.4375: ends 9.6875.
  //   r1 B: from 5.25 at 0.25 until 9.6875 (1.109375 ms), the other 3.890625:
  //         ends 13.578125.
  CHECK(close_rel(simulate_ok(plan, issued_in(0.8, 1), streams_at_once(2, 1.5)).metrics.iteration_time.value,
                  13.578125e-3));
}

TEST_CASE("shared_streams: a profile's measured streams, read, written only when set, and checked",
          "[sim][shared-compute][loaders]") {
  Profile profile = make_uniform_profile(2, kForward, kBackward, Bytes(0), Bytes(0));
  CHECK_FALSE(profile_to_json(profile).contains("shared_streams"));
  profile.shared_streams = SharedStreams{4, 1.21};
  const json written = profile_to_json(profile);
  CHECK(written["shared_streams"] == json{{"streams", 4}, {"speedup", 1.21}});
  const auto read = profile_from_json(written, "p.json");
  REQUIRE(read.ok());
  CHECK(read->shared_streams == SharedStreams{4, 1.21});

  const auto refused = [&](const char* key, const json& value) {
    json text = written;
    text["shared_streams"][key] = value;
    const auto result = profile_from_json(text, "p.json");
    return result ? std::string() : result.error().message;
  };
  CHECK(refused("streams", 1) == "p.json: shared_streams.streams must be >= 2, got 1");
  CHECK(refused("speedup", 0) == "p.json: shared_streams.speedup must be > 0, got 0");
  CHECK(refused("speed", 1.2) == R"(p.json: shared_streams has an unknown key "speed" (did you mean "speedup"?))");
}
