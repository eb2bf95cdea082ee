// The kernel measurements of one GPU (format "baton.kernels.v1"): what
// `baton kernels measure` times on a device and `baton kernels check` holds
// against the GPU kernel model (sim/gpu_model.h, sim/gpu_model_check.h).
//
//   {"format": "baton.kernels.v1", "device": "cuda:0 (NVIDIA H100 80GB HBM3)",
//    "dtype": "bf16",
//    "gemms":   [{"m": 8192, "n": 12288, "k": 4096, "count": 1, "seconds": 1.7e-4}, ...],
//    "streams": [{"bytes": 268435456, "seconds": 1.0e-4}, ...],
//    "tiny_kernel_seconds": 3.1e-6}
//
// A GEMM row is `count` independent products [m x k] x [k x n] in one call
// (count > 1: a batched product, as attention's); its time is the median of
// the measured repeats. A stream row is one copy of bytes / 2 bytes into
// another buffer: `bytes` counts what is read and written. tiny_kernel_seconds
// is a one-element add, the shortest kernel. Loading is strict (unknown keys,
// missing fields and non-positive values are refused, naming the field).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/result.h"
#include "sim/units.h"

namespace baton {

struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t count = 1;
};

struct MeasuredGemm {
  GemmShape shape;
  Seconds time;
};

struct MeasuredStream {
  int64_t bytes = 0;  // read + written
  Seconds time;
};

struct MeasuredKernels {
  std::string device;  // as the measuring device describes itself
  std::string dtype;   // "bf16", "fp16" or "fp32"
  std::vector<MeasuredGemm> gemms;
  std::vector<MeasuredStream> streams;
  Seconds tiny_kernel;
};

nlohmann::json kernels_to_json(const MeasuredKernels& kernels);
Result<MeasuredKernels> kernels_from_json(const nlohmann::json& document, const std::string& source);
Result<MeasuredKernels> parse_kernels(std::string_view text, const std::string& source);

}  // namespace baton
