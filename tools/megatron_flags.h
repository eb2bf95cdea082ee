// Megatron-LM's own flags for a GPT model and its layout, shared by
// `baton simulate` and `baton profile analytic --arch gpt`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "planner/megatron_search.h"
#include "sim/megatron.h"
#include "sim/megatron_sim.h"
#include "sim/topology.h"

namespace baton::cli {

struct MegatronArgs {
  GptModel model{0, 0, 0, 0, 50257};
  int micro_batch = 1;
  int global_batch = 0;
  int tensor = 1;
  int pipeline = 1;
  int data = 0;  // 0: not given (the flag refuses 0), the topology's GPUs / (t p)
  int layers_per_virtual_stage = 0;
  int context = 1;               // --context-parallel-size
  int expert_parallel = 1;       // --expert-model-parallel-size
  int expert_tensor = 0;         // --expert-tensor-parallel-size; 0: t
  std::string moe_dispatcher;    // --moe-token-dispatcher-type: "" (allgather), allgather, alltoall, flex
  std::string flex_backend;      // --moe-flex-dispatcher-backend: "", deepep (hybridep, ncclep refused)
  bool enable_deepep = false;    // --moe-enable-deepep (Megatron-core 0.12's spelling of flex with deepep)
  std::string cp_comm_type;      // --cp-comm-type: "", p2p (others refused)
  std::string recompute;         // "", "selective", "full"
  std::string recompute_method;  // --recompute-method: "", uniform, block (refused)
  int recompute_layers = 0;      // --recompute-num-layers (0: not given, 1)
  bool sequence_parallel = false;
  bool fp16 = false;
  bool bf16 = false;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;   // --overlap-param-gather
  bool tp_comm_overlap = false;        // --tp-comm-overlap
  bool grad_reduce_in_bf16 = false;    // --grad-reduce-in-bf16
  bool shared_expert_overlap = false;  // --moe-shared-expert-overlap
  bool overlap_moe_ep_comm = false;    // --overlap-moe-expert-parallel-comm
  bool delay_wgrad = false;            // --delay-wgrad-compute
  bool zero_bubble = false;            // --enable-zero-bubble
  int zero_bubble_pending = 0;         // --zero-bubble-max-pending-backward (0: not given, p)
  bool zero_bubble_heuristic = false;  // --zero-bubble-heuristic
  bool zero_bubble_v = false;          // --zero-bubble-v-schedule (ZB-V)
  bool dualpipev = false;              // --dualpipev
  int first_stage_layers = 0;          // --decoder-first-pipeline-num-layers (0: not given, even)
  int last_stage_layers = 0;           // --decoder-last-pipeline-num-layers
  bool embedding_in_split = false;     // --account-for-embedding-in-pipeline-split
  bool loss_in_split = false;          // --account-for-loss-in-pipeline-split
  std::string pipeline_layout;         // --pipeline-model-parallel-layout: "" (the flags above split)
  // The architecture beyond GPT-3's (sim/megatron.h's GptModel; --ffn-hidden-size,
  // --swiglu and --use-flash-attn go into `model` directly).
  bool group_query_attention = false;  // --group-query-attention
  bool no_position_embedding = false;  // --no-position-embedding (only with rotary positions: no effect)
  bool use_rotary = false;             // --use-rotary-position-embeddings (Megatron's legacy spelling of rope)
  bool no_swiglu_fusion = false;       // --no-bias-swiglu-fusion (with --swiglu: unfused; else no effect)
  bool no_gelu_fusion = false;         // --no-bias-gelu-fusion (GeLU with biases: unfused; else no effect)
  int64_t kv_channels = 0;             // --kv-channels (0: not given, h / a)
  std::string router_dtype;            // --moe-router-dtype: "", fp32 (modelled), fp64 (refused)
  std::string
      cross_entropy_impl;    // --cross-entropy-fusion-impl: "", native, te (refused with the fusion, as Megatron does)
  int64_t query_groups = 0;  // --num-query-groups (0: not given; Megatron's default 1)
  bool disable_bias_linear = false;  // --disable-bias-linear
  bool untie_embeddings = false;     // --untie-embeddings-and-output-weights
  std::string position_embedding;    // --position-embedding-type: "", learned_absolute, rope
  std::string normalization;         // --normalization: "", LayerNorm, RMSNorm
  std::string attention_backend;     // --attention-backend: "", flash, fused, auto, unfused, local
  std::string moe_layer_freq;        // --moe-layer-freq: "" (every block), N, or a list expression
  std::string fp8_format;            // --fp8-format: "", e4m3, hybrid
  std::string fp8_recipe;            // --fp8-recipe: "" (delayed), Megatron-core's five names
  bool first_last_bf16 = false;      // --first-last-layers-bf16
  int bf16_at_start = -1;            // --num-layers-at-start-in-bf16 (-1: not given, 1)
  int bf16_at_end = -1;              // --num-layers-at-end-in-bf16
  // Megatron's training flags given that baton accepts and does not model
  // (tools/megatron_training_flags.h), by name.
  std::vector<std::string> not_modelled;

  // Whether any model flag was given (--num-layers and its kin).
  bool given() const { return model.layers != 0 || model.hidden != 0 || model.heads != 0 || model.sequence != 0; }
};

// The architecture flags that give `model` beyond GPT-3's, each with a space
// before it ("" for GPT): " --ffn-hidden-size 11008 --swiglu ...".
std::string architecture_flags(const GptModel& model);
// Adds those flags (Llama's kind of decoder, experts, multi-latent attention,
// FP8 ...) to `cmd` in `group`; add_megatron_flags calls it.
void add_architecture_flags(CLI::App& cmd, MegatronArgs& args, const std::string& group);

// Adds the flags to `cmd` (in a "Megatron GPT" group).
void add_megatron_flags(CLI::App& cmd, MegatronArgs& args);

// The flags of that group `cmd`'s command line gave, by name; and a UsageError
// naming them where `command` runs something else (`instead`: "--profile"),
// which would ignore them.
std::vector<std::string> given_megatron_flags(const CLI::App& cmd);
void refuse_megatron_flags(const CLI::App& cmd, std::string_view command, std::string_view instead = "--profile");

// The model and layout the flags give on `topology`; UsageError naming the flag
// for a missing model flag or an invalid layout (check_megatron_layout).
struct MegatronRun {
  GptModel model;
  MegatronLayout layout;
};
// --sequence-parallel at t 1 is turned off with a note on stderr, as Megatron
// turns it off.
MegatronRun megatron_run(const MegatronArgs& args, const Topology& topology);
// The same without the layout's check and with data 0 left as is (sweeps
// check each point's layout); UsageError for a missing model flag.
MegatronRun megatron_flags_unchecked(const MegatronArgs& args);

// The layout flags given on `cmd` as pinned search axes (`plan`, `sweep
// --plan`); UsageError for --data-parallel-size, which the GPUs decide.
MegatronAxes pinned_megatron_axes(const MegatronArgs& flags, const CLI::App& cmd);

}  // namespace baton::cli
