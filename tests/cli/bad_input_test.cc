// Bad input is answered at the boundary: one message naming the file, the
// field and the value, exit code 2, and no output file written.
#include <filesystem>
#include <fstream>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

const std::string kProfile = "tests/data/tiny_profile.json";
const std::string kTopology = "tests/data/tiny_topology.json";

fs::path write(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir / name;
  std::ofstream(path) << text;
  return path;
}

std::string topology_with_bandwidth(const std::string& second) {
  return R"({"format": "baton.topology.v1", "name": "t", "device": {"name": "g", "memory_gib": 1},
    "levels": [{"name": "a", "size": 2, "bandwidth_gbps": 10, "latency_us": 1},
               {"name": "b", "size": 2, "bandwidth_gbps": )" +
         second + R"(, "latency_us": 1}]})";
}

// Runs simulate with the given inputs and checks exit 2, the message, and no trace file.
void expect_refused(const std::string& profile, const std::string& topology, const std::string& extra,
                    const std::vector<std::string>& message_parts) {
  const fs::path dir = scratch_dir("bad-input-out");
  const fs::path trace = dir / "trace.json";
  const CliRun run = run_baton("simulate --profile '" + profile + "' --topology '" + topology + "' " + extra +
                                   " --trace '" + trace.string() + "'",
                               "bad-input");
  INFO("stderr: " << run.err);
  CHECK(run.exit_code == 2);
  for (const auto& part : message_parts) CHECK(run.err.find(part) != std::string::npos);
  CHECK_FALSE(fs::exists(trace));
  CHECK(run.out.empty());
}

}  // namespace

TEST_CASE("malformed JSON names the file", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("bad-json");
  const fs::path bad = write(dir, "broken.json", "{\"format\": \"baton.profile.v1\", \"layers\": [");
  expect_refused(bad.string(), kTopology, "--stages 0-6", {bad.string(), "not valid JSON"});
}

TEST_CASE("a missing field names its path", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("missing-field");
  const fs::path bad = write(dir, "p.json", R"({"format": "baton.profile.v1", "model": "m", "microbatch_size": 1,
    "layers": [{"name": "a", "forward_ms": 1, "backward_ms": 1, "output_bytes": 1, "param_bytes": 1},
               {"name": "b", "backward_ms": 1, "output_bytes": 1, "param_bytes": 1}]})");
  expect_refused(bad.string(), kTopology, "--stages 0-2", {bad.string(), "layers[1].forward_ms is missing"});
}

TEST_CASE("a negative field names its path and value", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("negative-field");
  const fs::path bad = write(dir, "t.json", topology_with_bandwidth("-3"));
  expect_refused(kProfile, bad.string(), "--stages 0-6",
                 {bad.string() + ": levels[1].bandwidth_gbps must be > 0, got -3"});
}

TEST_CASE("a profile with zero layers is refused", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("zero-layers");
  const fs::path bad = write(dir, "p.json", R"({"format": "baton.profile.v1", "model": "m",
    "microbatch_size": 1, "layers": []})");
  expect_refused(bad.string(), kTopology, "--stages 0-1", {bad.string(), "layers must not be empty"});
}

TEST_CASE("an unknown layer in inputs is refused", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("unknown-input");
  const fs::path bad = write(dir, "p.json", R"({"format": "baton.profile.v1", "model": "m", "microbatch_size": 1,
    "layers": [{"name": "a", "forward_ms": 1, "backward_ms": 1, "output_bytes": 1, "param_bytes": 1},
               {"name": "b", "forward_ms": 1, "backward_ms": 1, "output_bytes": 1, "param_bytes": 1,
                "inputs": ["zz"]}]})");
  expect_refused(bad.string(), kTopology, "--stages 0-2", {"layers[1].inputs[0]", "\"zz\""});
}

TEST_CASE("a wrong format tag is refused", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("format-tag");
  const fs::path bad = write(dir, "t.json", R"({"format": "baton.profile.v1", "name": "x"})");
  expect_refused(kProfile, bad.string(), "--stages 0-6", {"format must be \"baton.topology.v1\""});
}

