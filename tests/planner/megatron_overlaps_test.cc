// The overlaps a plan was not asked for (planner/megatron_overlaps.h): which
// apply to a layout, and that each is that layout with the overlap alone
// added, as the simulator predicts it.
#include <string>
#include <vector>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "planner/megatron_overlaps.h"

namespace baton {
namespace {

const GptModel kModel{16, 2048, 16, 1024, 50257};

std::vector<std::string> flags_of(const std::vector<OverlapOption>& options) {
  std::vector<std::string> out;
  for (const OverlapOption& o : options) out.push_back(o.flags);
  return out;
}

// `option` is `chosen` with `set` applied, and the simulator's figures for it.
template <typename Set>
void check_is(const OverlapOption& option, const GptModel& model, const MegatronLayout& chosen,
              const Topology& topology, Set set) {
  MegatronLayout expected = chosen;
  set(expected);
  const auto predicted = predict_megatron(model, expected, topology, false);
  REQUIRE(predicted.ok());
  CHECK(option.iteration_time == predicted->iteration_time);
  CHECK(option.peak_memory == predicted->memory.peak());
  CHECK(option.fits == predicted->memory.fits());
  CHECK(option.layout.overlap_grad_reduce == expected.overlap_grad_reduce);
  CHECK(option.layout.overlap_param_gather == expected.overlap_param_gather);
  CHECK(option.layout.tp_comm_overlap == expected.tp_comm_overlap);
  CHECK(option.layout.moe_shared_expert_overlap == expected.moe_shared_expert_overlap);
  CHECK(option.layout.overlap_moe_ep_comm == expected.overlap_moe_ep_comm);
}

TEST_CASE("overlaps not asked: the data-parallel and tensor-parallel overlaps of a dense layout",
          "[planner][megatron]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  MegatronLayout chosen = megatron_layout(4, 2, 4, 1, 64);
  chosen.sequence_parallel = true;
  chosen.distributed_optimizer = true;
  const auto base = predict_megatron(kModel, chosen, topology, false);
  REQUIRE(base.ok());
  const auto options = overlaps_not_asked(kModel, chosen, topology);
  REQUIRE(options.ok());
  // With the distributed optimizer the two data-parallel overlaps come
  // together, as Megatron asks them.
  CHECK(flags_of(*options) ==
        std::vector<std::string>{"--overlap-grad-reduce --overlap-param-gather", "--tp-comm-overlap"});
  check_is((*options)[0], kModel, chosen, topology,
           [](MegatronLayout& l) { l.overlap_grad_reduce = l.overlap_param_gather = true; });
  check_is((*options)[1], kModel, chosen, topology, [](MegatronLayout& l) { l.tp_comm_overlap = true; });
  // Overlapping the reduction hides part of it behind the backward pass, and
  // the all-gather behind the next forward: never slower, here faster (d 4
  // reduces a quarter of the model's gradients across servers).
  CHECK((*options)[0].iteration_time < base->iteration_time);

  // Without the distributed optimizer: the reduction alone.
  chosen.distributed_optimizer = false;
  const auto plain = overlaps_not_asked(kModel, chosen, topology);
  REQUIRE(plain.ok());
  CHECK(flags_of(*plain) == std::vector<std::string>{"--overlap-grad-reduce", "--tp-comm-overlap"});
  check_is((*plain)[0], kModel, chosen, topology, [](MegatronLayout& l) { l.overlap_grad_reduce = true; });

  // The reduction already overlapped: the all-gather is what is left.
  chosen.distributed_optimizer = chosen.overlap_grad_reduce = true;
  chosen.tp_comm_overlap = true;
  const auto gather = overlaps_not_asked(kModel, chosen, topology);
  REQUIRE(gather.ok());
  CHECK(flags_of(*gather) == std::vector<std::string>{"--overlap-param-gather"});
  check_is((*gather)[0], kModel, chosen, topology, [](MegatronLayout& l) { l.overlap_param_gather = true; });
}

TEST_CASE("overlaps not asked: none where nothing is reduced or split", "[planner][megatron]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  // d 1: no data-parallel reduction; no sequence parallelism: no
  // tensor-parallel overlap Megatron runs.
  const MegatronLayout chosen = megatron_layout(4, 8, 1, 1, 64);
  const auto options = overlaps_not_asked(kModel, chosen, topology);
  REQUIRE(options.ok());
  CHECK(options->empty());
}

TEST_CASE("overlaps not asked: the two MoE overlaps, each where Megatron runs it", "[planner][megatron]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  GptModel model = testing::small_moe(8, 8, 2);
  model.shared_expert_ffn = 2816;
  MegatronLayout chosen = megatron_layout(1, 2, 16, 1, 64);
  chosen.expert_parallel = 4;
  chosen.layers_per_virtual_stage = 2;
  chosen.moe_dispatcher = MoeDispatcher::kAllToAll;
  chosen.overlap_grad_reduce = true;  // nothing left of the data-parallel overlaps
  const auto options = overlaps_not_asked(model, chosen, topology);
  REQUIRE(options.ok());
  CHECK(flags_of(*options) ==
        std::vector<std::string>{"--moe-shared-expert-overlap", "--overlap-moe-expert-parallel-comm"});
  check_is((*options)[0], model, chosen, topology, [](MegatronLayout& l) { l.moe_shared_expert_overlap = true; });
  check_is((*options)[1], model, chosen, topology, [](MegatronLayout& l) { l.overlap_moe_ep_comm = true; });

  // Full recomputation: Megatron refuses the batch-level overlap with it.
  MegatronLayout full = chosen;
  full.recompute = Recompute::kFull;
  const auto recomputed = overlaps_not_asked(model, full, topology);
  REQUIRE(recomputed.ok());
  CHECK(flags_of(*recomputed) == std::vector<std::string>{"--moe-shared-expert-overlap"});

  // One MoE overlap on: the other is refused beside it.
  MegatronLayout shared = chosen;
  shared.moe_shared_expert_overlap = true;
  const auto beside = overlaps_not_asked(model, shared, topology);
  REQUIRE(beside.ok());
  CHECK(beside->empty());

  // The allgather dispatcher: neither applies.
  MegatronLayout gathered = chosen;
  gathered.moe_dispatcher = MoeDispatcher::kAllGather;
  const auto none = overlaps_not_asked(model, gathered, topology);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

}  // namespace
}  // namespace baton
