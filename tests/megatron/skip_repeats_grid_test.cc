// Skipping repeats (SimOptions::skip_repeats, sim/engine_repeats.cc) over a
// grid of GPT layouts: predict_megatron without a trace (one replica, repeats
// skipped) gives the figures of the full simulation with a trace (every
// replica, every action), to 1e-9 relative; likewise with the gradient
// all-reduce overlapped and with uneven splits.
#include <cmath>

#include "tests/catch_compat.h"

#include "sim/megatron_sim.h"
#include "tests/megatron/megatron_test_support.h"

namespace baton {
namespace {

using testing::megatron_layout;
using testing::shipped_topology;

// The layout predicted with a trace (every action simulated) and without;
// returns whether the second skipped any.
bool check_same_figures(const GptModel& model, const MegatronLayout& layout, const Topology& topology) {
  const auto full = predict_megatron(model, layout, topology, true);
  const auto fast = predict_megatron(model, layout, topology, false);
  REQUIRE(full.ok());
  REQUIRE(fast.ok());
  CHECK(full->simulation.metrics.actions_skipped == 0);
  CHECK(fast->iteration_time.value == Approx(full->iteration_time.value).epsilon(1e-9));
  CHECK(fast->breakdown.bubble.value == Approx(full->breakdown.bubble.value).epsilon(1e-9).margin(1e-12));
  CHECK(fast->memory.peak() == full->memory.peak());
  return fast->simulation.metrics.actions_skipped > 0;
}

TEST_CASE("skip repeats: every layout of a GPT grid predicts the full simulation's figures",
          "[megatron][skip-repeats]") {
  const GptModel model{16, 2048, 16, 1024, 50257};
  const Topology topology = shipped_topology("a100_4x8.json");
  int compared = 0, skipping = 0;
  for (int t : {1, 2, 4})
    for (int p : {2, 4, 8})
      for (int b : {1, 2})
        for (int layers_per_chunk : {0, 1, 2})
          for (int zero_bubble : {0, 1, 2}) {
            if (layers_per_chunk > 0 && zero_bubble > 0) continue;
            const int d = 32 / (t * p);
            MegatronLayout layout = megatron_layout(t, p, d, b, 64 * d);
            layout.layers_per_virtual_stage = layers_per_chunk;
            layout.zero_bubble = zero_bubble;
            layout.recompute = Recompute::kSelective;
            layout.sequence_parallel = t > 1;
            if (!check_megatron_layout(model, layout, 32).ok()) continue;
            INFO("t " << t << " p " << p << " d " << d << " b " << b << " layers per chunk " << layers_per_chunk
                      << " zero bubble " << zero_bubble);
            skipping += check_same_figures(model, layout, topology) ? 1 : 0;
            ++compared;
            MegatronLayout overlapped = layout;
            overlapped.overlap_grad_reduce = true;
            if (d > 1) check_same_figures(model, overlapped, topology);
            MegatronLayout uneven = layout;  // one block fewer on the first and the last stage
            uneven.first_stage_layers = uneven.last_stage_layers = static_cast<int>(model.layers) / p - 1;
            if (layers_per_chunk == 0 && p >= 4 && check_megatron_layout(model, uneven, 32).ok()) {
              INFO("uneven split");
              check_same_figures(model, uneven, topology);
            }
          }
  // 64 / b microbatches per replica on p <= 8 ranks: the steady state repeats
  // long enough to skip in most layouts.
  CHECK(compared >= 60);
  CHECK(skipping * 4 >= compared * 3);
}

}  // namespace
}  // namespace baton
