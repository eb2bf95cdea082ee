// Trace writers: a Trace rendered as Chrome trace-event JSON, CSV and an SVG
// Gantt chart.
//
// Contract:
// - Every writer is a pure function of its arguments: identical input gives
//   byte-identical output (spans are written in the Trace's order, numbers with
//   a fixed number of decimals through fmt, which ignores the locale; no hash
//   map is iterated).
// - Workers are described by `Trace::workers`; a span whose worker has no entry
//   there is still written, with stage from its action and replica/device -1.
// - Times are written as recorded (the simulator starts at 0); only the
//   Gantt chart shifts its axis so that its first span starts at 0.
// - The writers never touch files; callers decide where the text goes.
//
// Chrome trace JSON (opens in Perfetto and chrome://tracing):
//   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {"origin": ...}}
//   - one process per worker: pid = worker id, "process_name" metadata
//     "worker 3 (stage 1, replica 0, device 5)" and "process_sort_index" = id;
//   - two threads per worker: tid 0 "compute", tid 1 "comm";
//   - one complete event ("ph":"X") per span: ts = start x 1e6, dur =
//     (end - start) x 1e6 (microseconds, 3 decimals), name = the action's text
//     form without its stage prefix ("F7", "SEND_ACT7>w5"), cat = kind name,
//     args {"microbatch", "stage", "action_index", "bytes", "action"}.
//
// CSV: header `worker,stage,replica,device,action_index,action,kind,microbatch,
// stream,start_s,end_s,bytes`, then one row per span in Trace order; times in
// seconds with 9 decimals (nanoseconds), stream "compute" or "comm".
//
// SVG Gantt chart: see GanttOptions and trace_to_svg below.
// Thread safety: pure functions, safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.h"

namespace baton {

// How the Gantt chart is drawn.
struct GanttOptions {
  // Heading at the top of the chart; empty draws no heading.
  std::string title = "baton trace";
  // Total width of the picture in pixels (labels and margins included).
  // Wider shows shorter spans; narrower keeps files small. Minimum 400.
  int width_px = 1400;
  // Above this many spans a chart switches to its compact form: no
  // communication sub-rows, no tooltips or microbatch numbers, and
  // consecutive compute spans thinner than one pixel (each starting within a
  // pixel of the previous one's end) are merged into one grey block whose
  // opacity is the busy share of its width ("merged" in the legend). This
  // bounds the output to about one rectangle per pixel column per worker.
  // Below it, every span is drawn with a tooltip (<title>) and the file grows
  // linearly, about 150 bytes per span.
  int64_t detailed_span_limit = 20000;
};

// The action's text form without its stage prefix: "F7", "SEND_ACT7>w5".
std::string span_name(const Action& action);
// "compute" or "comm".
std::string_view stream_name(Stream stream);
// The placement of every worker that appears in the trace, index = worker id:
// Trace::workers, extended up to the highest span worker; a worker the Trace
// does not describe gets {stage of its first span, replica -1, device -1}.
std::vector<WorkerInfo> trace_workers(const Trace& trace);

std::string trace_to_chrome_json(const Trace& trace);
std::string trace_to_csv(const Trace& trace);

// A Gantt chart, one row per worker (label "w3 s1"), time running right.
// Compute spans are boxes coloured by microbatch (a fixed 10-colour palette,
// microbatch k takes colour k mod 10): forward light, backward dark,
// input-gradient (I) medium, weight-gradient (W) dark hatched, STEP a thin
// black bar. Communication spans sit in a thin grey sub-row under the compute
// row (send, receive wait and all-reduce in different greys). A microbatch's
// number is written inside its box when the box is wide enough. A time axis
// with 1-2-5 ticks (ms below 1 s of span, s above) runs along the bottom,
// counted from the first span's start. A legend sits under the title.
std::string trace_to_svg(const Trace& trace, const GanttOptions& options = {});

// Two Gantt charts one above the other on one time scale (same origin: each
// trace's first span; same pixels per second), each headed by its origin
// (`Trace::origin`, or "predicted" / "measured" when empty).
std::string traces_to_svg_compare(const Trace& predicted, const Trace& measured, const GanttOptions& options = {});

}  // namespace baton
