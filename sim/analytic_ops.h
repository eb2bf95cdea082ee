// Building blocks of the analytic profile generator: operator costs, layer
// specs, and the architecture builders. Internal to sim/analytic*.cc; tests use
// it to state single-operator formulas. The cost model is the one stated in
// sim/analytic.h.
//
// Conventions: every count is for a whole microbatch of `batch` samples unless
// a name says per sample; FLOPs count a multiply-add as 2; bytes are device
// memory traffic (reads + writes) at `bytes_per_element` per value.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/analytic.h"
#include "sim/result.h"
#include "sim/units.h"

namespace baton::analytic {

// One operator's forward cost.
struct OpCost {
  double flops = 0.0;        // forward FLOPs for the whole microbatch
  double bytes = 0.0;        // forward bytes read + written
  bool has_weights = false;  // its backward splits into input- and weight-gradient halves
};

// The same operator run `times` times (e.g. once per time step): FLOPs and bytes scale.
OpCost repeat(OpCost op, double times);

// [m x k] x [k x n]: 2 m n k FLOPs; reads both operands and writes the result
// once: (m k + k n + m n) x bytes_per_element bytes.
OpCost matmul(double m, double n, double k, int bytes_per_element, bool has_weights);

// `count` independent [m x k] x [k x n] products (attention heads x samples).
OpCost batched_matmul(double count, double m, double n, double k, int bytes_per_element);

// Elementwise or row-wise operator over `elements` values: reads `reads` and
// writes `writes` tensors of that many values, `flops_per_element` FLOPs each.
OpCost elementwise(double elements, double reads, double writes, double flops_per_element, int bytes_per_element);

// A 2-D convolution of one sample's [in_channels x in_height x in_width] input.
struct ConvShape {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t in_height = 0;
  int64_t in_width = 0;

  int64_t out_height() const { return (in_height + 2 * padding - kernel) / stride + 1; }
  int64_t out_width() const { return (in_width + 2 * padding - kernel) / stride + 1; }
};

// 2 K^2 Cin Cout Hout Wout x batch FLOPs (bias adds not counted); reads input
// and weights, writes output.
OpCost conv2d(const ConvShape& shape, int64_t batch, int bytes_per_element);

// Roofline time of one operator on `device` (see sim/analytic.h).
Seconds op_time(const OpCost& op, const DeviceSpec& device);

// One profile layer before costing.
struct LayerSpec {
  std::string name;
  std::string what;             // "Conv2d(3, 64, 3x3, pad 1) 3x224x224 -> 64x224x224"
  std::vector<OpCost> ops;      // run one after another
  int64_t output_elements = 0;  // per sample
  int64_t parameters = 0;
  std::optional<std::vector<std::string>> inputs;  // producer names; none: the previous layer
};

// What the builders need to size operators.
struct BuildContext {
  int64_t batch = 1;
  int bytes_per_element = 2;
};

// Turns specs into a costed Profile (times, sizes, inputs resolved by name,
// descriptions completed with FLOPs and bytes). Error: an input names no
// earlier layer.
Result<Profile> assemble_profile(const std::string& model, const DeviceSpec& device, const BuildContext& context,
                                 const std::vector<LayerSpec>& specs);

// Shared layer makers (one operator each unless stated).
LayerSpec linear_layer(const BuildContext& context, const std::string& name, int64_t rows_per_sample,
                       int64_t in_features, int64_t out_features, bool bias);
LayerSpec relu_layer(const BuildContext& context, const std::string& name, int64_t elements_per_sample,
                     const std::string& shape_text);
LayerSpec dropout_layer(const BuildContext& context, const std::string& name, int64_t elements_per_sample,
                        const std::string& shape_text);

// "1.23 GFLOP", "456 MB": short magnitudes for descriptions.
std::string format_flops(double flops);
std::string format_bytes(double bytes);

// Architecture builders (sim/analytic_cnn.cc, analytic_gnmt.cc, analytic_transformer.cc).
std::vector<LayerSpec> vgg16_layers(const BuildContext& context);
std::vector<LayerSpec> alexnet_layers(const BuildContext& context);
std::vector<LayerSpec> resnet50_layers(const BuildContext& context);
// GNMT with `encoder_layers` + `decoder_layers` LSTM layers (4+4 or 8+8).
std::vector<LayerSpec> gnmt_layers(const BuildContext& context, int encoder_layers, int decoder_layers);

// A transformer stack: embedding, `layers` blocks, head.
struct TransformerConfig {
  std::string family;  // "gpt" (causal LM head) or "bert" (MLM + NSP heads)
  int64_t layers = 0;
  int64_t hidden = 0;  // d
  int64_t heads = 0;
  int64_t ffn = 0;  // feed-forward width (4d)
  int64_t sequence = 0;
  int64_t vocab = 0;
};
std::vector<LayerSpec> transformer_layers(const BuildContext& context, const TransformerConfig& config);
TransformerConfig bert_large_config();
// GPT-3 paper sizes: "gpt-1.3b", "gpt-13b", "gpt-175b".
std::optional<TransformerConfig> gpt_config(const std::string& arch);

}  // namespace baton::analytic
