#include "sim/analytic_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace baton::analytic {

OpCost repeat(OpCost op, double times) {
  op.flops *= times;
  op.bytes *= times;
  return op;
}

OpCost matmul(double m, double n, double k, int bytes_per_element, bool has_weights) {
  return OpCost{2.0 * m * n * k, (m * k + k * n + m * n) * bytes_per_element, has_weights};
}

OpCost batched_matmul(double count, double m, double n, double k, int bytes_per_element) {
  return repeat(matmul(m, n, k, bytes_per_element, /*has_weights=*/false), count);
}

OpCost elementwise(double elements, double reads, double writes, double flops_per_element, int bytes_per_element) {
  return OpCost{elements * flops_per_element, elements * (reads + writes) * bytes_per_element, false};
}

OpCost conv2d(const ConvShape& shape, int64_t batch, int bytes_per_element) {
  const double b = static_cast<double>(batch);
  const double outputs_per_sample = static_cast<double>(shape.out_channels * shape.out_height() * shape.out_width());
  const double weights = static_cast<double>(shape.kernel * shape.kernel * shape.in_channels * shape.out_channels);
  const double inputs_per_sample = static_cast<double>(shape.in_channels * shape.in_height * shape.in_width);
  const double flops =
      2.0 * static_cast<double>(shape.kernel * shape.kernel * shape.in_channels) * outputs_per_sample * b;
  const double bytes = (inputs_per_sample * b + weights + outputs_per_sample * b) * bytes_per_element;
  return OpCost{flops, bytes, true};
}

Seconds op_time(const OpCost& op, const DeviceSpec& device) {
  const double compute_s = op.flops / device.achieved_flops_per_s();
  const double memory_s = op.bytes / device.achieved_bytes_per_s();
  return Seconds(std::max(compute_s, memory_s));
}

std::string format_flops(double flops) {
  if (flops >= 1e12) return fmt::format("{:.2f} TFLOP", flops / 1e12);
  if (flops >= 1e9) return fmt::format("{:.2f} GFLOP", flops / 1e9);
  if (flops >= 1e6) return fmt::format("{:.2f} MFLOP", flops / 1e6);
  return fmt::format("{:.0f} FLOP", flops);
}

std::string format_bytes(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.2f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.2f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

namespace {

// "what; fwd 5.55 GFLOP, 214.00 MB moved[, memory-bound]" (per microbatch).
std::string describe(const LayerSpec& spec, const DeviceSpec& device) {
  double flops = 0.0;
  double bytes = 0.0;
  Seconds total;
  Seconds memory_bound;
  for (const OpCost& op : spec.ops) {
    flops += op.flops;
    bytes += op.bytes;
    const Seconds t = op_time(op, device);
    total += t;
    if (op.bytes / device.achieved_bytes_per_s() > op.flops / device.achieved_flops_per_s()) memory_bound += t;
  }
  const bool mostly_memory = memory_bound.value * 2.0 > total.value;
  return fmt::format("{}; fwd {}, {} moved{}", spec.what, format_flops(flops), format_bytes(bytes),
                     mostly_memory ? ", memory-bound" : "");
}

Result<std::vector<int>> resolve_inputs(const LayerSpec& spec, int index,
                                        const std::unordered_map<std::string, int>& index_of) {
  if (!spec.inputs) return index == 0 ? std::vector<int>{} : std::vector<int>{index - 1};
  std::vector<int> inputs;
  for (const std::string& producer : *spec.inputs) {
    auto found = index_of.find(producer);
    if (found == index_of.end())
      return Error{
          fmt::format("analytic model: layer '{}' reads '{}', which is no earlier layer", spec.name, producer)};
    inputs.push_back(found->second);
  }
  return inputs;
}

Layer cost_layer(const LayerSpec& spec, const DeviceSpec& device, const BuildContext& context) {
  Layer layer;
  layer.name = spec.name;
  layer.description = describe(spec, device);
  Seconds weight_half;
  for (const OpCost& op : spec.ops) {
    const Seconds t = op_time(op, device);
    layer.forward += t;
    if (op.has_weights) weight_half += t;
  }
  layer.backward = layer.forward * 2.0;
  layer.backward_weight = weight_half;
  layer.backward_input = layer.backward - weight_half;
  layer.output_bytes = Bytes(spec.output_elements * context.batch * context.bytes_per_element);
  layer.param_bytes = Bytes(spec.parameters * 4);  // fp32 master weights
  return layer;
}

}  // namespace

Result<Profile> assemble_profile(const std::string& model, const DeviceSpec& device, const BuildContext& context,
                                 const std::vector<LayerSpec>& specs) {
  Profile profile;
  profile.model = model;
  profile.device = device.label();
  profile.microbatch_size = static_cast<int>(context.batch);
  std::unordered_map<std::string, int> index_of;
  for (const LayerSpec& spec : specs) {
    const int index = profile.num_layers();
    if (index_of.count(spec.name) != 0) return Error{fmt::format("analytic model: layer name '{}' repeats", spec.name)};
    auto inputs = resolve_inputs(spec, index, index_of);
    if (!inputs) return inputs.error();
    Layer layer = cost_layer(spec, device, context);
    layer.inputs = std::move(*inputs);
    index_of.emplace(spec.name, index);
    profile.layers.push_back(std::move(layer));
  }
  return profile;
}

LayerSpec linear_layer(const BuildContext& context, const std::string& name, int64_t rows_per_sample,
                       int64_t in_features, int64_t out_features, bool bias) {
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("Linear({}, {}{})", in_features, out_features, bias ? "" : ", no bias");
  const double rows = static_cast<double>(rows_per_sample * context.batch);
  spec.ops = {matmul(rows, static_cast<double>(out_features), static_cast<double>(in_features),
                     context.bytes_per_element, /*has_weights=*/true)};
  spec.output_elements = rows_per_sample * out_features;
  spec.parameters = in_features * out_features + (bias ? out_features : 0);
  return spec;
}

LayerSpec relu_layer(const BuildContext& context, const std::string& name, int64_t elements_per_sample,
                     const std::string& shape_text) {
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("ReLU {}", shape_text);
  const double elements = static_cast<double>(elements_per_sample * context.batch);
  spec.ops = {elementwise(elements, 1, 1, 1, context.bytes_per_element)};
  spec.output_elements = elements_per_sample;
  return spec;
}

LayerSpec dropout_layer(const BuildContext& context, const std::string& name, int64_t elements_per_sample,
                        const std::string& shape_text) {
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("Dropout {}", shape_text);
  const double elements = static_cast<double>(elements_per_sample * context.batch);
  // Reads the input, writes the output and a mask of the same size.
  spec.ops = {elementwise(elements, 1, 2, 2, context.bytes_per_element)};
  spec.output_elements = elements_per_sample;
  return spec;
}

}  // namespace baton::analytic
