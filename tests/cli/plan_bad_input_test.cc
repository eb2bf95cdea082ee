// Bad input to `baton plan` (and the DAG checks of the profile loader): one
// clear message each, exit code 2, no plan file written.
#include <filesystem>
#include <fstream>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

std::string layer(const std::string& name, const std::string& inputs) {
  return R"({"name": ")" + name +
         R"(", "forward_ms": 1, "backward_ms": 2, "output_bytes": 1000, "param_bytes": 1000, "inputs": )" + inputs +
         "}";
}

fs::path write_profile(const fs::path& dir, const std::string& layers) {
  const fs::path path = dir / "profile.json";
  std::ofstream(path) << R"({"format": "baton.profile.v1", "model": "m", "microbatch_size": 1, "layers": [)" << layers
                      << "]}";
  return path;
}

void expect_plan_refused(const std::string& profile, const std::string& topology, const std::string& extra,
                         const std::string& message) {
  const fs::path out = scratch_dir("plan-bad-out") / "plan.json";
  const CliRun run = run_baton(
      "plan --profile '" + profile + "' --topology '" + topology + "' -o '" + out.string() + "' " + extra, "plan-bad");
  INFO("stderr: " << run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find(message) != std::string::npos);
  CHECK_FALSE(fs::exists(out));
}

}  // namespace

TEST_CASE("plan: a cycle in the DAG is refused", "[cli][bad-input][plan]") {
  const fs::path dir = scratch_dir("cycle");
  // b reads c and c reads b: c is not listed before b.
  const fs::path profile =
      write_profile(dir, layer("a", "[]") + "," + layer("b", R"(["a", "c"])") + "," + layer("c", R"(["b"])"));
  expect_plan_refused(profile.string(), "tests/data/tiny_topology.json", "",
                      "layers[1].inputs[1] names layer 2, which is not listed before this one");
}

TEST_CASE("plan: a self-loop is refused", "[cli][bad-input][plan]") {
  const fs::path dir = scratch_dir("self-loop");
  const fs::path profile = write_profile(dir, layer("a", "[]") + "," + layer("b", R"(["b"])"));
  expect_plan_refused(profile.string(), "tests/data/tiny_topology.json", "", "names the layer itself (a cycle)");
}

TEST_CASE("plan: an unknown layer in inputs is refused", "[cli][bad-input][plan]") {
  const fs::path dir = scratch_dir("unknown-layer");
  const fs::path profile = write_profile(dir, layer("a", "[]") + "," + layer("b", R"(["nope"])"));
  expect_plan_refused(profile.string(), "tests/data/tiny_topology.json", "",
                      "layers[1].inputs[0] names no layer of the profile, got \"nope\"");
}

TEST_CASE("plan: a profile with zero layers is refused", "[cli][bad-input][plan]") {
  const fs::path dir = scratch_dir("no-layers");
  const fs::path profile = write_profile(dir, "");
  expect_plan_refused(profile.string(), "tests/data/tiny_topology.json", "", "layers must not be empty");
}

TEST_CASE("plan: a topology with zero devices is refused", "[cli][bad-input][plan]") {
  const fs::path dir = scratch_dir("zero-devices");
  const fs::path topology = dir / "t.json";
  std::ofstream(topology) << R"({"format": "baton.topology.v1", "name": "empty", "device": {"name": "g",
    "memory_gib": 1}, "levels": [{"name": "node", "size": 0, "bandwidth_gbps": 10, "latency_us": 1}]})";
  expect_plan_refused("tests/data/tiny_profile.json", topology.string(), "", "levels[0].size must be >= 1, got 0");
}

TEST_CASE("plan: a memory limit no plan meets names the smallest that would", "[cli][bad-input][plan]") {
  // The tiny model's largest layer holds 8 MB of parameters: with Adam every
  // worker needs at least 4 x 8 MB, far above 1 MiB.
  expect_plan_refused("tests/data/tiny_profile.json", "tests/data/tiny_topology.json",
                      "--memory-limit-gib 0.001 --schedule 1f1b", "the smallest memory any split needs is");
}

TEST_CASE("plan: a bad option value is refused", "[cli][bad-input][plan]") {
  expect_plan_refused("tests/data/tiny_profile.json", "tests/data/tiny_topology.json", "--microbatches many",
                      "--microbatches: expected auto or a positive whole number, got \"many\"");
  expect_plan_refused("tests/data/tiny_profile.json", "tests/data/tiny_topology.json", "--cost-model magic",
                      "unknown cost model \"magic\"");
}

TEST_CASE("plan: an activation compression under 1 (an expansion) is refused", "[cli][bad-input][plan]") {
  // 1e-14 once multiplied each cut's bytes past int64 and the search chose a
  // plan whose simulation deadlocked on negative sizes.
  for (const char* ratio : {"1e-14", "0.5", "0"})
    expect_plan_refused("traces/vgg16_v100_mb32.json", "topologies/pipedream_a.json",
                        std::string("--activation-compression ") + ratio,
                        std::string("--activation-compression: must be at least 1, got ") + ratio);
}

