#include "sim/megatron_profile.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "sim/megatron_activation.h"
#include "sim/megatron_block.h"
#include "sim/megatron_rope.h"

namespace baton {

bool fused_softmax_available(int64_t micro_batch, int64_t heads_per_rank, int64_t sequence) {
  const int64_t s = sequence;
  if (s <= 16 || s > 16384 || s % 4 != 0) return false;
  int64_t pow2 = 1;
  while (pow2 < s) pow2 *= 2;
  const int64_t warp = std::min<int64_t>(pow2, 32);
  const int64_t per_block = (128 / warp) * (pow2 <= 128 ? 2 : 1);
  const int64_t batches = micro_batch * heads_per_rank;
  return batches % 4 == 0 && batches % per_block == 0;
}

namespace {

using namespace megatron_detail;

constexpr double kOptimizerBytes = 38.0;  // per parameter, see megatron_profile.h
constexpr int kForwardKernels = 16;       // host dispatch slots of one block's forward
constexpr int kBackwardKernels = 34;
// FlashAttention runs the attention core (scores, softmax, dropout, weights x
// V) as one kernel where Megatron's own runs four, and its backward as two
// where Megatron's runs six; rotary positions add a kernel for the queries and
// one for the keys, each way.
constexpr int kFlashForwardKernelsSaved = 3;
constexpr int kFlashBackwardKernelsSaved = 4;
constexpr int kRopeKernels = 2;
// Multi-latent attention's kernels beyond the standard attention's, counted
// from Megatron-core's MLASelfAttention, not measured: the two down
// projections, the split of the keys' and values' latent, the rotary key's
// broadcast to every head and the two concatenations of the queries and keys
// (forward); the two down projections' input and weight gradients, and the
// split, broadcast and concatenations' gradients (backward).
constexpr int kLatentForwardKernels = 6;
constexpr int kLatentBackwardKernels = 10;

// See fused_softmax_available; FlashAttention has no softmax kernel of its own.
bool fused_softmax(const BlockShape& x) {
  if (x.flash) return true;
  return x.softmax_fusion &&
         fused_softmax_available(static_cast<int64_t>(x.b), static_cast<int64_t>(x.a / x.t), static_cast<int64_t>(x.s));
}

// Without the fused kernel, Megatron (with query-key layer scaling, its
// default, the softmax runs in fp32) runs the softmax as five kernels where the
// fused one is one: cast to fp32, scale, masked fill, softmax, cast back; and
// as five in the backward. Extra kernels per pass, and extra bytes per score:
// forward 6 + 8 + 9 + 8 + 6 = 37 against 4, backward 36 against 6.
constexpr int kUnfusedSoftmaxKernels = 4;
constexpr double kUnfusedForwardBytes = 33.0;
constexpr double kUnfusedBackwardBytes = 30.0;

// The attention core: scores, softmax with dropout, weights x V. With
// grouped-query attention each of the a / t heads of a rank still takes its
// own products (its group's keys and values are shared, not its work).
Seconds attention_core(const GpuModel& gpu, const BlockShape& x) {
  const double count = x.b * x.a / x.t;
  if (x.flash) return flash_attention_forward(gpu, x);
  return gpu.gemm(x.s, x.s, x.head_qk, count) + gpu.memory_bound(count * x.s * x.s * kHalf * 3.0) +
         gpu.gemm(x.s, x.head_v, x.s, count);
}

// What the unfused softmax adds to a pass moving `bytes` more per score.
Seconds unfused_softmax(const GpuModel& gpu, const BlockShape& x, double bytes) {
  if (fused_softmax(x)) return Seconds(0.0);
  const double scores = x.b * x.a / x.t * x.s * x.s;
  return gpu.memory_bound(scores * bytes / kUnfusedSoftmaxKernels) * static_cast<double>(kUnfusedSoftmaxKernels);
}

// The MLP's activation: GeLU reads and writes T f / t values; SwiGLU reads
// 2 T f / t, writes T f / t (the experts': k T of them, F wide).
Seconds mlp_activation(const GpuModel& gpu, const BlockShape& x) {
  return gpu.memory_bound((x.gated ? 3.0 : 2.0) * x.tokens * x.topk * x.f / x.t * kHalf);
}

Seconds block_memory_bound(const GpuModel& gpu, const BlockShape& x) {
  const double layer_norm = 2.0 * x.local_tokens * x.h * kHalf;
  const double bias_dropout_add = 3.0 * x.local_tokens * x.h * kHalf;
  // Rotary positions, fused: the queries and the keys read and written once
  // (unfused: unfused_rope, sim/megatron_rope.h).
  const Seconds rope = x.rope && x.rope_fusion && !x.mla ? gpu.memory_bound(2.0 * x.tokens * x.q / x.t * kHalf) +
                                                               gpu.memory_bound(2.0 * x.tokens * x.kv / x.t * kHalf)
                                                         : Seconds(0.0);
  const Seconds standard =
      gpu.memory_bound(layer_norm) * 2.0 + gpu.memory_bound(bias_dropout_add) * 2.0 + mlp_activation(gpu, x) + rope;
  if (!x.mla) {
    // --qk-layernorm: the queries and the keys normalized, read and written.
    return x.qk_norm ? standard + gpu.memory_bound(2.0 * x.tokens * (x.q + x.kv) / x.t * kHalf) : standard;
  }
  // Multi-latent attention: the rotary part of the queries (a dr / t a token)
  // and of the one key (dr), the concatenations that build the queries and
  // the keys (a (dn + dr) / t each), and with --qk-layernorm the latents'
  // norms on the gathered tokens, each read and written once.
  const double heads = x.a / x.t;
  const Seconds latent = gpu.memory_bound(2.0 * x.tokens * (heads * x.pos + x.pos) * kHalf) +
                         gpu.memory_bound(2.0 * x.tokens * heads * x.head_qk * kHalf) * 2.0 +
                         (x.qk_norm ? gpu.memory_bound(2.0 * x.tokens * (x.q_lora + x.kv_lora) * kHalf) : Seconds(0.0));
  return standard + latent;
}

// `pass_share`: this block's share of the host's work per stage pass
// (GpuModel::host_per_pass over the blocks of a pass).
MegatronLayerTime block_time(const GpuModel& gpu, const BlockShape& x, Recompute recompute,
                             const CollectiveTime& tp_allreduce, const CollectiveTime& context_comm,
                             const CollectiveTime& expert_comm, const CollectiveTime& expert_tp, Seconds pass_share) {
  const double T = x.tokens;
  const double h = x.h;
  const double t = x.t;
  const double m = x.mlp_m;
  const AttentionLinears attention = attention_linears(gpu, x);
  const Seconds up = mlp_gemm(gpu, x, m, x.up / x.mlp_t, h);
  const Seconds down = mlp_gemm(gpu, x, m, h, x.f / x.mlp_t);
  const Seconds fused_core = attention_core(gpu, x);
  const Seconds core = fused_core + unfused_softmax(gpu, x, kUnfusedForwardBytes);
  const Seconds core_backward =
      fused_core * (x.flash ? kFlashBackwardRatio : 2.0) + unfused_softmax(gpu, x, kUnfusedBackwardBytes);
  const int unfused_kernels = fused_softmax(x) ? 0 : kUnfusedSoftmaxKernels;
  const UnfusedRope rope = unfused_rope(gpu, x);
  const UnfusedActivation glu = unfused_activation(gpu, x, x.tokens * x.topk * x.f / x.t, mlp_activation(gpu, x));
  const UnfusedActivation bda = unfused_bias_dropout_add(gpu, x, gpu.memory_bound(3.0 * x.local_tokens * x.h * kHalf));
  // The fused kernels where unfused_rope has none of its own to count.
  const int fused_rope_kernels = x.rope || x.mla ? kRopeKernels : 0;
  const int rope_forward_kernels = rope.forward_kernels > 0 ? rope.forward_kernels : fused_rope_kernels;
  const int rope_backward_kernels = rope.backward_kernels > 0 ? rope.backward_kernels : fused_rope_kernels;

  const Seconds elementwise = block_memory_bound(gpu, x);
  const Fp8Casts casts = fp8_casts(gpu, x);
  const Seconds allreduce = t > 1 ? tp_exchange(x, tp_allreduce, T * h) : Seconds(0.0);
  const Seconds attention_comm = attention_collectives(x, tp_allreduce);
  const MoeTime moe = moe_time(gpu, x, tp_allreduce, expert_comm, expert_tp);

  MegatronLayerTime time;
  time.forward_compute = attention.forward + up + down + core + elementwise + casts.forward + moe.forward_compute +
                         rope.forward + glu.forward_extra + bda.forward_extra;
  // Input gradients of the four linears, both attention products twice, the
  // memory-bound kernels twice; weight gradients of the four linears.
  const Seconds up_w = mlp_gemm(gpu, x, x.up / x.mlp_t, h, m);
  const Seconds down_w = mlp_gemm(gpu, x, h, x.f / x.mlp_t, m);
  const Seconds mlp_input = mlp_gemm(gpu, x, m, x.f / x.mlp_t, h) + mlp_gemm(gpu, x, m, h, x.up / x.mlp_t);
  const Seconds input = attention.input + mlp_input + core_backward + elementwise * 2.0 + casts.backward +
                        rope.backward + glu.backward_extra;
  time.weight_gradient = attention.weight + up_w + down_w + moe.weight_gradient;
  time.backward_compute = input + time.weight_gradient + moe.backward_compute - moe.weight_gradient;
  // The MLP's tensor-parallel collectives: the dense MLP's, or the experts'.
  // In the backward each runs beside its column-parallel layer's
  // weight-gradient GEMM (Megatron's asynchronous all-reduce).
  time.forward_comm = attention_comm + (x.moe ? moe.forward_comm : allreduce);
  time.backward_comm = max(Seconds(0.0), attention_comm - attention.first_weight) +
                       (x.moe ? moe.backward_comm : max(Seconds(0.0), allreduce - up_w));
  if (x.tp_overlap) {
    // --tp-comm-overlap: each sublayer's collectives pipelined with its
    // linears' GEMMs (the experts' not overlapped); in the backward the
    // better of that and the asynchronous overlap above, which Transformer
    // Engine keeps for the weight gradients (its bulk overlaps).
    time.forward_comm = overlapped_exposure(x, attention_comm, attention.forward) +
                        (x.moe ? moe.forward_comm : overlapped_exposure(x, allreduce, up + down));
    time.backward_comm =
        min(time.backward_comm,
            overlapped_exposure(x, attention_comm, attention.input + attention.weight) +
                (x.moe ? moe.backward_comm : overlapped_exposure(x, allreduce, mlp_input + up_w + down_w)));
  }
  const ContextExchange exchange = context_exchange(gpu, x, context_comm);
  time.context_forward = exchange.forward;
  time.context_backward = exchange.backward;
  time.expert_forward = moe.all_to_all;
  time.expert_backward = moe.all_to_all_backward;
  // What runs between the dispatch and the combine (Megatron-core's "mlp"
  // node, fine_grained_callables.py): the routed experts' GEMMs and
  // activation (twice in the backward) and their collectives over etp. The
  // router, the routing, the permutations and the shared expert run in the
  // nodes before the dispatch and after the combine.
  if (x.moe && recompute != Recompute::kFull) {
    BlockShape routed = x;
    routed.shared = 0.0;
    routed.shared_overlap = false;
    const MoeTime experts = moe_time(gpu, routed, tp_allreduce, expert_comm, expert_tp);
    const Seconds activation = mlp_activation(gpu, x);
    time.expert_work =
        Layer::ExpertWork{up + down + activation + glu.forward_extra + experts.forward_comm,
                          mlp_input + activation * 2.0 + glu.backward_extra + experts.backward_comm, up_w + down_w};
  }
  const Seconds exposed_forward = exchange.forward + moe.all_to_all;
  if (recompute == Recompute::kFull) {
    time.recompute = time.forward_compute + time.forward_comm + exposed_forward;
    time.expert_recompute = moe.all_to_all;
  }
  if (recompute == Recompute::kSelective) time.recompute = core + exchange.forward;
  // The host floor, per pass: the host dispatches while the GPU runs, and a
  // collective runs while the host dispatches the kernels after it.
  const Seconds forward_gpu = time.forward_compute + time.forward_comm + exposed_forward;
  const int forward_kernels = kForwardKernels + unfused_kernels + rope_forward_kernels + glu.forward_kernels_extra +
                              bda.forward_kernels_extra - (x.flash ? kFlashForwardKernelsSaved : 0) +
                              context_kernels(x, false) + moe.forward_kernels + (x.mla ? kLatentForwardKernels : 0) +
                              casts.forward_kernels;
  const Seconds forward_host = gpu.host_per_kernel * forward_kernels + pass_share;
  const int backward_kernels = kBackwardKernels + unfused_kernels + rope_backward_kernels + glu.backward_kernels_extra -
                               (x.flash ? kFlashBackwardKernelsSaved : 0) + context_kernels(x, true) +
                               moe.backward_kernels + (x.mla ? kLatentBackwardKernels : 0) + casts.backward_kernels +
                               (recompute == Recompute::kFull ? forward_kernels : 0);
  const Seconds backward_gpu =
      time.backward_compute + time.backward_comm + exchange.backward + moe.all_to_all_backward + time.recompute;
  const Seconds backward_host = gpu.host_per_kernel * backward_kernels + pass_share;
  time.host_wait = max(Seconds(0.0), forward_host - forward_gpu) + max(Seconds(0.0), backward_host - backward_gpu);
  // GPT: (12 h^2 + 13 h) / t; the experts over etp ep; multi-latent
  // attention's down projections whole.
  time.expert_parameters = x.expert_parameters / (x.mlp_t * x.ep);
  time.parameters = (x.block_parameters - x.expert_parameters - x.unsplit) / t + time.expert_parameters + x.unsplit;
  // With FP8 every weight of the block (its few biases and norm weights counted with them) is cached in FP8.
  time.fp8_parameters = x.linear_bytes == 1 ? time.parameters : 0.0;
  time.fp8_weight_cast = fp8_weight_cast(gpu, x, time.fp8_parameters);
  return time;
}

// MegatronLayerTime::reduced_bytes and gathered_bytes; `expert_weight`:
// make_megatron_profile's expert_gradient_weight; `fp8_gather`: the FP8
// parameters are gathered in FP8 (--fp8-param-gather).
void set_replica_bytes(MegatronLayerTime& time, const MegatronLayout& layout, double expert_weight, bool fp8_gather) {
  const double dense = time.parameters - time.expert_parameters;
  const double weighted = (dense + time.expert_parameters * expert_weight) * layout.tensor;
  time.reduced_bytes = weighted * layout.gradient_bytes();
  const double fp8_share = fp8_gather && time.parameters > 0.0 ? time.fp8_parameters / time.parameters : 0.0;
  time.gathered_bytes = layout.distributed_optimizer ? weighted * (kHalf - fp8_share) : 0.0;
}

// The layer of `time`, set_replica_bytes done.
Layer to_layer(const std::string& name, const std::string& what, const MegatronLayerTime& time,
               const MegatronLayout& layout, const GpuModel& gpu, double output_bytes) {
  Layer layer;
  layer.name = name;
  const Seconds weight = time.weight_gradient;
  layer.forward = time.forward_compute + time.forward_comm + time.context_forward + time.expert_forward;
  layer.backward = time.backward_compute + time.backward_comm + time.context_backward + time.expert_backward +
                   time.recompute + time.host_wait;
  // The host's wait (the forward's and the backward's) is charged to the
  // backward: the layer's total is right, its split between F and B is not.
  layer.backward_weight = weight;
  layer.backward_input = layer.backward - weight;
  // DualPipeV's overlapped pairs hide the all-to-alls behind the other pass
  // (the backward's: its own, and the recomputed forward's).
  layer.forward_overlap = time.expert_forward;
  layer.backward_overlap = time.expert_backward + time.expert_recompute;
  layer.experts = time.expert_work;
  const double dense = time.parameters - time.expert_parameters;
  const double optimizer_bytes =
      layout.distributed_optimizer
          ? (dense / layout.replicas() + time.expert_parameters / layout.expert_replicas()) * kOptimizerBytes
          : time.parameters * kOptimizerBytes;
  layer.optimizer = time.embedding_allreduce + gpu.memory_bound(optimizer_bytes) + time.fp8_weight_cast;
  layer.output_bytes = Bytes::counted(output_bytes);
  layer.param_bytes = Bytes::counted(layout.distributed_optimizer ? (time.reduced_bytes + time.gathered_bytes) / 2.0
                                                                  : time.reduced_bytes);
  layer.description = fmt::format(
      "{}; per microbatch on one of {} tensor-parallel ranks: forward {:.3f} ms compute + {:.3f} ms TP "
      "collectives, backward {:.3f} ms compute + {:.3f} ms exposed TP collectives + {:.3f} ms recomputation "
      "+ {:.3f} ms host dispatch",
      what, layout.tensor, time.forward_compute.value * 1e3, time.forward_comm.value * 1e3,
      time.backward_compute.value * 1e3, time.backward_comm.value * 1e3, time.recompute.value * 1e3,
      time.host_wait.value * 1e3);
  if (time.context_forward.value > 0.0 || time.context_backward.value > 0.0)
    layer.description += fmt::format("; exposed context-parallel exchange: forward {:.3f} ms, backward {:.3f} ms",
                                     time.context_forward.value * 1e3, time.context_backward.value * 1e3);
  if (time.expert_forward.value > 0.0 || time.expert_backward.value > 0.0)
    layer.description += fmt::format("; expert-parallel all-to-alls: forward {:.3f} ms, backward {:.3f} ms",
                                     time.expert_forward.value * 1e3, time.expert_backward.value * 1e3);
  return layer;
}

// The MLP's activation in a block's description: GeLU's only when unfused.
const char* activation_name(const GptModel& model) {
  if (model.swiglu) return model.activation_fusion ? " SwiGLU" : " SwiGLU (unfused)";
  return model.activation_fusion ? "" : " GeLU (bias unfused)";
}

std::string block_description(const GptModel& model, const MegatronLayout& layout) {
  std::string attention = fmt::format("{} heads", model.heads);
  if (model.kv_channels > 0 && !model.mla) attention += fmt::format(" of {}", model.kv_channels);
  if (model.query_groups > 0) attention += fmt::format(" in {} query groups", model.groups());
  if (model.mla)
    attention += fmt::format(" of multi-latent attention (latents {} / {}, heads {} + {} / {})", model.q_lora_rank,
                             model.kv_lora_rank, model.qk_head_dim, model.qk_pos_head_dim, model.v_head_dim);
  if (model.rope) attention += model.rope_fusion ? ", rotary" : ", rotary (unfused)";
  if (model.flash_attention) attention += ", FlashAttention";
  std::string extras;
  if (model.rms_norm) extras += ", RMSNorm";
  if (!model.linear_bias) extras += ", no biases";
  if (model.uses_fp8())
    extras +=
        fmt::format(", FP8 linears ({}, {} scaling)", fp8_format_name(model.fp8), fp8_recipe_name(model.fp8_recipe));
  if (model.moe())
    return fmt::format(
        "transformer block, {}, {} experts {} -> {}{} (top {}{}, {} per rank{}){}{}, recompute {}", attention,
        model.experts, model.hidden, model.expert_ffn(), activation_name(model), model.router_topk,
        model.group_limited() ? fmt::format(" in {} of {} groups", model.router_group_topk, model.router_groups) : "",
        model.experts / std::max(1, layout.expert_parallel), model.grouped_gemm ? ", grouped GEMM" : "",
        model.shared_expert_ffn > 0 ? fmt::format(" + a shared expert {}", model.shared_expert_ffn) : "", extras,
        recompute_name(layout.recompute));
  return fmt::format("transformer block, {}, MLP {} -> {}{}{}, recompute {}", attention, model.hidden, model.ffn(),
                     activation_name(model), extras, recompute_name(layout.recompute));
}

// The profile's model line: "gpt L32 h4096 a32 s4096 E8 top2 (t 8, ep 8, etp 1, bf16)".
std::string profile_name(const GptModel& model, const MegatronLayout& layout) {
  return fmt::format("gpt L{} h{} a{} s{}{} (t {}{}{}{}, {}{})", model.layers, model.hidden, model.heads,
                     model.sequence, model.moe() ? fmt::format(" E{} top{}", model.experts, model.router_topk) : "",
                     layout.tensor, layout.context > 1 ? fmt::format(", c {}", layout.context) : "",
                     layout.expert_parallel > 1 ? fmt::format(", ep {}", layout.expert_parallel) : "",
                     model.moe() && layout.expert_tensor_parallel() != layout.tensor
                         ? fmt::format(", etp {}", layout.expert_tensor_parallel())
                         : "",
                     layout.bf16 ? "bf16" : "fp16",
                     model.uses_fp8() ? fmt::format(", fp8 {}", fp8_format_name(model.fp8)) : "");
}

// The output layer and its loss, and each prediction depth's final norm,
// output layer and loss (Megatron-core's process_mtp_loss runs them all
// where the loss is).
MegatronLayerTime loss_time(const GpuModel& gpu, const BlockShape& x, const GptModel& model, int64_t vocab,
                            bool own_copy, const CollectiveTime& tp_allreduce) {
  MegatronLayerTime head = head_time(gpu, x, vocab, own_copy, model.rms_norm ? x.h : 2.0 * x.h, tp_allreduce);
  if (model.mtp_layers == 0) return head;
  const MegatronLayerTime logits = head_time(gpu, x, vocab, false, 0.0, tp_allreduce);  // no weights of its own
  for (int64_t j = 0; j < model.mtp_layers; ++j) add_time(head, logits);
  return head;
}

std::string head_description(const GptModel& model, int64_t vocab, bool tied_copies) {
  const char* weights = !model.tied_output ? "its own weights"
                        : tied_copies      ? "a copy of the word embedding, kept equal to it"
                                           : "the word embedding";
  return fmt::format("final {} + output layer {} x {} ({}) + cross entropy{}{}",
                     model.rms_norm ? "RMSNorm" : "LayerNorm", model.hidden, vocab, weights,
                     model.te_loss()              ? " (Transformer Engine's, fused)"
                     : model.cross_entropy_fusion ? " (fused)"
                     : model.half_loss            ? " (in half precision)"
                                                  : "",
                     model.mtp_layers > 0 ? fmt::format(", and the {} multi-token prediction depths' final norms, "
                                                        "output layers and cross entropies",
                                                        model.mtp_layers)
                                          : std::string());
}

}  // namespace

MegatronProfile make_megatron_profile(const GptModel& model, const MegatronLayout& layout, const GpuModel& gpu,
                                      const CollectiveTime& tp_allreduce, const CollectiveTime& embedding_allreduce,
                                      const CollectiveTime& context_comm, const CollectiveTime& expert_comm,
                                      double expert_gradient_weight, const CollectiveTime& expert_tensor_comm) {
  const CollectiveTime& expert_tp = expert_tensor_comm ? expert_tensor_comm : tp_allreduce;
  const BlockShape x = shape_of(model, layout);
  const int64_t vocab = padded_vocab(model, layout.tensor);
  const double activation = x.tokens * x.h * kHalf;
  // A V: both on rank 0; untied: nothing to keep equal. Multi-token
  // prediction's lookups need the word embedding on their rank: a copy there
  // unless it is rank 0's, or the output layer's rank holding the tied copy.
  const int last_rank = layout.stage_rank(layout.pipeline * layout.virtual_stages(model) - 1);
  const int mtp_rank = layout.stage_rank(layout.mtp_stage(model));
  const bool tied_copies = model.tied_output && last_rank != 0;
  const bool mtp_copy = model.mtp_layers > 0 && mtp_rank != 0 && !(model.tied_output && mtp_rank == last_rank);
  const double gradient_bytes = layout.gradient_bytes();
  const Seconds embedding_sync = (tied_copies || mtp_copy) && embedding_allreduce
                                     ? embedding_allreduce(static_cast<double>(vocab) / x.t * x.h * gradient_bytes)
                                     : Seconds(0.0);
  MegatronProfile out;
  out.profile.model = profile_name(model, layout);
  out.profile.device = gpu.name;
  out.profile.microbatch_size = layout.micro_batch;

  const bool fp8_gather = model.uses_fp8() && model.fp8_param_gather;
  MegatronLayerTime embedding = embedding_time(gpu, x, model, vocab, tp_allreduce);
  embedding.embedding_allreduce = embedding_sync;
  set_replica_bytes(embedding, layout, 1.0, fp8_gather);
  out.times.push_back(embedding);
  out.profile.layers.push_back(to_layer("embedding",
                                        fmt::format("word embedding {} x {} (split over t){}, dropout", vocab,
                                                    model.hidden, model.rope ? "" : " + position embedding"),
                                        embedding, layout, gpu, activation));
  // The blocks of one stage pass: a chunk's with interleaving or a V, a
  // stage's otherwise.
  const int64_t pass_blocks =
      layout.layers_per_virtual_stage > 0
          ? layout.layers_per_virtual_stage
          : std::max<int64_t>(1, model.layers / std::max(1, layout.pipeline * layout.virtual_stages(model)));
  const Seconds pass_share = gpu.host_per_pass / static_cast<double>(pass_blocks);
  // A block's time and layer by its kind: MoE or dense (--moe-layer-freq;
  // every block of a model without experts is dense), recomputed or not
  // (--recompute-method block: only the first N blocks of each chunk are
  // recomputed, the others run as without recomputation), in FP8 or not
  // (--first-last-layers-bf16 keeps the first and last blocks in bf16).
  struct Kind {
    MegatronLayerTime time;
    Layer layer;
  };
  const GptModel dense_model = model.dense_blocks();
  auto kind = [&](bool moe, bool recomputed, bool fp8) {
    MegatronLayout kind_layout = layout;
    if (!recomputed) kind_layout.recompute = Recompute::kNone;
    const GptModel kind_model = (moe ? model : dense_model).with_fp8_blocks(fp8);
    MegatronLayerTime time = block_time(gpu, shape_of(kind_model, layout), kind_layout.recompute, tp_allreduce,
                                        context_comm, expert_comm, expert_tp, pass_share);
    // A dense block of a mixture-of-experts model: no experts, but a block
    // that a pair puts beside the other pass's (sim/stage_costs.h).
    if (model.moe() && !moe && kind_layout.recompute != Recompute::kFull) time.expert_work = Layer::ExpertWork{};
    set_replica_bytes(time, layout, expert_gradient_weight, fp8_gather);
    return Kind{time, to_layer("block", block_description(kind_model, kind_layout), time, layout, gpu, activation)};
  };
  std::vector<bool> recomputed(static_cast<size_t>(model.layers), true);
  if (layout.recompute_block) {
    size_t at = 0;
    for (const int blocks : layout.stage_layers(model))
      for (int j = 0; j < blocks; ++j) recomputed.at(at++) = j < layout.recompute_layers;
  }
  std::optional<Kind> kinds[2][2][2];  // [MoE][recomputed][FP8], made when first needed
  out.times.reserve(static_cast<size_t>(model.layers + model.mtp_layers) + 2);
  out.profile.layers.reserve(static_cast<size_t>(model.layers + model.mtp_layers) + 2);
  for (int64_t i = 0; i < model.layers; ++i) {
    const bool moe = model.moe_block(i), again = recomputed[static_cast<size_t>(i)], fp8 = model.fp8_block(i);
    std::optional<Kind>& made = kinds[moe ? 1 : 0][again ? 1 : 0][fp8 ? 1 : 0];
    if (!made) made = kind(moe, again, fp8);
    out.times.push_back(made->time);
    out.profile.layers.push_back(made->layer);
    out.profile.layers.back().name = "block." + std::to_string(i);
  }
  const double final_norm = model.rms_norm ? x.h : 2.0 * x.h;
  // Multi-token prediction's depths after the blocks, on their chunk (the
  // last, or --pipeline-model-parallel-layout's): each its block (the last
  // block's kind, recomputed as the others but with --recompute-method block,
  // which Megatron-core skips for them) and the rest (mtp_time); the first
  // holds the word embedding's copy.
  if (model.mtp_layers > 0) {
    // Megatron-core runs the depths in FP8 with the model, whatever --first-last-layers-bf16 says.
    const bool again = !layout.recompute_block, fp8 = model.uses_fp8();
    std::optional<Kind>& made = kinds[model.mtp_moe() ? 1 : 0][again ? 1 : 0][fp8 ? 1 : 0];
    if (!made) made = kind(model.mtp_moe(), again, fp8);
    MegatronLayerTime depth = made->time;
    add_time(depth,
             mtp_time(gpu, x, model, vocab, final_norm, again && layout.recompute == Recompute::kFull, tp_allreduce));
    const std::string what = fmt::format(
        "multi-token prediction depth: embedding lookup, enorm + hnorm, eh_proj {} x {}, {}, final {}",
        2 * model.hidden, model.hidden, made->layer.description.substr(0, made->layer.description.find(';')),
        model.rms_norm ? "RMSNorm" : "LayerNorm");
    for (int64_t j = 0; j < model.mtp_layers; ++j) {
      MegatronLayerTime time = depth;
      if (j == 0 && mtp_copy) {
        time.parameters += static_cast<double>(vocab) / x.t * x.h;
        time.embedding_allreduce = embedding_sync;
      }
      set_replica_bytes(time, layout, expert_gradient_weight, fp8_gather);
      out.times.push_back(time);
      // What it hands on: the main hidden state and each depth's so far
      // (Megatron-core concatenates them for the loss: (1 + D) s b h at the last).
      out.profile.layers.push_back(
          to_layer("mtp." + std::to_string(j), what, time, layout, gpu, activation * static_cast<double>(j + 2)));
    }
  }
  MegatronLayerTime head = loss_time(gpu, x, model, vocab, tied_copies || !model.tied_output, tp_allreduce);
  if (tied_copies) head.embedding_allreduce = embedding_sync;
  set_replica_bytes(head, layout, 1.0, fp8_gather);
  out.times.push_back(head);
  out.profile.layers.push_back(to_layer("head", head_description(model, vocab, tied_copies), head, layout, gpu, 0.0));
  return out;
}

}  // namespace baton
