// `baton simulate` decides whether a plan fits per device: workers placed on
// one device with `@` share its memory.
//
// tests/data/tiny_profile.json on tiny_topology.json (1 GiB per device), GPipe,
// stages 0-3 and 3-6 both on device 0. With Adam a stage holds its parameters
// 4 times (weights, gradients, 2 optimizer states), and under GPipe all M
// stashes at once after the last forward:
//   stage 0: params 4 + 8 + 8 = 20 MB, stash = its 3 layers' outputs = 3 MB
//   stage 1: params 8 + 8 + 2 = 18 MB, stash = input 1 MB + outputs 1 + 0.5 + 0.004 MB = 2.504 MB
#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

constexpr int64_t kMB = 1000 * 1000;
constexpr int64_t kGiB = int64_t{1} << 30;

int64_t stage0_peak(int64_t microbatches) { return 4 * 20 * kMB + microbatches * 3 * kMB; }
int64_t stage1_peak(int64_t microbatches) { return 4 * 18 * kMB + microbatches * 2504 * 1000; }

CliRun simulate_on_one_device(int microbatches, const std::string& extra, const std::string& scratch,
                              const std::string& schedules = "gpipe") {
  return run_baton(
      "simulate --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json "
      "--stages 0-3x1@0,3-6x1@0 --schedule " +
          schedules + " --microbatches " + std::to_string(microbatches) + " " + extra,
      scratch);
}

}  // namespace

TEST_CASE("simulate: two workers on one device that together exceed it do not fit", "[cli][memory][devices]") {
  // M = 200: 680 MB and 572.8 MB, each below 1 GiB (1073.7 MB), together 1252.8 MB above it.
  const int microbatches = 200;
  REQUIRE(stage0_peak(microbatches) < kGiB);
  REQUIRE(stage1_peak(microbatches) < kGiB);
  REQUIRE(stage0_peak(microbatches) + stage1_peak(microbatches) > kGiB);
  const CliRun json_run = simulate_on_one_device(microbatches, "--json", "device-memory-json");
  REQUIRE(json_run.exit_code == 0);
  const nlohmann::json result = nlohmann::json::parse(json_run.out);
  CHECK(result["workers"][0]["peak_memory_bytes"] == stage0_peak(microbatches));
  CHECK(result["workers"][1]["peak_memory_bytes"] == stage1_peak(microbatches));
  CHECK(result["device_memory_bytes"] == kGiB);
  REQUIRE(result["devices"].size() == 1);
  CHECK(result["devices"][0]["device"] == 0);
  CHECK(result["devices"][0]["workers"] == nlohmann::json::array({0, 1}));
  CHECK(result["devices"][0]["peak_memory_bytes"] == stage0_peak(microbatches) + stage1_peak(microbatches));
  CHECK(result["devices"][0]["fits"] == false);
  CHECK(result["fits"] == false);

  const CliRun text = simulate_on_one_device(microbatches, "", "device-memory-text");
  REQUIRE(text.exit_code == 0);
  INFO(text.out);
  CHECK(text.out.find("on device 0 (workers 0, 1 share it: their sum at one instant): DOES NOT FIT") !=
        std::string::npos);

  const CliRun side_by_side = simulate_on_one_device(microbatches, "", "device-memory-two", "gpipe,1f1b");
  REQUIRE(side_by_side.exit_code == 0);
  INFO(side_by_side.out);
  // GPipe holds 200 stashes per stage (no); 1F1B 2 on stage 0 and 1 on stage 1 (yes).
  const size_t row = side_by_side.out.find("fits 1.00 GiB");
  REQUIRE(row != std::string::npos);
  const std::string line = side_by_side.out.substr(row, side_by_side.out.find('\n', row) - row);
  const size_t no = line.find(" no");
  CHECK(no != std::string::npos);
  CHECK(line.find(" yes", no) != std::string::npos);
}

TEST_CASE("simulate: two workers on one device that together fit it fit", "[cli][memory][devices]") {
  // M = 100: 380 MB + 322.4 MB = 702.4 MB, below 1 GiB.
  const int microbatches = 100;
  REQUIRE(stage0_peak(microbatches) + stage1_peak(microbatches) < kGiB);
  const CliRun json_run = simulate_on_one_device(microbatches, "--json", "device-memory-fits");
  REQUIRE(json_run.exit_code == 0);
  const nlohmann::json result = nlohmann::json::parse(json_run.out);
  CHECK(result["devices"][0]["peak_memory_bytes"] == stage0_peak(microbatches) + stage1_peak(microbatches));
  CHECK(result["devices"][0]["fits"] == true);
  CHECK(result["fits"] == true);
  const CliRun text = simulate_on_one_device(microbatches, "", "device-memory-fits-text");
  CHECK(text.out.find("on device 0 (workers 0, 1 share it") != std::string::npos);
  CHECK(text.out.find("DOES NOT FIT") == std::string::npos);
}
