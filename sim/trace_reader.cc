#include "sim/trace_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "sim/json_fields.h"
#include "sim/trace_writers.h"

namespace baton {

namespace {

using json_fields::FieldPath;

// Worker ids (pid, "worker W" in a process name) and action indices above
// these are refused: the reader makes a worker entry for every id up to the
// highest, so a few bytes naming worker 2^31 would ask for gigabytes.
constexpr int64_t kMaxTraceWorkers = int64_t{1} << 20;
constexpr int64_t kMaxActionIndex = (int64_t{1} << 31) - 1;
// Stages and batches are counted as the highest + 1 (trace_shape): kept well
// inside an int.
constexpr int64_t kMaxTraceStages = int64_t{1} << 24;
constexpr int64_t kMaxTraceBatch = (int64_t{1} << 30) - 1;

std::string where(const std::string& source, size_t index) { return fmt::format("{}: traceEvents[{}]", source, index); }

// "worker 3 (stage 1, replica 0, device 5)" or "worker 3 (stage 1)".
bool parse_process_name(const std::string& name, int& worker, WorkerInfo& info) {
  int w = 0, stage = 0, replica = -1, device = -1;
  if (std::sscanf(name.c_str(), "worker %d (stage %d, replica %d, device %d)", &w, &stage, &replica, &device) == 4 ||
      std::sscanf(name.c_str(), "worker %d (stage %d)", &w, &stage) == 2) {
    worker = w;
    info = WorkerInfo{stage, replica, device, {}};
    return w >= 0 && w < kMaxTraceWorkers && stage >= 0 && stage < kMaxTraceStages;
  }
  return false;
}

void read_metadata(const nlohmann::json& event, std::vector<WorkerInfo>& workers) {
  const auto name = event.find("name");
  if (name == event.end() || *name != "process_name" || !event.contains("args")) return;
  const nlohmann::json& args = event["args"];
  if (!args.is_object() || !args.contains("name") || !args["name"].is_string()) return;
  int worker = 0;
  WorkerInfo info;
  if (!parse_process_name(args["name"].get<std::string>(), worker, info)) return;
  if (worker >= static_cast<int>(workers.size()))
    workers.resize(static_cast<size_t>(worker) + 1, WorkerInfo{0, -1, -1, {}});
  workers[static_cast<size_t>(worker)] = info;
}

Result<Span> read_span(const nlohmann::json& event, const std::string& source, size_t event_index) {
  const FieldPath event_at = FieldPath(source).field("traceEvents").index(event_index);
  if (auto ok =
          json_fields::check_known_keys(event, event_at, {"ph", "pid", "tid", "name", "cat", "ts", "dur", "args"});
      !ok)
    return ok.error();
  const std::string at = where(source, event_index);
  const auto number = [&](const nlohmann::json& object, const char* key) -> Result<double> {
    if (!object.contains(key) || !object[key].is_number())
      return Error{fmt::format("{}: \"{}\" must be a number", at, key)};
    return object[key].get<double>();
  };
  // An integer in [0, most], as JSON writes it (no fraction, no exponent).
  const auto whole = [&](const nlohmann::json& object, const char* key, int64_t most) -> Result<int64_t> {
    const auto value = object.find(key);
    if (value == object.end() || !value->is_number_integer() ||
        (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(most)) ||
        (!value->is_number_unsigned() && (value->get<int64_t>() < 0 || value->get<int64_t>() > most)))
      return Error{fmt::format("{}: \"{}\" must be an integer from 0 to {}", at, key, most)};
    return value->get<int64_t>();
  };
  auto pid = whole(event, "pid", kMaxTraceWorkers - 1);
  auto ts = number(event, "ts");
  auto dur = number(event, "dur");
  if (!pid) return pid.error();
  if (!ts) return ts.error();
  if (!dur) return dur.error();
  if (*dur < 0 || !std::isfinite(*ts + *dur))
    return Error{fmt::format("{}: \"dur\" must be >= 0 and ts + dur a finite time", at)};
  if (!event.contains("args") || !event["args"].is_object())
    return Error{fmt::format("{}: \"args\" must be an object", at)};
  const nlohmann::json& args = event["args"];
  if (auto ok = json_fields::check_known_keys(args, event_at.field("args"),
                                              {"microbatch", "stage", "action_index", "bytes", "action"});
      !ok)
    return ok.error();
  if (event.contains("tid") &&
      !(event["tid"] == 0 || event["tid"] == 1 || event["tid"] == 2 || event["tid"] == 3 || event["tid"] == 4))
    return Error{
        fmt::format("{}: \"tid\" must be 0 (compute), 1 (comm), 2 (tensor-parallel collectives), 3 (context-parallel "
                    "exchange) or 4 (expert-parallel all-to-alls)",
                    at)};
  if (!args.contains("action") || !args["action"].is_string())
    return Error{fmt::format("{}: args.action must be an action's text form", at)};
  auto action = parse_action(args["action"].get<std::string>());
  if (!action) return Error{fmt::format("{}: args.action: {}", at, action.error().message)};
  if (action->stage >= kMaxTraceStages || action->batch() > kMaxTraceBatch)
    return Error{
        fmt::format("{}: args.action: stage below {} and batch at most {}", at, kMaxTraceStages, kMaxTraceBatch)};
  auto index = whole(args, "action_index", kMaxActionIndex);
  if (!index) return index.error();
  Result<int64_t> bytes =
      args.contains("bytes") ? whole(args, "bytes", std::numeric_limits<int64_t>::max()) : Result<int64_t>(0);
  if (!bytes) return bytes.error();
  Span span;
  span.worker = static_cast<int32_t>(*pid);
  span.action_index = static_cast<int32_t>(*index);
  span.action = *action;
  const int tid = event.value("tid", 0);
  span.stream = tid == 1   ? Stream::kComm
                : tid == 2 ? Stream::kTensorComm
                : tid == 3 ? Stream::kContextComm
                : tid == 4 ? Stream::kExpertComm
                           : Stream::kCompute;
  span.start = Seconds::from_us(*ts);
  span.end = Seconds::from_us(*ts + *dur);
  span.bytes = Bytes(*bytes);
  return span;
}

// The document's own keys and "otherData" (the trace's origin).
Result<std::string> read_origin(const nlohmann::json& document, const FieldPath& root) {
  if (auto ok = json_fields::check_known_keys(document, root, {"traceEvents", "displayTimeUnit", "otherData"}); !ok)
    return ok.error();
  auto other = document.find("otherData");
  if (other == document.end()) return std::string();
  const FieldPath at = root.field("otherData");
  if (auto ok = json_fields::check_object(*other, at); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(*other, at, {"origin"}); !ok) return ok.error();
  return json_fields::read_string_or(*other, at, "origin", "");
}

}  // namespace

Result<Trace> trace_from_chrome_json(const nlohmann::json& document, const std::string& source) {
  if (!document.is_object() || !document.contains("traceEvents") || !document["traceEvents"].is_array())
    return Error{fmt::format("{}: not a Chrome trace (no \"traceEvents\" array)", source)};
  Trace trace;
  auto origin = read_origin(document, FieldPath(source));
  if (!origin) return origin.error();
  trace.origin = *origin;
  const nlohmann::json& events = document["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const nlohmann::json& event = events[i];
    if (!event.is_object()) return Error{fmt::format("{}: must be an object", where(source, i))};
    const auto ph = event.find("ph");
    const std::string phase = ph != event.end() && ph->is_string() ? ph->get<std::string>() : "";
    if (phase == "M") read_metadata(event, trace.workers);
    if (phase != "X") continue;
    auto span = read_span(event, source, i);
    if (!span) return span.error();
    trace.spans.push_back(*span);
  }
  // A worker whose spans no process name describes is described as the
  // writers describe it (trace_workers: the stage of its first span), so the
  // trace read is the trace a writer would write back.
  trace.workers = trace_workers(trace);
  for (const Span& span : trace.spans) trace.num_stages = std::max(trace.num_stages, span.action.stage + 1);
  for (const WorkerInfo& info : trace.workers) trace.num_stages = std::max(trace.num_stages, info.stage + 1);
  std::stable_sort(trace.spans.begin(), trace.spans.end(), [](const Span& a, const Span& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.worker != b.worker) return a.worker < b.worker;
    return a.action_index < b.action_index;
  });
  return trace;
}

Result<Trace> parse_chrome_trace(std::string_view text, const std::string& source) {
  nlohmann::json document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return Error{fmt::format("{}: not valid JSON", source)};
  return trace_from_chrome_json(document, source);
}

}  // namespace baton
