// Trace reader: the inverse of trace_to_chrome_json (sim/trace_writers.h), so
// a prediction and a measurement written to files can be compared later.
//
// Accepted input: a Chrome trace-event JSON object with "traceEvents" (an
// array) and optional "otherData": {"origin": str}.
// - "ph": "M" events named "process_name" with args.name
//   "worker W (stage S, replica R, device D)" (or "worker W (stage S)")
//   describe the workers; other metadata is ignored;
// - "ph": "X" events are spans: pid = worker (an integer below 2^20), tid 0
//   compute / 1 comm / 2 tensor-parallel collectives, ts and dur in
//   microseconds (dur >= 0, ts + dur finite), args.action the action's full
//   text form ("s2:F7"; stage below 2^24, batch below 2^30),
//   args.action_index (an integer >= 0), args.bytes (an integer >= 0,
//   default 0);
// - other event phases are ignored.
// A worker with spans and no process name is described as the writers
// describe it (sim/trace_writers.h trace_workers: the stage of its first
// span), so what is read writes back as it was read.
// What the writer writes is all that is accepted where the reader reads: the
// document holds only "traceEvents", "displayTimeUnit" and "otherData",
// otherData only "origin" (a string), a span only ph, pid, tid, name, cat,
// ts, dur and args, and a span's args only microbatch, stage, action_index,
// bytes and action; any other key there is refused, naming the event and the
// key (`a.json: traceEvents[7].args has an unknown key "action_idx" (did you
// mean "action_index"?)`). Metadata and other phases are not checked (other
// tools' events may sit beside baton's).
// Spans are returned sorted by (start, worker, action_index) as the writers
// and interpreters produce them. Times keep the writer's microsecond
// resolution (3 decimals), so a round trip changes a time by < 1 ns.
// Errors name the source, the event index and the field.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/result.h"
#include "sim/trace.h"

namespace baton {

Result<Trace> trace_from_chrome_json(const nlohmann::json& document, const std::string& source);
Result<Trace> parse_chrome_trace(std::string_view text, const std::string& source);

}  // namespace baton
