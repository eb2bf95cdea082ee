// `baton compare` refuses two traces of different Programs (unless --partial):
// their iteration times would be of different work. Traces from `simulate`
// of tests/data/tiny_profile.json on tiny_topology.json, two stages (0-3,
// 3-6). Under a flush schedule with M microbatches each worker runs M
// forwards, M backwards, M sends, M receives and one STEP: 2 (4 M + 1) action
// spans in all.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

std::string simulated_trace(const std::filesystem::path& dir, const std::string& schedule, int microbatches) {
  const std::filesystem::path trace = dir / (schedule + "-" + std::to_string(microbatches) + ".json");
  const CliRun run = run_baton(
      "simulate --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json --stages 0-3,3-6 "
      "--schedule " +
          schedule + " --microbatches " + std::to_string(microbatches) + " --trace " + quoted(trace),
      "compare-cli");
  REQUIRE(run.exit_code == 0);
  return quoted(trace);
}

int action_spans(int microbatches) { return 2 * (4 * microbatches + 1); }

}  // namespace

TEST_CASE("compare: traces of one Program pair every span", "[cli][compare]") {
  const auto dir = scratch_dir("compare-same");
  const std::string a = simulated_trace(dir, "1f1b", 4);
  const CliRun run = run_baton("compare " + a + " " + a + " --json", "compare-cli");
  REQUIRE(run.exit_code == 0);
  const nlohmann::json figures = nlohmann::json::parse(run.out);
  CHECK(figures["paired_spans"].get<int>() == action_spans(4));
  CHECK(figures["only_predicted"].get<int>() == 0);
  CHECK(figures["only_measured"].get<int>() == 0);
}

TEST_CASE("compare: other microbatch counts are refused with both shapes, nothing written", "[cli][compare]") {
  const auto dir = scratch_dir("compare-microbatches");
  const std::string four = simulated_trace(dir, "1f1b", 4);
  const std::string six = simulated_trace(dir, "1f1b", 6);
  const auto svg = dir / "compare.svg";
  const CliRun run = run_baton("compare " + four + " " + six + " --svg " + quoted(svg), "compare-cli");
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("not of the same Program") != std::string::npos);
  CHECK(run.err.find("2 workers, 2 stages, 4 batches, " + std::to_string(action_spans(4)) + " action spans") !=
        std::string::npos);
  CHECK(run.err.find("2 workers, 2 stages, 6 batches, " + std::to_string(action_spans(6)) + " action spans") !=
        std::string::npos);
  CHECK(run.err.find("--partial") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(svg));

  // --partial compares what pairs: fewer spans than either trace holds.
  const CliRun partial = run_baton("compare " + four + " " + six + " --partial --json", "compare-cli");
  REQUIRE(partial.exit_code == 0);
  const nlohmann::json figures = nlohmann::json::parse(partial.out);
  const int paired = figures["paired_spans"].get<int>();
  CHECK(paired > 0);
  CHECK(paired + figures["only_predicted"].get<int>() == action_spans(4));
  CHECK(paired + figures["only_measured"].get<int>() == action_spans(6));
}

TEST_CASE("compare: another schedule of the same shape is refused as such", "[cli][compare]") {
  const auto dir = scratch_dir("compare-schedule");
  const std::string one_f_one_b = simulated_trace(dir, "1f1b", 4);
  const std::string gpipe = simulated_trace(dir, "gpipe", 4);
  const CliRun run = run_baton("compare " + one_f_one_b + " " + gpipe, "compare-cli");
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("both have 2 workers, 2 stages, 4 batches, " + std::to_string(action_spans(4)) +
                     " action spans") != std::string::npos);
  CHECK(run.err.find("a different schedule or stage split") != std::string::npos);
  CHECK(run.out.empty());
}
