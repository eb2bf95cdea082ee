// `baton run`'s own behaviour through the binary: flags it refuses rather
// than ignore, its report and progress on long runs, a gloo rank whose peers
// never come, and plans of more workers than start on one machine.
#include "tests/exec/exec_test_support.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exec/launcher.h"
#include "tests/cli/cli_runner.h"

namespace baton::testing {

namespace fs = std::filesystem;

namespace {

// `baton run` of the mlp in two 1F1B stages on the 2-core topology, from a
// uniform profile written in `dir`, then `extra`.
std::string mlp_two_stages(const fs::path& dir, const std::string& extra) {
  const std::string profile = write_profile(dir, "mlp", "mlp", 6);
  return fmt::format(
      "run --profile '{}' --topology topologies/cpu_2core.json --stages 0-3,3-6 --schedule 1f1b --model mlp {}",
      profile, extra);
}

TEST_CASE("run refuses flags its backend or schedule would ignore, and stages chunks cannot place", "[exec][cli]") {
  const fs::path dir = scratch_dir("exec-ignored-flags");
  const std::string profile = write_profile(dir, "mlp", "mlp", 6);
  const std::string common =
      fmt::format("run --profile '{}' --topology topologies/cpu_2core.json --model mlp --steps 1 ", profile);
  const auto refused = [&](const std::string& extra, const std::string& message) {
    const CliRun run = run_baton(common + extra, "exec-ignored-flags");
    INFO(extra << "\n" << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(message) != std::string::npos);
    CHECK(run.out.empty());
  };
  refused("--stages 0-3,3-6 --schedule 1f1b --nproc 5",
          "run: --nproc starts a process per worker (--backend gloo or nccl); the threads backend runs the plan's 2 "
          "workers in this process");
  refused("--stages 0-3,3-6 --schedule 1f1b --vertical-sync",
          "run: --vertical-sync is pipedream's (its stages hold several weight versions); 1f1b flushes and holds one");
  refused("--stages 0-3,3-6 --schedule gpipe --no-weight-stashing",
          "run: --no-weight-stashing is pipedream's (its stages hold several weight versions); gpipe flushes and "
          "holds one");
  refused("--stages 0-1,1-2,2-3,3-6 --schedule interleaved-1f1b --virtual-stages 3",
          "--stages: stages hold 4 stages, which interleaved-1f1b with 3 chunks per device cannot place");
}

TEST_CASE("run's text shows the first and last steps of a long run with the wall times' median and range",
          "[exec][cli]") {
  const std::string command = mlp_two_stages(scratch_dir("exec-long-run"), "--steps 14");
  const CliRun run = run_baton(command, "exec-long-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  // Steps 0-4, a "..." row, steps 9-13: 5 + 5 of 14 (more than 12 shown in full).
  for (const std::string shown : {"\n0 ", "\n4 ", "\n...", "\n9 ", "\n13 "})
    CHECK(run.out.find(shown) != std::string::npos);
  for (const std::string hidden : {"\n5 ", "\n8 "}) CHECK(run.out.find(hidden) == std::string::npos);
  CHECK(run.out.find("14 steps: wall time median ") != std::string::npos);
  // Every step in --json.
  const CliRun json = run_baton(command + " --json", "exec-long-run");
  REQUIRE(json.exit_code == 0);
  CHECK(nlohmann::json::parse(json.out)["steps"].size() == 14);
}

// Sets an environment variable for the commands run while it lives.
struct Variable {
  Variable(const char* name, const std::string& value) : name(name) { ::setenv(name, value.c_str(), 1); }
  ~Variable() { ::unsetenv(name); }
  const char* name;
};

TEST_CASE("run reports progress on stderr at most every BATON_PROGRESS_EVERY seconds, never at its last step",
          "[exec][cli]") {
  const std::string command = mlp_two_stages(scratch_dir("exec-progress"), "--steps 5");
  {
    // 0 s: after every step but the last, whose report follows.
    const Variable every("BATON_PROGRESS_EVERY", "0");
    const CliRun run = run_baton(command, "exec-progress");
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    for (int step = 1; step <= 4; ++step)
      CHECK(run.err.find(fmt::format("run: step {} of 5 done after ", step)) != std::string::npos);
    CHECK(run.err.find("step 5 of 5") == std::string::npos);
  }
  {
    // An hour: none in a run of milliseconds.
    const Variable every("BATON_PROGRESS_EVERY", "3600");
    const CliRun run = run_baton(command, "exec-progress");
    REQUIRE(run.exit_code == 0);
    CHECK(run.err.find(" done after ") == std::string::npos);
  }
  const Variable bad("BATON_PROGRESS_EVERY", "soon");
  const CliRun run = run_baton(command, "exec-progress");
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("environment: BATON_PROGRESS_EVERY=soon is not a number of seconds >= 0") != std::string::npos);
}

// Sets a rank's torchrun-style variables for the commands run while it lives.
struct RankVariables {
  explicit RankVariables(int port) : master_port("MASTER_PORT", std::to_string(port)) {}
  Variable rank{"RANK", "0"};
  Variable world_size{"WORLD_SIZE", "2"};
  Variable master_addr{"MASTER_ADDR", "127.0.0.1"};
  Variable master_port;
};

TEST_CASE("a rank whose peers never come ends within --timeout naming the rendezvous, and a bad MASTER_PORT is refused",
          "[exec][gloo][cli]") {
  const std::string command = mlp_two_stages(scratch_dir("exec-lonely-rank"), "--steps 1 --backend gloo --timeout 2");
  const int port = exec::free_local_port().value();
  {
    const RankVariables variables(port);
    const CliRun run = run_baton(command, "exec-lonely-rank");
    INFO(run.err);
    CHECK(run.exit_code == 1);
    CHECK(run.err.find(fmt::format("run: rank 0: rendezvous at 127.0.0.1:{}: not all 2 ranks met within 2 s "
                                   "(--timeout): is every rank started, with the same MASTER_ADDR and MASTER_PORT?",
                                   port)) != std::string::npos);
    CHECK(run.err.find("frame #") == std::string::npos);
  }
  {
    const RankVariables variables(99999);
    const CliRun run = run_baton(command, "exec-lonely-rank");
    INFO(run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("environment: MASTER_PORT=99999 is not a TCP port (1 to 65535)") != std::string::npos);
  }
}

TEST_CASE("a plan of more workers than start on one machine is refused before any starts", "[exec][cli]") {
  // 300 data-parallel replicas of the mlp on a 300-device topology: more than
  // exec::kMaxLocalRanks (256) threads or processes here.
  const fs::path dir = scratch_dir("exec-many-workers");
  const std::string profile = write_profile(dir, "mlp", "mlp", 6);
  const fs::path topology = dir / "wide.json";
  std::ofstream(topology)
      << R"({"format": "baton.topology.v1", "name": "wide", "device": {"name": "cpu", "memory_gib": 8},
    "levels": [{"name": "net", "size": 300, "bandwidth_gbps": 10, "latency_us": 5}]})";
  const std::string common = fmt::format(
      "run --profile '{}' --topology '{}' --stages 0-6x300 --schedule dp --model mlp "
      "--steps 1",
      profile, topology.string());
  const CliRun threads = run_baton(common, "exec-many-workers");
  INFO(threads.err);
  CHECK(threads.exit_code == 2);
  CHECK(threads.err.find("the plan has 300 workers; the threads backend runs at most 256 in one process") !=
        std::string::npos);
  const CliRun gloo = run_baton(common + " --backend gloo", "exec-many-workers");
  INFO(gloo.err);
  CHECK(gloo.exit_code == 2);
  CHECK(gloo.err.find("the plan has 300 workers, and at most 256 ranks start on one machine; start them with "
                      "torchrun") != std::string::npos);
}

}  // namespace

}  // namespace baton::testing