TEST_CASE("stage ranges that do not cover the layers are refused", "[cli][bad-input]") {
  expect_refused(kProfile, kTopology, "--stages 0-2,2-4", {"must cover all 6 layers", "0-2x1,2-4x1"});
  expect_refused(kProfile, kTopology, "--stages 0-2,3-6", {"stages[1].layers must begin at layer 2"});
}

TEST_CASE("more replicas than devices is refused", "[cli][bad-input]") {
  expect_refused(kProfile, kTopology, "--stages 0-3x3,3-6x2", {"5 devices", "has 4"});
}

TEST_CASE("stages that chunks cannot place are refused as such, not as too many devices", "[cli][bad-input]") {
  // Six stages, four chunks per device: 6 is no multiple of 4. The devices were
  // counted first, one per stage, and the message said 6 devices were needed.
  expect_refused(kProfile, kTopology, "--stages 0-1,1-2,2-3,3-4,4-5,5-6 --schedule interleaved-1f1b --virtual-stages 4",
                 {"--stages: stages hold 6 stages, which interleaved-1f1b with 4 chunks per device cannot place: give "
                  "a multiple of 4 (for example 4 or 8)"});
}

TEST_CASE("bad stage syntax and unknown schedules are refused", "[cli][bad-input]") {
  expect_refused(kProfile, kTopology, "--stages 0-3y2,3-6", {"--stages", "0-3y2"});
  expect_refused(kProfile, kTopology, "--stages 0-3,3-6 --schedule zigzag", {"unknown schedule \"zigzag\""});
  expect_refused(kProfile, kTopology, "--stages 0-3,3-6 --schedule ''",
                 {"--schedule: expected one of pipedream, 1f1b"});
  expect_refused(kProfile, kTopology, "--stages 0-3,3-6,", {"--stages: \"\" has no layer range"});
  expect_refused(kProfile, kTopology, "--stages ''", {"--stages: no stage given"});
  expect_refused(kProfile, kTopology, "--plan ''", {"simulate: --plan names no file"});
  expect_refused("tests/data", kTopology, "--stages 0-6", {"tests/data: is a folder, not a file"});
  expect_refused(kProfile, kTopology, "--stages 0-3,3-6 --schedule 1f1b,gpipe --vertical-sync",
                 {"--vertical-sync applies to pipedream"});
}

TEST_CASE("a missing input file is refused", "[cli][bad-input]") {
  expect_refused("tests/data/no_such_profile.json", kTopology, "--stages 0-6",
                 {"tests/data/no_such_profile.json: cannot open"});
}

TEST_CASE("a misspelled topology key is refused by name, with the key it resembles", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("misspelled-key");
  const fs::path bad = write(dir, "t.json", R"({"format": "baton.topology.v1", "name": "t",
    "device": {"name": "g", "memory_gib": 1},
    "levels": [{"name": "a", "size": 2, "bandwidth_gbps": 10, "latency_us": 1},
               {"name": "b", "size": 2, "bandwith_gbps": 10, "latency_us": 1}]})");
  const fs::path trace = dir / "trace.json";
  const fs::path gantt = dir / "gantt.svg";
  const CliRun run = run_baton("simulate --profile '" + kProfile + "' --topology '" + bad.string() +
                                   "' --stages 0-6 --trace '" + trace.string() + "' --gantt '" + gantt.string() + "'",
                               "misspelled-key");
  CHECK(run.exit_code == 2);
  CHECK(run.err == "baton: " + bad.string() +
                       ": levels[1] has an unknown key \"bandwith_gbps\" (did you mean \"bandwidth_gbps\"?)\n");
  CHECK(run.out.empty());
  CHECK_FALSE(fs::exists(trace));
  CHECK_FALSE(fs::exists(gantt));
}

