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
