// A prediction against a measurement of the same Program, figure by figure
// (the domain of `baton compare` and `baton validate`; tools/compare_report.h
// renders it).
//
// Spans pair up by (worker, action_index) when their actions are equal; a
// span of either trace that finds no such partner counts as "only predicted"
// or "only measured". Each figure holds a predicted and a measured time, and
// its relative error (measured - predicted) / predicted where the prediction
// is > 0:
// - iteration: each trace's makespan (last span end - first span start),
//   whether its spans pair or not;
// - per stage s: the compute time (F, B, I, W, STEP spans) of s's paired
//   spans, summed and divided by the number of workers of s those spans ran
//   on, i.e. the mean compute time per worker of the stage;
// - per action kind k: the mean duration of the paired spans of kind k.
// `count` is the number of paired spans behind a figure (1 for iteration).
// Thread safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/trace.h"

namespace baton {

struct ComparedFigure {
  Seconds predicted;
  Seconds measured;
  int count = 0;
  bool has_error() const { return predicted > Seconds(0); }
  double error() const { return has_error() ? (measured - predicted) / predicted : 0.0; }
};

struct TraceComparison {
  int paired = 0;
  int only_predicted = 0;
  int only_measured = 0;
  ComparedFigure iteration;
  std::map<int, ComparedFigure> stages;         // stage -> compute time per worker
  std::map<std::string, ComparedFigure> kinds;  // kind name ("F", "SEND_ACT", ...) -> mean duration
};

// A predicted span and the measured span of the same action.
struct SpanPair {
  const Span* predicted = nullptr;
  const Span* measured = nullptr;
};

// The spans of two traces paired as above. The pointers point into the traces
// given, which must outlive the result.
struct SpanPairing {
  std::vector<SpanPair> pairs;  // in (worker, action_index) order
  int only_predicted = 0;
  int only_measured = 0;
};

// What a trace's spans say of the Program behind it: the workers that have
// spans, the stages, the batches (microbatches, or pipedream's minibatches)
// its forward spans cover (highest batch + 1), and the action spans (the
// spans pair_spans pairs: tensor-parallel collectives inside an action left
// out). Two traces of one Program have equal shapes.
struct TraceShape {
  int workers = 0;
  int stages = 0;
  int batches = 0;
  int spans = 0;
  bool operator==(const TraceShape&) const = default;
};
TraceShape trace_shape(const Trace& trace);

// Last span end - first span start; 0 for a trace without spans.
Seconds makespan(const Trace& trace);
SpanPairing pair_spans(const Trace& predicted, const Trace& measured);
TraceComparison compare_traces(const Trace& predicted, const Trace& measured);

}  // namespace baton