TEST_CASE("a misspelled device or profile key is refused", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("misspelled-device");
  const fs::path topology = write(dir, "t.json", R"({"format": "baton.topology.v1", "name": "t",
    "device": {"name": "g", "memory_gib": 1, "relative_sped": 2},
    "levels": [{"name": "a", "size": 4, "bandwidth_gbps": 10, "latency_us": 1}]})");
  expect_refused(
      kProfile, topology.string(), "--stages 0-6",
      {topology.string() + ": device has an unknown key \"relative_sped\" (did you mean \"relative_speed\"?)"});
  const fs::path profile = write(dir, "p.json", R"({"format": "baton.profile.v1", "model": "m", "microbatch_size": 1,
    "layers": [{"name": "a", "forwrd_ms": 1, "backward_ms": 1, "output_bytes": 1, "param_bytes": 1}]})");
  expect_refused(profile.string(), kTopology, "--stages 0-1",
                 {profile.string() + ": layers[0] has an unknown key \"forwrd_ms\" (did you mean \"forward_ms\"?)"});
}

TEST_CASE("a plan file with an unknown key is refused", "[cli][bad-input]") {
  const fs::path dir = scratch_dir("misspelled-plan");
  const fs::path plan = write(dir, "plan.json", R"({"format": "baton.plan.v1", "schedule": "1f1b",
    "microbatch_size": 1, "microbatches": 4, "stages": [{"layers": [0, 6], "replicas": 1, "device": [0]}]})");
  const fs::path trace = dir / "trace.json";
  const CliRun run = run_baton("simulate --profile '" + kProfile + "' --topology '" + kTopology + "' --plan '" +
                                   plan.string() + "' --trace '" + trace.string() + "'",
                               "misspelled-plan");
  CHECK(run.exit_code == 2);
  CHECK(run.err ==
        "baton: " + plan.string() + ": stages[0] has an unknown key \"device\" (did you mean \"devices\"?)\n");
  CHECK_FALSE(fs::exists(trace));
}

TEST_CASE("a plan file whose virtual_stages its schedule does not run is refused", "[cli][bad-input]") {
  // zb-h1 runs one stage per device; the file's 3 chunks per device would be
  // dropped without a word.
  const fs::path dir = scratch_dir("plan-virtual-stages");
  const fs::path plan = write(dir, "plan.json", R"({"format": "baton.plan.v1", "schedule": "zb-h1",
    "microbatch_size": 4, "microbatches": 6, "virtual_stages": 3,
    "stages": [{"layers": [0, 1], "replicas": 1}, {"layers": [1, 2], "replicas": 1}, {"layers": [2, 3], "replicas": 1},
               {"layers": [3, 6], "replicas": 1}]})");
  const fs::path trace = dir / "trace.json";
  const CliRun run = run_baton("simulate --profile '" + kProfile + "' --topology '" + kTopology + "' --plan '" +
                                   plan.string() + "' --trace '" + trace.string() + "'",
                               "plan-virtual-stages");
  CHECK(run.exit_code == 2);
  CHECK(run.err ==
        "baton: " + plan.string() +
            ": virtual_stages must be 1 for zb-h1 (interleaved-1f1b, zbv and dualpipev run chunks), got 3\n");
  CHECK(run.out.empty());
  CHECK_FALSE(fs::exists(trace));
}

TEST_CASE("simulate refuses a microbatch size other than the profile's, saying how to get one",
          "[cli][bad-input][microbatch-size]") {
  // The profile's times, activations and transfers are per microbatch of its
  // 4 samples; at 8 the simulator would keep them and only double the samples.
  expect_refused(kProfile, kTopology, "--stages 0-3,3-6 --microbatch-size 8",
                 {"--microbatch-size is 8 but profile " + kProfile + " was taken at 4 samples per microbatch",
                  "baton profile analytic --arch ... --microbatch-size 8",
                  "baton profile measure --model ... --microbatch-size 8"});
  // The profile's own size is accepted.
  const CliRun same = run_baton(
      "simulate --profile '" + kProfile + "' --topology '" + kTopology + "' --stages 0-3,3-6 --microbatch-size 4",
      "microbatch-size-same");
  CHECK(same.exit_code == 0);
  CHECK(same.out.find("microbatches x 4 samples") != std::string::npos);
}

