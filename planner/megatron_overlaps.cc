#include "planner/megatron_overlaps.h"

#include <utility>

namespace baton {

namespace {

// The chosen layout with each overlap it lacks, with the flags that add it.
std::vector<std::pair<std::string, MegatronLayout>> candidates(const GptModel& model, const MegatronLayout& chosen) {
  std::vector<std::pair<std::string, MegatronLayout>> out;
  auto add = [&](std::string flags, auto&& set) {
    MegatronLayout l = chosen;
    set(l);
    out.emplace_back(std::move(flags), l);
  };
  if (chosen.replicas() > 1 && !chosen.overlap_grad_reduce) {
    if (chosen.distributed_optimizer)
      add("--overlap-grad-reduce --overlap-param-gather",
          [](MegatronLayout& l) { l.overlap_grad_reduce = l.overlap_param_gather = true; });
    else
      add("--overlap-grad-reduce", [](MegatronLayout& l) { l.overlap_grad_reduce = true; });
  } else if (chosen.overlap_grad_reduce && chosen.distributed_optimizer && !chosen.overlap_param_gather) {
    add("--overlap-param-gather", [](MegatronLayout& l) { l.overlap_param_gather = true; });
  }
  if (chosen.sequence_parallel && !chosen.tp_comm_overlap)
    add("--tp-comm-overlap", [](MegatronLayout& l) { l.tp_comm_overlap = true; });
  const bool all_to_all = model.moe() && chosen.moe_dispatcher == MoeDispatcher::kAllToAll;
  // The two MoE overlaps exclude each other (Megatron refuses them together).
  const bool moe_overlap = chosen.moe_shared_expert_overlap || chosen.overlap_moe_ep_comm;
  if (all_to_all && !moe_overlap && model.shared_expert_ffn > 0)
    add("--moe-shared-expert-overlap", [](MegatronLayout& l) { l.moe_shared_expert_overlap = true; });
  if (all_to_all && !moe_overlap && chosen.expert_parallel > 1 && chosen.layers_per_virtual_stage > 0)
    add("--overlap-moe-expert-parallel-comm", [](MegatronLayout& l) { l.overlap_moe_ep_comm = true; });
  if (chosen.overlap_moe_ep_comm && !chosen.delay_wgrad_compute)
    add("--delay-wgrad-compute", [](MegatronLayout& l) { l.delay_wgrad_compute = true; });
  return out;
}

}  // namespace

Result<std::vector<OverlapOption>> overlaps_not_asked(const GptModel& model, const MegatronLayout& chosen,
                                                      const Topology& topology) {
  std::vector<OverlapOption> options;
  for (auto& [flags, layout] : candidates(model, chosen)) {
    // One Megatron or baton refuses with this layout (say, the batch-level
    // overlap with full recomputation) does not apply to it.
    if (!check_megatron_layout(model, layout, topology.num_devices())) continue;
    auto predicted = predict_megatron(model, layout, topology, false, nullptr, false);
    if (!predicted) return predicted.error();
    options.push_back({flags, layout, predicted->iteration_time, predicted->memory.peak(), predicted->memory.fits()});
  }
  return options;
}

}  // namespace baton
