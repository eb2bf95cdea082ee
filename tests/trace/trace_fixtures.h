// Hand-made traces shared by the trace writer tests, and small text helpers.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "tests/catch_compat.h"

#include "sim/trace.h"

namespace baton::testing {

constexpr double kForwardMs = 1.0;   // tF
constexpr double kBackwardMs = 2.0;  // tB
constexpr double kSendMs = 0.5;      // one activation or gradient transfer
constexpr double kStepMs = 0.1;
constexpr int64_t kActivationBytes = int64_t{1} << 20;

inline Span make_span(int worker, int action_index, std::string_view action, double start_ms, double end_ms,
                      int64_t bytes = 0) {
  const Result<Action> parsed = parse_action(action);
  REQUIRE(parsed.ok());
  Span span;
  span.worker = worker;
  span.action_index = action_index;
  span.action = *parsed;
  span.stream = is_compute(parsed->kind) ? Stream::kCompute : Stream::kComm;
  span.start = Seconds::from_ms(start_ms);
  span.end = Seconds::from_ms(end_ms);
  span.bytes = Bytes(bytes);
  return span;
}

inline void sort_spans(Trace& trace) {
  std::sort(trace.spans.begin(), trace.spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.start.value, a.worker, a.action_index) < std::tie(b.start.value, b.worker, b.action_index);
  });
}

// Two stages, one worker each (worker w on device w), two microbatches run
// GPipe-style: F0 F1 B0 B1 then STEP, with the sends and receives between
// (tF = 1 ms, tB = 2 ms, a transfer 0.5 ms; each box starts at its label):
//   ms     0   1   2   3   4   5   6   7   8   9   10
//   w0 s0  F0  F1                  B0      B1      S
//   w1 s1        F0  F1  B0      B1      S
inline Trace small_trace() {
  const double f = kForwardMs, b = kBackwardMs, c = kSendMs;
  const int64_t act = kActivationBytes;
  Trace trace;
  trace.origin = "predicted";
  trace.num_stages = 2;
  trace.workers = {WorkerInfo{0, 0, 0, {}}, WorkerInfo{1, 0, 1, {}}};
  const double w1_f0 = f + c;          // F0 on w1 starts when the activation arrives
  const double w1_b0 = w1_f0 + 2 * f;  // after F0 and F1 (F1's input arrived at 2f + c)
  const double w0_b0 = w1_b0 + b + c;  // gradient of microbatch 0 arrives
  trace.spans = {
      make_span(0, 0, "s0:F0", 0, f),
      make_span(0, 1, "s0:SEND_ACT0>w1", f, f + c, act),
      make_span(0, 2, "s0:F1", f, 2 * f),
      make_span(0, 3, "s0:SEND_ACT1>w1", 2 * f, 2 * f + c, act),
      make_span(0, 4, "s0:RECV_GRAD0<w1", 2 * f, w0_b0, act),
      make_span(0, 5, "s0:B0", w0_b0, w0_b0 + b),
      make_span(0, 6, "s0:RECV_GRAD1<w1", w0_b0 + b, w0_b0 + b, act),
      make_span(0, 7, "s0:B1", w0_b0 + b, w0_b0 + 2 * b),
      make_span(0, 8, "s0:STEP0", w0_b0 + 2 * b, w0_b0 + 2 * b + kStepMs),
      make_span(1, 0, "s1:RECV_ACT0<w0", 0, w1_f0, act),
      make_span(1, 1, "s1:F0", w1_f0, w1_f0 + f),
      make_span(1, 2, "s1:RECV_ACT1<w0", w1_f0 + f, w1_f0 + f, act),
      make_span(1, 3, "s1:F1", w1_f0 + f, w1_f0 + 2 * f),
      make_span(1, 4, "s1:B0", w1_b0, w1_b0 + b),
      make_span(1, 5, "s1:SEND_GRAD0>w0", w1_b0 + b, w1_b0 + b + c, act),
      make_span(1, 6, "s1:B1", w1_b0 + b, w1_b0 + 2 * b),
      make_span(1, 7, "s1:SEND_GRAD1>w0", w1_b0 + 2 * b, w1_b0 + 2 * b + c, act),
      make_span(1, 8, "s1:STEP0", w1_b0 + 2 * b, w1_b0 + 2 * b + kStepMs),
  };
  sort_spans(trace);
  return trace;
}

inline int count_if_span(const Trace& trace, bool (*predicate)(const Span&)) {
  return static_cast<int>(std::count_if(trace.spans.begin(), trace.spans.end(), predicate));
}

inline int count_substring(std::string_view text, std::string_view needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t end = text.find(separator); end != std::string_view::npos; end = text.find(separator, begin)) {
    parts.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  parts.emplace_back(text.substr(begin));
  return parts;
}

}  // namespace baton::testing
