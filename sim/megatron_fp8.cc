#include "sim/megatron_fp8.h"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "sim/gpu_model.h"
#include "sim/megatron.h"

namespace baton {

namespace {

// One operand dimension an FP8 GEMM needs a multiple of `multiple`.
struct Dimension {
  int64_t value;
  int64_t multiple;
  std::string what;
};

std::vector<Dimension> fp8_dimensions(const GptModel& model, const MegatronLayout& layout) {
  const int64_t t = layout.tensor;
  const int64_t tokens = static_cast<int64_t>(layout.micro_batch) * layout.local_sequence(model);
  const int64_t h = model.hidden, a = model.heads;
  std::vector<Dimension> dims = {{tokens, 8, "a microbatch's tokens on a rank, b s / c"},
                                 {layout.sequence_parallel ? tokens / t : tokens, 8,
                                  "the column-parallel linears' input rows, b s / (c t) with --sequence-parallel"},
                                 {h, 16, "--hidden-size, the QKV's and the MLP's input width"}};
  if (model.mla) {
    const int64_t qk = model.qk_head_dim + model.qk_pos_head_dim;
    if (model.q_lora_rank > 0)
      dims.push_back({model.q_lora_rank, 16, "--q-lora-rank, the query up projection's input"});
    dims.push_back({model.kv_lora_rank, 16, "--kv-lora-rank, the key and value up projection's input"});
    dims.push_back({model.kv_lora_rank + model.qk_pos_head_dim, 8,
                    "--kv-lora-rank + --qk-pos-emb-head-dim, the key and value down projection's rows"});
    dims.push_back({a * qk / t, 8, "the queries' width per rank, a (dn + dr) / t"});
    dims.push_back({a * model.v_head_dim / t, 16, "the output projection's input per rank, a dv / t"});
  } else {
    dims.push_back({(model.query_width() + 2 * model.kv_hidden()) / t, 8, "the QKV's width per rank, (a + 2 G) d / t"});
    dims.push_back({model.query_width() / t, 16, "the output projection's input per rank, a d / t"});
  }
  const int64_t mlp_t = model.moe() ? layout.expert_tensor_parallel() : t;
  const char* mlp = model.moe() ? "an expert's width per rank, --moe-ffn-hidden-size / etp"
                                : "the MLP's width per rank, --ffn-hidden-size / t";
  dims.push_back({model.expert_ffn() / mlp_t, 16, mlp});
  if (model.moe() && model.moe_blocks() < model.layers)
    dims.push_back({model.ffn() / t, 16, "the dense blocks' MLP width per rank, --ffn-hidden-size / t"});
  if (model.moe() && model.shared_expert_ffn > 0)
    dims.push_back({model.shared_expert_ffn / t, 16,
                    "the shared expert's width per rank, --moe-shared-expert-intermediate-size / t"});
  if (model.mtp_layers > 0) dims.push_back({h / t, 8, "eh_proj's width per rank, h / t"});
  return dims;
}

}  // namespace

Status check_fp8(const GptModel& model, const MegatronLayout& layout) {
  if (!model.uses_fp8()) {
    if (model.fp8_recipe != Fp8Recipe::kDelayed)
      return Error{
          fmt::format("--fp8-recipe {} needs --fp8-format (e4m3 or hybrid)", fp8_recipe_name(model.fp8_recipe))};
    if (model.fp8_param_gather) return Error{"--fp8-param-gather needs --fp8-format (e4m3 or hybrid)"};
    if (model.bf16_end_blocks()) return Error{"--first-last-layers-bf16 needs --fp8-format (e4m3 or hybrid)"};
    return ok_status();
  }
  switch (model.fp8_recipe) {
    case Fp8Recipe::kDelayed:
    case Fp8Recipe::kTensorwise: break;
    case Fp8Recipe::kMxfp8:
      return Error{
          "--fp8-recipe mxfp8 runs on Blackwell GPUs only, which baton has no model of: delayed or tensorwise"};
    case Fp8Recipe::kBlockwise:
    case Fp8Recipe::kCustom:
      return Error{fmt::format("--fp8-recipe {} is not modelled: delayed (the default) or tensorwise",
                               fp8_recipe_name(model.fp8_recipe))};
  }
  if (model.fp8_param_gather && !layout.distributed_optimizer)
    return Error{
        "--fp8-param-gather needs --use-distributed-optimizer (Megatron's distributed optimizer gathers the "
        "FP8 weights)"};
  if (model.bf16_end_blocks()) {
    if (model.fp8_recipe == Fp8Recipe::kDelayed)
      return Error{
          "--first-last-layers-bf16 needs --fp8-recipe tensorwise: delayed scaling does not support "
          "first or last blocks in bf16 (Megatron-core refuses it)"};
    const int64_t most = model.layers / std::max(1, layout.pipeline);
    for (const auto& [count, flag] : {std::pair{model.bf16_first_blocks, "--num-layers-at-start-in-bf16"},
                                      std::pair{model.bf16_last_blocks, "--num-layers-at-end-in-bf16"}})
      if (count > most)
        return Error{fmt::format("{} {} is more than the {} layers of a pipeline stage (Megatron-core's bound)", flag,
                                 count, most)};
  }
  for (const Dimension& dim : fp8_dimensions(model, layout))
    if (dim.value % dim.multiple != 0)
      return Error{fmt::format(
          "--fp8-format {}: Transformer Engine's FP8 GEMMs need every operand's rows a multiple of 8 and its width a "
          "multiple of 16, and {} is {}, not a multiple of {}",
          fp8_format_name(model.fp8), dim.what, dim.value, dim.multiple)};
  return ok_status();
}

Status check_fp8_gpu(const GptModel& model, const GpuModel& gpu) {
  if (!model.uses_fp8() || gpu.fp8_tflops > 0.0) return ok_status();
  return Error{fmt::format("--fp8-format {}: the {} has no FP8 tensor cores (Hopper's H100 and H200 have them)",
                           fp8_format_name(model.fp8), gpu.name)};
}

}  // namespace baton
