// Megatron-style GPT training: the model, its layout, and what baton predicts
// for it (sim/megatron_sim.h runs it).
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
// A MegatronLayout is one run's parallel layout in Megatron's own terms:
// tensor parallel t, pipeline parallel p, data parallel d, micro-batch b,
// global batch B (microbatches per iteration m = B / (b d)), optionally
// layers per virtual pipeline stage (interleaved 1F1B with v = L / (p x that)
// chunks per device), activation recomputation, sequence parallelism, fp16
// or bf16, the distributed optimizer, overlapped gradient reduction and
// context parallelism c (the sequence split over c ranks) and expert
// parallelism ep (the experts split over ep of the d c ranks that share a
// pipeline rank's weights).
// Ranks are placed as Megatron places them: tensor-parallel ranks innermost
// (consecutive devices), then context parallel, then data parallel, then
// pipeline; an expert-parallel group is ep consecutive tensor-parallel groups
// (Megatron-core's expert ranks tp-ep-dp-pp, with the experts' tensor
// parallelism that of the rest).
//
// Formulas used by every caller:
//   parameters = L (12 h^2 + 13 h) + V h + s h + 2 h   (Megatron's count:
//     blocks, word and position embeddings, the final LayerNorm); in general
//     a block holds P_lin = h (h + 2 h G / a) + h^2 + (2 or 3 gated) h f
//     linear weights (f the MLP's width, G the query groups), their biases
//     (h + 2 h G / a + h + (1 or 2) f + h, none without bias) and two norms
//     (2 h each, h for RMSNorm); the position table (s h) only with learned
//     positions, a second V h with an untied output layer; with experts the
//     MLP's (2 or 3) h f and its biases are E x (2 or 3) h F and E x ((1 or
//     2) F + h), and the router adds h E
//   model FLOPs per iteration (Narayanan et al. 2021, eq. 3, which counts the
//     recomputed forward only with full recomputation):
//     F = 24 k B s L h^2 (1 + s / (6 h) + V / (16 L h)),
//     k = 4 with full recomputation, 3 otherwise; in general
//     F = k B s L (2 P_lin + 4 s h) + 6 B s h V (the attention products
//     counted over the whole s x s, as Megatron's own formula counts them);
//     with experts P_lin counts the k experts a token passes through, not the
//     E, nor the router (Megatron's num_floating_point_operations); with
//     multi-latent attention Megatron-core's own count: P_lin with the
//     latents' norm weights, and s a (dn + dr + dv) in place of 4 s h (the
//     products over the causal half); with D multi-token prediction depths
//     (Megatron's count) L + D blocks, 3 h + 2 h^2 more linear weights per
//     depth (its three norms' h each and eh_proj), and 6 B s h V (1 + D)
//   multi-token prediction's parameters: D (a block + 2 h^2 + three norms)
//   model_tflops_per_gpu = F / (iteration time x GPUs) / 1e12
// Thread safety: plain values and pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/megatron_fp8.h"
#include "sim/megatron_names.h"
#include "sim/result.h"

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
  int64_t ffn_hidden = 0;        // --ffn-hidden-size f; 0: 4h
  int64_t query_groups = 0;      // --num-query-groups G; 0: a (a group per head)
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
  // Mixture of experts (Megatron-core's MoE layers; GptModel's comment above
  // has the parts): E experts of width F in every block's MLP, top-k routing.
  int64_t experts = 0;      // --num-experts E; 0: a dense MLP
  int64_t router_topk = 2;  // --moe-router-topk k (Megatron's default 2)
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
  // Width of the keys (and of the values): h G / a.
  int64_t kv_hidden() const { return heads > 0 ? hidden / heads * groups() : hidden; }
  // Whether any of the fields above differs from GPT's.
  bool beyond_gpt() const {
    return ffn_hidden > 0 || query_groups > 0 || swiglu || !linear_bias || !tied_output || rope || rms_norm ||
           flash_attention || moe() || mla || qk_layernorm || mtp_layers > 0 || uses_fp8() ||
           attention_dropout != 0.1 || hidden_dropout != 0.1 || max_positions > 0 || vocab_divisor != 128 ||
           !softmax_fusion;
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
// G / a) + h^2; with multi-latent attention the down projections h q_lora and
// h (kv_lora + dr) (h a (dn + dr) in place of the first two terms without
// q_lora), the up projections q_lora a (dn + dr) and kv_lora a (dn + dv), and
// the output projection a dv h (sim/megatron_attention.cc).
double gpt_attention_weights(const GptModel& model);
// The attention's biases (none without them; multi-latent attention's output
// projection's alone) and --qk-layernorm's norms (the latents', or the
// queries' and keys' per head).
double gpt_attention_biases_and_norms(const GptModel& model);
// The weights a tensor-parallel rank holds whole, not split over t:
// multi-latent attention's down projections; 0 otherwise.
double gpt_block_unsplit_parameters(const GptModel& model);

struct MegatronLayout {
  int tensor = 1;
  int pipeline = 1;
  int data = 1;
  int micro_batch = 1;
  int global_batch = 1;
  int layers_per_virtual_stage = 0;  // 0: not interleaved
  Recompute recompute = Recompute::kNone;
  // With full recomputation, Megatron-core's --recompute-method and
  // --recompute-num-layers N (it asks for both with full recomputation):
  // uniform keeps the input of every N blocks of a chunk and recomputes the N
  // together before their backward (N = 1: each block alone, Megatron-LM's
  // full recomputation); block (recompute_block) recomputes the first N
  // blocks of each chunk, one by one, and keeps every activation of the rest.
  int recompute_layers = 1;
  bool recompute_block = false;
  bool sequence_parallel = false;
  bool bf16 = false;  // else fp16
  // --grad-reduce-in-bf16: with bf16, gradients accumulated and reduced in
  // bf16 (2 bytes) rather than fp32 (4); with fp16 they are 2 bytes anyway.
  bool grad_reduce_in_bf16 = false;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  // Megatron's --overlap-param-gather (with the distributed optimizer and
  // --overlap-grad-reduce, as Megatron asks): the all-gather of the updated
  // weights runs beside the next iteration's first forward pass instead of
  // after the optimizer step; only what outlasts that pass is exposed.
  bool overlap_param_gather = false;
  // Megatron's --tp-comm-overlap (Transformer Engine's userbuffers; with
  // --sequence-parallel, as Megatron asks): each tensor-parallel all-gather
  // and reduce-scatter of a block's dense linears is cut into chunks and
  // pipelined with the GEMM it feeds or drains, so only what outlasts those
  // GEMMs is exposed (sim/megatron_profile.h). The experts' collectives are
  // not overlapped.
  bool tp_comm_overlap = false;
  // Bytes of a gradient in the buffers Megatron accumulates and reduces: 4
  // with bf16 (fp32, as Megatron keeps them), 2 with fp16 or --grad-reduce-in-bf16.
  double gradient_bytes() const { return bf16 && !grad_reduce_in_bf16 ? 4.0 : 2.0; }
  // The zero-bubble schedules of Qi et al. (ICLR 2024) instead of 1F1B (one
  // chunk per GPU, p >= 2): 0 none, 1 ZB-H1, 2 ZB-H2. Flags of the Zero
  // Bubble authors' Megatron-LM fork: --enable-zero-bubble with
  // --zero-bubble-max-pending-backward p (ZB-H1) or 2p (ZB-H2).
  int zero_bubble = 0;
  // With zero_bubble: instead of baton's handcrafted ZB-H1 / ZB-H2 orders,
  // the Zero Bubble authors' greedy scheduler (sim/zb_heuristic.h) on the
  // profile's stage times under the same memory limit (p or 2p microbatches'
  // activations): their fork's ZB-1p / ZB-2p without its ILP refinement.
  // baton's flag --zero-bubble-heuristic.
  bool zero_bubble_heuristic = false;
  // A V-shaped schedule instead (p >= 2, not with interleaving, zero_bubble
  // or an uneven split): 2p chunks of L / (2p) blocks.
  VSchedule v_schedule = VSchedule::kNone;
  // Uneven splits (Megatron-core's --decoder-first-pipeline-num-layers and
  // --decoder-last-pipeline-num-layers, not interleaved): the first and the
  // last pipeline stage's blocks, 0 for an even share; the other stages share
  // the rest evenly. The first stage also runs the embedding, the last the
  // output layer, so one block fewer there can balance the pipeline.
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  // Megatron-core's --account-for-embedding-in-pipeline-split and
  // --account-for-loss-in-pipeline-split: the embedding (the output layer and
  // loss) counts as one more layer when the L (+1, +2) layers are cut into p
  // stages (and each stage into chunks of --num-layers-per-virtual-pipeline-
  // stage), so the first (last) chunk holds one block fewer, none when chunks
  // are one layer. Not with the decoder-first/last counts above.
  bool embedding_in_split = false;
  bool loss_in_split = false;
  // Context parallelism (Megatron-core's --context-parallel-size c and
  // --cp-comm-type): each sequence cut into 2c chunks, rank j of the c
  // holding chunks j and 2c - 1 - j (the causal work balanced), so every
  // block runs on s / c tokens; with p2p (the default) the attention runs in
  // c steps, each over the rank's queries and one rank's keys and values,
  // which travel round the ring of the c ranks while the step computes
  // (Transformer Engine's ring attention, which Megatron needs for it:
  // FlashAttention's core); ContextComm has the others. The c ranks of one
  // data-parallel rank share its microbatches and hold the same weights: the
  // gradients (and the distributed optimizer's shards) are reduced over d c
  // ranks. Ranks are placed tensor, context, data, pipeline (Megatron's order
  // tp-cp-dp-pp).
  int context = 1;
  ContextComm context_comm = ContextComm::kP2P;
  // Expert parallelism (Megatron-core's --expert-model-parallel-size ep, with
  // --num-experts): the E experts of every block split over ep of the d c
  // ranks that would each hold them all (E / ep each), which move each
  // token to the rank of its experts and back as `moe_dispatcher` says and
  // reduce the experts' gradients over the d c / ep ranks that hold the
  // same experts. The other weights stay replicated over d c.
  int expert_parallel = 1;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllGather;  // Megatron-core's default
  // Megatron-core's --moe-shared-expert-overlap (with a shared expert and the
  // alltoall dispatcher, as Megatron asks): the shared expert runs on a
  // stream of its own, its all-gather, first GEMM and activation beside the
  // dispatch's all-to-all, its second GEMM and reduce-scatter beside the
  // combine's, so each all-to-all is exposed only where it outlasts that
  // work (sim/megatron_block.h).
  bool moe_shared_expert_overlap = false;
  // Megatron-core's --overlap-moe-expert-parallel-comm (its batch-level
  // overlap: ep > 1, the alltoall dispatcher, interleaved 1F1B when p > 1,
  // no full recomputation, not with the shared expert's overlap, as Megatron
  // asks): each steady-state forward runs with the backward after it as one
  // unit, each pass's all-to-alls hidden behind the other's compute
  // (Plan::paired_steady_state, sim/program.h's pairs); with p = 1, Megatron-
  // core's no-pipelining schedule: F0, F1&B0, F2&B1, ..., the last B.
  bool overlap_moe_ep_comm = false;
  // Megatron-core's --delay-wgrad-compute (with --overlap-moe-expert-
  // parallel-comm, as Megatron asks): in each pair the experts' weight
  // gradients run after their input gradients, beside the dispatch's
  // backward all-to-all, which so starts earlier (Plan::delay_wgrad_compute).
  bool delay_wgrad_compute = false;
  // Expert tensor parallelism (Megatron-core's --expert-tensor-parallel-size
  // etp; 0: t, its default): each expert's weights split over etp GPUs as a
  // dense MLP's over t. The experts have a grid of their own over the t c d
  // GPUs of a pipeline rank, placed expert-tensor, expert, expert-data
  // (Megatron-core's expert ranks tp-ep-dp-pp): etp consecutive GPUs split an
  // expert, ep ranks etp apart hold the E experts (so with etp 1 and t 8 the
  // eight GPUs of a tensor-parallel group are an expert-parallel group), and
  // t c d / (etp ep) ranks etp ep apart hold the same experts. The tokens a
  // rank sends are its sequence-parallel shard's, as before.
  int expert_tensor = 0;
  // Megatron-core's --pipeline-model-parallel-layout (core 0.13 on): every
  // chunk's layers spelled out, `pipeline_layout` the text as given and
  // `layout_chunks` its p v chunks in model order (chunk k on pipeline rank k
  // mod p, as interleaving places them), each a string of E (the embedding),
  // t (a block), m (a multi-token prediction depth) and L (the output layer
  // and loss). Empty: the other split flags decide.
  std::string pipeline_layout;
  std::vector<std::string> layout_chunks;

  int gpus() const { return tensor * pipeline * data * context; }
  // The ranks that hold each pipeline rank's weights: d c.
  int replicas() const { return data * context; }
  // etp: expert_tensor, or t when it is 0.
  int expert_tensor_parallel() const { return expert_tensor > 0 ? expert_tensor : tensor; }
  // The ranks that hold the same experts: t c d / (etp ep), d c / ep with etp = t.
  int expert_replicas() const { return tensor * replicas() / std::max(1, expert_parallel * expert_tensor_parallel()); }
  // Tokens of a sequence on one context-parallel rank: s / c.
  int64_t local_sequence(const GptModel& model) const { return model.sequence / std::max(1, context); }
  int microbatches() const { return global_batch / (micro_batch * data); }
  // The layers the pipeline split counts: L, plus one for each account flag.
  int64_t split_layers(const GptModel& model) const {
    return model.layers + (embedding_in_split ? 1 : 0) + (loss_in_split ? 1 : 0);
  }
  // Chunks per device: split_layers / (p x layers per virtual stage), 1 without
  // interleaving, 2 with a V-shaped schedule.
  int virtual_stages(const GptModel& model) const;
  // Whether the schedule splits the backward into I and W passes (zero
  // bubble, ZB-V, DualPipeV): a block's I pass leaves what its W needs.
  bool splits_backward() const { return zero_bubble > 0 || v_schedule != VSchedule::kNone; }
  // Blocks of each of the p v stages (chunks) in model order; a checked layout.
  std::vector<int> stage_layers(const GptModel& model) const;
  // The chunk that runs the multi-token prediction depths: the last, or the
  // one --pipeline-model-parallel-layout puts them in.
  int mtp_stage(const GptModel& model) const;
  // The pipeline rank of chunk `stage` (Plan::rank_of's placement: k mod p,
  // down the ranks and back in a V).
  int stage_rank(int stage) const;
};

// A layout of t x p x d GPUs, micro-batch b, global batch `global`; the rest default.
MegatronLayout megatron_layout(int t, int p, int d, int b, int global);

// --moe-layer-freq's text into `model`: an integer N (moe_layer_freq), or a
// list expression of 0s and 1s as Megatron evaluates it, lists joined by +
// and repeated by * in parentheses ("([1]*3+[0]*1)*3", "[0]*3+[1]*58";
// moe_layer_pattern). Error, naming the flag: any other text, or a pattern
// of more than kMaxGptLayers entries.
Status parse_moe_layer_freq(std::string_view text, GptModel& model);

// --pipeline-model-parallel-layout's text as Megatron-core reads it
// (pipeline_parallel_layer_layout.py, parse_str_to_list): commas dropped,
// each "(...)*n" (no parenthesis inside) repeated n times, then each "x*n",
// then cut into chunks at "|"; each chunk's letters E, t, m and L. Error,
// naming the flag: any other character, a "*" without a count, a layout of
// more than kMaxGptLayers x 4 letters. check_megatron_layout checks the
// chunks against the model.
Result<std::vector<std::string>> parse_pipeline_layout(std::string_view text);
// The layout's chunks against the model (check_megatron_layout's part; the
// error names the flag), as Megatron-core's validate_layer_layout: a multiple
// of p chunks, E first and L last once each, L t blocks, D m depths after
// every block, all in one chunk that is the last of its rank; and baton's: no
// empty chunk, none of the other split flags, 1F1B or interleaved 1F1B.
Status check_pipeline_layout(const GptModel& model, const MegatronLayout& layout);

// Multi-latent attention's flags (check_megatron_layout's part; the error
// names the flag): each size at least 1 (--q-lora-rank 0: none) and at most
// kMaxGptHidden, none of them without --multi-latent-attention, no grouped
// queries (each head has its own keys and values from the latent), no
// context parallelism (not modelled).
Status check_latent_attention(const GptModel& model, const MegatronLayout& layout);

// The vocabulary Megatron pads to: a multiple of --make-vocab-size-divisible-by (128) x t.
int64_t padded_vocab(const GptModel& model, int tensor);
// Megatron's parameter count (above), with the padded vocabulary.
double gpt_parameters(const GptModel& model, int tensor);
// The parameters one token passes through: with experts, the k of E it is
// routed to in each MoE block (Mixtral 8x7B's "13B active"); the parameters
// otherwise. gpt_parameters and megatron_model_flops count each block as
// what it is (MoE or dense, --moe-layer-freq).
double gpt_active_parameters(const GptModel& model, int tensor);
// Model FLOPs of one iteration (above).
double megatron_model_flops(const GptModel& model, const MegatronLayout& layout);

// Checks a layout against its model and the devices there are; the error names
// the Megatron flag at fault (--tensor-model-parallel-size, ...) and says what
// would be valid: positive sizes, heads divisible by t, layers divisible among
// the pipeline stages (and their chunks), a micro-batch size that divides the
// global batch per data-parallel rank, at most `devices` GPUs, sequence
// parallelism only with t > 1, zero-bubble schedules only with p >= 2 and
// without interleaving, a V-shaped schedule only with p >= 2, alone among the
// schedule flags, an even split and L (plus the counted layers) divisible by
// 2p, uneven splits that leave the other stages a whole and
// equal number of blocks (the account flags: L plus the counted layers
// divisible by p, and by p x layers per virtual stage when interleaved).
Status check_megatron_layout(const GptModel& model, const MegatronLayout& layout, int devices);
// The rule of Megatron's that a layout check, the layout search's overlaps
// (planner/megatron_search.h) and the command line's pins share:
// --overlap-param-gather goes with --overlap-grad-reduce.
inline constexpr const char* kOverlapParamGatherNeedsGradReduce =
    "--overlap-param-gather needs --overlap-grad-reduce, as Megatron does";
// Likewise: --delay-wgrad-compute goes with --overlap-moe-expert-parallel-comm.
inline constexpr const char* kDelayWgradNeedsEpOverlap =
    "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm, as Megatron does";
// Likewise: DeepEP's flex dispatcher does not pad the experts' inputs.
inline constexpr const char* kFlexRefusesPadding =
    "--moe-token-dispatcher-type flex does not go with --moe-pad-expert-input-to-capacity, as in Megatron (DeepEP)";

}  // namespace baton
