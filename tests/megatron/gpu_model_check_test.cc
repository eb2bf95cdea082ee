// The GPU kernel model held against measured kernels (sim/gpu_model_check.h)
// and the measurements' file format (sim/kernels_file.h).
#include <cmath>
#include <string>

#include "tests/catch_compat.h"

#include "sim/gpu_model_check.h"
#include "sim/kernels_file.h"

namespace baton {
namespace {

GpuModel h100() {
  auto gpu = gpu_model("h100");
  REQUIRE(gpu.ok());
  return *gpu;
}

// 8192^3 at half of the H100's 989 TFLOP/s; 256 MiB copied at 0.8 of its 3350 GB/s.
MeasuredKernels hand_made() {
  MeasuredKernels kernels;
  kernels.device = "cuda:0 (a test)";
  kernels.dtype = "bf16";
  const double big = 8192.0;
  kernels.gemms.push_back({{8192, 8192, 8192, 1}, Seconds(2.0 * big * big * big / (0.5 * 989e12))});
  kernels.streams.push_back({int64_t{256} << 20, Seconds(static_cast<double>(int64_t{256} << 20) / (0.8 * 3350e9))});
  kernels.tiny_kernel = Seconds::from_us(4.0);
  return kernels;
}

TEST_CASE("kernel check: errors against the model, fractions of the GPU's peaks", "[megatron][gpu]") {
  const GpuModel gpu = h100();
  const MeasuredKernels measured = hand_made();
  const KernelCheck check = check_kernels(gpu, measured);
  REQUIRE(check.gemms.size() == 1);
  REQUIRE(check.streams.size() == 1);
  // 64 x 64 tiles of 128 x 128 over 132 SMs: 31 waves, a large GEMM.
  CHECK(check.large_gemm_fraction == Approx(0.5).epsilon(1e-12));
  CHECK(check.large_stream_fraction == Approx(0.8).epsilon(1e-12));
  const KernelCheckRow& gemm = check.gemms[0];
  CHECK(gemm.predicted.value == Approx(gpu.gemm(8192, 8192, 8192).value).epsilon(1e-12));
  CHECK(gemm.error == Approx(gemm.measured.value / gemm.predicted.value - 1.0).epsilon(1e-12));
  // The stream at 0.8 of HBM against the model's memory_efficiency: error = e / 0.8 - 1.
  CHECK(check.streams[0].error == Approx(gpu.memory_efficiency / 0.8 - 1.0).epsilon(1e-9));
  CHECK(check.gemm_mape == Approx(std::abs(gemm.error)).epsilon(1e-12));
  CHECK(check.stream_mape == Approx(std::abs(check.streams[0].error)).epsilon(1e-12));
  CHECK(check.tiny_kernel.value == Approx(4e-6));
  const std::string text = kernel_check_markdown(check, gpu, measured);
  CHECK(text.find("| 8192 | 8192 | 8192 | 1 |") != std::string::npos);
  CHECK(text.find("0.500") != std::string::npos);
}

TEST_CASE("kernel check: a GEMM of fewer than 4 waves is not counted as large", "[megatron][gpu]") {
  MeasuredKernels measured = hand_made();
  // 2 x 2 tiles: 4 tiles on 132 SMs, a small fraction of one wave.
  measured.gemms = {{{256, 256, 8192, 1}, Seconds(1e-3)}};
  CHECK(check_kernels(h100(), measured).large_gemm_fraction == 0.0);
}

TEST_CASE("kernel check: the default shapes are GPT layers' and the copies 1 MiB to 1 GiB", "[megatron][gpu]") {
  // 4 hidden sizes x 2 token counts x 2 tensor-parallel sizes x 5 GEMMs, and 3 x 2 attention products.
  CHECK(gpt_gemm_shapes().size() == 4 * 2 * 2 * 5 + 6);
  const std::vector<int64_t> sizes = stream_sizes_bytes();
  REQUIRE(sizes.size() == 6);
  CHECK(sizes.front() == int64_t{1} << 20);
  CHECK(sizes.back() == int64_t{1} << 30);
}

TEST_CASE("kernels file: what the writer writes loads again, and the loader is strict", "[loaders][megatron]") {
  const MeasuredKernels kernels = hand_made();
  const nlohmann::json document = kernels_to_json(kernels);
  auto loaded = kernels_from_json(document, "k.json");
  REQUIRE(loaded.ok());
  CHECK(loaded->device == kernels.device);
  CHECK(loaded->gemms[0].shape.k == 8192);
  CHECK(loaded->gemms[0].time.value == kernels.gemms[0].time.value);
  CHECK(loaded->streams[0].bytes == kernels.streams[0].bytes);
  CHECK(loaded->tiny_kernel.value == kernels.tiny_kernel.value);

  nlohmann::json misspelled = document;
  misspelled["gemms"][0]["cout"] = 2;
  auto refused = kernels_from_json(misspelled, "k.json");
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("k.json: gemms[0] has an unknown key \"cout\""));

  nlohmann::json zero = document;
  zero["streams"][0]["seconds"] = 0.0;
  REQUIRE_FALSE(kernels_from_json(zero, "k.json").ok());
  CHECK_THAT(kernels_from_json(zero, "k.json").error().message, Catch::Contains("streams[0].seconds"));

  nlohmann::json dtype = document;
  dtype["dtype"] = "int8";
  REQUIRE_FALSE(kernels_from_json(dtype, "k.json").ok());
  CHECK_THAT(kernels_from_json(dtype, "k.json").error().message, Catch::Contains("dtype"));
}

}  // namespace
}  // namespace baton
