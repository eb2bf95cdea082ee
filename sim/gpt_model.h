// A GPT model as Megatron-LM and Megatron-core build it (sim/megatron.h
// lays it out and sim/megatron_sim.h predicts it).
//
// A GptModel is Megatron-LM's GPT: `layers` pre-LayerNorm transformer blocks
// of width h with a heads and a 4h MLP, sequence s, learned position
// embeddings, a vocabulary padded to a multiple of 128 x t (Megatron's
// --make-vocab-size-divisible-by 128 times the tensor-parallel size) and an
// output layer tied to the word embedding. Megatron-core's architecture flags
// make it the decoders trained today (Llama's kind): --ffn-hidden-size, a
// gated SwiGLU MLP (--swiglu: the up projection 2 x ffn wide, SiLU times the
// gate), grouped-query attention (--group-query-attention
// --num-query-groups G: keys and values for G groups of a / G heads), no
// linear biases (--disable-bias-linear), an output layer of its own
// (--untie-embeddings-and-output-weights), rotary positions
// (--position-embedding-type rope: no position table), RMSNorm
// (--normalization RMSNorm: a weight, no bias), and FlashAttention
// (--use-flash-attn: the attention core in one kernel, no s x s scores kept).
// Mixture of experts (Megatron-core's MoE, as Mixtral and its kind): every
// block's MLP becomes E experts (--num-experts), each an MLP of width F
// (--moe-ffn-hidden-size, default f, gated with --swiglu), and a router, an
// h x E linear without bias whose top k (--moe-router-topk) experts take
// each token; routing is taken as balanced (the auxiliary loss's aim), each
// expert receiving k / E of the tokens. A shared expert
// (--moe-shared-expert-intermediate-size S, DeepSeek's and Qwen's) is a
// dense MLP of width S beside them that every token passes through.
// --moe-layer-freq makes only some blocks MoE blocks (the others keep the
// dense MLP of width f): every N-th from the first, or a pattern of 0s and
// 1s, one per layer.
// Multi-latent attention (--multi-latent-attention, DeepSeek-V2's and V3's,
// as Megatron-core 0.14 and later build it): the queries from a latent of
// width q_lora (--q-lora-rank; without it straight from the h input), the
// keys and values from one latent of width kv_lora (--kv-lora-rank), each
// head's query and key dn + dr wide (--qk-head-dim dn, --qk-pos-emb-head-dim
// dr: a rotary part whose key is one for all heads) and its value dv
// (--v-head-dim). The down projections to the latents (h x q_lora, h x
// (kv_lora + dr)) are whole on every tensor-parallel rank, the up projections
// (q_lora x a (dn + dr), kv_lora x a (dn + dv)) and the output projection
// (a dv x h) split as Megatron's column- and row-parallel linears are.
// --qk-layernorm adds the latents' RMSNorms (for standard attention, the
// queries' and keys' per head).
//
// Its parameters:
//   parameters = L (12 h^2 + 13 h) + V h + s h + 2 h   (Megatron's count:
//     blocks, word and position embeddings, the final LayerNorm); in general
//     a block holds P_lin = h (h + 2 h G / a) + h^2 + (2 or 3 gated) h f
//     linear weights (f the MLP's width, G the query groups; with
//     --kv-channels d each h / a above is d and the h^2 a d h), their biases
//     (h + 2 h G / a + h + (1 or 2) f + h, none without bias) and two norms
//     (2 h each, h for RMSNorm); the position table (s h) only with learned
//     positions, a second V h with an untied output layer; with experts the
//     MLP's (2 or 3) h f and its biases are E x (2 or 3) h F and E x ((1 or
//     2) F + h), and the router adds h E
//   multi-token prediction's parameters: D (a block + 2 h^2 + three norms)
// Thread safety: plain values and pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/megatron_fp8.h"

