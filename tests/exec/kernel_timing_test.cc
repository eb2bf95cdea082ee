// measure_kernels (exec/executor.h) on the CPU: every shape and stream timed,
// in the order given, and bad options refused before anything runs.
#include "tests/exec/exec_test_support.h"

namespace baton::testing {
namespace {

TEST_CASE("measure_kernels times each GEMM, copy and the shortest kernel in the order given", "[exec][kernels]") {
  exec::KernelOptions options;
  options.dtype = "fp32";
  options.gemms = {{32, 48, 16, 1}, {8, 8, 8, 3}};
  options.stream_bytes = {4096, 1000};
  options.warmup = 1;
  options.repeats = 3;
  auto measured = exec::measure_kernels(options);
  INFO((measured ? std::string() : measured.error().message));
  REQUIRE(measured.ok());
  CHECK(measured->device == "cpu");
  CHECK(measured->dtype == "fp32");
  REQUIRE(measured->gemms.size() == 2);
  CHECK(measured->gemms[0].shape.n == 48);
  CHECK(measured->gemms[1].shape.count == 3);
  for (const MeasuredGemm& gemm : measured->gemms) CHECK(gemm.time.value > 0.0);
  REQUIRE(measured->streams.size() == 2);
  // A copy of bytes / 2 read and as many written, in whole fp32 elements.
  CHECK(measured->streams[0].bytes == 4096);
  CHECK(measured->streams[1].bytes == 2 * (1000 / 2 / 4) * 4);
  CHECK(measured->tiny_kernel.value > 0.0);
}

TEST_CASE("measure_kernels refuses an unknown dtype, no shapes and a zero dimension", "[exec][kernels]") {
  exec::KernelOptions options;
  options.gemms = {{8, 8, 8, 1}};
  options.stream_bytes = {4096};
  options.dtype = "int8";
  CHECK_THAT(exec::measure_kernels(options).error().message, Catch::Contains("dtype must be bf16, fp16 or fp32"));
  options.dtype = "fp32";
  options.gemms.clear();
  CHECK_THAT(exec::measure_kernels(options).error().message, Catch::Contains("no GEMM shape"));
  options.gemms = {{8, 0, 8, 1}};
  CHECK_THAT(exec::measure_kernels(options).error().message, Catch::Contains("has a dimension below 1"));
}

}  // namespace
}  // namespace baton::testing
