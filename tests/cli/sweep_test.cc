// `baton sweep` from the command line: the split each point gets, the chart it
// writes, and refused --split values.
#include <filesystem>
#include <set>
#include <string>

#include "tests/catch_compat.h"

#include "planner/sweep_table.h"
#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

const std::string kGrid =
    "sweep --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json "
    "--vary bandwidth_gbps.1=1,10,100 --vary servers=1,2 --schedule pipedream,1f1b,gpipe "
    "--microbatches 8 --threads 2 --quiet";

struct SweepRun {
  CliRun run;
  std::string csv;
  std::string chart;
};

SweepRun sweep(const std::string& extra, const std::string& name) {
  const fs::path dir = scratch_dir("sweep-" + name);
  const fs::path csv = dir / "sweep.csv", chart = dir / "sweep.svg";
  SweepRun out{run_baton(kGrid + " " + extra + " --csv '" + csv.string() + "' --chart '" + chart.string() + "'",
                         "sweep-" + name),
               "", ""};
  if (fs::exists(csv)) out.csv = slurp(csv);
  if (fs::exists(chart)) out.chart = slurp(chart);
  return out;
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("sweep plans each point unless told to balance", "[cli][sweep]") {
  const SweepRun by_default = sweep("", "default");
  const SweepRun planned = sweep("--split plan", "plan");
  const SweepRun balanced = sweep("--split balanced", "balanced");
  const SweepRun balanced_4 = sweep("--split balanced:4", "balanced-4");
  for (const SweepRun* run : {&by_default, &planned, &balanced, &balanced_4}) {
    INFO("stderr: " << run->run.err);
    REQUIRE(run->run.exit_code == 0);
    CHECK(count(run->csv, "\n") == 1 + 3 * 2 * 3);  // header, bandwidths x servers x schedules
  }
  CHECK(by_default.csv == planned.csv);
  CHECK(balanced.csv == balanced_4.csv);  // `balanced` is 4 stages
  CHECK(by_default.csv != balanced.csv);
  CHECK(by_default.chart.find("(planned per point)") != std::string::npos);
  // The title names the first point's split: 1 server of 2 devices, 2 stages.
  CHECK(balanced.chart.find("(2 balanced stages)") != std::string::npos);
}

TEST_CASE("sweep draws a line per schedule and server count, and a legend of each once", "[cli][sweep]") {
  const SweepRun run = sweep("", "chart");
  INFO("stderr: " << run.run.err);
  REQUIRE(run.run.exit_code == 0);
  // A line per (schedule, servers) pair with a point that fits; points that do
  // not fit in memory are left out of their line.
  std::set<std::string> drawn;
  const auto table = baton::parse_sweep_csv(run.csv, "sweep.csv");
  REQUIRE(table.ok());
  const int schedule = table->column("schedule"), servers = table->column("servers"), fits = table->column("fits");
  for (const auto& row : table->rows)
    if (row[fits] == "yes") drawn.insert(row[schedule] + "," + row[servers]);
  CHECK_FALSE(drawn.empty());
  CHECK(count(run.chart, "<path class='series'") == static_cast<int>(drawn.size()));
  CHECK(count(run.chart, "class='legend-entry'") == 3 + 2);
  CHECK(run.chart.find(">schedule</text>") != std::string::npos);
  CHECK(run.chart.find(">servers</text>") != std::string::npos);
}

TEST_CASE("sweep refuses a split it does not know", "[cli][sweep][bad-input]") {
  for (const char* split : {"balanced:0", "balanced:x", "balanced:2x", "even"}) {
    const SweepRun run = sweep(std::string("--split ") + split, "bad-split");
    INFO(split << " stderr: " << run.run.err);
    CHECK(run.run.exit_code == 2);
    CHECK(run.run.err.find("--split") != std::string::npos);
    CHECK(run.csv.empty());
  }
}

TEST_CASE("sweep refuses a grid of which no point could be computed, writing nothing", "[cli][sweep][bad-input]") {
  // Interleaved 1F1B needs the planner's chunked layouts: under --split
  // balanced every point fails alike. (Where a schedule fails and another
  // does not, the failed points are error rows of a table that is written.)
  const fs::path dir = scratch_dir("sweep-no-point");
  const std::string grid =
      "sweep --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json --split balanced "
      "--schedule interleaved-1f1b --vary servers=1,2 --quiet ";
  const CliRun run = run_baton(grid + "--csv " + quoted(dir / "sweep.csv"), "sweep-no-point");
  INFO(run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("sweep: no point of the 2 could be computed; the first: interleaved-1f1b runs several chunks "
                     "per device: its points need --split plan") != std::string::npos);
  CHECK(fs::is_empty(dir));
  // A shard's points may all fail where others' do not: its CSV is written for the merge.
  const CliRun shard = run_baton(grid + "--shard 1/2 --csv " + quoted(dir / "shard.csv"), "sweep-no-point-shard");
  CHECK(shard.exit_code == 0);
  CHECK(fs::exists(dir / "shard.csv"));
}

TEST_CASE("sweep refuses an axis given twice, by the same name or by another name for it", "[cli][sweep][bad-input]") {
  const std::string profile = "sweep --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json ";
  const struct {
    std::string arguments, message;
  } cases[] = {
      {profile + "--vary servers=1 --vary servers=2", "--vary: axis servers given twice"},
      // Level 1 of tiny_topology.json is named ethernet.
      {profile + "--vary bandwidth_gbps.1=1,10 --vary bandwidth_gbps.ethernet=25",
       "--vary: axis bandwidth_gbps.1 given twice (as bandwidth_gbps.1 and bandwidth_gbps.ethernet)"},
      {"sweep --topology topologies/a100_4x8.json --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
       "--seq-length 1024 --global-batch-size 64 --vary tp=1,2 --vary tensor-model-parallel-size=4",
       "--vary: axis tensor-model-parallel-size given twice (as tp and tensor-model-parallel-size)"},
  };
  for (const auto& c : cases) {
    const CliRun run = run_baton(c.arguments + " --quiet", "sweep-twice");
    INFO(c.arguments << "\nstderr: " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(c.message) != std::string::npos);
    CHECK(run.out.empty());
  }
}

TEST_CASE("a profile sweep's table on standard output shows each row's schedule and whether it fits", "[cli][sweep]") {
  const CliRun run = run_baton(kGrid, "sweep-stdout");
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  const std::string header = run.out.substr(0, run.out.find('\n'));
  for (const char* column : {"bandwidth_gbps.1", "servers", "schedule", "devices", "stages", "fits"})
    CHECK(header.find(column) != std::string::npos);
  // 3 bandwidths x 2 server counts x 3 schedules, one line each after the
  // header (and its rule, if any), every one naming its schedule and fit.
  int rows = 0;
  for (size_t at = run.out.find('\n') + 1; at < run.out.size(); at = run.out.find('\n', at) + 1) {
    const std::string line = run.out.substr(at, run.out.find('\n', at) - at);
    const bool scheduled = line.find("pipedream") != std::string::npos || line.find("1f1b") != std::string::npos ||
                           line.find("gpipe") != std::string::npos;
    if (!scheduled) continue;
    ++rows;
    CHECK((line.find(" yes") != std::string::npos || line.find(" no") != std::string::npos));
  }
  CHECK(rows == 3 * 2 * 3);
}

TEST_CASE("sweep --split balanced:S refuses more stages than layers and labels the stages each point ran",
          "[cli][sweep][bad-input]") {
  // tiny_profile.json has 6 layers.
  const SweepRun too_many = sweep("--split balanced:7", "balanced-7");
  INFO("stderr: " << too_many.run.err);
  CHECK(too_many.run.exit_code == 2);
  CHECK(too_many.run.err.find("--split balanced:7: 7 stages need as many layers, and the profile has 6") !=
        std::string::npos);
  // servers=1 gives 2 x 1 = 2 devices, servers=2 gives 2 x 2 = 4: balanced:4
  // runs 2 stages on the first and 4 on the second, and the rows say which.
  const SweepRun four = sweep("--split balanced:4", "balanced-labels");
  REQUIRE(four.run.exit_code == 0);
  const auto table = baton::parse_sweep_csv(four.csv, "sweep.csv");
  REQUIRE(table.ok());
  const int servers = table->column("servers"), split = table->column("split");
  for (const auto& row : table->rows) {
    INFO(row[servers] << ": " << row[split]);
    CHECK(row[split] == (row[servers] == "1" ? "2 balanced stages" : "4 balanced stages"));
  }
}