namespace baton {

// The largest model dimensions check_megatron_layout takes (2^16 layers,
// hidden 2^18, 2^20 tokens of sequence, a vocabulary of 2^24, micro-batch
// 2^20, 2^10 context-parallel ranks): far beyond any model trained, and small
// enough that its parameters count in int64 bytes.
inline constexpr int64_t kMaxGptLayers = int64_t{1} << 16;
inline constexpr int64_t kMaxGptHidden = int64_t{1} << 18;
inline constexpr int64_t kMaxGptSequence = int64_t{1} << 20;
inline constexpr int64_t kMaxGptVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxGptMicroBatch = int64_t{1} << 20;
inline constexpr int kMaxGptContext = 1 << 10;  // context-parallel ranks

struct GptModel {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t sequence = 0;
  int64_t vocab = 50257;  // GPT-2's BPE vocabulary
  // The architecture beyond GPT-3's (above); the defaults are GPT's.
  int64_t ffn_hidden = 0;    // --ffn-hidden-size f; 0: 4h
  int64_t query_groups = 0;  // --num-query-groups G; 0: a (a group per head)
  // --kv-channels d, a head's width (0: h / a, Megatron's default): the
  // queries a d wide, the keys and values G d, the output projection's input
  // a d (Qwen3's MoE models: h 2048, 32 heads of 128). Multi-latent attention
  // has its own widths and ignores it, as Megatron does.
  int64_t kv_channels = 0;
  bool swiglu = false;           // --swiglu
  bool linear_bias = true;       // false: --disable-bias-linear
  bool tied_output = true;       // false: --untie-embeddings-and-output-weights
  bool rope = false;             // --position-embedding-type rope (else learned_absolute)
  bool rms_norm = false;         // --normalization RMSNorm (else LayerNorm)
  bool flash_attention = false;  // --use-flash-attn
  // --attention-dropout and --hidden-dropout (Megatron's defaults 0.1; Llama-
  // style runs train with 0): at 0 no dropout mask is kept (PyTorch's dropout
  // returns its input), the attention's scores' 1 byte each and the hidden
  // states' two of 1 byte each; time taken as the same.
  double attention_dropout = 0.1;
  double hidden_dropout = 0.1;
  // --max-position-embeddings P (Megatron requires P >= s; 0: s): the
  // learned position table's rows (none with rotary positions).
  int64_t max_positions = 0;
  // --make-vocab-size-divisible-by (Megatron's 128): the vocabulary padded to
  // a multiple of it times t.
  int64_t vocab_divisor = 128;
  // false: --no-masked-softmax-fusion, Megatron's softmax unfused whatever
  // the scores' shape (FlashAttention's is in its kernel either way).
  bool softmax_fusion = true;
  // false: --no-rope-fusion, the rotary positions applied by Megatron-core's
  // PyTorch ops (sim/megatron_rope.h) instead of one fused kernel each for the
  // queries and the keys. Megatron turns the fusion off without rotary
  // positions; so does baton (true there: nothing to fuse).
  bool rope_fusion = true;
  // false: --no-bias-swiglu-fusion, a SwiGLU MLP's activation by PyTorch's
  // ops instead of Megatron-core's fused kernel (sim/megatron_activation.h);
  // with GeLU and biases --no-bias-gelu-fusion, the bias added apart. GeLU
  // without biases: true (Megatron turns the fusion off there, and one GeLU
  // kernel runs either way).
  bool activation_fusion = true;
  // false: --no-bias-dropout-fusion, the bias, the dropout and the residual
  // addition after the attention and after the MLP as separate PyTorch ops
  // (sim/megatron_activation.h's unfused_bias_dropout_add).
  bool bias_dropout_fusion = true;
  // --cross-entropy-loss-fusion (Megatron-core's native implementation,
  // --cross-entropy-fusion-impl native): the loss's fp32 passes over the
  // logits fused into fewer kernels (sim/megatron_ends.cc has the bytes).
  bool cross_entropy_fusion = false;
  // With cross_entropy_fusion, --cross-entropy-fusion-impl te: Transformer
  // Engine's fused cross entropy (its Triton kernels) in place of the native
  // one. Megatron-core runs it (with a warning) and Megatron-Bridge's
  // performance recipes set it; Megatron-LM's training refuses it, and so
  // does baton's command line (the plan file and the model take it).
  bool te_cross_entropy = false;
  // --fp16-lm-cross-entropy (with --fp16): the unfused loss's passes in half
  // precision, without the casts to fp32 and back.
  bool half_loss = false;
  // Mixture of experts (Megatron-core's MoE layers; GptModel's comment above
  // has the parts): E experts of width F in every block's MLP, top-k routing.
  int64_t experts = 0;      // --num-experts E; 0: a dense MLP
  int64_t router_topk = 2;  // --moe-router-topk k (Megatron's default 2)
  // --moe-router-dtype fp32 (false: the input's dtype, Megatron's default):
  // the router's logits, softmax and top-k in fp32. Megatron-core's
  // router_gating_linear computes the logits from bf16 operands into fp32
  // and, in the backward, casts the input and the weight to fp32 for the two
  // gradient GEMMs (fp32 operands: TF32 in Transformer Engine's GEMM) and
  // the gradients back to bf16.
  bool fp32_router = false;
  // Group-limited routing (--moe-router-num-groups g, --moe-router-group-topk
  // K; 0: none, Megatron's None): the E experts in g groups of E / g in
  // order, a token's k experts taken from the K groups it scores highest.
  // DeepSeek-V3's node-limited routing is g the servers of the expert group,
  // K = 4. Without K, g alone changes nothing (as in Megatron).
  int64_t router_groups = 0;
  int64_t router_group_topk = 0;
  int64_t moe_ffn_hidden = 0;     // --moe-ffn-hidden-size F; 0: the MLP's width f
  bool grouped_gemm = false;      // --moe-grouped-gemm: the local experts in one kernel
  int64_t shared_expert_ffn = 0;  // --moe-shared-expert-intermediate-size S; 0: none
  // --moe-layer-freq: an integer N (every N-th block from block 0 a MoE
  // block), or a pattern (moe_layer_pattern: 1 a MoE block, 0 a dense one,
  // one per layer; then moe_layer_freq is 0).
  int64_t moe_layer_freq = 1;
  std::vector<uint8_t> moe_layer_pattern = {};
  // Token dropping (Megatron-core's --moe-expert-capacity-factor C; 0:
  // dropless, its default): each expert takes at most C k T / E of a rank's
  // T tokens' k copies; with --moe-pad-expert-input-to-capacity exactly that
  // many, padded.
  double capacity_factor = 0.0;
  bool pad_to_capacity = false;
  // Multi-latent attention (above), with Megatron's defaults.
  bool mla = false;              // --multi-latent-attention
  int64_t q_lora_rank = 0;       // --q-lora-rank; 0: none (the queries straight from h)
  int64_t kv_lora_rank = 32;     // --kv-lora-rank
  int64_t qk_head_dim = 128;     // --qk-head-dim dn
  int64_t qk_pos_head_dim = 64;  // --qk-pos-emb-head-dim dr
  int64_t v_head_dim = 128;      // --v-head-dim dv
  bool qk_layernorm = false;     // --qk-layernorm
  // Multi-token prediction (--mtp-num-layers D, DeepSeek-V3's, as Megatron-
  // core 0.12 and later build it; 0: none): after the last block, D depths
  // one after another on the last pipeline stage, each an embedding lookup of
  // the tokens shifted once more, its norm and the incoming hidden state's
  // (enorm, hnorm), eh_proj (a column-parallel [2h x h] without bias, its
  // output gathered over t), a transformer block of the last block's kind
  // (MoE or dense), a final norm, and the output layer (shared weights) with
  // its own cross entropy.
  int64_t mtp_layers = 0;
  // FP8 (--fp8-format, --fp8-recipe; sim/megatron_fp8.h): the blocks' linear
  // GEMMs on FP8 operands through Transformer Engine.
  Fp8Format fp8 = Fp8Format::kNone;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  // --fp8-param-gather: the blocks' weights held in FP8 (Transformer Engine's
  // FP8 parameters, the distributed optimizer gathering them), no bf16 copy.
  bool fp8_param_gather = false;
  // --first-last-layers-bf16 with --num-layers-at-start-in-bf16 and
  // --num-layers-at-end-in-bf16: the first and last blocks of the model in
  // bf16 (0 and 0: none).
  int64_t bf16_first_blocks = 0;
  int64_t bf16_last_blocks = 0;

