// The mixture of experts' flags against the model and the layout
// (sim/megatron.h's check_experts, check_megatron_layout's part).
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "sim/megatron.h"

namespace baton {

namespace {

// The largest --num-experts check_experts takes (DeepSeek-V3 has 256), and
// the largest capacity factor (one beyond E / k pads every expert to every token).
constexpr int64_t kMaxGptExperts = int64_t{1} << 14;
constexpr double kMaxCapacityFactor = 1024.0;

// --moe-router-num-groups g and --moe-router-group-topk K, as Megatron-core's
// TransformerConfig checks them (K needs g, g divides E, K <= g), and two
// more its group_limited_topk needs to route as documented: a group is
// scored by its top k / K experts (K <= k), and the K groups hold k experts.
Status check_group_limited_routing(const GptModel& model) {
  const int64_t g = model.router_groups, groups_k = model.router_group_topk, k = model.router_topk;
  if (g < 0) return Error{"--moe-router-num-groups must be at least 1"};
  if (groups_k < 0) return Error{"--moe-router-group-topk must be at least 1"};
  if (g > model.experts)
    return Error{fmt::format("--moe-router-num-groups {} must be at most --num-experts {}: a group holds whole experts",
                             g, model.experts)};
  if (g > 0 && model.experts % g != 0)
    return Error{fmt::format("--num-experts {} is not divisible by --moe-router-num-groups {}, as Megatron requires",
                             model.experts, g)};
  if (groups_k == 0) return ok_status();
  if (g == 0) return Error{"--moe-router-group-topk needs --moe-router-num-groups, as Megatron requires"};
  if (groups_k > g)
    return Error{fmt::format("--moe-router-group-topk {} must be at most --moe-router-num-groups {}", groups_k, g)};
  if (groups_k > k)
    return Error{fmt::format(
        "--moe-router-group-topk {} must be at most --moe-router-topk {}: Megatron scores a group by its top k / K "
        "experts' scores, none at K > k",
        groups_k, k)};
  if (k > groups_k * (model.experts / g))
    return Error{
        fmt::format("--moe-router-topk {} is more than the {} experts of --moe-router-group-topk {} groups of "
                    "{}: a token's experts come from its groups",
                    k, groups_k * (model.experts / g), groups_k, model.experts / g)};
  return ok_status();
}

}  // namespace

// --num-experts and --expert-model-parallel-size: whole experts on each
// expert-parallel rank, taken from the d c ranks that share the weights.
Status check_experts(const GptModel& model, const MegatronLayout& layout) {
  const int ep = layout.expert_parallel;
  if (ep < 1) return Error{"--expert-model-parallel-size must be at least 1"};
  if (model.experts < 0) return Error{"--num-experts must be at least 1"};
  if (model.shared_expert_ffn < 0) return Error{"--moe-shared-expert-intermediate-size must be at least 1"};
  if (!model.moe()) {
    if (ep > 1) return Error{fmt::format("--expert-model-parallel-size {} needs --num-experts", ep)};
    if (layout.expert_tensor > 0 && layout.expert_tensor != layout.tensor)
      return Error{fmt::format("--expert-tensor-parallel-size {} needs --num-experts", layout.expert_tensor)};
    if (model.grouped_gemm) return Error{"--moe-grouped-gemm needs --num-experts"};
    if (model.moe_ffn_hidden > 0) return Error{"--moe-ffn-hidden-size needs --num-experts"};
    if (model.shared_expert_ffn > 0) return Error{"--moe-shared-expert-intermediate-size needs --num-experts"};
    if (model.capacity_factor != 0.0) return Error{"--moe-expert-capacity-factor needs --num-experts"};
    if (model.pad_to_capacity) return Error{"--moe-pad-expert-input-to-capacity needs --num-experts"};
    if (model.router_groups != 0) return Error{"--moe-router-num-groups needs --num-experts"};
    if (model.router_group_topk != 0) return Error{"--moe-router-group-topk needs --num-experts"};
    if (model.fp32_router) return Error{"--moe-router-dtype needs --num-experts"};
    if (model.moe_layer_freq != 1 || !model.moe_layer_pattern.empty())
      return Error{"--moe-layer-freq needs --num-experts"};
    return ok_status();
  }
  if (model.shared_expert_ffn > kMaxGptHidden * 8)
    return Error{fmt::format("--moe-shared-expert-intermediate-size must be at most {}, got {}", kMaxGptHidden * 8,
                             model.shared_expert_ffn)};
  if (model.moe_layer_pattern.empty() && (model.moe_layer_freq < 1 || model.moe_layer_freq > model.layers))
    return Error{
        fmt::format("--moe-layer-freq {} must be between 1 and --num-layers {}", model.moe_layer_freq, model.layers)};
  if (!model.moe_layer_pattern.empty()) {
    if (static_cast<int64_t>(model.moe_layer_pattern.size()) != model.layers)
      return Error{fmt::format("--moe-layer-freq's pattern has {} entries for --num-layers {}: one per layer",
                               model.moe_layer_pattern.size(), model.layers)};
    if (std::any_of(model.moe_layer_pattern.begin(), model.moe_layer_pattern.end(), [](uint8_t v) { return v > 1; }))
      return Error{"--moe-layer-freq's pattern takes 1 (a MoE block) and 0 (a dense one)"};
    if (model.moe_blocks() == 0) return Error{"--moe-layer-freq's pattern has no MoE block (no 1)"};
  }
  if (model.experts > kMaxGptExperts)
    return Error{fmt::format("--num-experts must be at most {}, got {}", kMaxGptExperts, model.experts)};
  if (!(model.capacity_factor >= 0.0 && model.capacity_factor <= kMaxCapacityFactor))  // NaN too
    return Error{fmt::format("--moe-expert-capacity-factor must be greater than 0 and at most {}, got {}",
                             kMaxCapacityFactor, model.capacity_factor)};
  if (model.pad_to_capacity && model.capacity_factor <= 0.0)
    return Error{"--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor, as Megatron does"};
  if (model.router_topk < 1 || model.router_topk > model.experts)
    return Error{
        fmt::format("--moe-router-topk {} must be between 1 and --num-experts {}", model.router_topk, model.experts)};
  if (auto routing = check_group_limited_routing(model); !routing) return routing;
  if (model.moe_ffn_hidden < 0) return Error{"--moe-ffn-hidden-size must be at least 1"};
  if (model.moe_ffn_hidden > kMaxGptHidden * 8)
    return Error{
        fmt::format("--moe-ffn-hidden-size must be at most {}, got {}", kMaxGptHidden * 8, model.moe_ffn_hidden)};
  if (model.experts % ep != 0)
    return Error{fmt::format(
        "--num-experts {} is not divisible by --expert-model-parallel-size {}: each rank holds whole experts",
        model.experts, ep)};
  const int etp = layout.expert_tensor_parallel();
  if (layout.expert_tensor < 0) return Error{"--expert-tensor-parallel-size must be at least 1"};
  if (layout.expert_tensor == layout.tensor || layout.expert_tensor == 0) {
    if (layout.replicas() % ep != 0)
      return Error{fmt::format(
          "--expert-model-parallel-size {} does not divide the {} ranks that share each pipeline rank's weights "
          "(--data-parallel-size {}{}): the experts are split among them",
          ep, layout.replicas(), layout.data,
          layout.context > 1 ? fmt::format(" x --context-parallel-size {}", layout.context) : std::string())};
  } else if (int64_t{layout.tensor} * layout.replicas() % (int64_t{etp} * ep) != 0) {
    return Error{fmt::format(
        "--expert-tensor-parallel-size {} x --expert-model-parallel-size {} does not divide the {} GPUs of a "
        "pipeline rank (t c d): the experts' grid is laid over them",
        etp, ep, layout.tensor * layout.replicas())};
  }
  if (model.expert_ffn() % etp != 0)
    return Error{fmt::format("--{} {} is not divisible by --expert-tensor-parallel-size {}",
                             model.moe_ffn_hidden > 0 ? "moe-ffn-hidden-size" : "ffn-hidden-size", model.expert_ffn(),
                             etp)};
  if (layout.tensor > 1 && !layout.sequence_parallel)
    return Error{
        fmt::format("--num-experts with --tensor-model-parallel-size {} needs --sequence-parallel, as Megatron does",
                    layout.tensor)};
  return ok_status();
}

}  // namespace baton