TEST_CASE("plan: layers of absurd sizes do not fit, their sums held at int64's end instead of wrapping",
          "[cli][bad-input][plan]") {
  // 2^59 bytes of parameters in each of 16 layers: the sum is 2^63, past
  // int64. Wrapped, every stage held 0 B and the plan "fit"; held at the end,
  // no split fits 80 GiB.
  const fs::path dir = scratch_dir("absurd-sizes");
  std::string layers;
  for (int i = 0; i < 16; ++i) {
    if (i > 0) layers += ",";
    layers += R"({"name": "l)" + std::to_string(i) +
              R"(", "forward_ms": 1, "backward_ms": 2, "output_bytes": 1000, "param_bytes": 576460752303423488})";
  }
  const fs::path profile = write_profile(dir, layers);
  expect_plan_refused(profile.string(), "topologies/a100_4x8.json", "--schedule 1f1b",
                      "the smallest memory any split needs is");
  // simulate of a split says the same: 2^62 bytes of weights a stage (and the
  // optimizer's state, once a double cast to int64 past its range) do not fit.
  const CliRun simulated = run_baton(
      "simulate --profile " + quoted(profile) + " --topology topologies/a100_4x8.json --stages 0-8x2,8-16x2 --json",
      "plan-bad-absurd-simulate");
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  CHECK(simulated.out.find("\"fits\": false") != std::string::npos);
  CHECK(simulated.out.find("\"fits\": true") == std::string::npos);
}

TEST_CASE("plan: --cost-model pipedream refuses a schedule, microbatch count or chunk count it would drop",
          "[cli][bad-input][plan]") {
  const std::string vgg = "traces/vgg16_v100_mb32.json", pipedream_a = "topologies/pipedream_a.json";
  expect_plan_refused(vgg, pipedream_a, "--cost-model pipedream --schedule 1f1b",
                      "--schedule 1f1b with --cost-model pipedream: PipeDream's optimizer plans the pipedream "
                      "schedule only");
  expect_plan_refused(vgg, pipedream_a, "--cost-model pipedream --microbatches 16",
                      "--microbatches with --cost-model pipedream");
  expect_plan_refused(vgg, pipedream_a, "--cost-model pipedream --virtual-stages 2",
                      "--virtual-stages with --cost-model pipedream");
  // Its own schedule, named, is what it plans.
  const CliRun named = run_baton(
      "plan --profile " + vgg + " --topology " + pipedream_a + " --cost-model pipedream --schedule pipedream --json",
      "plan-pipedream-named");
  INFO(named.err);
  CHECK(named.exit_code == 0);
}

TEST_CASE("plan: more chunks per device than the layers give names --virtual-stages and the layer count",
          "[cli][bad-input][plan]") {
  // vgg16's 39 layers on pipedream_a's 16 devices: p >= 2 devices per
  // pipeline, so at most floor(39 / 2) = 19 chunks per device.
  expect_plan_refused("traces/vgg16_v100_mb32.json", "topologies/pipedream_a.json",
                      "--virtual-stages 100 --schedule interleaved-1f1b",
                      "--virtual-stages 100: interleaved-1f1b cuts p x 100 chunks from the model's layers (p >= 2 "
                      "devices per pipeline), and the profile has 39 layers: at most 19 chunks per device");
}

TEST_CASE("plan: --microbatches beyond what its plans could simulate is refused before the search",
          "[cli][bad-input][plan]") {
  // vgg16 has 39 layers: at most floor(2^22 / 39) = 107546 microbatches.
  const int most = (1 << 22) / 39;
  expect_plan_refused("traces/vgg16_v100_mb32.json", "topologies/pipedream_a.json",
                      "--microbatches " + std::to_string(most + 1),
                      "--microbatches " + std::to_string(most + 1) + ": at most " + std::to_string(most));
}

TEST_CASE("plan: a chunked schedule with fewer microbatches than devices plans on fewer and says so, and none is named",
          "[cli][bad-input][plan]") {
  // bert-large on a100_4x8's 32 GPUs under interleaved-1f1b at 16 microbatches: M must be a multiple of
  // p x r, so at most 16 workers have a layout.
  const CliRun run = run_baton(
      "plan --profile traces/bert-large_a100_mb8.json --topology topologies/a100_4x8.json "
      "--schedule interleaved-1f1b --microbatches 16",
      "plan-chunked-fewer");
  INFO("stderr: " << run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("of the 32, the rest idle (interleaved-1f1b at 16 microbatches runs on at most 16)") !=
        std::string::npos);
  // zbv at 2 microbatches: 2 p r <= 2 has no p >= 2.
  expect_plan_refused("traces/bert-large_a100_mb8.json", "topologies/cpu_2core.json", "--schedule zbv --microbatches 2",
                      "no layout of zbv takes 2 microbatches per iteration: on p ranks x r replicas (p >= 2) it needs "
                      "at least 2 p r, so at least 4 (--microbatches)");
  // gpt-175b needs more devices than zbv at 16 microbatches can use (2 p r <= 16): more microbatches
  // is what would let it fit, and the refusal says so beside the memory.
  expect_plan_refused("traces/gpt-175b_a100_mb1.json", "topologies/a100_vtrain.json",
                      "--schedule zbv --microbatches 16",
                      "zbv at 16 microbatches runs on at most 8 of the 512 devices, so more microbatches "
                      "(--microbatches) let it use more");
}
