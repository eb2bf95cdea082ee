// `baton check` cases for GPT layouts (tools/cmd_check.cc): a "gpt" object
// in Megatron's argument names instead of "profile", planned by the layout
// search (planner/megatron_search.h) on the case's topology:
//   "gpt": {"num_layers", "hidden_size", "num_attention_heads", "seq_length",
//           "global_batch_size": int >= 1, optional "vocab_size" (default 50257),
//           optional architecture keys beyond GPT-3's (sim/megatron.h's
//           kGptArchitectureKeys: "ffn_hidden_size", "swiglu", ...),
//           optional "bf16": bool, optional "pinned": {optional
//           "tensor_model_parallel_size", "pipeline_model_parallel_size",
//           "micro_batch_size", "num_layers_per_virtual_pipeline_stage": int,
//           "recompute_granularity": "none"|"selective"|"full",
//           "sequence_parallel", "use_distributed_optimizer": bool,
//           "zero_bubble": "1f1b"|"zb-h1"|"zb-h2",
//           "v_schedule": "none"|"zbv"|"dualpipev",
//           "data_parallel_size", "gpus": int (plan's --data-parallel-size
//           and --gpus)}}
// and its expectation:
//   "expected": {"iteration_time_s": num, "layout": "t 8 p 8 d 4 b 1 v 4 recompute selective sp"}
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "planner/megatron_search.h"
#include "sim/json_fields.h"
#include "sim/megatron_arguments.h"
#include "sim/topology.h"

namespace baton::cli {

struct GptCheck {
  GptModel model;
  int global_batch = 0;
  bool bf16 = false;
  MegatronAxes pinned;
};

// Reads the "gpt" object; UsageError naming the file, the key and the value.
GptCheck read_gpt_check(const nlohmann::json& gpt, const json_fields::FieldPath& at);

// The layout in the form `plan` prints and the expectation holds.
std::string short_layout(const GptModel& model, const MegatronLayout& layout);

struct GptCheckResult {
  double iteration_time_s = 0.0;
  std::string layout;
};
// The search's best layout; Error when none fits.
Result<GptCheckResult> plan_gpt_check(const GptCheck& check, const Topology& topology);

}  // namespace baton::cli
