// Simulating one data-parallel replica for all (SimOptions::one_replica): it
// is used only where the replicas' timelines are equal, so every figure
// predict_megatron gives without a trace equals the full simulation's.
#include <cmath>

#include "tests/catch_compat.h"

#include "sim/megatron_sim.h"
#include "sim/simulator.h"
#include "tests/megatron/megatron_test_support.h"

namespace baton {
namespace {

using testing::megatron_layout;
using testing::shipped_topology;

const GptModel kModel{24, 2048, 16, 2048, 50257};

// The same layout predicted with a trace (every replica simulated) and without.
void check_equal(const MegatronLayout& layout, const Topology& topology, bool expect_one) {
  const auto full = predict_megatron(kModel, layout, topology, true);
  const auto fast = predict_megatron(kModel, layout, topology, false);
  REQUIRE(full.ok());
  REQUIRE(fast.ok());
  CHECK_FALSE(full->simulation.one_replica);
  CHECK(fast->simulation.one_replica == expect_one);
  CHECK(fast->iteration_time.value == Approx(full->iteration_time.value).epsilon(1e-12));
  CHECK(fast->breakdown.bubble.value == Approx(full->breakdown.bubble.value).epsilon(1e-9).margin(1e-12));
  if (expect_one) CHECK(fast->simulation.metrics.actions * layout.data == full->simulation.metrics.actions);
}

TEST_CASE("one replica: equal figures for 1F1B and interleaved layouts on rail-connected servers") {
  const Topology topology = shipped_topology("a100_vtrain.json");  // 8 rails per server
  for (int t : {1, 2, 8})
    for (int p : {2, 4}) {
      const int d = 64 / (t * p);
      MegatronLayout plain = megatron_layout(t, p, d, 1, 8 * d);
      INFO("t " << t << " p " << p << " d " << d);
      check_equal(plain, topology, true);
      MegatronLayout interleaved = plain;
      interleaved.layers_per_virtual_stage = kModel.layers / (2 * p);
      check_equal(interleaved, topology, true);
      MegatronLayout overlapped = plain;
      overlapped.overlap_grad_reduce = true;
      check_equal(overlapped, topology, true);
    }
}

TEST_CASE("one replica: replicas that share a link are all simulated") {
  // The vTrain cluster with one InfiniBand link per server instead of 8 rails:
  // with t 1, p 2 and d 16 the replicas of rank 0 fill servers 0 and 1 and
  // send to servers 2 and 3 over the same uplinks, so their transfers queue
  // behind each other and their timelines differ.
  Topology topology = shipped_topology("a100_vtrain.json");
  topology.levels.back().rails = 1;
  const MegatronLayout layout = megatron_layout(1, 2, 16, 1, 128);
  check_equal(layout, topology, false);
  const Topology groups = *tensor_group_topology(topology, 1);
  CHECK_FALSE(replicas_interchangeable(megatron_plan(kModel, layout), groups));
  // With the rails back every replica has its own links.
  CHECK(replicas_interchangeable(megatron_plan(kModel, layout),
                                 *tensor_group_topology(shipped_topology("a100_vtrain.json"), 1)));
  // One replica (d 1) is nothing to collapse.
  CHECK_FALSE(replicas_interchangeable(megatron_plan(kModel, megatron_layout(1, 2, 1, 1, 8)), groups));
}

}  // namespace
}  // namespace baton
