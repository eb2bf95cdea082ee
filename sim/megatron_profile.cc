#include "sim/megatron_profile.h"

#include <algorithm>

#include <fmt/format.h>

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

constexpr double kHalf = 2.0;             // bytes per fp16/bf16 value
constexpr double kOptimizerBytes = 38.0;  // per parameter, see megatron_profile.h
constexpr int kForwardKernels = 16;       // host dispatch slots of one block's forward
constexpr int kBackwardKernels = 34;

struct Shape {
  double b, s, h, a, t, tokens, local_tokens;
};

Shape shape_of(const GptModel& model, const MegatronLayout& layout) {
  Shape x{};
  x.b = layout.micro_batch;
  x.s = static_cast<double>(model.sequence);
  x.h = static_cast<double>(model.hidden);
  x.a = static_cast<double>(model.heads);
  x.t = layout.tensor;
  x.tokens = x.b * x.s;
  x.local_tokens = layout.sequence_parallel ? x.tokens / x.t : x.tokens;
  return x;
}

// See fused_softmax_available.
bool fused_softmax(const Shape& x) {
  return fused_softmax_available(static_cast<int64_t>(x.b), static_cast<int64_t>(x.a / x.t), static_cast<int64_t>(x.s));
}

// Without the fused kernel, Megatron (with query-key layer scaling, its
// default, the softmax runs in fp32) runs the softmax as five kernels where the
// fused one is one: cast to fp32, scale, masked fill, softmax, cast back; and
// as five in the backward. Extra kernels per pass, and extra bytes per score:
// forward 6 + 8 + 9 + 8 + 6 = 37 against 4, backward 36 against 6.
constexpr int kUnfusedSoftmaxKernels = 4;
constexpr double kUnfusedForwardBytes = 33.0;
constexpr double kUnfusedBackwardBytes = 30.0;

// The attention core: scores, softmax with dropout, weights x V.
Seconds attention_core(const GpuModel& gpu, const Shape& x) {
  const double count = x.b * x.a / x.t;
  return gpu.gemm(x.s, x.s, x.h / x.a, count) + gpu.memory_bound(count * x.s * x.s * kHalf * 3.0) +
         gpu.gemm(x.s, x.h / x.a, x.s, count);
}

// What the unfused softmax adds to a pass moving `bytes` more per score.
Seconds unfused_softmax(const GpuModel& gpu, const Shape& x, double bytes) {
  if (fused_softmax(x)) return Seconds(0.0);
  const double scores = x.b * x.a / x.t * x.s * x.s;
  return gpu.memory_bound(scores * bytes / kUnfusedSoftmaxKernels) * static_cast<double>(kUnfusedSoftmaxKernels);
}

Seconds block_memory_bound(const GpuModel& gpu, const Shape& x) {
  const double layer_norm = 2.0 * x.local_tokens * x.h * kHalf;
  const double bias_dropout_add = 3.0 * x.local_tokens * x.h * kHalf;
  const double gelu = 2.0 * x.tokens * 4.0 * x.h / x.t * kHalf;
  return gpu.memory_bound(layer_norm) * 2.0 + gpu.memory_bound(bias_dropout_add) * 2.0 + gpu.memory_bound(gelu);
}

