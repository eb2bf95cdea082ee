// Analytic profiles: layer costs derived from a model's architecture and a
// device's stated peak, for models and clusters nobody has measured.
//
// `make_analytic_profile("vgg16", *device_spec("v100"), 32)` returns the Profile a
// measurement would give, computed from FLOP and byte counts. The cost model,
// stated once here and used for every layer of every architecture:
//
//   A layer is a list of operators run one after another (a conv, then its
//   BatchNorm, then its ReLU). Each operator has forward FLOPs F (a multiply-add
//   counts 2) and forward bytes B read from and written to device memory.
//     operator forward time = max(F / (peak_tflops x 1e12 x efficiency),
//                                 B / (memory_bandwidth_gbytes_per_s x 1e9 x memory_efficiency))
//     (a roofline: cheap layers such as ReLU, pooling and norms are memory-bound)
//     layer forward   = sum of its operators' forward times
//     layer backward  = 2 x layer forward: an operator with weights computes the
//                       input gradient and the weight gradient, each as costly as
//                       its forward; an operator without weights is charged 2x too
//                       (it reads the output gradient and its saved input, writes
//                       the input gradient)
//     backward_weight = the forward time of the operators with weights (their
//                       weight-gradient half); backward_input = backward - backward_weight
//     output_bytes    = output elements per sample x microbatch x bytes_per_element
//     param_bytes     = parameters x 4 (fp32 master weights, whatever the math precision)
//
// Not modelled: kernel launch overheads, overlap between operators, the
// optimizer step, dropout, loss computation, and activation memory inside a
// layer (the Profile format only carries layer outputs). Attention score
// matrices are materialized (no fused attention kernels).
//
// Thread safety: pure functions over constant tables; call from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/profile.h"
#include "sim/result.h"

namespace baton {

// One accelerator as the cost model sees it. Peaks are vendor datasheet figures
// (dense, no sparsity); efficiencies are our assumptions, stated per device.
struct DeviceSpec {
  std::string name;          // short key: "v100", "a100", "h100", "titanx", "cpu"
  std::string full_name;     // "V100-SXM2-16GB"
  std::string precision;     // math and activation type: "fp16", "bf16" or "fp32"
  double peak_tflops = 0.0;  // dense peak at `precision` (tensor cores where used), 1 TFLOP/s = 1e12 FLOP/s
  double efficiency = 0.0;   // fraction of peak_tflops that GEMMs and convolutions achieve
  double memory_bandwidth_gbytes_per_s = 0.0;  // peak device-memory bandwidth, 1 GB/s = 1e9 B/s
  double memory_efficiency = 0.0;              // fraction of it that streaming kernels achieve
  double memory_gib = 0.0;                     // device memory capacity
  int bytes_per_element = 2;                   // activation element size at `precision`
  std::string basis;                           // where the figures come from, in words

  double achieved_flops_per_s() const { return peak_tflops * 1e12 * efficiency; }
  double achieved_bytes_per_s() const { return memory_bandwidth_gbytes_per_s * 1e9 * memory_efficiency; }
  // "V100-SXM2-16GB (analytic: 125 TFLOP/s fp16 tensor x 0.40)": the Profile's device.
  std::string label() const;
};

// The devices device_spec() knows, in a stable order.
std::vector<std::string> analytic_devices();
// The spec of a named device; an Error listing the known names otherwise.
Result<DeviceSpec> device_spec(const std::string& name);

// The architectures make_analytic_profile() knows, in a stable order:
// vgg16, alexnet, resnet50, gnmt8, gnmt16, bert-large, gpt-1.3b, gpt-13b, gpt-175b.
std::vector<std::string> analytic_architectures();

// The profile of `arch` on `device` at `microbatch_size` samples (sequences for
// GNMT, BERT and GPT). Errors: unknown architecture, microbatch_size < 1, a
// device with a non-positive peak, efficiency, bandwidth or element size.
Result<Profile> make_analytic_profile(const std::string& arch, const DeviceSpec& device, int microbatch_size);

// One paragraph saying how make_analytic_profile() derived a profile: the
// formulas above with this device's peak, efficiencies, precision and batch.
std::string analytic_derivation(const DeviceSpec& device, int microbatch_size);

// profile_to_json(profile) plus a top-level "derivation" string (which the
// profile loader ignores): the form shipped under traces/.
nlohmann::json profile_to_json_with_derivation(const Profile& profile, const std::string& derivation);

}  // namespace baton
