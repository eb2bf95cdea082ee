// compare_traces (sim/trace_compare.h): spans paired by (worker, action
// index, action), and the iteration, per-stage and per-kind figures on small
// hand-made traces. Times in ms; every expected figure is written as the sum
// it stands for.
#include <string>

#include "tests/catch_compat.h"

#include "sim/trace_compare.h"
#include "tests/trace/trace_fixtures.h"

namespace baton {
namespace {

using testing::kBackwardMs;
using testing::kForwardMs;
using testing::kSendMs;
using testing::kStepMs;
using testing::make_span;
using testing::small_trace;

double ms(Seconds s) { return s.ms(); }

// Stage 0 replicated on workers 0 and 1 (data parallel), one microbatch each:
//   w0: F0 [0, 1]  B0 [1, 3]  ALLREDUCE0 [3, 4]
//   w1: F1 [0, 1]  B1 [1, 3]  ALLREDUCE0 [3, 4]
Trace predicted_dp() {
  Trace trace;
  trace.spans = {make_span(0, 0, "s0:F0", 0, 1),         make_span(0, 1, "s0:B0", 1, 3),
                 make_span(0, 2, "s0:ALLREDUCE0", 3, 4), make_span(1, 0, "s0:F1", 0, 1),
                 make_span(1, 1, "s0:B1", 1, 3),         make_span(1, 2, "s0:ALLREDUCE0", 3, 4)};
  return trace;
}

// The same actions measured slower, starting at 10 ms:
//   w0: F0 [10, 11.5]  B0 [11.5, 14]    ALLREDUCE0 [14, 16]
//   w1: F1 [10, 11.2]  B1 [11.2, 13.6]  ALLREDUCE0 [14, 16]
Trace measured_dp() {
  Trace trace;
  trace.spans = {make_span(0, 0, "s0:F0", 10, 11.5),       make_span(0, 1, "s0:B0", 11.5, 14),
                 make_span(0, 2, "s0:ALLREDUCE0", 14, 16), make_span(1, 0, "s0:F1", 10, 11.2),
                 make_span(1, 1, "s0:B1", 11.2, 13.6),     make_span(1, 2, "s0:ALLREDUCE0", 14, 16)};
  return trace;
}

}  // namespace

TEST_CASE("trace compare: makespan is the last end minus the first start, 0 without spans") {
  CHECK(makespan(Trace{}) == Seconds(0));
  Trace trace;
  // The longest span is not the last: ends 9, 6; starts 2, 4.
  trace.spans = {make_span(0, 0, "s0:F0", 2, 9), make_span(1, 0, "s1:F0", 4, 6)};
  CHECK(ms(makespan(trace)) == Approx(9.0 - 2.0));
}

TEST_CASE("trace compare: a trace against itself pairs every span with no error") {
  const Trace trace = small_trace();
  const TraceComparison c = compare_traces(trace, trace);
  CHECK(c.paired == static_cast<int>(trace.spans.size()));
  CHECK(c.only_predicted == 0);
  CHECK(c.only_measured == 0);
  CHECK(c.iteration.predicted == makespan(trace));
  CHECK(c.iteration.count == 1);
  CHECK(c.iteration.error() == 0.0);
  // One worker per stage: F0 F1 B0 B1 STEP0.
  const double f = kForwardMs, b = kBackwardMs;
  for (int stage : {0, 1}) {
    CHECK(ms(c.stages.at(stage).predicted) == Approx(2 * f + 2 * b + kStepMs));
    CHECK(c.stages.at(stage).count == 5);
  }
  CHECK(ms(c.kinds.at("F").predicted) == Approx(f));
  CHECK(c.kinds.at("F").count == 4);
  CHECK(ms(c.kinds.at("B").measured) == Approx(b));
  CHECK(ms(c.kinds.at("SEND_ACT").predicted) == Approx(kSendMs));
  // RECV_ACT on w1: the wait for microbatch 0's activation (f + c), then none for 1's.
  CHECK(ms(c.kinds.at("RECV_ACT").predicted) == Approx((f + kSendMs + 0.0) / 2));
}

TEST_CASE("trace compare: replicas of a stage give its compute time per worker") {
  const TraceComparison c = compare_traces(predicted_dp(), measured_dp());
  CHECK(c.paired == 6);
  REQUIRE(c.stages.size() == 1);
  const ComparedFigure& stage = c.stages.at(0);
  // F and B of both workers (ALLREDUCE is not compute), over 2 workers.
  CHECK(stage.count == 4);
  CHECK(ms(stage.predicted) == Approx((1.0 + 2.0 + 1.0 + 2.0) / 2));
  CHECK(ms(stage.measured) == Approx((1.5 + 2.5 + 1.2 + 2.4) / 2));
  CHECK(stage.error() == Approx((7.6 / 2 - 6.0 / 2) / (6.0 / 2)));
}

TEST_CASE("trace compare: per kind, the mean duration of the paired spans") {
  const TraceComparison c = compare_traces(predicted_dp(), measured_dp());
  REQUIRE(c.kinds.size() == 3);
  CHECK(ms(c.kinds.at("F").predicted) == Approx(1.0));
  CHECK(ms(c.kinds.at("F").measured) == Approx((1.5 + 1.2) / 2));
  CHECK(ms(c.kinds.at("B").measured) == Approx((2.5 + 2.4) / 2));
  CHECK(c.kinds.at("ALLREDUCE").count == 2);
  CHECK(c.kinds.at("ALLREDUCE").error() == Approx((2.0 - 1.0) / 1.0));
}

TEST_CASE("trace compare: the iteration compares the makespans, wherever the traces start") {
  const TraceComparison c = compare_traces(predicted_dp(), measured_dp());
  CHECK(ms(c.iteration.predicted) == Approx(4.0 - 0.0));
  CHECK(ms(c.iteration.measured) == Approx(16.0 - 10.0));
  CHECK(c.iteration.error() == Approx((6.0 - 4.0) / 4.0));
}

TEST_CASE("trace compare: spans that differ in action, or have no partner, stay unpaired") {
  Trace measured = measured_dp();
  measured.spans[1] = make_span(0, 1, "s0:B1", 11.5, 14);         // w0's action 1 is B1, not B0
  measured.spans.erase(measured.spans.begin() + 3);               // w1's F1 missing
  measured.spans.push_back(make_span(1, 3, "s0:STEP0", 16, 17));  // beyond the prediction
  const SpanPairing pairing = pair_spans(predicted_dp(), measured);
  CHECK(pairing.pairs.size() == 6 - 2);
  CHECK(pairing.only_predicted == 2);  // w0's B0 and w1's F1
  CHECK(pairing.only_measured == 2);   // w0's B1 and w1's STEP0
  const TraceComparison c = compare_traces(predicted_dp(), measured);
  CHECK(c.paired == 4);
  CHECK(c.only_predicted == 2);
  CHECK(c.only_measured == 2);
  // Stage 0 keeps F0 of w0 and B1 of w1: still two workers.
  CHECK(c.stages.at(0).count == 2);
  CHECK(ms(c.stages.at(0).measured) == Approx((1.5 + 2.4) / 2));
  // The iteration takes every span, paired or not: the measured one ends at 17.
  CHECK(ms(c.iteration.measured) == Approx(17.0 - 10.0));
}

TEST_CASE("trace compare: pairs come in (worker, action index) order and point into the traces") {
  const Trace predicted = predicted_dp();
  Trace measured = measured_dp();
  std::swap(measured.spans[0], measured.spans[5]);  // the order of the spans does not matter
  const SpanPairing pairing = pair_spans(predicted, measured);
  REQUIRE(pairing.pairs.size() == 6);
  for (size_t i = 0; i < pairing.pairs.size(); ++i) {
    const SpanPair& pair = pairing.pairs[i];
    CHECK(pair.predicted == &predicted.spans[i]);  // predicted_dp lists its spans in that order
    CHECK(pair.measured->worker == pair.predicted->worker);
    CHECK(pair.measured->action_index == pair.predicted->action_index);
    CHECK(pair.measured->action == pair.predicted->action);
  }
}

TEST_CASE("trace compare: a figure predicted as 0 has no error") {
  Trace predicted, measured;
  predicted.spans = {make_span(1, 0, "s1:RECV_ACT0<w0", 5, 5)};
  measured.spans = {make_span(1, 0, "s1:RECV_ACT0<w0", 5, 7)};
  const TraceComparison c = compare_traces(predicted, measured);
  const ComparedFigure& recv = c.kinds.at("RECV_ACT");
  CHECK(ms(recv.measured) == Approx(2.0));
  CHECK_FALSE(recv.has_error());
  CHECK(recv.error() == 0.0);
  CHECK(c.stages.empty());  // a receive is not compute
  CHECK_FALSE(c.iteration.has_error());
}

TEST_CASE("trace shape: the workers, stages, forward batches and action spans a trace holds") {
  const TraceShape shape = trace_shape(predicted_dp());
  CHECK(shape.workers == 2);  // w0 and w1
  CHECK(shape.stages == 1);   // every action on s0
  CHECK(shape.batches == 2);  // F0 and F1
  CHECK(shape.spans == 6);
  Trace measured = measured_dp();
  CHECK(trace_shape(measured) == shape);
  measured.spans.push_back(make_span(1, 3, "s1:F2", 16, 17));  // a third batch, on a second stage
  const TraceShape more = trace_shape(measured);
  CHECK(more.stages == 2);
  CHECK(more.batches == 3);
  CHECK(more.spans == 7);
  CHECK_FALSE(more == shape);
}

}  // namespace baton
