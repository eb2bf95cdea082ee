// The local launcher's CPU shares (exec/launcher.h): which CPUs each rank gets,
// that a started rank runs on them, and the environment it gets.
#include "tests/exec/exec_test_support.h"

#include <sched.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "exec/launcher.h"
#include "tests/cli/cli_runner.h"

namespace baton::testing {

TEST_CASE("each rank gets allowed.size() / nproc of the allowed CPUs, in order", "[exec][launcher]") {
  using Cpus = std::vector<std::vector<int>>;
  CHECK(exec::rank_cpus({0, 1}, 2) == Cpus{{0}, {1}});
  // 5 CPUs for 2 ranks: 2 each, the fifth unused; the list need not be contiguous.
  CHECK(exec::rank_cpus({0, 2, 4, 6, 8}, 2) == Cpus{{0, 2}, {4, 6}});
  CHECK(exec::rank_cpus({3, 5, 7}, 1) == Cpus{{3, 5, 7}});
  // Fewer CPUs than ranks: no shares, the scheduler places them.
  CHECK(exec::rank_cpus({0, 1}, 3).empty());
  CHECK(exec::rank_cpus({}, 1).empty());
}

TEST_CASE("a rank started by the launcher runs on its share, the launcher on all of its own", "[exec][launcher]") {
  cpu_set_t own;
  REQUIRE(sched_getaffinity(0, sizeof own, &own) == 0);
  std::vector<int> allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &own)) allowed.push_back(cpu);
  const auto shares = exec::rank_cpus(allowed, 2);
  const std::filesystem::path dir = scratch_dir("launcher-cpus");
  for (bool pin : {true, false}) {
    exec::LaunchSpec spec;
    spec.executable = "/bin/sh";
    spec.arguments = {"-c", "grep Cpus_allowed_list /proc/self/status > \"" + dir.string() + "/rank$RANK\""};
    spec.nproc = 2;
    spec.timeout = Seconds(30);
    spec.pin = pin;
    auto outcome = exec::launch_local_ranks(spec);
    REQUIRE(outcome.ok());
    REQUIRE(outcome->ok());
    for (int rank = 0; rank < 2; ++rank) {
      std::ifstream in(dir / ("rank" + std::to_string(rank)));
      std::string line;
      std::getline(in, line);
      INFO("pin " << pin << ", rank " << rank << ": " << line);
      const std::string listed = line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
      // The kernel writes runs as ranges ("0-1"); compare the CPUs, not the text.
      std::vector<int> cpus;
      for (size_t at = 0; at < listed.size();) {
        const size_t end = listed.find(',', at);
        const std::string part = listed.substr(at, end == std::string::npos ? std::string::npos : end - at);
        const size_t dash = part.find('-');
        const int first = std::stoi(part.substr(0, dash));
        const int last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
        for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
        if (end == std::string::npos) break;
        at = end + 1;
      }
      CHECK(cpus == ((pin && !shares.empty()) ? shares[static_cast<size_t>(rank)] : allowed));
    }
  }
  cpu_set_t after;
  REQUIRE(sched_getaffinity(0, sizeof after, &after) == 0);
  CHECK(CPU_EQUAL(&own, &after));
}

TEST_CASE("a rank's environment has the spec's entries in place of inherited ones of the same name",
          "[exec][launcher]") {
  struct Restore {
    ~Restore() { unsetenv("BATON_LAUNCH_TEST"); }
  } restore;
  setenv("BATON_LAUNCH_TEST", "inherited", 1);
  const std::filesystem::path dir = scratch_dir("launcher-environment");
  exec::LaunchSpec spec;
  spec.executable = "/bin/sh";
  spec.arguments = {"-c", "env | grep '^BATON_LAUNCH_TEST=' > \"" + dir.string() + "/rank$RANK\""};
  spec.nproc = 2;
  spec.timeout = Seconds(30);
  spec.environment = {"BATON_LAUNCH_TEST=given"};
  auto outcome = exec::launch_local_ranks(spec);
  REQUIRE(outcome.ok());
  REQUIRE(outcome->ok());
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(dir / ("rank" + std::to_string(rank)));
    const std::string listed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(listed == "BATON_LAUNCH_TEST=given\n");  // once, the spec's
  }
}

}  // namespace baton::testing
