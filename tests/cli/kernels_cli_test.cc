// `baton kernels check`: a measured kernels file against the GPU kernel model;
// bad input exits 2 naming what is wrong.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

fs::path write_kernels(const fs::path& dir, const nlohmann::json& document) {
  const fs::path path = dir / "kernels.json";
  std::ofstream(path) << document.dump(2);
  return path;
}

nlohmann::json measured() {
  // 8192^3 in 2.2 ms on an H100: 2 x 8192^3 / 2.2e-3 / 989e12 = 0.5054 of its peak.
  return {{"format", "baton.kernels.v1"},
          {"device", "cuda:0 (NVIDIA H100 80GB HBM3)"},
          {"dtype", "bf16"},
          {"gemms", {{{"m", 8192}, {"n", 8192}, {"k", 8192}, {"count", 1}, {"seconds", 2.2e-3}}}},
          {"streams", {{{"bytes", 268435456}, {"seconds", 1.0e-4}}}},
          {"tiny_kernel_seconds", 4e-6}};
}

}  // namespace

TEST_CASE("kernels check prints each kernel against the model and the fractions of peak", "[cli][kernels]") {
  const fs::path dir = scratch_dir("kernels-check");
  const fs::path file = write_kernels(dir, measured());
  const CliRun run = run_baton("kernels check " + quoted(file) + " --gpu H100-SXM5-80GB", "kernels-check");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("against the model of H100-SXM5-80GB"));
  CHECK_THAT(run.out, Catch::Contains("| 8192 | 8192 | 8192 | 1 | 2200.0 us |"));
  CHECK_THAT(run.out, Catch::Contains("| 0.505 |"));
  // 268435456 bytes in 100 us: 2.684e12 B/s, 0.801 of 3350 GB/s.
  CHECK_THAT(run.out, Catch::Contains("| 0.801 |"));
}

TEST_CASE("kernels refuses a bad file, an unknown GPU and a bad shape with exit 2", "[cli][kernels][bad-input]") {
  const fs::path dir = scratch_dir("kernels-bad");
  nlohmann::json bad = measured();
  bad["gemms"][0]["seconds"] = -1.0;
  const fs::path file = write_kernels(dir, bad);
  const CliRun negative = run_baton("kernels check " + quoted(file) + " --gpu h100", "kernels-bad");
  CHECK(negative.exit_code == 2);
  CHECK_THAT(negative.err, Catch::Contains("gemms[0].seconds"));
  const fs::path good = write_kernels(dir, measured());
  const CliRun gpu = run_baton("kernels check " + quoted(good) + " --gpu tpu", "kernels-bad");
  CHECK(gpu.exit_code == 2);
  // kernels check takes no topology: the message names --gpu, not a topology's device.name.
  CHECK_THAT(gpu.err, Catch::Contains("--gpu tpu: no GPU model of that name; known are "));
  CHECK(gpu.err.find("device.name") == std::string::npos);
  const CliRun shape = run_baton("kernels measure --gemm 8x8", "kernels-bad");
  CHECK(shape.exit_code == 2);
  CHECK_THAT(shape.err, Catch::Contains("--gemm '8x8'"));
}
