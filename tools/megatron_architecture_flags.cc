// The architecture beyond GPT-3's in Megatron-core's flags: reading them
// (add_architecture_flags) and writing a model's back (architecture_flags),
// declared in tools/megatron_flags.h.
#include "tools/megatron_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tools/cli_support.h"

namespace baton::cli {

void add_architecture_flags(CLI::App& cmd, MegatronArgs& args, const std::string& group) {
  cmd.add_option("--ffn-hidden-size", args.model.ffn_hidden, "the MLP's width f (default 4h)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_flag("--swiglu", args.model.swiglu,
               "gated MLP: SiLU of one f-wide projection times another (Llama's), so three h x f weights")
      ->group(group);
  cmd.add_flag("--group-query-attention", args.group_query_attention,
               "keys and values shared by groups of heads (--num-query-groups of them)")
      ->group(group);
  cmd.add_option("--num-query-groups", args.query_groups,
                 "with --group-query-attention: key/value groups G, dividing the heads and divisible by t "
                 "(Megatron's default 1)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_flag("--disable-bias-linear", args.disable_bias_linear, "no biases in the linear layers")->group(group);
  cmd.add_flag("--untie-embeddings-and-output-weights", args.untie_embeddings,
               "an output layer with its own V x h weights (on the last stage), not the word embedding's")
      ->group(group);
  cmd.add_option("--position-embedding-type", args.position_embedding,
                 "learned_absolute (the default: a table of s x h) | rope (rotary: no table, a kernel on the queries "
                 "and keys)")
      ->check(CLI::IsMember({"learned_absolute", "rope"}))
      ->group(group);
  cmd.add_option("--normalization", args.normalization, "LayerNorm (the default) | RMSNorm (a weight, no bias)")
      ->check(CLI::IsMember({"LayerNorm", "RMSNorm"}))
      ->group(group);
  cmd.add_option("--attention-backend", args.attention_backend,
                 "Megatron-core's: flash, fused (cuDNN's) and auto run the attention core as FlashAttention does "
                 "(--use-flash-attn); unfused and local as Megatron's own attention (the default without the flag)")
      ->check(CLI::IsMember({"flash", "fused", "auto", "unfused", "local"}))
      ->group(group);
  cmd.add_flag("--use-flash-attn", args.model.flash_attention,
               "FlashAttention: the attention core as one kernel that keeps no s x s scores (baton's estimate, "
               "checked in FP8 runs on H100s only: docs/TRANSFORMERS.md)")
      ->group(group);
  cmd.add_flag("--qk-layernorm", args.model.qk_layernorm,
               "norms on the queries and keys (per head), or with --multi-latent-attention on its latents")
      ->group(group);
  cmd.add_flag("--multi-latent-attention", args.model.mla,
               "DeepSeek's multi-latent attention (Megatron-core's MLA): queries, keys and values from latents "
               "(baton's estimate, not checked against a measured run)")
      ->group(group);
  cmd.add_option("--q-lora-rank", args.model.q_lora_rank,
                 "with --multi-latent-attention: the queries' latent width (default: none, the queries from h)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--kv-lora-rank", args.model.kv_lora_rank,
                 "with --multi-latent-attention: the keys' and values' latent width (default 32, Megatron's)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--qk-head-dim", args.model.qk_head_dim,
                 "with --multi-latent-attention: a head's query and key width dn, without the rotary part "
                 "(default 128)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--qk-pos-emb-head-dim", args.model.qk_pos_head_dim,
                 "with --multi-latent-attention: the rotary part dr of a head's query and key, one key for all "
                 "heads (default 64)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--v-head-dim", args.model.v_head_dim,
                 "with --multi-latent-attention: a head's value width dv (default 128)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--num-experts", args.model.experts,
                 "mixture of experts: every block's MLP becomes E experts and a router (Megatron-core's MoE; "
                 "routing taken as balanced; baton's estimate, not checked against a measured run)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--attention-dropout", args.model.attention_dropout,
                 "dropout on the attention's scores (default 0.1, Megatron's); at 0 no mask is kept (without "
                 "FlashAttention the scores keep 2 of their 5 bytes)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd.add_option("--hidden-dropout", args.model.hidden_dropout,
                 "dropout on the attention's and the MLP's outputs (default 0.1, Megatron's; Llama-style runs "
                 "give 0); at 0 their two masks are not kept")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd.add_option("--max-position-embeddings", args.model.max_positions,
                 "the learned position table's rows P, at least --seq-length (Megatron requires the flag; default "
                 "here: the sequence); no table with --position-embedding-type rope")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--make-vocab-size-divisible-by", args.model.vocab_divisor,
                 "the vocabulary padded to a multiple of this times t (default 128, Megatron's)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_flag("--no-masked-softmax-fusion{false}", args.model.softmax_fusion,
               "Megatron's softmax unfused (in fp32, five kernels each way) whatever the scores' shape; no effect "
               "with FlashAttention")
      ->group(group);
  cmd.add_flag("--cross-entropy-loss-fusion", args.model.cross_entropy_fusion,
               "the loss's fp32 passes over the logits fused (Megatron-core's native kernels: 22 + 10 bytes per "
               "logit against 38 + 14 unfused)")
      ->group(group);
  cmd.add_flag("--fp16-lm-cross-entropy", args.model.half_loss,
               "with --fp16: the unfused loss's passes over the logits in half precision (16 + 4 bytes per logit), "
               "no casts to fp32 and back")
      ->group(group);
  cmd.add_option("--cross-entropy-fusion-impl", args.cross_entropy_impl,
                 "native (Megatron's default); te with --cross-entropy-loss-fusion is refused by Megatron-LM's "
                 "training, and here (without it the implementation is not used)")
      ->check(CLI::IsMember({"native", "te"}))
      ->group(group);
  cmd.add_option("--kv-channels", args.kv_channels,
                 "a head's width d (default --hidden-size / --num-attention-heads): the queries a d wide, the keys "
                 "and values (groups) x d, the output projection's input a d; ignored with --multi-latent-attention, "
                 "as in Megatron")
      ->check(at_least(1))
      ->group(group);
  cmd.add_flag("--use-rotary-position-embeddings", args.use_rotary,
               "Megatron's legacy spelling of --position-embedding-type rope (it takes precedence, as in Megatron)")
      ->group(group);
  cmd.add_flag("--no-rope-fusion{false}", args.model.rope_fusion,
               "rotary positions by PyTorch's ops, not one fused kernel: 6 kernels and 24 bytes a value forward, 5 and "
               "20 backward, for the queries and the keys each (no effect without rotary positions, as in Megatron)")
      ->group(group);
  cmd.add_flag(
         "--no-bias-swiglu-fusion", args.no_swiglu_fusion,
         "with --swiglu: SiLU and the product by PyTorch's ops, not one fused kernel (10 bytes an output value in "
         "2 kernels forward, 26 in 4 backward, SiLU's output kept; no effect without --swiglu, as in Megatron)")
      ->group(group);
  cmd.add_flag("--no-bias-gelu-fusion", args.no_gelu_fusion,
               "with GeLU and the linear layers' biases: the bias added by a kernel of its own before GeLU's; "
               "without biases no effect (Megatron turns the fusion off itself there)")
      ->group(group);
  cmd.add_flag("--no-bias-dropout-fusion{false}", args.model.bias_dropout_fusion,
               "the bias, the dropout and the residual's addition after the attention and the MLP as separate ops: "
               "forward 4 (with biases) + 5 (with dropout) + 6 bytes a value in up to 3 kernels where the fused one "
               "moves 6; the backward as fused")
      ->group(group);
  cmd.add_flag("--no-position-embedding", args.no_position_embedding,
               "with --position-embedding-type rope, as Megatron's example scripts give it: no effect (Megatron "
               "refuses it otherwise)")
      ->group(group);
  cmd.add_option("--moe-router-topk", args.model.router_topk, "with --num-experts: experts per token k (default 2)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--moe-router-dtype", args.router_dtype,
                 "with --num-experts: fp32 computes the router's logits, softmax and top-k in fp32 (its backward's "
                 "GEMMs on fp32 operands, TF32, and the casts to fp32 and back); default the input's dtype; fp64 is "
                 "not modelled")
      ->check(CLI::IsMember({"fp32", "fp64"}))
      ->group(group);
  cmd.add_option("--moe-router-num-groups", args.model.router_groups,
                 "with --num-experts: group-limited routing's g groups of E / g experts in order (DeepSeek-V3's "
                 "node-limited routing: the servers of the expert group); used with --moe-router-group-topk")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option(
         "--moe-router-group-topk", args.model.router_group_topk,
         "with --moe-router-num-groups: a token's k experts come from the K groups it scores highest (DeepSeek-V3: "
         "4), so DeepEP's flex dispatcher sends it to at most K of them")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--moe-ffn-hidden-size", args.model.moe_ffn_hidden,
                 "with --num-experts: each expert's width F (default --ffn-hidden-size)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_flag("--moe-grouped-gemm", args.model.grouped_gemm,
               "with --num-experts: a rank's experts in one grouped GEMM kernel (else one GEMM per expert)")
      ->group(group);
  cmd.add_option("--moe-shared-expert-intermediate-size", args.model.shared_expert_ffn,
                 "with --num-experts: a shared expert of this width S beside the routed ones, every token through "
                 "it (DeepSeek's, Qwen's; several shared experts: their widths summed)")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--moe-expert-capacity-factor", args.model.capacity_factor,
                 "with --num-experts: token dropping, each expert taking at most C k T / E of a rank's tokens' "
                 "copies (default: dropless); with balanced routing C < 1 drops the rest")
      ->check(above_and_at_most(0.0, 1024.0))
      ->group(group);
  cmd.add_flag("--moe-pad-expert-input-to-capacity", args.model.pad_to_capacity,
               "with --moe-expert-capacity-factor: every expert's input padded to its capacity (C k T / E tokens)")
      ->group(group);
  cmd.add_option("--mtp-num-layers", args.model.mtp_layers,
                 "multi-token prediction depths D (DeepSeek-V3's, Megatron-core 0.12 on): each a block of the last "
                 "block's kind and eh_proj on the last pipeline stage (or where --pipeline-model-parallel-layout puts "
                 "its m; balance it with --decoder-last-pipeline-num-layers), each its output layer and loss with "
                 "the model's")
      ->check(at_least(1))
      ->group(group);
  cmd.add_option("--fp8-format", args.fp8_format,
                 "FP8 through Transformer Engine on Hopper GPUs: e4m3, or hybrid (E5M2 gradients); the blocks' "
                 "linear GEMMs on FP8 operands at the FP8 peak, their inputs quantized and kept in FP8, the weights "
                 "cached in FP8 (checked against NVIDIA's published H100 throughput: docs/TRANSFORMERS.md, \"FP8\")")
      ->check(CLI::IsMember({"e4m3", "hybrid"}))
      ->group(group);
  cmd.add_option("--fp8-recipe", args.fp8_recipe,
                 "with --fp8-format: delayed (the default: scales from earlier iterations' maxima) or tensorwise "
                 "(each tensor's maximum taken first: another pass over it); blockwise, mxfp8 and custom are refused")
      ->check(CLI::IsMember({"delayed", "tensorwise", "blockwise", "mxfp8", "custom"}))
      ->group(group);
  cmd.add_flag("--fp8-param-gather", args.model.fp8_param_gather,
               "with --fp8-format and the distributed optimizer: the blocks' weights held in FP8 (no bf16 copy, no "
               "separate FP8 cache), only their transposes made each iteration")
      ->group(group);
  cmd.add_flag("--first-last-layers-bf16", args.first_last_bf16,
               "with --fp8-format and --fp8-recipe tensorwise: the model's first and last blocks in bf16 "
               "(--num-layers-at-start-in-bf16, --num-layers-at-end-in-bf16; 1 each by default)")
      ->group(group);
  cmd.add_option("--num-layers-at-start-in-bf16", args.bf16_at_start,
                 "with --first-last-layers-bf16: the first blocks kept in bf16 (default 1)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option("--num-layers-at-end-in-bf16", args.bf16_at_end,
                 "with --first-last-layers-bf16: the last blocks kept in bf16 (default 1)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option("--moe-layer-freq", args.moe_layer_freq,
                 "with --num-experts: which blocks are MoE blocks (the others dense, of width --ffn-hidden-size): N, "
                 "every N-th from the first (default 1: all), or a list of 0s and 1s as Megatron evaluates it, "
                 "e.g. \"([0]*3+[1]*58)\" or \"([1]*3+[0]*1)*3\"")
      ->group(group);
}

