// Whole-program text: program_to_text round trip, the worker x step grid.
#include <sstream>

#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "tests/schedule/schedule_test_support.h"

namespace baton {
namespace {

using testing::make_plan;

// A two-worker program from one action list per worker.
Program program_of(const std::vector<std::string>& lists, int microbatches) {
  Program program;
  program.num_stages = static_cast<int>(lists.size());
  program.batches = microbatches;
  for (size_t w = 0; w < lists.size(); ++w) {
    program.workers.push_back(WorkerInfo{static_cast<int>(w), 0, static_cast<int>(w), {}});
    auto actions = parse_action_list(lists[w]);
    REQUIRE(actions.ok());
    program.actions.push_back(*actions);
  }
  return program;
}

// Reads program_to_text output back: "wN: <actions>" per line.
std::vector<std::vector<Action>> read_program_text(const std::string& text) {
  std::vector<std::vector<Action>> lists;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::string label = "w" + std::to_string(lists.size()) + ":";
    REQUIRE(line.rfind(label, 0) == 0);
    auto actions = parse_action_list(std::string_view(line).substr(label.size()));
    REQUIRE(actions.ok());
    lists.push_back(*actions);
  }
  return lists;
}

TEST_CASE("program text is one line per worker", "[text]") {
  const Program program = program_of({"s0:F0 s0:B0 s0:STEP0", "s1:F0 s1:B0 s1:STEP0"}, 1);
  CHECK(program_to_text(program) == "w0: s0:F0 s0:B0 s0:STEP0\nw1: s1:F0 s1:B0 s1:STEP0\n");
}

TEST_CASE("every generated program round-trips through its text", "[text]") {
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB, Schedule::kPipeDream}) {
    for (const std::vector<int>& replicas : std::vector<std::vector<int>>{{1}, {1, 1, 1}, {2, 1, 1}, {1, 3}, {15, 1}}) {
      const Program program = build_program(make_plan(schedule, replicas, 30));
      INFO(schedule_name(schedule) << " " << program.num_workers() << " workers");
      CHECK(read_program_text(program_to_text(program)) == program.actions);
    }
  }
  const Program dp = build_program(make_plan(Schedule::kDataParallel, {4}, 9));
  CHECK(read_program_text(program_to_text(dp)) == dp.actions);
}

TEST_CASE("program counts and the stage table", "[program]") {
  const Plan plan = make_plan(Schedule::kOneFOneB, {2, 3}, 6);
  const Program program = make_1f1b(plan);
  // Per worker: 2 * local microbatches + ALLREDUCE + STEP; stage 0's two
  // replicas own 6 / 2 microbatches each, stage 1's three own 6 / 3.
  CHECK(program.num_actions() == 2 * (2 * (6 / 2) + 2) + 3 * (2 * (6 / 3) + 2));
  CHECK(program.replicas_of(0) == 2);
  CHECK(program.replicas_of(1) == 3);
  CHECK(program.replicas_of(2) == 0);
  const auto table = workers_by_stage(program);
  REQUIRE(table.size() == 2u);
  CHECK(table[0] == std::vector<int>{0, 1});
  CHECK(table[1] == std::vector<int>{2, 3, 4});
}

// Cell width = longest cell text ("STEP0", 5) + 3; the label column is as wide
// as the longest label ("w0 s0", 5).
TEST_CASE("the grid shows one row per worker and marks a cell", "[grid]") {
  const Program program = program_of({"s0:F0 s0:F1 s0:B0 s0:B1 s0:STEP0", "s1:F0 s1:B0 s1:F1 s1:B1 s1:STEP0"}, 2);
  CHECK(program_grid(program) ==
        "step | 0       1       2       3       4\n"
        "w0 s0| F0      F1      B0      B1      STEP0\n"
        "w1 s1| F0      B0      F1      B1      STEP0\n");
  CHECK(program_grid(program, 1, 1) ==
        "step | 0       1       2       3       4\n"
        "w0 s0| F0      F1      B0      B1      STEP0\n"
        "w1 s1| F0     [B0]     F1      B1      STEP0\n"
        "               ^\n");
}

TEST_CASE("the grid can mark the step after a worker's last action", "[grid]") {
  const Program program = program_of({"s0:F0 s0:B0", "s1:RECV_ACT0<w0"}, 1);
  const std::string grid = program_grid(program, 1, 1);
  CHECK_THAT(grid, Catch::Contains("w1 s1| RECV_ACT0<w0  []\n"));
  CHECK_THAT(grid, Catch::Contains("^"));
}

TEST_CASE("an excerpt of a long program shows the steps around the mark", "[grid]") {
  const Program program = build_program(make_plan(Schedule::kPipeDream, {1, 1}, 40));
  const std::string excerpt = program_grid_excerpt(program, 0, 50, 2);
  CHECK_THAT(excerpt, Catch::StartsWith("step |     48"));
  CHECK_THAT(excerpt, Catch::Contains("w0 s0|... "));
  CHECK_THAT(excerpt, Catch::Contains("["));
  CHECK_THAT(excerpt, Catch::Contains("^"));
  CHECK(excerpt.find(" 47 ") == std::string::npos);
  CHECK(excerpt.find(" 53") == std::string::npos);
  // Five columns per row at most: the marked row holds one "[...]" and four plain cells.
  CHECK(std::count(excerpt.begin(), excerpt.end(), '\n') == 1 + 2 + 1);
}

}  // namespace
}  // namespace baton
