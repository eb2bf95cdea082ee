// Device specs for analytic profiles. Peaks are datasheet figures (dense, no
// structured sparsity); the efficiencies are assumptions, chosen from what
// well-tuned mixed-precision training reports (Megatron-LM: 44-52% of A100
// bf16 peak on large GPT models; ~30-45% model FLOP utilization is typical on
// V100 and H100) and from the ~80% of peak bandwidth that streaming kernels reach.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/analytic.h"

namespace baton {

namespace {

DeviceSpec v100() {
  return DeviceSpec{"v100",
                    "V100-SXM2-16GB",
                    "fp16",
                    125.0,
                    0.40,
                    900.0,
                    0.80,
                    16.0,
                    2,
                    "NVIDIA V100 SXM2 datasheet: 125 TFLOP/s fp16 tensor core (15.7 fp32), "
                    "900 GB/s HBM2, 16 GB; efficiencies 0.40 (compute) and 0.80 (memory) assumed"};
}

DeviceSpec a100() {
  return DeviceSpec{"a100",
                    "A100-SXM4-80GB",
                    "bf16",
                    312.0,
                    0.45,
                    2039.0,
                    0.80,
                    80.0,
                    2,
                    "NVIDIA A100 SXM4 80GB datasheet: 312 TFLOP/s bf16 tensor core dense (19.5 "
                    "fp32), 2039 GB/s HBM2e, 80 GB; efficiencies 0.45 (compute) and 0.80 (memory) "
                    "assumed"};
}

DeviceSpec h100() {
  return DeviceSpec{"h100",
                    "H100-SXM5-80GB",
                    "bf16",
                    989.0,
                    0.40,
                    3350.0,
                    0.80,
                    80.0,
                    2,
                    "NVIDIA H100 SXM5 datasheet: 989 TFLOP/s bf16 tensor core dense (67 fp32), "
                    "3350 GB/s HBM3, 80 GB; efficiencies 0.40 (compute) and 0.80 (memory) assumed"};
}

DeviceSpec titanx() {
  return DeviceSpec{"titanx",
                    "TITAN-X-Pascal-12GB",
                    "fp32",
                    11.0,
                    0.50,
                    480.0,
                    0.75,
                    12.0,
                    4,
                    "NVIDIA TITAN X (Pascal) specifications: 11 TFLOP/s fp32 (no tensor cores), "
                    "480 GB/s GDDR5X, 12 GB; efficiencies 0.50 (compute) and 0.75 (memory) assumed"};
}

DeviceSpec cpu() {
  return DeviceSpec{"cpu",
                    "CPU-core-AVX2",
                    "fp32",
                    0.096,
                    0.30,
                    20.0,
                    0.50,
                    8.0,
                    4,
                    "one x86-64 core with AVX2: 2 FMA units x 8 fp32 lanes x 2 FLOP x 3 GHz = "
                    "96 GFLOP/s, ~20 GB/s of DRAM bandwidth per core, 8 GiB per rank; "
                    "efficiencies 0.30 (compute) and 0.50 (memory) assumed"};
}

}  // namespace

std::string DeviceSpec::label() const {
  return fmt::format("{} (analytic: {:g} TFLOP/s {}{} x {:.2f}, {:g} GB/s x {:.2f})", full_name, peak_tflops, precision,
                     precision == "fp32" ? "" : " tensor", efficiency, memory_bandwidth_gbytes_per_s,
                     memory_efficiency);
}

std::vector<std::string> analytic_devices() { return {"v100", "a100", "h100", "titanx", "cpu"}; }

Result<DeviceSpec> device_spec(const std::string& name) {
  for (const DeviceSpec& spec : {v100(), a100(), h100(), titanx(), cpu()}) {
    if (spec.name == name) return spec;
  }
  return Error{fmt::format("unknown device '{}' (known: {})", name, fmt::join(analytic_devices(), ", "))};
}

}  // namespace baton
