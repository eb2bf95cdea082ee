// GNMT as in PipeDream's GNMT-8 / GNMT-16 (the MLPerf reference model):
// encoder = embedding, a bidirectional LSTM, an LSTM of 2H inputs, then LSTMs
// with residual adds; decoder = embedding, an LSTM whose output queries a
// Bahdanau attention over the last encoder layer, then LSTMs that read
// [previous output, attention context] (2H inputs; residual adds from the third
// on); classifier = Linear(H, vocab) at every target position.
//
// Assumptions: hidden H = 1024, vocabulary 32,320 (MLPerf's BPE vocabulary, "32k"),
// source and target length 50 tokens, teacher forcing (the decoder LSTMs and
// the attention run over the whole target sequence at once), separate encoder
// and decoder embeddings. An LSTM layer multiplies its input by W_ih for all
// time steps in one GEMM and then runs T recurrent [B x H] x [H x 4H] GEMMs that
// each re-read W_hh from memory (no persistent kernel).
#include <fmt/format.h>

#include "sim/analytic_ops.h"

namespace baton::analytic {

namespace {

constexpr int64_t kHidden = 1024;
constexpr int64_t kVocab = 32320;
constexpr int64_t kSequence = 50;

// One direction of one LSTM layer over the whole sequence.
std::vector<OpCost> lstm_direction_ops(const BuildContext& context, int64_t input_size) {
  const double b = static_cast<double>(context.batch);
  const double t = static_cast<double>(kSequence);
  const double h = static_cast<double>(kHidden);
  const int bpe = context.bytes_per_element;
  return {matmul(b * t, 4 * h, static_cast<double>(input_size), bpe, /*has_weights=*/true),
          repeat(matmul(b, 4 * h, h, bpe, /*has_weights=*/true), t),
          // gates: read 4 pre-activations and c_prev, write h and c
          elementwise(b * t * h, 5, 2, 10, bpe)};
}

// PyTorch's nn.LSTM parameters: W_ih, W_hh and two bias vectors per direction.
int64_t lstm_parameters(int64_t input_size) { return 4 * kHidden * (input_size + kHidden) + 8 * kHidden; }

LayerSpec lstm_layer(const BuildContext& context, const std::string& name, int64_t input_size, bool bidirectional,
                     bool residual) {
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("LSTM({}, {}{}) over {} steps{}", input_size, kHidden, bidirectional ? ", bidirectional" : "",
                          kSequence, residual ? " + residual add" : "");
  const int directions = bidirectional ? 2 : 1;
  for (int d = 0; d < directions; ++d) {
    for (const OpCost& op : lstm_direction_ops(context, input_size)) spec.ops.push_back(op);
  }
  const double elements = static_cast<double>(context.batch * kSequence * kHidden);
  if (input_size == 2 * kHidden && !bidirectional)  // concatenating two H-wide inputs
    spec.ops.push_back(elementwise(2 * elements, 1, 1, 0, context.bytes_per_element));
  if (residual) spec.ops.push_back(elementwise(elements, 2, 1, 1, context.bytes_per_element));
  spec.output_elements = kSequence * kHidden * directions;
  spec.parameters = directions * lstm_parameters(input_size);
  return spec;
}

LayerSpec embedding_layer(const BuildContext& context, const std::string& name) {
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("Embedding({}, {}) of {} tokens", kVocab, kHidden, kSequence);
  const double elements = static_cast<double>(context.batch * kSequence * kHidden);
  // Gathers one row per token; its backward is the (scatter-add) weight gradient.
  OpCost gather = elementwise(elements, 1, 1, 0, context.bytes_per_element);
  gather.has_weights = true;
  spec.ops = {gather};
  spec.output_elements = kSequence * kHidden;
  spec.parameters = kVocab * kHidden;
  return spec;
}

// Bahdanau attention (PipeDream's GNMT: linear_q and linear_k without bias, a
// score vector v): score(q, k) = v . tanh(W_q q + W_k k), softmax over source
// positions, context = weights x keys.
LayerSpec attention_layer(const BuildContext& context, const std::string& name, const std::string& query,
                          const std::string& keys) {
  const double b = static_cast<double>(context.batch);
  const double t = static_cast<double>(kSequence);
  const double h = static_cast<double>(kHidden);
  const int bpe = context.bytes_per_element;
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("Bahdanau attention, {} queries x {} keys, {} units", kSequence, kSequence, kHidden);
  spec.ops = {matmul(b * t, h, h, bpe, true),            // W_q q
              matmul(b * t, h, h, bpe, true),            // W_k k
              elementwise(b * t * t * h, 2, 1, 2, bpe),  // tanh(W_q q + W_k k), materialized
              matmul(b * t * t, 1, h, bpe, true),        // . v
              elementwise(b * t * t, 1, 1, 5, bpe),      // softmax
              batched_matmul(b, t, h, t, bpe)};          // context = weights x keys
  spec.output_elements = kSequence * kHidden;
  spec.parameters = 2 * kHidden * kHidden + kHidden;
  spec.inputs = std::vector<std::string>{query, keys};
  return spec;
}

void add_encoder(const BuildContext& context, int layers, std::vector<LayerSpec>* out) {
  out->push_back(embedding_layer(context, "encoder.embedding"));
  out->push_back(lstm_layer(context, "encoder.rnn0", kHidden, /*bidirectional=*/true, false));
  out->push_back(lstm_layer(context, "encoder.rnn1", 2 * kHidden, false, false));
  for (int i = 2; i < layers; ++i)
    out->push_back(lstm_layer(context, fmt::format("encoder.rnn{}", i), kHidden, false, true));
}

void add_decoder(const BuildContext& context, int layers, const std::string& encoder_output,
                 std::vector<LayerSpec>* out) {
  out->push_back(embedding_layer(context, "decoder.embedding"));
  out->back().inputs = std::vector<std::string>{};  // target tokens come from the data loader
  out->push_back(lstm_layer(context, "decoder.rnn0", kHidden, false, false));
  out->push_back(attention_layer(context, "decoder.attention", "decoder.rnn0", encoder_output));
  for (int i = 1; i < layers; ++i) {
    out->push_back(lstm_layer(context, fmt::format("decoder.rnn{}", i), 2 * kHidden, false, i >= 2));
    out->back().inputs = std::vector<std::string>{fmt::format("decoder.rnn{}", i - 1), "decoder.attention"};
  }
}

}  // namespace

std::vector<LayerSpec> gnmt_layers(const BuildContext& context, int encoder_layers, int decoder_layers) {
  std::vector<LayerSpec> layers;
  add_encoder(context, encoder_layers, &layers);
  add_decoder(context, decoder_layers, fmt::format("encoder.rnn{}", encoder_layers - 1), &layers);
  layers.push_back(linear_layer(context, "classifier", kSequence, kHidden, kVocab, /*bias=*/true));
  layers.back().what += fmt::format(" at {} target positions", kSequence);
  return layers;
}

}  // namespace baton::analytic