TEST_CASE("simulate refuses a plan file at a microbatch size other than the profile's",
          "[cli][bad-input][microbatch-size]") {
  const fs::path dir = scratch_dir("plan-microbatch-size");
  const std::string stages = R"("stages": [{"layers": [0, 3], "replicas": 1}, {"layers": [3, 6], "replicas": 1}]})";
  const fs::path plan = write(dir, "plan.json", R"({"format": "baton.plan.v1", "schedule": "1f1b",
    "microbatch_size": 1024, "microbatches": 8, )" + stages);
  expect_refused(
      kProfile, kTopology, "--plan '" + plan.string() + "'",
      {plan.string() + ": microbatch_size is 1024 but profile " + kProfile + " was taken at 4 samples per microbatch"});
  // --microbatch-size replaces the file's size: at the profile's it runs.
  const CliRun replaced = run_baton("simulate --profile '" + kProfile + "' --topology '" + kTopology + "' --plan '" +
                                        plan.string() + "' --microbatch-size 4",
                                    "plan-microbatch-size-replaced");
  CHECK(replaced.exit_code == 0);
  CHECK(replaced.out.find("8 microbatches x 4 samples") != std::string::npos);
  // A file at the profile's size runs as it is.
  const fs::path same = write(dir, "same.json", R"({"format": "baton.plan.v1", "schedule": "1f1b",
    "microbatch_size": 4, "microbatches": 8, )" + stages);
  const CliRun ran =
      run_baton("simulate --profile '" + kProfile + "' --topology '" + kTopology + "' --plan '" + same.string() + "'",
                "plan-microbatch-size-same");
  CHECK(ran.exit_code == 0);
}

TEST_CASE("simulate writes all of --trace, --csv and --gantt or none of them", "[cli][bad-input]") {
  // The Gantt chart's folder cannot be made (a file stands where it would
  // be): the trace and CSV, which come first, are not left behind either.
  const fs::path dir = scratch_dir("outputs-all-or-none");
  const fs::path blocker = write(dir, "not-a-folder", "a file");
  const fs::path trace = dir / "t.json", csv = dir / "t.csv", gantt = blocker / "g.svg";
  const CliRun run = run_baton("simulate --profile " + kProfile + " --topology " + kTopology +
                                   " --stages 0-3,3-6 --schedule 1f1b,gpipe" + " --trace " + quoted(trace) + " --csv " +
                                   quoted(csv) + " --gantt " + quoted(gantt),
                               "outputs-all-or-none");
  INFO("stderr: " << run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("cannot create folder") != std::string::npos);
  size_t left = 0;
  for (const auto& entry : fs::directory_iterator(dir)) left += entry.path() != blocker;
  CHECK(left == 0);  // no trace, CSV or temporary of either schedule
}

TEST_CASE("simulate refuses a plan file made for another model", "[cli][bad-input]") {
  // The tiny profile's plan, its "model" changed: the layer ranges still fit,
  // but the stages were chosen for another model's layers.
  const fs::path dir = scratch_dir("plan-other-model");
  const fs::path plan = dir / "plan.json";
  const CliRun planned = run_baton(
      "plan --profile " + kProfile + " --topology " + kTopology + " --schedule 1f1b -o " + quoted(plan), "plan-mine");
  REQUIRE(planned.exit_code == 0);
  CHECK(run_baton("simulate --profile " + kProfile + " --topology " + kTopology + " --plan " + quoted(plan),
                  "plan-mine-simulated")
            .exit_code == 0);
  std::string text = slurp(plan);
  const std::string mine = "\"model\": \"tiny\"";
  REQUIRE(text.find(mine) != std::string::npos);
  text.replace(text.find(mine), mine.size(), "\"model\": \"resnet50\"");
  write(dir, "other.json", text);
  expect_refused(kProfile, kTopology, "--plan " + quoted(dir / "other.json"),
                 {"other.json was made for model \"resnet50\", not \"tiny\" (" + kProfile + "'s)"});
}
