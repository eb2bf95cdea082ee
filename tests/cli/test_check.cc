// `baton check`: a case whose plan moved fails with a readable diff; an
// unchanged one passes.
#include <filesystem>
#include <fstream>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

void write_case(const fs::path& dir, const std::string& expected) {
  std::ofstream(dir / "case.json") << R"({"format": "baton.check.v1", "name": "tiny",
    "profile": "tests/data/tiny_profile.json", "topology": "tests/data/tiny_topology.json",
    "options": {"cost_model": "pipedream", "straight": true},
    "expected": )" << expected << R"(, "tolerance": {"time_relative": 1e-9}})";
}

}  // namespace

TEST_CASE("check passes an unchanged case and fails a moved one with a diff", "[cli][check]") {
  const fs::path dir = scratch_dir("check-cases");
  write_case(dir, R"({"time_per_minibatch_s": 1.0, "stages": "0-6x1"})");
  const CliRun update = run_baton("check --update '" + dir.string() + "'", "check-update");
  REQUIRE(update.exit_code == 0);
  const CliRun same = run_baton("check '" + dir.string() + "'", "check-same");
  CHECK(same.exit_code == 0);
  CHECK(same.out.find("1 passed, 0 failed") != std::string::npos);

  // Expectations that no longer hold (another time, another split): both differences are reported.
  write_case(dir, R"({"time_per_minibatch_s": 0.1, "stages": "0-3x1,3-6x1"})");
  const CliRun moved = run_baton("check '" + dir.string() + "'", "check-moved");
  CHECK(moved.exit_code == 1);
  CHECK(moved.out.find("FAIL tiny") != std::string::npos);
  CHECK(moved.out.find("time      expected 0.1 s") != std::string::npos);
  CHECK(moved.out.find("stages    expected 0-3x1,3-6x1") != std::string::npos);
  CHECK(moved.out.find("0 passed, 1 failed") != std::string::npos);
}

TEST_CASE("check refuses a folder without cases", "[cli][check][bad-input]") {
  const fs::path dir = scratch_dir("check-empty");
  const CliRun run = run_baton("check '" + dir.string() + "'", "check-empty");
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("holds no *.json check cases") != std::string::npos);
}