  int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  // The learned position table's rows: P (s by default), none with rotary positions.
  int64_t position_rows() const { return rope ? 0 : (max_positions > 0 ? max_positions : sequence); }
  // Whether the model trains in FP8 (--fp8-format), and whether
  // --first-last-layers-bf16 keeps blocks at either end in bf16.
  bool uses_fp8() const { return fp8 != Fp8Format::kNone; }
  bool bf16_end_blocks() const { return bf16_first_blocks > 0 || bf16_last_blocks > 0; }
  // Whether block i (0-based) runs its linears in FP8: with --fp8-format, but
  // the first and last blocks --first-last-layers-bf16 keeps in bf16.
  bool fp8_block(int64_t i) const { return uses_fp8() && i >= bf16_first_blocks && i < layers - bf16_last_blocks; }
  // The same model with its blocks in bf16 (or in FP8) throughout.
  GptModel with_fp8_blocks(bool on) const {
    GptModel copy = *this;
    if (!on) copy.fp8 = Fp8Format::kNone;
    return copy;
  }
  bool moe() const { return experts > 0; }
  // The copies of each token the experts process under balanced routing: k
  // (dropless, or C >= 1 without padding: no expert exceeds its capacity),
  // k C padded to capacity, k C with C < 1 (the rest dropped); 1 without
  // experts. Megatron's FLOPs count k either way.
  double expert_copies() const {
    if (!moe()) return 1.0;
    const double k = static_cast<double>(router_topk);
    if (capacity_factor <= 0.0) return k;
    return k * (pad_to_capacity ? capacity_factor : std::min(capacity_factor, 1.0));
  }
  int64_t expert_ffn() const { return moe_ffn_hidden > 0 ? moe_ffn_hidden : ffn(); }
  // Whether tokens are routed within K of g expert groups (both flags given).
  bool group_limited() const { return moe() && router_groups > 0 && router_group_topk > 0; }
  // Whether block i (0-based) is a MoE block (every block of a model with
  // experts, unless --moe-layer-freq says otherwise).
  bool moe_block(int64_t i) const {
    if (!moe()) return false;
    if (!moe_layer_pattern.empty()) return i < static_cast<int64_t>(moe_layer_pattern.size()) && moe_layer_pattern[i];
    return moe_layer_freq > 0 && i % moe_layer_freq == 0;
  }
  // The MoE blocks among the L.
  int64_t moe_blocks() const {
    int64_t n = 0;
    for (int64_t i = 0; i < layers; ++i) n += moe_block(i) ? 1 : 0;
    return n;
  }
  // The model of a dense block of this one: no experts (its MLP of width f).
  GptModel dense_blocks() const {
    GptModel dense = *this;
    dense.experts = 0;
    dense.moe_ffn_hidden = dense.shared_expert_ffn = 0;
    dense.router_groups = dense.router_group_topk = 0;
    dense.grouped_gemm = false;
    dense.moe_layer_freq = 1;
    dense.moe_layer_pattern.clear();
    return dense;
  }
  // Whether multi-token prediction's blocks are MoE blocks: the last block's kind.
  bool mtp_moe() const { return moe_block(layers - 1); }
  // The model of a multi-token prediction depth's block: the last block's.
  GptModel mtp_block() const { return mtp_moe() ? *this : dense_blocks(); }
  int64_t groups() const { return query_groups > 0 ? query_groups : heads; }
  // A head's width d: --kv-channels, or h / a.
  int64_t head_dim() const { return kv_channels > 0 ? kv_channels : (heads > 0 ? hidden / heads : hidden); }
  // Width of the queries (and of the attention's output): a d, h by default.
  int64_t query_width() const { return heads > 0 ? heads * head_dim() : hidden; }
  // Width of the keys (and of the values): G d, h G / a by default.
  int64_t kv_hidden() const { return heads > 0 ? head_dim() * groups() : hidden; }
  // --kv-channels d as the model keeps it: 0 at h / a (the default) and with
  // multi-latent attention (which ignores it, as Megatron does).
  int64_t kept_kv_channels(int64_t d) const {
    return mla || (heads > 0 && hidden % heads == 0 && d == hidden / heads) ? 0 : d;
  }
  // Whether the loss runs Transformer Engine's fused cross entropy (the
  // implementation is used only with the fusion).
  bool te_loss() const { return cross_entropy_fusion && te_cross_entropy; }
  // Whether any of the fields above differs from GPT's.
  bool beyond_gpt() const {
    return ffn_hidden > 0 || query_groups > 0 || kv_channels > 0 || swiglu || !linear_bias || !tied_output || rope ||
           rms_norm || flash_attention || moe() || mla || qk_layernorm || mtp_layers > 0 || uses_fp8() ||
           attention_dropout != 0.1 || hidden_dropout != 0.1 || max_positions > 0 || vocab_divisor != 128 ||
           !softmax_fusion || !rope_fusion || !activation_fusion || !bias_dropout_fusion || cross_entropy_fusion ||
           half_loss || te_cross_entropy || fp32_router;
  }
};

// A Llama-style decoder in Megatron-core's flags: a SwiGLU MLP of width
// `ffn`, `groups` key-value groups (a group per head when equal to the
// heads), no biases, an untied output layer, rotary positions, RMSNorm;
// Megatron's own attention (FlashAttention is GptModel::flash_attention).
GptModel llama_style(int64_t layers, int64_t hidden, int64_t heads, int64_t groups, int64_t ffn, int64_t vocab,
                     int64_t sequence);

// One block's linear weights P_lin (above; with experts, every expert's, the
// shared expert's and the router's). These are a MoE block's for a model with
// experts: GptModel::dense_blocks gives the others'.
double gpt_block_linear_parameters(const GptModel& model);
// The linear weights one token passes through in a block: P_lin, but with
// experts the k it is routed to (not the router: Megatron's FLOPs count
// leaves it out).
double gpt_block_active_linear_parameters(const GptModel& model);
// With experts, one block's expert weights and biases (E of them), which
// expert parallelism splits and the expert-data-parallel ranks reduce; 0 for
// a dense MLP.
double gpt_block_expert_parameters(const GptModel& model);
// Multi-token prediction's parameters: per depth a block of the last
// block's kind, eh_proj (2 h^2) and three norms (enorm, hnorm, the final);
// the embedding and output weights are the model's own. 0 without.
double gpt_mtp_parameters(const GptModel& model);
// One block's parameters: P_lin, its biases and its two norms (and with
// --qk-layernorm the attention's own norms).
double gpt_block_parameters(const GptModel& model);
// The attention's linear weights: QKV and the output projection, h (h + 2 h
// G / a) + h^2 (with --kv-channels d: h (a d + 2 G d) + a d h); with
// multi-latent attention the down projections h q_lora and h (kv_lora + dr)
// (h a (dn + dr) in place of the first two terms without q_lora), the up
// projections q_lora a (dn + dr) and kv_lora a (dn + dv), and the output
// projection a dv h (sim/megatron_attention.cc).
double gpt_attention_weights(const GptModel& model);
// The attention's biases (none without them; multi-latent attention's output
// projection's alone) and --qk-layernorm's norms (the latents', or the
// queries' and keys' per head).
double gpt_attention_biases_and_norms(const GptModel& model);
// The weights a tensor-parallel rank holds whole, not split over t:
// multi-latent attention's down projections; 0 otherwise.
double gpt_block_unsplit_parameters(const GptModel& model);

// The vocabulary Megatron pads to: a multiple of --make-vocab-size-divisible-by (128) x t.
int64_t padded_vocab(const GptModel& model, int tensor);
// Megatron's parameter count (above), with the padded vocabulary.
double gpt_parameters(const GptModel& model, int tensor);
// The parameters one token passes through: with experts, the k of E it is
// routed to in each MoE block (Mixtral 8x7B's "13B active"); the parameters
// otherwise. gpt_parameters and megatron_model_flops count each block as
// what it is (MoE or dense, --moe-layer-freq).
double gpt_active_parameters(const GptModel& model, int tensor);

}  // namespace baton
