#include "sim/analytic.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/analytic_ops.h"

namespace baton {

namespace {

Status check_device(const DeviceSpec& device) {
  if (!(device.peak_tflops > 0.0) || !(device.efficiency > 0.0) || !(device.memory_bandwidth_gbytes_per_s > 0.0) ||
      !(device.memory_efficiency > 0.0) || device.bytes_per_element < 1) {
    return Error{
        fmt::format("device '{}': peak_tflops, efficiency, memory_bandwidth_gbytes_per_s, memory_efficiency "
                    "and bytes_per_element must all be > 0, got {}, {}, {}, {}, {}",
                    device.name, device.peak_tflops, device.efficiency, device.memory_bandwidth_gbytes_per_s,
                    device.memory_efficiency, device.bytes_per_element)};
  }
  return ok_status();
}

Result<std::vector<analytic::LayerSpec>> architecture_layers(const std::string& arch,
                                                             const analytic::BuildContext& context) {
  if (arch == "vgg16") return analytic::vgg16_layers(context);
  if (arch == "alexnet") return analytic::alexnet_layers(context);
  if (arch == "resnet50") return analytic::resnet50_layers(context);
  if (arch == "gnmt8") return analytic::gnmt_layers(context, 4, 4);
  if (arch == "gnmt16") return analytic::gnmt_layers(context, 8, 8);
  if (arch == "bert-large") return analytic::transformer_layers(context, analytic::bert_large_config());
  if (auto gpt = analytic::gpt_config(arch)) return analytic::transformer_layers(context, *gpt);
  return Error{fmt::format("unknown architecture '{}' (known: {})", arch, fmt::join(analytic_architectures(), ", "))};
}

}  // namespace

std::vector<std::string> analytic_architectures() {
  return {"vgg16", "alexnet", "resnet50", "gnmt8", "gnmt16", "bert-large", "gpt-1.3b", "gpt-13b", "gpt-175b"};
}

Result<Profile> make_analytic_profile(const std::string& arch, const DeviceSpec& device, int microbatch_size) {
  if (microbatch_size < 1) return Error{fmt::format("microbatch_size must be >= 1, got {}", microbatch_size)};
  if (auto ok = check_device(device); !ok) return ok.error();
  const analytic::BuildContext context{microbatch_size, device.bytes_per_element};
  auto specs = architecture_layers(arch, context);
  if (!specs) return specs.error();
  return analytic::assemble_profile(arch, device, context, *specs);
}

std::string analytic_derivation(const DeviceSpec& device, int microbatch_size) {
  return fmt::format(
      "Analytic, not measured. Per operator, forward time = max(FLOPs / ({:g} TFLOP/s {} peak x "
      "{:.2f} efficiency), bytes moved / ({:g} GB/s x {:.2f})) on {}; a layer's forward_ms is the "
      "sum over its operators (FLOPs: conv 2*K*K*Cin*Cout*Hout*Wout*batch, linear "
      "2*in*out*rows, attention QK^T and AV 2*s*s*d each; a multiply-add counts 2). "
      "backward_ms = 2 x forward_ms (input and weight gradients each cost one forward); "
      "backward_weight_ms = the forward time of the operators with weights. Microbatch {} "
      "samples, {} activations: output_bytes = output elements x {} bytes x {}; param_bytes = "
      "parameters x 4 (fp32 master weights). Device basis: {}. Regenerate with "
      "bench/make_shipped_profiles.",
      device.peak_tflops, device.precision, device.efficiency, device.memory_bandwidth_gbytes_per_s,
      device.memory_efficiency, device.full_name, microbatch_size, device.precision, device.bytes_per_element,
      microbatch_size, device.basis);
}

nlohmann::json profile_to_json_with_derivation(const Profile& profile, const std::string& derivation) {
  nlohmann::json document = profile_to_json(profile);
  document["derivation"] = derivation;
  return document;
}

}  // namespace baton
