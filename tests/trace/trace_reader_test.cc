// The Chrome trace reader: what the writer writes reads back, and a key the
// writer does not write, where the reader reads, is refused by name.
#include <fstream>
#include <sstream>
#include <string>

#include "tests/catch_compat.h"

#include "sim/trace_reader.h"
#include "sim/trace_writers.h"
#include "tests/trace/trace_fixtures.h"

namespace baton {
namespace {

using nlohmann::json;
using testing::small_trace;

// The small trace has 2 workers and the writer gives each 6 metadata events
// (process name and sort index, two thread names and sort indexes), so its
// first span is event 2 x 6 = 12.
constexpr size_t kFirstSpan = 12;

json written_small_trace() { return json::parse(trace_to_chrome_json(small_trace())); }

std::string refusal(const Result<Trace>& read) { return read.ok() ? "(read)" : read.error().message; }

}  // namespace

TEST_CASE("trace reader: the writer's output reads back whole") {
  const json document = written_small_trace();
  REQUIRE(document["traceEvents"][kFirstSpan]["ph"] == "X");
  REQUIRE(document["traceEvents"][kFirstSpan - 1]["ph"] == "M");
  auto read = trace_from_chrome_json(document, "a.json");
  REQUIRE(read.ok());
  CHECK(read->origin == "predicted");
  CHECK(read->spans.size() == small_trace().spans.size());
  CHECK(trace_to_chrome_json(*read) == trace_to_chrome_json(small_trace()));
}

TEST_CASE("trace reader: an unknown key in a span, its args, the document or otherData is refused") {
  json span = written_small_trace();
  span["traceEvents"][kFirstSpan]["tss"] = 3;
  CHECK(refusal(trace_from_chrome_json(span, "a.json")) ==
        R"(a.json: traceEvents[12] has an unknown key "tss" (did you mean "ts"?))");
  json args = written_small_trace();
  args["traceEvents"][kFirstSpan]["args"]["action_idx"] = 0;
  CHECK(refusal(trace_from_chrome_json(args, "a.json")) ==
        R"(a.json: traceEvents[12].args has an unknown key "action_idx" (did you mean "action_index"?))");
  json top = written_small_trace();
  top["othrData"] = json::object();
  CHECK(refusal(trace_from_chrome_json(top, "a.json")) ==
        R"(a.json: document has an unknown key "othrData" (did you mean "otherData"?))");
  json other = written_small_trace();
  other["otherData"]["note"] = "x";
  CHECK(refusal(trace_from_chrome_json(other, "a.json")) ==
        R"(a.json: otherData has an unknown key "note" (expected one of: origin))");
}

TEST_CASE("trace reader: wrong types are refused, not thrown") {
  json origin = written_small_trace();
  origin["otherData"]["origin"] = 3;
  CHECK(refusal(trace_from_chrome_json(origin, "a.json")) == "a.json: otherData.origin must be a string, got 3");
  json tid = written_small_trace();
  tid["traceEvents"][kFirstSpan]["tid"] = "comm";
  CHECK(
      refusal(trace_from_chrome_json(tid, "a.json")) ==
      R"(a.json: traceEvents[12]: "tid" must be 0 (compute), 1 (comm), 2 (tensor-parallel collectives), 3 (context-parallel exchange) or 4 (expert-parallel all-to-alls))");
  json phase = written_small_trace();
  phase["traceEvents"][0]["ph"] = 7;  // not a phase baton writes: skipped
  phase["traceEvents"][1]["name"] = 7;
  CHECK(trace_from_chrome_json(phase, "a.json").ok());
}

TEST_CASE("trace reader: numbers no trace holds are refused, naming the field and its range") {
  const auto with = [](const char* key, json value, bool in_args = false) {
    json document = written_small_trace();
    (in_args ? document["traceEvents"][kFirstSpan]["args"] : document["traceEvents"][kFirstSpan])[key] = value;
    return refusal(trace_from_chrome_json(document, "a.json"));
  };
  // 2^20 workers at most: the reader makes an entry for every worker id up to
  // the highest, so pid 2^31 from a few bytes would ask for gigabytes.
  CHECK(with("pid", 1 << 20) == R"(a.json: traceEvents[12]: "pid" must be an integer from 0 to 1048575)");
  CHECK(with("pid", -1) == R"(a.json: traceEvents[12]: "pid" must be an integer from 0 to 1048575)");
  CHECK(with("pid", 0.5) == R"(a.json: traceEvents[12]: "pid" must be an integer from 0 to 1048575)");
  CHECK(with("pid", 1e300) == R"(a.json: traceEvents[12]: "pid" must be an integer from 0 to 1048575)");
  CHECK(
      with("tid", 5) ==
      R"(a.json: traceEvents[12]: "tid" must be 0 (compute), 1 (comm), 2 (tensor-parallel collectives), 3 (context-parallel exchange) or 4 (expert-parallel all-to-alls))");
  CHECK(with("dur", -1) == R"(a.json: traceEvents[12]: "dur" must be >= 0 and ts + dur a finite time)");
  json endless = written_small_trace();
  endless["traceEvents"][kFirstSpan]["ts"] = 1.7e308;
  endless["traceEvents"][kFirstSpan]["dur"] = 1.7e308;  // ends past the largest double
  CHECK(refusal(trace_from_chrome_json(endless, "a.json")) ==
        R"(a.json: traceEvents[12]: "dur" must be >= 0 and ts + dur a finite time)");
  CHECK(with("action_index", 2147483648.0, true) ==
        R"(a.json: traceEvents[12]: "action_index" must be an integer from 0 to 2147483647)");
  CHECK(with("bytes", 1.5, true) ==
        R"(a.json: traceEvents[12]: "bytes" must be an integer from 0 to 9223372036854775807)");
  CHECK(with("action", "s16777216:F0", true) ==
        "a.json: traceEvents[12]: args.action: stage below 16777216 and batch at most 1073741823");
  CHECK(with("action", "s0:F1073741824", true) ==
        "a.json: traceEvents[12]: args.action: stage below 16777216 and batch at most 1073741823");
}

TEST_CASE("trace reader: a worker no process name describes is described from its first span") {
  // Other tools' traces may leave a worker out of the metadata: the reader
  // describes it as the writers do, so what it read writes back as read.
  json document = written_small_trace();
  json events = json::array();
  for (const json& event : document["traceEvents"])
    if (!(event["ph"] == "M" && event["pid"] == 1)) events.push_back(event);
  document["traceEvents"] = events;
  auto read = trace_from_chrome_json(document, "a.json");
  REQUIRE(read.ok());
  REQUIRE(read->workers.size() == 2);
  int first_stage = -1;
  for (const Span& span : read->spans)
    if (span.worker == 1) {
      first_stage = span.action.stage;
      break;
    }
  CHECK(read->workers[1].stage == first_stage);
  auto again = parse_chrome_trace(trace_to_chrome_json(*read), "b.json");
  REQUIRE(again.ok());
  CHECK(trace_to_chrome_json(*again) == trace_to_chrome_json(*read));
}

TEST_CASE("trace reader: events of other phases and other tools' metadata are not checked") {
  json document = written_small_trace();
  document["traceEvents"].push_back({{"ph", "i"}, {"pid", 0}, {"ts", 1}, {"s", "g"}, {"name", "marker"}});
  document["traceEvents"].push_back({{"ph", "M"}, {"pid", 0}, {"name", "process_labels"}, {"args", {{"labels", "x"}}}});
  CHECK(trace_from_chrome_json(document, "a.json").ok());
}

TEST_CASE("trace reader: the golden Chrome traces read back") {
  for (const char* name : {"trace_small.chrome.json", "simulate_pipedream.chrome.json"}) {
    const std::string path = std::string(BATON_SOURCE_DIR) + "/tests/golden/" + name;
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    INFO(path);
    CHECK(refusal(parse_chrome_trace(text.str(), path)) == "(read)");
  }
}

}  // namespace baton