// `pass_share`: this block's share of the host's work per stage pass
// (GpuModel::host_per_pass over the blocks of a pass).
MegatronLayerTime block_time(const GpuModel& gpu, const Shape& x, Recompute recompute,
                             const CollectiveTime& tp_allreduce, Seconds pass_share) {
  const double T = x.tokens;
  const double h = x.h;
  const double t = x.t;
  const Seconds qkv = gpu.gemm(T, 3 * h / t, h);
  const Seconds projection = gpu.gemm(T, h, h / t);
  const Seconds up = gpu.gemm(T, 4 * h / t, h);
  const Seconds down = gpu.gemm(T, h, 4 * h / t);
  const Seconds fused_core = attention_core(gpu, x);
  const Seconds core = fused_core + unfused_softmax(gpu, x, kUnfusedForwardBytes);
  const Seconds core_backward = fused_core * 2.0 + unfused_softmax(gpu, x, kUnfusedBackwardBytes);
  const int unfused_kernels = fused_softmax(x) ? 0 : kUnfusedSoftmaxKernels;
  const Seconds elementwise = block_memory_bound(gpu, x);
  const Seconds allreduce = t > 1 ? tp_allreduce(T * h * kHalf) : Seconds(0.0);

  MegatronLayerTime time;
  time.forward_compute = qkv + projection + up + down + core + elementwise;
  time.forward_comm = allreduce * 2.0;
  // Input gradients of the four linears, both attention products twice, the
  // memory-bound kernels twice; weight gradients of the four linears.
  const Seconds qkv_w = gpu.gemm(3 * h / t, h, T);
  const Seconds up_w = gpu.gemm(4 * h / t, h, T);
  const Seconds input = gpu.gemm(T, h, 3 * h / t) + gpu.gemm(T, h / t, h) + gpu.gemm(T, 4 * h / t, h) +
                        gpu.gemm(T, h, 4 * h / t) + core_backward + elementwise * 2.0;
  time.weight_gradient = qkv_w + gpu.gemm(h, h / t, T) + up_w + gpu.gemm(h, 4 * h / t, T);
  time.backward_compute = input + time.weight_gradient;
  time.backward_comm = max(Seconds(0.0), allreduce - qkv_w) + max(Seconds(0.0), allreduce - up_w);
  if (recompute == Recompute::kFull) time.recompute = time.forward_compute + time.forward_comm;
  if (recompute == Recompute::kSelective) time.recompute = core;
  // The host floor, per pass: the host dispatches while the GPU runs, and a
  // collective runs while the host dispatches the kernels after it.
  const Seconds forward_gpu = time.forward_compute + time.forward_comm;
  const int forward_kernels = kForwardKernels + unfused_kernels;
  const Seconds forward_host = gpu.host_per_kernel * forward_kernels + pass_share;
  const int backward_kernels =
      kBackwardKernels + unfused_kernels + (recompute == Recompute::kFull ? forward_kernels : 0);
  const Seconds backward_gpu = time.backward_compute + time.backward_comm + time.recompute;
  const Seconds backward_host = gpu.host_per_kernel * backward_kernels + pass_share;
  time.host_wait = max(Seconds(0.0), forward_host - forward_gpu) + max(Seconds(0.0), backward_host - backward_gpu);
  time.parameters = (12.0 * h * h + 13.0 * h) / t;
  return time;
}

MegatronLayerTime embedding_time(const GpuModel& gpu, const Shape& x, const GptModel& model, int64_t vocab,
                                 const CollectiveTime& tp_allreduce) {
  MegatronLayerTime time;
  const double values = x.tokens * x.h;
  time.forward_compute = gpu.memory_bound(2.0 * values * kHalf) + gpu.memory_bound(3.0 * x.local_tokens * x.h * kHalf);
  time.forward_comm = x.t > 1 ? tp_allreduce(values * kHalf) : Seconds(0.0);
  time.weight_gradient = gpu.memory_bound(3.0 * values * kHalf);
  time.backward_compute = time.weight_gradient + gpu.memory_bound(3.0 * x.local_tokens * x.h * kHalf);
  time.parameters = (static_cast<double>(vocab) / x.t + static_cast<double>(model.sequence)) * x.h;
  return time;
}

// `own_copy`: the head holds its own copy of the word embedding (p > 1).
MegatronLayerTime head_time(const GpuModel& gpu, const Shape& x, int64_t vocab, bool own_copy,
                            const CollectiveTime& tp_allreduce) {
  MegatronLayerTime time;
  const double v = static_cast<double>(vocab) / x.t;
  const double logits = x.tokens * v * 4.0;  // fp32 for the cross entropy
  time.forward_compute = gpu.memory_bound(2.0 * x.local_tokens * x.h * kHalf) + gpu.gemm(x.tokens, v, x.h) +
                         gpu.memory_bound(3.0 * logits);
  time.weight_gradient = gpu.gemm(v, x.h, x.tokens);
  time.backward_compute = time.weight_gradient + gpu.gemm(x.tokens, x.h, v) + gpu.memory_bound(2.0 * logits) +
                          gpu.memory_bound(2.0 * x.local_tokens * x.h * kHalf);
  time.backward_comm = x.t > 1 ? tp_allreduce(x.tokens * x.h * kHalf) : Seconds(0.0);
  time.parameters = 2.0 * x.h + (own_copy ? v * x.h : 0.0);  // the final LayerNorm, the embedding's copy
  return time;
}

