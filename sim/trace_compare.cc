#include "sim/trace_compare.h"

#include <algorithm>
#include <set>
#include <utility>

namespace baton {

namespace {

using SpanKey = std::pair<int32_t, int32_t>;  // (worker, action_index)

std::map<SpanKey, const Span*> index_spans(const Trace& trace) {
  std::map<SpanKey, const Span*> index;
  for (const Span& span : trace.spans)  // the actions themselves, not the collectives inside them
    if (!inside_compute(span.stream)) index[{span.worker, span.action_index}] = &span;
  return index;
}

Seconds duration(const Span& span) { return span.end - span.start; }

void add(ComparedFigure& figure, const SpanPair& pair) {
  figure.predicted += duration(*pair.predicted);
  figure.measured += duration(*pair.measured);
  ++figure.count;
}

void divide(ComparedFigure& figure, double by) {
  figure.predicted = figure.predicted / by;
  figure.measured = figure.measured / by;
}

}  // namespace

TraceShape trace_shape(const Trace& trace) {
  TraceShape shape;
  std::set<int32_t> workers;
  for (const Span& span : trace.spans) {
    if (inside_compute(span.stream)) continue;
    workers.insert(span.worker);
    ++shape.spans;
    shape.stages = std::max(shape.stages, span.action.stage + 1);
    if (span.action.kind == ActionKind::kForward) shape.batches = std::max(shape.batches, span.action.batch() + 1);
  }
  shape.workers = static_cast<int>(workers.size());
  return shape;
}

Seconds makespan(const Trace& trace) {
  if (trace.spans.empty()) return Seconds(0);
  Seconds first = trace.spans.front().start;
  Seconds last = trace.spans.front().end;
  for (const Span& span : trace.spans) {
    first = min(first, span.start);
    last = max(last, span.end);
  }
  return last - first;
}

SpanPairing pair_spans(const Trace& predicted, const Trace& measured) {
  SpanPairing pairing;
  const auto measured_index = index_spans(measured);
  for (const auto& [key, p] : index_spans(predicted)) {
    const auto it = measured_index.find(key);
    if (it == measured_index.end() || !(it->second->action == p->action)) {
      ++pairing.only_predicted;
      continue;
    }
    pairing.pairs.push_back(SpanPair{p, it->second});
  }
  pairing.only_measured = static_cast<int>(measured_index.size() - pairing.pairs.size());
  return pairing;
}

TraceComparison compare_traces(const Trace& predicted, const Trace& measured) {
  const SpanPairing pairing = pair_spans(predicted, measured);
  TraceComparison c;
  c.paired = static_cast<int>(pairing.pairs.size());
  c.only_predicted = pairing.only_predicted;
  c.only_measured = pairing.only_measured;
  std::map<int, std::set<int32_t>> stage_workers;
  for (const SpanPair& pair : pairing.pairs) {
    const Action& action = pair.predicted->action;
    add(c.kinds[std::string(kind_name(action.kind))], pair);
    if (!is_compute(action.kind)) continue;
    add(c.stages[action.stage], pair);
    stage_workers[action.stage].insert(pair.predicted->worker);
  }
  for (auto& [name, kind] : c.kinds) divide(kind, kind.count);
  for (auto& [stage, figure] : c.stages) divide(figure, static_cast<double>(stage_workers[stage].size()));
  c.iteration = ComparedFigure{makespan(predicted), makespan(measured), 1};
  return c;
}

}  // namespace baton
