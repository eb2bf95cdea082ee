#include "planner/megatron_overlaps.h"

#include <utility>

namespace baton {

namespace {

// The chosen layout with each overlap it lacks, with the flags that add it;
// check_megatron_layout then drops those that do not apply (Megatron's and
// baton's rules: sequence parallelism for --tp-comm-overlap, the alltoall
// dispatcher and a shared expert for --moe-shared-expert-overlap, ...).
std::vector<std::pair<std::string, MegatronLayout>> candidates(const MegatronLayout& chosen) {
  std::vector<std::pair<std::string, MegatronLayout>> out;
  auto add = [&](std::string flags, auto&& set) {
    MegatronLayout l = chosen;
    set(l);
    out.emplace_back(std::move(flags), l);
  };
  // Megatron asks --overlap-param-gather with --overlap-grad-reduce; with
  // one replica there is nothing to reduce.
  if (chosen.replicas() > 1 && !chosen.overlap_grad_reduce) {
    if (chosen.distributed_optimizer)
      add("--overlap-grad-reduce --overlap-param-gather",
          [](MegatronLayout& l) { l.overlap_grad_reduce = l.overlap_param_gather = true; });
    else
      add("--overlap-grad-reduce", [](MegatronLayout& l) { l.overlap_grad_reduce = true; });
  } else if (chosen.overlap_grad_reduce && chosen.distributed_optimizer && !chosen.overlap_param_gather) {
    add("--overlap-param-gather", [](MegatronLayout& l) { l.overlap_param_gather = true; });
  }
  if (!chosen.tp_comm_overlap) add("--tp-comm-overlap", [](MegatronLayout& l) { l.tp_comm_overlap = true; });
  if (!chosen.moe_shared_expert_overlap)
    add("--moe-shared-expert-overlap", [](MegatronLayout& l) { l.moe_shared_expert_overlap = true; });
  if (!chosen.overlap_moe_ep_comm)
    add("--overlap-moe-expert-parallel-comm", [](MegatronLayout& l) { l.overlap_moe_ep_comm = true; });
  if (!chosen.delay_wgrad_compute)
    add("--delay-wgrad-compute", [](MegatronLayout& l) { l.delay_wgrad_compute = true; });
  return out;
}

}  // namespace

Result<std::vector<OverlapOption>> overlaps_not_asked(const GptModel& model, const MegatronLayout& chosen,
                                                      const Topology& topology) {
  std::vector<OverlapOption> options;
  for (auto& [flags, layout] : candidates(chosen)) {
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