Layer to_layer(const std::string& name, const std::string& what, const MegatronLayerTime& time,
               const MegatronLayout& layout, const GpuModel& gpu, double output_bytes) {
  Layer layer;
  layer.name = name;
  const Seconds weight = time.weight_gradient;
  layer.forward = time.forward_compute + time.forward_comm;
  layer.backward = time.backward_compute + time.backward_comm + time.recompute + time.host_wait;
  // The host's wait (the forward's and the backward's) is charged to the
  // backward: the layer's total is right, its split between F and B is not.
  layer.backward_weight = weight;
  layer.backward_input = layer.backward - weight;
  const double optimizer_bytes = time.parameters * kOptimizerBytes / (layout.distributed_optimizer ? layout.data : 1);
  layer.optimizer = time.embedding_allreduce + gpu.memory_bound(optimizer_bytes);
  layer.output_bytes = Bytes::counted(output_bytes);
  const double gradient_bytes = layout.bf16 ? 4.0 : 2.0;
  layer.param_bytes = Bytes::counted(time.parameters * layout.tensor * gradient_bytes);
  layer.description = fmt::format(
      "{}; per microbatch on one of {} tensor-parallel ranks: forward {:.3f} ms compute + {:.3f} ms TP "
      "collectives, backward {:.3f} ms compute + {:.3f} ms exposed TP collectives + {:.3f} ms recomputation "
      "+ {:.3f} ms host dispatch",
      what, layout.tensor, time.forward_compute.value * 1e3, time.forward_comm.value * 1e3,
      time.backward_compute.value * 1e3, time.backward_comm.value * 1e3, time.recompute.value * 1e3,
      time.host_wait.value * 1e3);
  return layer;
}

}  // namespace

MegatronProfile make_megatron_profile(const GptModel& model, const MegatronLayout& layout, const GpuModel& gpu,
                                      const CollectiveTime& tp_allreduce, const CollectiveTime& embedding_allreduce) {
  const Shape x = shape_of(model, layout);
  const int64_t vocab = padded_vocab(model, layout.tensor);
  const double activation = x.tokens * x.h * kHalf;
  const bool tied_copies = layout.pipeline > 1 && layout.v_schedule == VSchedule::kNone;  // a V: both on rank 0
  const double gradient_bytes = layout.bf16 ? 4.0 : 2.0;
  const Seconds embedding_sync = tied_copies && embedding_allreduce
                                     ? embedding_allreduce(static_cast<double>(vocab) / x.t * x.h * gradient_bytes)
                                     : Seconds(0.0);
  MegatronProfile out;
  out.profile.model = fmt::format("gpt L{} h{} a{} s{} (t {}, {})", model.layers, model.hidden, model.heads,
                                  model.sequence, layout.tensor, layout.bf16 ? "bf16" : "fp16");
  out.profile.device = gpu.name;
  out.profile.microbatch_size = layout.micro_batch;

  MegatronLayerTime embedding = embedding_time(gpu, x, model, vocab, tp_allreduce);
  embedding.embedding_allreduce = embedding_sync;
  out.times.push_back(embedding);
  out.profile.layers.push_back(
      to_layer("embedding",
               fmt::format("word embedding {} x {} (split over t) + position embedding, dropout", vocab, model.hidden),
               embedding, layout, gpu, activation));
  // The blocks of one stage pass: a chunk's with interleaving or a V, a
  // stage's otherwise.
  const int64_t pass_blocks =
      layout.layers_per_virtual_stage > 0
          ? layout.layers_per_virtual_stage
          : std::max<int64_t>(1, model.layers / std::max(1, layout.pipeline * layout.virtual_stages(model)));
  const MegatronLayerTime block =
      block_time(gpu, x, layout.recompute, tp_allreduce, gpu.host_per_pass / static_cast<double>(pass_blocks));
  const Layer block_layer = to_layer("block",
                                     fmt::format("transformer block, {} heads, MLP {} -> {}, recompute {}", model.heads,
                                                 model.hidden, 4 * model.hidden, recompute_name(layout.recompute)),
                                     block, layout, gpu, activation);
  out.times.reserve(static_cast<size_t>(model.layers) + 2);
  out.profile.layers.reserve(static_cast<size_t>(model.layers) + 2);
  for (int64_t i = 0; i < model.layers; ++i) {  // every block alike
    out.times.push_back(block);
    out.profile.layers.push_back(block_layer);
    out.profile.layers.back().name = "block." + std::to_string(i);
  }
  MegatronLayerTime head = head_time(gpu, x, vocab, tied_copies, tp_allreduce);
  head.embedding_allreduce = embedding_sync;
  out.times.push_back(head);
  out.profile.layers.push_back(
      to_layer("head",
               fmt::format("final LayerNorm + output layer {} x {} ({}) + cross entropy", model.hidden, vocab,
                           tied_copies ? "a copy of the word embedding, kept equal to it" : "the word embedding"),
               head, layout, gpu, 0.0));
  return out;
}

}  // namespace baton
