// Mixture of experts in the Megatron layout search (planner/megatron_search.h)
// and the GPT sweep (planner/gpt_sweep.h): ep searched over the divisors of d
// c that divide the experts, with both token dispatchers, each pinned where
// given, and an axis of its own.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "planner/gpt_sweep.h"
#include "planner/megatron_search.h"

namespace baton {
namespace {

// A small Mixtral-like model of 8 layers, 8 experts, top 2.
GptModel small_moe() { return testing::small_moe(8, 8, 2); }

// Every axis but ep (and d, which the GPUs give) pinned: t 1, p 2, one
// chunk, 1F1B, no recomputation, the distributed optimizer.
MegatronAxes pinned_but_experts() {
  MegatronAxes fixed;
  fixed.tensor = 1;
  fixed.pipeline = 2;
  fixed.context = 1;
  fixed.micro_batch = 1;
  fixed.recompute = Recompute::kNone;
  fixed.sequence_parallel = false;
  fixed.distributed_optimizer = true;
  fixed.layers_per_virtual_stage = 0;
  fixed.zero_bubble = 0;
  fixed.v_schedule = VSchedule::kNone;
  fixed.stage_layers = std::make_pair(0, 0);
  return fixed;
}

TEST_CASE("moe: the search takes every ep that divides both d c and the experts", "[planner][megatron][moe]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");  // 32 GPUs: d = 32 / (t p) = 16
  const GptModel m = small_moe();
  const auto all = search_megatron_layouts(m, 64, true, pinned_but_experts(), topology, 1000000);
  REQUIRE(all.ok());
  CHECK(all->pruned == 0);
  CHECK(all->not_fitting == 0);
  // The divisors of d c = 16 that divide E = 8.
  std::set<int> expected;
  for (int ep = 1; ep <= 16; ++ep)
    if (16 % ep == 0 && 8 % ep == 0) expected.insert(ep);
  REQUIRE(expected == std::set<int>{1, 2, 4, 8});
  // Each with both token dispatchers.
  CHECK(all->enumerated == 2 * static_cast<int>(expected.size()));
  std::set<int> searched;
  std::set<std::pair<int, MoeDispatcher>> pairs;
  for (const MegatronCandidate& c : all->best) {
    searched.insert(c.layout.expert_parallel);
    pairs.insert({c.layout.expert_parallel, c.layout.moe_dispatcher});
    CHECK(c.layout.data == 16);
    CHECK(c.iteration_time.value >= c.lower_bound.value * (1 - 1e-12));
  }
  CHECK(searched == expected);
  CHECK(pairs.size() == 2 * expected.size());
  // The chosen layout's time is the simulator's; pruning keeps it.
  const MegatronCandidate& best = all->best.front();
  const auto again = predict_megatron(m, best.layout, topology, false);
  REQUIRE(again.ok());
  CHECK(again->iteration_time == best.iteration_time);
  const auto pruned = search_megatron_layouts(m, 64, true, pinned_but_experts(), topology, 1);
  REQUIRE(pruned.ok());
  REQUIRE(pruned->best.size() == 1);
  CHECK(pruned->best.front().iteration_time == best.iteration_time);
  CHECK(pruned->best.front().layout.expert_parallel == best.layout.expert_parallel);
  CHECK(pruned->best.front().layout.moe_dispatcher == best.layout.moe_dispatcher);
  // ep pinned stays pinned; a dense model searches ep 1 only.
  MegatronAxes fixed = pinned_but_experts();
  fixed.expert_parallel = 4;
  const auto four = search_megatron_layouts(m, 64, true, fixed, topology, 1000000);
  REQUIRE(four.ok());
  REQUIRE_FALSE(four->best.empty());
  for (const MegatronCandidate& c : four->best) CHECK(c.layout.expert_parallel == 4);
  // So does the dispatcher.
  fixed.moe_dispatcher = MoeDispatcher::kAllToAll;
  const auto alltoall = search_megatron_layouts(m, 64, true, fixed, topology, 1000000);
  REQUIRE(alltoall.ok());
  CHECK(alltoall->enumerated == 1);
  for (const MegatronCandidate& c : alltoall->best) CHECK(c.layout.moe_dispatcher == MoeDispatcher::kAllToAll);
  GptModel dense = m;
  dense.experts = 0;
  dense.moe_ffn_hidden = 0;
  const auto plain = search_megatron_layouts(dense, 64, true, pinned_but_experts(), topology, 1000000);
  REQUIRE(plain.ok());
  CHECK(plain->enumerated == 1);
  for (const MegatronCandidate& c : plain->best) CHECK(c.layout.expert_parallel == 1);
}

TEST_CASE("moe: the sweep's expert-model-parallel-size axis, ep for short", "[planner][sweep][moe]") {
  GptSweepAxis ep{"ep", {"1", "02", "8"}};
  REQUIRE(check_gpt_axis(ep, {}).ok());
  CHECK(ep.name == "expert-model-parallel-size");
  CHECK(ep.values == std::vector<std::string>{"1", "2", "8"});
  GptSweepAxis zero{"ep", {"0"}};
  CHECK_FALSE(check_gpt_axis(zero, {}).ok());
  // Each point simulates its ep, written in the layout's column.
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  GptSweepSpec spec;
  spec.model = small_moe();
  spec.layout = megatron_layout(1, 2, 0, 1, 64);  // d: each point's GPUs / (t p)
  spec.layout.bf16 = true;
  spec.axes = {{"ep", {"1", "2", "3"}}};
  auto table = run_gpt_sweep(spec, topology, [](size_t, size_t) {});
  REQUIRE(table.ok());
  REQUIRE(table->rows.size() == 3);
  const auto at = [&](size_t row, const char* name) {
    const int column = table->column(name);
    REQUIRE(column >= 0);
    return table->rows[row][static_cast<size_t>(column)];
  };
  for (size_t i = 0; i < 3; ++i) {
    INFO("ep " << spec.axes[0].values[i] << ": " << at(i, "error"));
    CHECK(at(i, "expert_model_parallel_size") == spec.axes[0].values[i]);
    CHECK(at(i, "data_parallel_size") == "16");
    MegatronLayout l = megatron_layout(1, 2, 16, 1, 64);
    l.bf16 = true;
    l.expert_parallel = std::stoi(spec.axes[0].values[i]);
    const auto expected = predict_megatron(spec.model, l, topology, false);
    // ep 3 does not divide the 8 experts: the point says why.
    if (i == 2) {
      CHECK_FALSE(expected.ok());
      CHECK(at(i, "error").find("--expert-model-parallel-size 3") != std::string::npos);
      continue;
    }
    REQUIRE(expected.ok());
    REQUIRE(at(i, "error").empty());
    CHECK(std::stod(at(i, "iteration_time_s")) == Approx(expected->iteration_time.value).epsilon(1e-8));
  }
}

TEST_CASE("moe: the sweep's moe-token-dispatcher-type axis simulates each dispatcher", "[planner][sweep][moe]") {
  GptSweepAxis dispatcher{"moe-token-dispatcher-type", {"alltoall", "allgather", "flex"}};
  REQUIRE(check_gpt_axis(dispatcher, {}).ok());
  GptSweepAxis deepep{"moe-token-dispatcher-type", {"deepep"}};
  const Status refused = check_gpt_axis(deepep, {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message == "--vary moe-token-dispatcher-type: \"deepep\" is not allgather, alltoall or flex");
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  GptSweepSpec spec;
  spec.model = small_moe();
  spec.layout = megatron_layout(1, 2, 0, 1, 64);
  spec.layout.bf16 = true;
  spec.layout.expert_parallel = 8;
  spec.axes = {dispatcher};
  auto table = run_gpt_sweep(spec, topology, [](size_t, size_t) {});
  REQUIRE(table.ok());
  REQUIRE(table->rows.size() == 3);
  const int time = table->column("iteration_time_s");
  REQUIRE(time >= 0);
  for (size_t i = 0; i < 3; ++i) {
    MegatronLayout l = megatron_layout(1, 2, 16, 1, 64);
    l.bf16 = true;
    l.expert_parallel = 8;
    l.moe_dispatcher = *parse_moe_dispatcher(dispatcher.values[i]);
    const auto expected = predict_megatron(spec.model, l, topology, false);
    REQUIRE(expected.ok());
    CHECK(std::stod(table->rows[i][static_cast<size_t>(time)]) == Approx(expected->iteration_time.value).epsilon(1e-8));
  }
  const int column = table->column("moe_token_dispatcher_type");
  REQUIRE(column >= 0);
  CHECK(table->rows[0][static_cast<size_t>(column)] == "alltoall");
  CHECK(table->rows[1][static_cast<size_t>(column)] == "allgather");
  CHECK(table->rows[2][static_cast<size_t>(column)] == "flex");
  // At ep 8 the gather moves more than the all-to-alls; inside one server
  // flex sends alltoall's bytes (one expert a GPU: nothing to deduplicate).
  CHECK(std::stod(table->rows[1][static_cast<size_t>(time)]) > std::stod(table->rows[0][static_cast<size_t>(time)]));
  CHECK(std::stod(table->rows[2][static_cast<size_t>(time)]) <= std::stod(table->rows[0][static_cast<size_t>(time)]));
}

TEST_CASE("moe: the search puts --moe-shared-expert-overlap on the alltoall layouts of a model with a shared expert",
          "[planner][megatron][moe]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  GptModel m = small_moe();
  m.shared_expert_ffn = 4096;
  MegatronAxes fixed = pinned_but_experts();
  fixed.shared_expert_overlap = true;
  const auto found = search_megatron_layouts(m, 64, true, fixed, topology, 1000000);
  REQUIRE(found.ok());
  REQUIRE_FALSE(found->best.empty());
  int alltoalls = 0;
  for (const MegatronCandidate& c : found->best) {
    const bool a2a = c.layout.moe_dispatcher == MoeDispatcher::kAllToAll;
    CHECK(c.layout.moe_shared_expert_overlap == a2a);
    alltoalls += a2a ? 1 : 0;
  }
  CHECK(alltoalls > 0);
  // Without a shared expert it applies to none.
  const auto unshared = search_megatron_layouts(small_moe(), 64, true, fixed, topology, 1000000);
  REQUIRE(unshared.ok());
  for (const MegatronCandidate& c : unshared->best) CHECK_FALSE(c.layout.moe_shared_expert_overlap);
}

TEST_CASE(
    "moe: the search puts --overlap-moe-expert-parallel-comm on the alltoall layouts with ep > 1, interleaved or p 1",
    "[planner][megatron][moe]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  MegatronAxes fixed = pinned_but_experts();
  fixed.overlap_moe_ep_comm = true;
  // Without a pipeline (Megatron's no-pipelining pairs): on the alltoall
  // layouts with ep > 1, each one's memory as predict_megatron has it (the
  // pairs hold one microbatch more than the same layout unpaired).
  fixed.pipeline = 1;
  const auto alone = search_megatron_layouts(small_moe(), 64, true, fixed, topology, 1000000);
  REQUIRE(alone.ok());
  int unpipelined = 0;
  for (const MegatronCandidate& c : alone->best) {
    const bool applies = c.layout.moe_dispatcher == MoeDispatcher::kAllToAll && c.layout.expert_parallel > 1;
    CHECK(c.layout.overlap_moe_ep_comm == applies);
    unpipelined += applies ? 1 : 0;
    const auto again = predict_megatron(small_moe(), c.layout, topology, false);
    REQUIRE(again.ok());
    CHECK(again->iteration_time == c.iteration_time);
    CHECK(again->memory.peak() == c.peak_memory);
    CHECK(again->memory.ranks.at(0).inflight_microbatches == (applies && c.layout.microbatches() > 1 ? 2 : 1));
  }
  CHECK(unpipelined > 0);
  fixed.pipeline = 2;
  // Not interleaved: it applies to none.
  const auto straight = search_megatron_layouts(small_moe(), 64, true, fixed, topology, 1000000);
  REQUIRE(straight.ok());
  for (const MegatronCandidate& c : straight->best) CHECK_FALSE(c.layout.overlap_moe_ep_comm);
  // Interleaved (4 chunks of one layer a GPU): on the alltoall layouts with ep > 1.
  fixed.layers_per_virtual_stage = 1;
  const auto found = search_megatron_layouts(small_moe(), 64, true, fixed, topology, 1000000);
  REQUIRE(found.ok());
  int on = 0;
  for (const MegatronCandidate& c : found->best) {
    const bool applies = c.layout.moe_dispatcher == MoeDispatcher::kAllToAll && c.layout.expert_parallel > 1;
    CHECK(c.layout.overlap_moe_ep_comm == applies);
    on += applies ? 1 : 0;
    const auto again = predict_megatron(small_moe(), c.layout, topology, false);
    REQUIRE(again.ok());
    CHECK(again->iteration_time == c.iteration_time);
    CHECK(again->memory.peak() == c.peak_memory);
  }
  CHECK(on > 0);
  // --delay-wgrad-compute asked too: on exactly the layouts with the overlap.
  fixed.delay_wgrad_compute = true;
  const auto delayed = search_megatron_layouts(small_moe(), 64, true, fixed, topology, 1000000);
  REQUIRE(delayed.ok());
  int late = 0;
  for (const MegatronCandidate& c : delayed->best) {
    CHECK(c.layout.delay_wgrad_compute == c.layout.overlap_moe_ep_comm);
    late += c.layout.delay_wgrad_compute ? 1 : 0;
  }
  CHECK(late == on);
}

}  // namespace
}  // namespace baton
