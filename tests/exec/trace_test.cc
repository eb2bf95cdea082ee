// Measured traces use the Program's action ids, and the Chrome-trace reader
// (sim/trace_reader.h) reads back what the writer wrote.
#include "tests/exec/exec_test_support.h"

#include <cmath>
#include <set>

#include "sim/schedules.h"
#include "sim/trace_reader.h"
#include "sim/trace_writers.h"

namespace baton::testing {

TEST_CASE("a measured trace has one span per action, keyed like the Program", "[exec][trace]") {
  const Plan plan = exec_plan("0-2,2-4x2,4-6", Schedule::kOneFOneB, 4);
  auto run = exec::run_threads(plan, train_options("mlp", 2));
  REQUIRE(run.ok());
  const Program program = build_program(plan);
  const Trace& trace = run->trace;
  CHECK(trace.origin == "measured");
  REQUIRE(static_cast<int64_t>(trace.spans.size()) == program.num_actions());
  std::set<std::pair<int, int>> seen;
  for (const Span& span : trace.spans) {
    REQUIRE(span.worker < program.num_workers());
    REQUIRE(span.action_index < static_cast<int>(program.actions[span.worker].size()));
    CHECK(span.action == program.actions[span.worker][span.action_index]);
    CHECK(span.start.value >= 0.0);
    CHECK(span.end >= span.start);
    CHECK(seen.insert({span.worker, span.action_index}).second);
    if (is_send(span.action.kind) || is_recv(span.action.kind)) CHECK(span.bytes.value > 0);
  }
  // A worker runs its actions in order: starts never go back in action order.
  for (int w = 0; w < program.num_workers(); ++w) {
    Seconds previous(-1.0);
    std::vector<Seconds> starts(program.actions[w].size());
    for (const Span& span : trace.spans) {
      if (span.worker == w) starts[span.action_index] = span.start;
    }
    for (Seconds start : starts) {
      CHECK(start >= previous);
      previous = start;
    }
  }
}

TEST_CASE("the Chrome trace reader returns what the writer wrote", "[exec][trace][reader]") {
  auto run = exec::run_threads(exec_plan("0-3,3-6", Schedule::kPipeDream, 4), train_options("mlp", 1));
  REQUIRE(run.ok());
  const Trace& original = run->trace;
  auto read = parse_chrome_trace(trace_to_chrome_json(original), "measured.json");
  REQUIRE(read.ok());
  CHECK(read->origin == original.origin);
  CHECK(read->num_stages == original.num_stages);
  REQUIRE(read->workers.size() == original.workers.size());
  for (size_t w = 0; w < original.workers.size(); ++w) {
    CHECK(read->workers[w].stage == original.workers[w].stage);
    CHECK(read->workers[w].replica == original.workers[w].replica);
  }
  REQUIRE(read->spans.size() == original.spans.size());
  // The writer keeps microseconds with 3 decimals: a round trip moves a time by <= 0.5 ns.
  constexpr double kResolution = 0.5e-9 + 1e-12;
  for (size_t i = 0; i < original.spans.size(); ++i) {
    const Span& a = original.spans[i];
    const Span& b = read->spans[i];
    CHECK(a.worker == b.worker);
    CHECK(a.action_index == b.action_index);
    CHECK(a.action == b.action);
    CHECK(a.stream == b.stream);
    CHECK(a.bytes == b.bytes);
    CHECK(std::abs(a.start.value - b.start.value) <= kResolution);
    CHECK(std::abs(a.end.value - b.end.value) <= 2 * kResolution);
  }
}

TEST_CASE("the Chrome trace reader names the event and field it cannot read", "[exec][trace][reader]") {
  auto not_json = parse_chrome_trace("{", "a.json");
  REQUIRE_FALSE(not_json.ok());
  CHECK(not_json.error().message == "a.json: not valid JSON");
  auto no_events = parse_chrome_trace(R"({"spans": []})", "b.json");
  REQUIRE_FALSE(no_events.ok());
  CHECK(no_events.error().message.find("traceEvents") != std::string::npos);
  auto bad_action = parse_chrome_trace(
      R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1, "dur": 2,
          "args": {"action": "s0:Q1", "action_index": 0}}]})",
      "c.json");
  REQUIRE_FALSE(bad_action.ok());
  CHECK(bad_action.error().message.rfind("c.json: traceEvents[0]: args.action", 0) == 0);
  auto no_ts = parse_chrome_trace(R"({"traceEvents": [{"ph": "X", "pid": 0, "dur": 2, "args": {}}]})", "d.json");
  REQUIRE_FALSE(no_ts.ok());
  CHECK(no_ts.error().message == "d.json: traceEvents[0]: \"ts\" must be a number");
}

}  // namespace baton::testing
