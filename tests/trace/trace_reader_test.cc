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
  CHECK(refusal(trace_from_chrome_json(tid, "a.json")) ==
        R"(a.json: traceEvents[12]: "tid" must be 0 (compute) or 1 (comm))");
  json phase = written_small_trace();
  phase["traceEvents"][0]["ph"] = 7;  // not a phase baton writes: skipped
  phase["traceEvents"][1]["name"] = 7;
  CHECK(trace_from_chrome_json(phase, "a.json").ok());
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
