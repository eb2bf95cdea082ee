// `baton sweep` with a GPT model: the TP x PP heatmap, shards written by
// --shard K/N and joined by `baton sweep merge` into the unsharded CSV and
// chart byte for byte, and what it refuses.
#include <filesystem>
#include <string>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

const std::string kGpt =
    "sweep --topology topologies/a100_4x8.json --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
    "--seq-length 1024 --global-batch-size 64 --vary tp=1,2,4,8 --vary pp=1,2,4 --vary mbs=1,2 --threads 2 --quiet";

}  // namespace

TEST_CASE("gpt sweep: 4 shards merged are the unsharded CSV and chart, byte for byte", "[cli][sweep]") {
  const fs::path dir = scratch_dir("gpt-sweep-shards");
  const CliRun whole =
      run_baton(kGpt + " --csv " + quoted(dir / "all.csv") + " --chart " + quoted(dir / "all.svg"), "gpt-sweep-whole");
  INFO(whole.err);
  REQUIRE(whole.exit_code == 0);
  const std::string chart = slurp(dir / "all.svg");
  CHECK(chart.find("tensor x pipeline parallelism") != std::string::npos);
  CHECK(chart.find("peak memory per GPU") != std::string::npos);
  std::string shards;
  for (int k = 1; k <= 4; ++k) {
    const fs::path csv = dir / ("shard-" + std::to_string(k) + ".csv");
    const CliRun part = run_baton(kGpt + " --shard " + std::to_string(k) + "/4 --csv " + quoted(csv), "gpt-sweep-part");
    INFO(part.err);
    REQUIRE(part.exit_code == 0);
    shards = quoted(csv) + " " + shards;  // given in reverse order
  }
  const CliRun merged = run_baton(
      "sweep merge " + shards + " --csv " + quoted(dir / "merged.csv") + " --chart " + quoted(dir / "merged.svg"),
      "gpt-sweep-merge");
  INFO(merged.err);
  REQUIRE(merged.exit_code == 0);
  CHECK(merged.out.find("merged 24 points from 4 files") != std::string::npos);
  CHECK(slurp(dir / "merged.csv") == slurp(dir / "all.csv"));
  CHECK(slurp(dir / "merged.svg") == chart);

  // Three of the four shards: refused, nothing written.
  const CliRun partial = run_baton("sweep merge " + quoted(dir / "shard-1.csv") + " " + quoted(dir / "shard-2.csv") +
                                       " " + quoted(dir / "shard-4.csv") + " --csv " + quoted(dir / "partial.csv"),
                                   "gpt-sweep-partial");
  CHECK(partial.exit_code == 2);
  CHECK(partial.err.find("points are missing") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "partial.csv"));
  // Nothing to write it as: refused rather than a merge that writes nothing.
  const CliRun nowhere = run_baton("sweep merge " + shards, "gpt-sweep-nowhere");
  CHECK(nowhere.exit_code == 2);
  CHECK(nowhere.err.find("sweep merge: give --csv, --chart or both") != std::string::npos);
}

TEST_CASE("gpt sweep: refuses profile flags, a chart of one shard and an unknown axis", "[cli][sweep][bad-input]") {
  const fs::path dir = scratch_dir("gpt-sweep-bad");
  const struct {
    std::string extra;
    const char* said;
  } cases[] = {
      {"--schedule 1f1b", "--schedule: not for a GPT model"},
      {"--shard 1/2 --csv x.csv --chart " + quoted(dir / "x.svg"), "--chart with --shard"},
      {"--shard 1/2", "--shard needs --csv"},
      {"--shard 3/2 --csv " + quoted(dir / "x.csv"), "--shard: expected K/N"},
      {"--vary microbatches=4", "GPT sweeps vary micro-batch-size or global-batch-size instead"},
      // Cluster axes take what a profile sweep's take (they once ran, each point an error row).
      {"--vary servers=0", "--vary servers: values must be whole numbers from 1 to 1048576, got 0"},
      {"--vary servers=0.5", "--vary servers: values must be whole numbers from 1 to 1048576, got 0.5"},
      {"--vary memory_gib=-1", "--vary memory_gib: must be > 0 and <= 1048576, got -1"},
      {"--vary bandwidth_gbps.0=0", "--vary bandwidth_gbps.0: bandwidth must be > 0, got 0"},
      {"--vary latency_us.0=-1", "--vary latency_us.0: latency must be >= 0, got -1"},
      {"--vary bandwidth_gbps.9=1", "--vary bandwidth_gbps.9: the topology has no level \"9\""},
      {"--vary servers=200000", "--vary servers: 200000 makes a cluster of 1600000 devices, more than 1048576"}};
  for (const auto& c : cases) {
    const CliRun run = run_baton(kGpt + " " + c.extra, "gpt-sweep-bad");
    INFO(c.extra << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(c.said) != std::string::npos);
  }
  CHECK(fs::is_empty(dir));
}
