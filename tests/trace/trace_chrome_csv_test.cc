// Chrome trace JSON and CSV writers on hand-made traces.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include "tests/catch_compat.h"

#include "sim/trace_writers.h"
#include "tests/trace/trace_fixtures.h"

namespace baton {
namespace {

using testing::count_if_span;
using testing::small_trace;
using testing::split;

// ts and dur are written in microseconds with 3 decimals.
constexpr double kMicrosecondTolerance = 0.5e-3 + 1e-9;

std::vector<nlohmann::json> events_with_phase(const nlohmann::json& document, const char* phase) {
  std::vector<nlohmann::json> events;
  for (const nlohmann::json& event : document.at("traceEvents")) {
    if (event.at("ph") == phase) events.push_back(event);
  }
  return events;
}

TEST_CASE("chrome json: one complete event per span, times in microseconds") {
  const Trace trace = small_trace();
  const nlohmann::json document = nlohmann::json::parse(trace_to_chrome_json(trace));
  CHECK(document.at("displayTimeUnit") == "ms");
  CHECK(document.at("otherData").at("origin") == "predicted");
  const std::vector<nlohmann::json> events = events_with_phase(document, "X");
  REQUIRE(events.size() == trace.spans.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const Span& span = trace.spans[i];
    const nlohmann::json& event = events[i];
    INFO("span " << i << ": " << to_string(span.action));
    CHECK(event.at("pid") == span.worker);
    CHECK(event.at("tid") == (span.stream == Stream::kComm ? 1 : 0));
    CHECK(event.at("ts").get<double>() == Approx(span.start.value * 1e6).margin(kMicrosecondTolerance));
    CHECK(event.at("dur").get<double>() == Approx((span.end - span.start).value * 1e6).margin(kMicrosecondTolerance));
    CHECK(event.at("name") == span_name(span.action));
    CHECK(event.at("cat") == std::string(kind_name(span.action.kind)));
    const nlohmann::json& args = event.at("args");
    CHECK(args.at("microbatch") == span.action.batch());
    CHECK(args.at("stage") == span.action.stage);
    CHECK(args.at("action_index") == span.action_index);
    CHECK(args.at("bytes") == span.bytes.value);
    CHECK(args.at("action") == to_string(span.action));
  }
}

TEST_CASE("chrome json: names without the stage prefix") {
  const Trace trace = small_trace();
  const std::string json = trace_to_chrome_json(trace);
  CHECK(json.find("\"name\":\"F1\"") != std::string::npos);
  CHECK(json.find("\"name\":\"SEND_ACT0>w1\"") != std::string::npos);
  CHECK(json.find("\"name\":\"RECV_GRAD1<w1\"") != std::string::npos);
  CHECK(span_name(*parse_action("s2:SEND_ACT7>w5")) == "SEND_ACT7>w5");
}

TEST_CASE("chrome json: a process per worker with two named threads") {
  const Trace trace = small_trace();
  const nlohmann::json document = nlohmann::json::parse(trace_to_chrome_json(trace));
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, int> sort_index;
  for (const nlohmann::json& event : events_with_phase(document, "M")) {
    const int pid = event.at("pid");
    const int tid = event.at("tid");
    if (event.at("name") == "process_name") process_names[pid] = event.at("args").at("name");
    if (event.at("name") == "thread_name") thread_names[{pid, tid}] = event.at("args").at("name");
    if (event.at("name") == "process_sort_index") sort_index[pid] = event.at("args").at("sort_index");
  }
  CHECK(process_names == std::map<int, std::string>{{0, "worker 0 (stage 0, replica 0, device 0)"},
                                                    {1, "worker 1 (stage 1, replica 0, device 1)"}});
  CHECK(sort_index == std::map<int, int>{{0, 0}, {1, 1}});
  for (int worker = 0; worker < 2; ++worker) {
    CHECK(thread_names[{worker, 0}] == "compute");
    CHECK(thread_names[{worker, 1}] == "comm");
  }
}

TEST_CASE("chrome json: deterministic, empty traces and odd origins stay valid") {
  Trace trace = small_trace();
  CHECK(trace_to_chrome_json(trace) == trace_to_chrome_json(small_trace()));

  trace.origin = "measured \"run\" \\ 1";
  const nlohmann::json document = nlohmann::json::parse(trace_to_chrome_json(trace));
  CHECK(document.at("otherData").at("origin") == trace.origin);

  Trace no_spans = small_trace();
  no_spans.spans.clear();
  const nlohmann::json empty = nlohmann::json::parse(trace_to_chrome_json(no_spans));
  CHECK(events_with_phase(empty, "X").empty());
  CHECK(events_with_phase(empty, "M").size() == 2 * 6);  // 6 metadata events per worker
  nlohmann::json parsed;
  CHECK_NOTHROW(parsed = nlohmann::json::parse(trace_to_chrome_json(Trace{})));
}

TEST_CASE("chrome json: a worker missing from Trace::workers still gets a process") {
  Trace trace = small_trace();
  trace.workers.resize(1);
  const nlohmann::json document = nlohmann::json::parse(trace_to_chrome_json(trace));
  bool named = false;
  for (const nlohmann::json& event : events_with_phase(document, "M")) {
    if (event.at("pid") == 1 && event.at("name") == "process_name") {
      CHECK(event.at("args").at("name") == "worker 1 (stage 1)");
      named = true;
    }
  }
  CHECK(named);
}

TEST_CASE("csv: a header and one row per span with the span's fields") {
  const Trace trace = small_trace();
  const std::string csv = trace_to_csv(trace);
  REQUIRE(!csv.empty());
  REQUIRE(csv.back() == '\n');
  const std::vector<std::string> lines = split(csv.substr(0, csv.size() - 1), '\n');
  REQUIRE(lines.size() == trace.spans.size() + 1);
  CHECK(lines[0] == "worker,stage,replica,device,action_index,action,kind,microbatch,stream,start_s,end_s,bytes");
  for (size_t i = 1; i < lines.size(); ++i) {
    const Span& span = trace.spans[i - 1];
    const std::vector<std::string> fields = split(lines[i], ',');
    REQUIRE(fields.size() == 12);
    CHECK(std::stoi(fields[0]) == span.worker);
    CHECK(std::stoi(fields[1]) == span.action.stage);
    CHECK(std::stoi(fields[3]) == span.worker);  // worker w sits on device w
    CHECK(std::stoi(fields[4]) == span.action_index);
    CHECK(fields[5] == to_string(span.action));
    CHECK(fields[6] == kind_name(span.action.kind));
    CHECK(std::stoi(fields[7]) == span.action.batch());
    CHECK(fields[8] == (span.stream == Stream::kComm ? "comm" : "compute"));
    CHECK(std::stod(fields[9]) == Approx(span.start.value).margin(0.5e-9));
    CHECK(std::stod(fields[10]) == Approx(span.end.value).margin(0.5e-9));
    CHECK(std::stoll(fields[11]) == span.bytes.value);
  }
}

TEST_CASE("csv: fixed formatting of a send row") {
  const Trace trace = small_trace();
  const std::string csv = trace_to_csv(trace);
  // SEND_ACT0>w1 on worker 0 runs from tF = 1 ms to tF + 0.5 ms, 1 MiB.
  CHECK(csv.find("\n0,0,0,0,1,s0:SEND_ACT0>w1,SEND_ACT,0,comm,0.001000000,0.001500000,1048576\n") != std::string::npos);
  CHECK(csv == trace_to_csv(small_trace()));
  CHECK(count_if_span(trace, [](const Span& s) { return s.stream == Stream::kComm; }) ==
        testing::count_substring(csv, ",comm,"));
}

}  // namespace
}  // namespace baton
