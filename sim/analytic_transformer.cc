// Transformer stacks: GPT (GPT-3 paper sizes) and BERT-large. One profile layer
// for the embeddings, one per transformer block, one for the output head.
//
// A block (pre-LayerNorm for GPT, post-LayerNorm for BERT; the cost is the
// same) with s tokens, width d, feed-forward width f = 4d, per sample:
//   QKV projection 2 s d (3d), scores Q K^T 2 s^2 d, softmax over h s^2 values,
//   weights x V 2 s^2 d, output projection 2 s d^2, MLP 2 s d f x 2,
//   two LayerNorms, GeLU over s f values and two residual adds (memory-bound);
//   GEMM FLOPs = 24 s d^2 + 4 s^2 d (Megatron-LM's count);
//   parameters = 12 d^2 + 13 d.
// The score matrices are materialized (no fused attention) and causal masking
// is not exploited (full s x s products, as in Megatron-LM's FLOP count).
// The output head's vocabulary projection is tied to the token embedding:
// its weights are counted once, in the embedding layer (a pipeline stage that
// holds the head without the embedding needs its own copy, vocab x d x 4 bytes,
// which this profile does not charge).
#include <fmt/format.h>

#include "sim/analytic_ops.h"

namespace baton::analytic {

namespace {

double as_double(int64_t value) { return static_cast<double>(value); }

std::vector<OpCost> block_ops(const BuildContext& context, const TransformerConfig& c) {
  const double b = as_double(context.batch);
  const double s = as_double(c.sequence);
  const double d = as_double(c.hidden);
  const double h = as_double(c.heads);
  const double f = as_double(c.ffn);
  const double tokens = b * s;
  const int bpe = context.bytes_per_element;
  const OpCost layer_norm = elementwise(tokens * d, 1, 1, 8, bpe);
  const OpCost residual_add = elementwise(tokens * d, 2, 1, 1, bpe);
  return {layer_norm,
          matmul(tokens, 3 * d, d, bpe, true),       // QKV projection
          batched_matmul(b * h, s, s, d / h, bpe),   // Q K^T
          elementwise(b * h * s * s, 1, 1, 5, bpe),  // scale, mask, softmax
          batched_matmul(b * h, s, d / h, s, bpe),   // weights x V
          matmul(tokens, d, d, bpe, true),           // output projection
          residual_add,
          layer_norm,
          matmul(tokens, f, d, bpe, true),        // MLP up
          elementwise(tokens * f, 1, 1, 8, bpe),  // GeLU
          matmul(tokens, d, f, bpe, true),        // MLP down
          residual_add};
}

LayerSpec block_layer(const BuildContext& context, const TransformerConfig& c, const std::string& name) {
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format(
      "transformer block: attention ({} heads x {}, {}x{} scores{}), MLP {} -> {} -> {}, "
      "2 LayerNorms, 2 residual adds",
      c.heads, c.hidden / c.heads, c.sequence, c.sequence, c.family == "gpt" ? ", causal" : "", c.hidden, c.ffn,
      c.hidden);
  spec.ops = block_ops(context, c);
  spec.output_elements = c.sequence * c.hidden;
  // QKV 3d^2 + 3d, output d^2 + d, MLP 2 d f + f + d, two LayerNorms 4d.
  spec.parameters = 4 * c.hidden * c.hidden + 2 * c.hidden * c.ffn + 9 * c.hidden + c.ffn;
  return spec;
}

// GPT: token + learned position embeddings. BERT: word + position + token
// type embeddings, then a LayerNorm.
LayerSpec embedding_layer(const BuildContext& context, const TransformerConfig& c) {
  const double elements = as_double(context.batch * c.sequence * c.hidden);
  const int bpe = context.bytes_per_element;
  const bool bert = c.family == "bert";
  LayerSpec spec;
  spec.name = bert ? "embeddings" : "embedding";
  spec.what = fmt::format("token Embedding({}, {}) + position Embedding({}, {}){} of {} tokens", c.vocab, c.hidden,
                          c.sequence, c.hidden, bert ? " + token type Embedding(2) + LayerNorm" : "", c.sequence);
  OpCost gather = elementwise(elements, bert ? 3 : 2, 1, bert ? 2 : 1, bpe);
  gather.has_weights = true;  // its backward is the scatter-add weight gradient
  spec.ops = {gather};
  if (bert) spec.ops.push_back(elementwise(elements, 1, 1, 8, bpe));
  spec.output_elements = c.sequence * c.hidden;
  spec.parameters = (c.vocab + c.sequence) * c.hidden + (bert ? 4 * c.hidden : 0);
  return spec;
}

// GPT: final LayerNorm + tied LM head, logits at every position.
LayerSpec gpt_head_layer(const BuildContext& context, const TransformerConfig& c) {
  const double tokens = as_double(context.batch * c.sequence);
  const int bpe = context.bytes_per_element;
  LayerSpec spec;
  spec.name = "head";
  spec.what = fmt::format(
      "final LayerNorm + LM head Linear({}, {}, tied to the token embedding) at "
      "{} positions",
      c.hidden, c.vocab, c.sequence);
  spec.ops = {elementwise(tokens * as_double(c.hidden), 1, 1, 8, bpe),
              matmul(tokens, as_double(c.vocab), as_double(c.hidden), bpe, true)};
  spec.output_elements = c.sequence * c.vocab;
  spec.parameters = 2 * c.hidden;
  return spec;
}

// BERT pre-training heads: MLM (dense + GeLU + LayerNorm, tied decoder with its
// own bias, at every position) and NSP (pooler dense + tanh on [CLS], 2 classes).
LayerSpec bert_heads_layer(const BuildContext& context, const TransformerConfig& c) {
  const double b = as_double(context.batch);
  const double tokens = b * as_double(c.sequence);
  const double d = as_double(c.hidden);
  const int bpe = context.bytes_per_element;
  LayerSpec spec;
  spec.name = "heads";
  spec.what = fmt::format(
      "MLM head (Linear({0}, {0}) + GeLU + LayerNorm + decoder to {1}, tied) at "
      "{2} positions + pooler + NSP Linear({0}, 2)",
      c.hidden, c.vocab, c.sequence);
  spec.ops = {matmul(tokens, d, d, bpe, true),
              elementwise(tokens * d, 1, 1, 8, bpe),  // GeLU
              elementwise(tokens * d, 1, 1, 8, bpe),  // LayerNorm
              matmul(tokens, as_double(c.vocab), d, bpe, true),
              matmul(b, d, d, bpe, true),   // pooler
              matmul(b, 2, d, bpe, true)};  // NSP classifier
  spec.output_elements = c.sequence * c.vocab + 2;
  spec.parameters =
      (c.hidden * c.hidden + c.hidden) + 2 * c.hidden + c.vocab + (c.hidden * c.hidden + c.hidden) + (2 * c.hidden + 2);
  return spec;
}

}  // namespace

std::vector<LayerSpec> transformer_layers(const BuildContext& context, const TransformerConfig& config) {
  const bool bert = config.family == "bert";
  std::vector<LayerSpec> layers;
  layers.push_back(embedding_layer(context, config));
  for (int64_t i = 0; i < config.layers; ++i) {
    const std::string name = bert ? fmt::format("encoder.layer.{}", i) : fmt::format("block.{}", i);
    layers.push_back(block_layer(context, config, name));
  }
  layers.push_back(bert ? bert_heads_layer(context, config) : gpt_head_layer(context, config));
  return layers;
}

TransformerConfig bert_large_config() { return TransformerConfig{"bert", 24, 1024, 16, 4096, 512, 30522}; }

std::optional<TransformerConfig> gpt_config(const std::string& arch) {
  // GPT-3 paper, Table 2.1; sequence 2048, GPT-2's 50,257-token vocabulary.
  // Heads of 128: the paper lists 24 heads of 128 for the 1.3B model, which do
  // not tile d = 2048; we use 16 (attention FLOPs do not depend on the split).
  if (arch == "gpt-1.3b") return TransformerConfig{"gpt", 24, 2048, 16, 4 * 2048, 2048, 50257};
  if (arch == "gpt-13b") return TransformerConfig{"gpt", 40, 5120, 40, 4 * 5120, 2048, 50257};
  if (arch == "gpt-175b") return TransformerConfig{"gpt", 96, 12288, 96, 4 * 12288, 2048, 50257};
  return std::nullopt;
}

}  // namespace baton::analytic