std::string architecture_flags(const GptModel& model) {
  std::string text;
  if (model.ffn_hidden > 0) text += fmt::format(" --ffn-hidden-size {}", model.ffn_hidden);
  if (model.swiglu) text += " --swiglu";
  if (model.query_groups > 0) text += fmt::format(" --group-query-attention --num-query-groups {}", model.query_groups);
  if (model.kv_channels > 0) text += fmt::format(" --kv-channels {}", model.kv_channels);
  if (!model.linear_bias) text += " --disable-bias-linear";
  if (!model.tied_output) text += " --untie-embeddings-and-output-weights";
  if (model.rope) text += " --position-embedding-type rope";
  if (model.rms_norm) text += " --normalization RMSNorm";
  if (model.flash_attention) text += " --use-flash-attn";
  if (model.attention_dropout != 0.1) text += fmt::format(" --attention-dropout {}", model.attention_dropout);
  if (model.hidden_dropout != 0.1) text += fmt::format(" --hidden-dropout {}", model.hidden_dropout);
  if (model.max_positions > 0) text += fmt::format(" --max-position-embeddings {}", model.max_positions);
  if (model.vocab_divisor != 128) text += fmt::format(" --make-vocab-size-divisible-by {}", model.vocab_divisor);
  if (!model.softmax_fusion) text += " --no-masked-softmax-fusion";
  if (!model.rope_fusion) text += " --no-rope-fusion";
  if (!model.activation_fusion) text += model.swiglu ? " --no-bias-swiglu-fusion" : " --no-bias-gelu-fusion";
  if (!model.bias_dropout_fusion) text += " --no-bias-dropout-fusion";
  if (model.cross_entropy_fusion) text += " --cross-entropy-loss-fusion";
  if (model.half_loss) text += " --fp16-lm-cross-entropy";
  if (model.qk_layernorm) text += " --qk-layernorm";
  if (model.mla) {
    text += " --multi-latent-attention";
    if (model.q_lora_rank > 0) text += fmt::format(" --q-lora-rank {}", model.q_lora_rank);
    text += fmt::format(" --kv-lora-rank {} --qk-head-dim {} --qk-pos-emb-head-dim {} --v-head-dim {}",
                        model.kv_lora_rank, model.qk_head_dim, model.qk_pos_head_dim, model.v_head_dim);
  }
  if (model.mtp_layers > 0) text += fmt::format(" --mtp-num-layers {}", model.mtp_layers);
  if (model.uses_fp8()) {
    text +=
        fmt::format(" --fp8-format {} --fp8-recipe {}", fp8_format_name(model.fp8), fp8_recipe_name(model.fp8_recipe));
    if (model.fp8_param_gather) text += " --fp8-param-gather";
    if (model.bf16_end_blocks())
      text += fmt::format(" --first-last-layers-bf16 --num-layers-at-start-in-bf16 {} --num-layers-at-end-in-bf16 {}",
                          model.bf16_first_blocks, model.bf16_last_blocks);
  }
  if (model.moe()) {
    text += fmt::format(" --num-experts {} --moe-router-topk {}", model.experts, model.router_topk);
    if (model.router_groups > 0) text += fmt::format(" --moe-router-num-groups {}", model.router_groups);
    if (model.router_group_topk > 0) text += fmt::format(" --moe-router-group-topk {}", model.router_group_topk);
    if (model.fp32_router) text += " --moe-router-dtype fp32";
    if (model.moe_ffn_hidden > 0) text += fmt::format(" --moe-ffn-hidden-size {}", model.moe_ffn_hidden);
    if (model.grouped_gemm) text += " --moe-grouped-gemm";
    if (model.shared_expert_ffn > 0)
      text += fmt::format(" --moe-shared-expert-intermediate-size {}", model.shared_expert_ffn);
    if (model.capacity_factor > 0.0) text += fmt::format(" --moe-expert-capacity-factor {}", model.capacity_factor);
    if (model.pad_to_capacity) text += " --moe-pad-expert-input-to-capacity";
    if (!model.moe_layer_pattern.empty())
      text += fmt::format(" --moe-layer-freq '[{}]'", fmt::join(model.moe_layer_pattern, ","));  // quoted for a shell
    else if (model.moe_layer_freq != 1)
      text += fmt::format(" --moe-layer-freq {}", model.moe_layer_freq);
  }
  return text;
}

}  // namespace baton::cli
