// Trace: what happened, action by action, on every worker; the common output
// of the simulator (predicted) and the executor (measured).
//
// One span per executed action. `action_index` is the action's position in its
// worker's list in the Program, so spans of a prediction and a measurement of
// the same Program pair up by (worker, action_index).
// Span times by kind:
//   compute (F, B, I, W, STEP): the time the device ran it;
//   SEND_*: from the start of the transfer on the wire to its delivery;
//   RECV_*: from the moment the worker reached the receive to the moment the
//           data was there (zero length when it had already arrived);
//   ALLREDUCE: from the start of the collective to its end.
// Thread safety: plain values.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sim/program.h"
#include "sim/units.h"

namespace baton {

// kTensorComm: the tensor-parallel collectives inside a compute span (a
// Megatron prediction, sim/megatron_sim.h): same worker, action and
// action_index as the compute span they belong to, drawn on their own track.
// kContextComm: likewise the exposed context-parallel exchange of keys and
// values inside a compute span; kExpertComm: the expert-parallel all-to-alls
// (a mixture of experts' dispatch and combine).
enum class Stream : uint8_t { kCompute, kComm, kTensorComm, kContextComm, kExpertComm };
// Whether spans of `stream` lie inside an action's compute span (the
// collectives a Megatron prediction draws), not actions of their own.
inline bool inside_compute(Stream stream) {
  return stream == Stream::kTensorComm || stream == Stream::kContextComm || stream == Stream::kExpertComm;
}

struct Span {
  int32_t worker = 0;
  int32_t action_index = 0;
  Action action;
  Stream stream = Stream::kCompute;
  Seconds start;
  Seconds end;
  Bytes bytes;  // data moved (sends, receives, all-reduce); 0 for compute
};

struct Trace {
  std::string origin;  // "predicted" or "measured"
  std::vector<WorkerInfo> workers;
  int num_stages = 0;
  std::vector<Span> spans;  // ordered by (start, worker, action_index)
};

// Whether any span of the trace is on `stream`.
inline bool has_stream(const Trace& trace, Stream stream) {
  return std::any_of(trace.spans.begin(), trace.spans.end(), [stream](const Span& s) { return s.stream == stream; });
}

// The earliest start and the latest end over a trace's spans, as a start and
// a length (both 0 without spans).
struct TraceExtent {
  double start_s = 0;
  double length_s = 0;
};
inline TraceExtent trace_extent(const Trace& trace) {
  if (trace.spans.empty()) return {};
  double first = trace.spans.front().start.value;
  double last = trace.spans.front().end.value;
  for (const Span& span : trace.spans) {
    first = std::min(first, span.start.value);
    last = std::max(last, span.end.value);
  }
  return {first, last - first};
}

// The zero-bubble paper's cost (Qi et al., ICLR 2024): the longest, over
// workers, of the time from a worker's first compute action's start to its
// last one's end (STEPs left out); 0 without compute spans.
inline Seconds longest_compute_span(const Trace& trace) {
  std::vector<std::pair<double, double>> span;  // [worker]: (first start, last end); start < 0 when none
  for (const Span& s : trace.spans) {
    if (s.stream != Stream::kCompute || s.action.kind == ActionKind::kStep) continue;
    if (static_cast<size_t>(s.worker) >= span.size()) span.resize(static_cast<size_t>(s.worker) + 1, {-1.0, 0.0});
    auto& [first, last] = span[static_cast<size_t>(s.worker)];
    first = first < 0.0 ? s.start.value : std::min(first, s.start.value);
    last = std::max(last, s.end.value);
  }
  double longest = 0.0;
  for (const auto& [first, last] : span)
    if (first >= 0.0) longest = std::max(longest, last - first);
  return Seconds(longest);
}

}  // namespace baton
