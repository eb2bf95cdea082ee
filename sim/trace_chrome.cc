// Chrome trace-event JSON writer (see trace_writers.h for the format).
//
// Written by hand rather than through nlohmann::json so that a trace of
// millions of spans streams into one string with fixed number formatting;
// nlohmann::json only escapes the free-text strings.
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/trace_writers.h"

namespace baton {
namespace {

constexpr int kComputeTid = 0;
constexpr int kCommTid = 1;
constexpr int kTensorTid = 2;   // tensor-parallel collectives, only in traces that have them
constexpr int kContextTid = 3;  // the context-parallel exchange, likewise
constexpr int kExpertTid = 4;   // the expert-parallel all-to-alls, likewise

int tid_of(Stream stream) {
  switch (stream) {
    case Stream::kCompute: return kComputeTid;
    case Stream::kComm: return kCommTid;
    case Stream::kTensorComm: return kTensorTid;
    case Stream::kContextComm: return kContextTid;
    case Stream::kExpertComm: return kExpertTid;
  }
  return kComputeTid;
}

std::string json_string(const std::string& text) { return nlohmann::json(text).dump(); }

std::string process_name(int worker, const WorkerInfo& info) {
  if (info.replica < 0) return fmt::format("worker {} (stage {})", worker, info.stage);
  return fmt::format("worker {} (stage {}, replica {}, device {})", worker, info.stage, info.replica, info.device);
}

// The tracks beyond compute and comm that the trace has.
struct Tracks {
  bool tensor = false, context = false, expert = false;
};

void append_metadata(std::string& out, int worker, const WorkerInfo& info, const Tracks& tracks) {
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 "{{\"ph\":\"M\",\"pid\":{},\"tid\":0,\"name\":\"process_name\","
                 "\"args\":{{\"name\":{}}}}},\n",
                 worker, json_string(process_name(worker, info)));
  fmt::format_to(it,
                 "{{\"ph\":\"M\",\"pid\":{},\"tid\":0,\"name\":\"process_sort_index\","
                 "\"args\":{{\"sort_index\":{}}}}},\n",
                 worker, worker);
  for (const auto& [tid, name] :
       {std::pair{kComputeTid, "compute"}, std::pair{kCommTid, "comm"},
        std::pair{kTensorTid, "tensor-parallel collectives"}, std::pair{kContextTid, "context-parallel exchange"},
        std::pair{kExpertTid, "expert-parallel all-to-alls"}}) {
    if ((tid == kTensorTid && !tracks.tensor) || (tid == kContextTid && !tracks.context) ||
        (tid == kExpertTid && !tracks.expert))
      continue;
    fmt::format_to(it,
                   "{{\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_name\","
                   "\"args\":{{\"name\":\"{}\"}}}},\n",
                   worker, tid, name);
    fmt::format_to(it,
                   "{{\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_sort_index\","
                   "\"args\":{{\"sort_index\":{}}}}},\n",
                   worker, tid, tid);
  }
}

// Action text forms are plain ASCII without quotes or backslashes, so they
// need no escaping.
void append_span(std::string& out, const Span& span) {
  const int tid = tid_of(span.stream);
  fmt::format_to(std::back_inserter(out),
                 "{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"name\":\"{}\",\"cat\":\"{}\","
                 "\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"microbatch\":{},\"stage\":{},"
                 "\"action_index\":{},\"bytes\":{},\"action\":\"{}\"}}}}",
                 span.worker, tid,
                 span.stream == Stream::kTensorComm    ? "TP " + span_name(span.action)
                 : span.stream == Stream::kContextComm ? "CP " + span_name(span.action)
                 : span.stream == Stream::kExpertComm  ? "EP " + span_name(span.action)
                                                       : span_name(span.action),
                 kind_name(span.action.kind), span.start.us(), (span.end - span.start).us(), span.action.number,
                 span.action.stage, span.action_index, span.bytes.value, to_string(span.action));
}

}  // namespace

std::string trace_to_chrome_json(const Trace& trace) {
  const std::vector<WorkerInfo> workers = trace_workers(trace);
  std::string out = "{\"traceEvents\": [\n";
  out.reserve(workers.size() * 600 + trace.spans.size() * 220);
  const Tracks tracks{has_stream(trace, Stream::kTensorComm), has_stream(trace, Stream::kContextComm),
                      has_stream(trace, Stream::kExpertComm)};
  for (size_t w = 0; w < workers.size(); ++w) append_metadata(out, static_cast<int>(w), workers[w], tracks);
  for (size_t i = 0; i < trace.spans.size(); ++i) {
    append_span(out, trace.spans[i]);
    out += i + 1 < trace.spans.size() ? ",\n" : "\n";
  }
  // Metadata lines end in a comma; with no spans the last one must not.
  if (trace.spans.empty() && !workers.empty()) out.erase(out.size() - 2, 1);
  fmt::format_to(std::back_inserter(out), "],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {{\"origin\": {}}}}}\n",
                 json_string(trace.origin));
  return out;
}

}  // namespace baton
