// Helpers shared by the trace writers, and the CSV writer.
#include "sim/trace_writers.h"

#include <iterator>

#include <fmt/format.h>

namespace baton {

std::string span_name(const Action& action) {
  std::string text = to_string(action);
  const size_t colon = text.find(':');
  return colon == std::string::npos ? text : text.substr(colon + 1);
}

std::string_view stream_name(Stream stream) {
  switch (stream) {
    case Stream::kCompute: return "compute";
    case Stream::kComm: return "comm";
    case Stream::kTensorComm: return "tensor";
    case Stream::kContextComm: return "context";
    case Stream::kExpertComm: return "expert";
  }
  return "compute";
}

std::vector<WorkerInfo> trace_workers(const Trace& trace) {
  std::vector<WorkerInfo> workers = trace.workers;
  const size_t described = workers.size();
  std::vector<bool> seen(described, true);
  for (const Span& span : trace.spans) {
    if (span.worker < 0) continue;
    const auto index = static_cast<size_t>(span.worker);
    if (index >= workers.size()) {
      workers.resize(index + 1, WorkerInfo{0, -1, -1, {}});
      seen.resize(index + 1, false);
    }
    if (!seen[index]) {
      workers[index].stage = span.action.stage;
      seen[index] = true;
    }
  }
  return workers;
}

namespace {

void append_csv_row(std::string& out, const Span& span, const WorkerInfo& info) {
  fmt::format_to(std::back_inserter(out), "{},{},{},{},{},{},{},{},{},{:.9f},{:.9f},{}\n", span.worker,
                 span.action.stage, info.replica, info.device, span.action_index, to_string(span.action),
                 kind_name(span.action.kind), span.action.number, stream_name(span.stream), span.start.value,
                 span.end.value, span.bytes.value);
}

}  // namespace

std::string trace_to_csv(const Trace& trace) {
  const std::vector<WorkerInfo> workers = trace_workers(trace);
  std::string out = "worker,stage,replica,device,action_index,action,kind,microbatch,stream,start_s,end_s,bytes\n";
  out.reserve(out.size() + trace.spans.size() * 64);
  for (const Span& span : trace.spans) {
    const WorkerInfo info =
        span.worker >= 0 ? workers[static_cast<size_t>(span.worker)] : WorkerInfo{span.action.stage, -1, -1, {}};
    append_csv_row(out, span, info);
  }
  return out;
}

}  // namespace baton
