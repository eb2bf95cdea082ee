// gpt-mini: a small GPT-style decoder (token + position embedding, pre-norm
// blocks of causal self-attention and MLP, a norm + linear head).
//
// Sizes: vocabulary V = 32, context T = 16, width D = 32, H = 2 heads of
// Dh = 16, MLP hidden 4D, 4 blocks. Activations between layers: [B, T, D].
//
// Task: sequences x_{t+1} = (5 x_t + c) mod V with x_0 and c in [0, 4) drawn
// per sequence; the target is the sequence shifted by one (next token).
#include <cmath>

#include <fmt/format.h>

#include "exec/model.h"
#include "exec/weight_grad.h"

namespace baton::exec {

namespace {

constexpr int64_t kVocab = 32;
constexpr int64_t kContext = 16;
constexpr int64_t kWidth = 32;
constexpr int64_t kHeads = 2;
constexpr int64_t kBlocks = 4;
constexpr uint64_t kSequenceStream = 0x6E71;

ParamDef fan_in(std::vector<int64_t> shape, int64_t in) {
  return ParamDef{std::move(shape), Init::kFanIn, static_cast<double>(in)};
}

LayerDef embed_layer() {
  LayerDef layer;
  layer.name = "embed";
  layer.description = fmt::format("token embedding {}x{} + position embedding {}x{}", kVocab, kWidth, kContext, kWidth);
  layer.params = {ParamDef{{kVocab, kWidth}, Init::kNormal, 0.5}, ParamDef{{kContext, kWidth}, Init::kNormal, 0.1}};
  layer.output_shape = {kContext, kWidth};
  layer.forward = [](const at::Tensor& tokens, at::TensorList p) { return at::embedding(p[0], tokens) + p[1]; };
  return layer;
}

// Causal multi-head self-attention of x [B, T, D] (already normalised).
at::Tensor attention(const at::Tensor& h, const at::Tensor& w_qkv, const at::Tensor& b_qkv, const at::Tensor& w_proj,
                     const at::Tensor& b_proj) {
  const int64_t batch = h.size(0);
  const int64_t head_dim = kWidth / kHeads;
  std::vector<at::Tensor> qkv = linear(h, w_qkv, b_qkv).chunk(3, -1);
  const auto heads = [&](const at::Tensor& t) {  // [B, T, D] -> [B, H, T, Dh]
    return t.reshape({batch, kContext, kHeads, head_dim}).transpose(1, 2);
  };
  at::Tensor scores =
      at::matmul(heads(qkv[0]), heads(qkv[1]).transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
  const at::Tensor future = at::ones({kContext, kContext}, scores.options().dtype(at::kBool)).triu(1);
  at::Tensor weights = at::softmax(scores.masked_fill(future, -INFINITY), -1);
  at::Tensor y = at::matmul(weights, heads(qkv[2])).transpose(1, 2).reshape({batch, kContext, kWidth});
  return linear(y, w_proj, b_proj);
}

LayerDef block_layer(int index) {
  LayerDef layer;
  layer.name = fmt::format("block{}", index);
  layer.description =
      fmt::format("pre-norm block: {}-head causal attention + MLP {}->{}->{}", kHeads, kWidth, 4 * kWidth, kWidth);
  layer.params = {ParamDef{{kWidth}, Init::kOnes, 0},       ParamDef{{kWidth}, Init::kZeros, 0},
                  fan_in({3 * kWidth, kWidth}, kWidth),     fan_in({3 * kWidth}, kWidth),
                  fan_in({kWidth, kWidth}, kWidth),         fan_in({kWidth}, kWidth),
                  ParamDef{{kWidth}, Init::kOnes, 0},       ParamDef{{kWidth}, Init::kZeros, 0},
                  fan_in({4 * kWidth, kWidth}, kWidth),     fan_in({4 * kWidth}, kWidth),
                  fan_in({kWidth, 4 * kWidth}, 4 * kWidth), fan_in({kWidth}, 4 * kWidth)};
  layer.output_shape = {kContext, kWidth};
  layer.forward = [](const at::Tensor& x, at::TensorList p) {
    at::Tensor h = at::layer_norm(x, {kWidth}, p[0], p[1]);
    at::Tensor x1 = x + attention(h, p[2], p[3], p[4], p[5]);
    at::Tensor h2 = at::layer_norm(x1, {kWidth}, p[6], p[7]);
    return x1 + linear(at::gelu(linear(h2, p[8], p[9])), p[10], p[11]);
  };
  return layer;
}

LayerDef head_layer() {
  LayerDef layer;
  layer.name = "head";
  layer.description = fmt::format("LayerNorm + Linear({}, {})", kWidth, kVocab);
  layer.params = {ParamDef{{kWidth}, Init::kOnes, 0}, ParamDef{{kWidth}, Init::kZeros, 0},
                  fan_in({kVocab, kWidth}, kWidth), fan_in({kVocab}, kWidth)};
  layer.output_shape = {kContext, kVocab};
  layer.forward = [](const at::Tensor& x, at::TensorList p) {
    return linear(at::layer_norm(x, {kWidth}, p[0], p[1]), p[2], p[3]);
  };
  return layer;
}

// Sample `index` as T + 1 tokens written to `out`.
void sequence(uint64_t seed, int64_t index, int64_t* out) {
  const uint64_t key = random_key(seed, kSequenceStream, static_cast<uint64_t>(index));
  int64_t token = static_cast<int64_t>(random_bits(key, 0) % kVocab);
  const int64_t step = static_cast<int64_t>(random_bits(key, 1) % 4);
  for (int64_t t = 0; t <= kContext; ++t) {
    out[t] = token;
    token = (5 * token + step) % kVocab;
  }
}

}  // namespace

ModelDef make_gpt_mini() {
  ModelDef model;
  model.name = "gpt-mini";
  model.description = fmt::format("GPT-style decoder: vocab {}, context {}, width {}, {} heads, {} blocks", kVocab,
                                  kContext, kWidth, kHeads, kBlocks);
  model.input_shape = {kContext};
  model.input_dtype = at::kLong;
  model.layers.push_back(embed_layer());
  for (int i = 1; i <= kBlocks; ++i) model.layers.push_back(block_layer(i));
  model.layers.push_back(head_layer());
  model.sample = [](uint64_t seed, int64_t first, int64_t batch) {
    at::Tensor all = at::empty({batch, kContext + 1}, at::kLong);
    for (int64_t j = 0; j < batch; ++j) sequence(seed, first + j, all.data_ptr<int64_t>() + j * (kContext + 1));
    return Sample{all.narrow(1, 0, kContext).contiguous(), all.narrow(1, 1, kContext).contiguous()};
  };
  model.loss = [](const at::Tensor& logits, const at::Tensor& target) {
    return at::cross_entropy_loss(logits.reshape({-1, kVocab}), target.reshape({-1}));
  };
  return model;
}

}  // namespace baton::exec
