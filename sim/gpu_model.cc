#include "sim/gpu_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace baton {

namespace {

// Fitted once on the A100 rows (see gpu_model.h); shared by every GPU.
constexpr double kGemmEfficiency = 0.7366;
constexpr double kHalfTileEfficiency = 0.9107;
constexpr double kMemoryEfficiency = 0.6746;
constexpr double kKernelFloorSeconds = 48.63e-6;
constexpr double kHostPerKernelSeconds = 49.87e-6;
constexpr double kHostPerPassSeconds = 0.4635e-3;
// The H100 and H200 SXM (GH100 at 700 W): the share of their tensor-core
// peaks they sustain relative to the A100, fixed on NVIDIA's published H100
// throughput in bf16 and FP8 (gpu_model.h says how).
constexpr double kHopperTensorShare = 0.75;

GpuModel make(std::string name, int sms, double peak, double fp8, double fp32, double hbm, double memory_gib,
              std::string datasheet, double tensor_share = 1.0) {
  GpuModel model;
  model.tensor_share = tensor_share;
  model.name = std::move(name);
  model.sms = sms;
  model.peak_tflops = peak;
  model.fp8_tflops = fp8;
  model.fp32_tflops = fp32;
  model.hbm_gbytes_per_s = hbm;
  model.memory_gib = memory_gib;
  model.gemm_efficiency = kGemmEfficiency;
  model.half_tile_efficiency = kHalfTileEfficiency;
  model.memory_efficiency = kMemoryEfficiency;
  model.kernel_floor = Seconds(kKernelFloorSeconds);
  model.host_per_kernel = Seconds(kHostPerKernelSeconds);
  model.host_per_pass = Seconds(kHostPerPassSeconds);
  model.source = fmt::format(
      "{}; GEMM efficiency {} of peak ({} of that in half tiles) and memory efficiency {}, {} us per kernel at "
      "least, {} us of host dispatch per kernel and {} ms of the host's per stage pass, fitted to the A100 rows "
      "of data/groundtruth/vtrain",
      datasheet, kGemmEfficiency, kHalfTileEfficiency, kMemoryEfficiency, kKernelFloorSeconds * 1e6,
      kHostPerKernelSeconds * 1e6, kHostPerPassSeconds * 1e3);
  if (tensor_share != 1.0)
    model.source += fmt::format(
        "; {} of the tensor-core peaks sustained (relative to the A100), fixed on NVIDIA's published H100 "
        "throughput (data/groundtruth/megatron_h100, data/groundtruth/nemo_h100_fp8)",
        tensor_share);
  return model;
}

std::vector<GpuModel> known() {
  return {
      make("A100-SXM4-80GB", 108, 312.0, 0.0, 156.0, 2039.0, 80.0,
           "NVIDIA A100 datasheet: 108 SMs, 312 TFLOP/s fp16/bf16 and 156 tf32 dense, 2039 GB/s HBM2e, 80 GB"),
      make("A100-SXM4-40GB", 108, 312.0, 0.0, 156.0, 1555.0, 40.0,
           "NVIDIA A100 datasheet: 108 SMs, 312 TFLOP/s fp16/bf16 and 156 tf32 dense, 1555 GB/s HBM2, 40 GB"),
      make("H100-SXM5-80GB", 132, 989.0, 1979.0, 495.0, 3350.0, 80.0,
           "NVIDIA H100 SXM5 datasheet: 132 SMs, 989 TFLOP/s fp16/bf16, 1979 fp8 and 495 tf32 dense, 3350 GB/s HBM3, "
           "80 GB",
           kHopperTensorShare),
      make("H200-SXM-141GB", 132, 989.0, 1979.0, 495.0, 4800.0, 141.0,
           "NVIDIA H200 SXM datasheet: 132 SMs (the H100 SXM5's GH100), 989 TFLOP/s fp16/bf16, 1979 fp8 and 495 tf32 "
           "dense, 4800 GB/s HBM3e, 141 GB",
           kHopperTensorShare),
      make("V100-SXM2-16GB", 80, 125.0, 0.0, 15.7, 900.0, 16.0,
           "NVIDIA V100 SXM2 datasheet: 80 SMs, 125 TFLOP/s fp16 tensor core, 15.7 fp32, 900 GB/s HBM2, 16 GB"),
      make("V100-SXM2-32GB", 80, 125.0, 0.0, 15.7, 900.0, 32.0,
           "NVIDIA V100 SXM2 datasheet: 80 SMs, 125 TFLOP/s fp16 tensor core, 15.7 fp32, 900 GB/s HBM2, 32 GB"),
  };
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

}  // namespace

Seconds GpuModel::gemm(double m, double n, double k, double count, int bytes_per_element) const {
  struct Tile {
    double m, n, efficiency;
  };
  const Tile tiles[] = {{double(tile_m), double(tile_n), 1.0},
                        {2.0 * tile_m, double(tile_n), 1.0},
                        {double(tile_m), 2.0 * tile_n, 1.0},
                        {double(tile_m), tile_n / 2.0, half_tile_efficiency},
                        {tile_m / 2.0, double(tile_n), half_tile_efficiency}};
  double compute = 1e300;
  for (const Tile& tile : tiles) {
    const double waves = std::ceil(count * std::ceil(m / tile.m) * std::ceil(n / tile.n) / sms);
    const double peak = bytes_per_element == 1 && fp8_tflops > 0.0    ? fp8_tflops
                        : bytes_per_element == 4 && fp32_tflops > 0.0 ? fp32_tflops
                                                                      : peak_tflops;
    const double tile_flops_per_s = peak * 1e12 / sms * tensor_share * gemm_efficiency * tile.efficiency;
    compute = std::min(compute, waves * 2.0 * tile.m * tile.n * k / tile_flops_per_s);
  }
  const double bytes = count * (m * k + k * n + m * n) * bytes_per_element;
  return std::max({Seconds(compute), memory_bound(bytes), kernel_floor});
}

Seconds GpuModel::memory_bound(double bytes) const {
  return std::max(Seconds(bytes / (hbm_gbytes_per_s * 1e9 * memory_efficiency)), kernel_floor);
}

std::vector<std::string> gpu_models() {
  std::vector<std::string> names;
  for (const GpuModel& model : known()) names.push_back(model.name);
  return names;
}

Result<GpuModel> gpu_model(const std::string& device_name) {
  const std::string wanted = lower(device_name);
  for (const GpuModel& model : known()) {
    const std::string name = lower(model.name);
    if (name == wanted || name.substr(0, 4) == wanted) return model;
  }
  return Error{
      fmt::format("no GPU model for device '{}': known are {} (or a100, h100, h200, v100); name one in the "
                  "topology's device.name",
                  device_name, fmt::join(gpu_models(), ", "))};
}

}  // namespace baton
