// SVG Gantt chart writer on hand-made traces.
#include <string>
#include <vector>

#include "tests/catch_compat.h"

#include "sim/trace_writers.h"
#include "tests/trace/svg_checks.h"
#include "tests/trace/trace_fixtures.h"

namespace baton {
namespace {

using testing::count_if_span;
using testing::count_substring;
using testing::make_span;
using testing::small_trace;
using testing::well_formed;

bool is_compute_span(const Span& span) { return span.stream == Stream::kCompute; }
bool is_drawn_comm_span(const Span& span) { return span.stream == Stream::kComm && span.end > span.start; }

TEST_CASE("svg: a well-formed chart with one box per span, title and legend") {
  const Trace trace = small_trace();
  GanttOptions options;
  options.title = "two stages & two microbatches";
  const std::string svg = trace_to_svg(trace, options);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") == svg.size() - 7);
  std::string why;
  CHECK(well_formed(svg, why));
  INFO(why);
  CHECK(count_substring(svg, "<rect class=\"c") == count_if_span(trace, is_compute_span));
  CHECK(count_substring(svg, "<rect class=\"m") == count_if_span(trace, is_drawn_comm_span));
  CHECK(svg.find("two stages &amp; two microbatches") != std::string::npos);
  for (const char* label :
       {"forward", "backward", "input-grad", "weight-grad", "step", "send act", "recv wait", "all-reduce"}) {
    CHECK(svg.find(label) != std::string::npos);
  }
  CHECK(svg.find(">w0 s0</text>") != std::string::npos);
  CHECK(svg.find(">w1 s1</text>") != std::string::npos);
  CHECK(svg.find("merged") == std::string::npos);
}

TEST_CASE("svg: deterministic and as wide as asked") {
  GanttOptions options;
  options.width_px = 900;
  const std::string svg = trace_to_svg(small_trace(), options);
  CHECK(svg == trace_to_svg(small_trace(), options));
  CHECK(svg.find("width=\"900\"") != std::string::npos);
}

TEST_CASE("svg: the time axis steps by 1, 2 or 5 and is labelled in ms") {
  // The trace lasts 10.1 ms over 1400 - 92 px of plot: about 13 ticks wanted,
  // 10.1 / 13 = 0.78 rounds up to a step of 1 ms: labels 0, 1, ..., 10.
  const std::string svg = trace_to_svg(small_trace());
  CHECK(svg.find("time (ms)") != std::string::npos);
  for (int tick = 0; tick <= 10; ++tick) {
    CHECK(svg.find(">" + std::to_string(tick) + "</text>") != std::string::npos);
  }
  CHECK(svg.find(">11</text>") == std::string::npos);

  // A 4 s trace: 4 / 13 = 0.31 -> 0.5 s steps, labelled with one decimal.
  Trace long_trace;
  long_trace.spans = {make_span(0, 0, "s0:F0", 0, 4000)};
  const std::string long_svg = trace_to_svg(long_trace);
  CHECK(long_svg.find("time (s)") != std::string::npos);
  CHECK(long_svg.find(">3.5</text>") != std::string::npos);
  CHECK(long_svg.find(">4.0</text>") != std::string::npos);
}

TEST_CASE("svg: forward, backward, input- and weight-gradient look different") {
  Trace trace;
  trace.workers = {WorkerInfo{0, 0, 0, {}}};
  trace.spans = {make_span(0, 0, "s0:F3", 0, 1), make_span(0, 1, "s0:B3", 1, 2), make_span(0, 2, "s0:I3", 2, 3),
                 make_span(0, 3, "s0:W3", 3, 4)};
  const std::string svg = trace_to_svg(trace);
  auto fill_of = [&](const char* css_class) {
    const size_t rect = svg.find(std::string("<rect class=\"") + css_class);
    REQUIRE(rect != std::string::npos);
    const size_t fill = svg.find("fill=\"", rect) + 6;
    return svg.substr(fill, svg.find('"', fill) - fill);
  };
  const std::vector<std::string> fills = {fill_of("cF"), fill_of("cB"), fill_of("cI"), fill_of("cW")};
  for (size_t i = 0; i < fills.size(); ++i) {
    for (size_t j = i + 1; j < fills.size(); ++j) CHECK(fills[i] != fills[j]);
  }
  CHECK(fills[3] == "url(#h3)");  // microbatch 3's hatch
}

TEST_CASE("svg: microbatch colours cycle through a palette of 10") {
  Trace trace;
  trace.spans = {make_span(0, 0, "s0:F0", 0, 1), make_span(0, 1, "s0:F1", 1, 2), make_span(0, 2, "s0:F10", 2, 3)};
  const std::string svg = trace_to_svg(trace);
  std::vector<std::string> fills;
  for (size_t at = svg.find("<rect class=\"cF"); at != std::string::npos; at = svg.find("<rect class=\"cF", at + 1)) {
    const size_t fill = svg.find("fill=\"", at) + 6;
    fills.push_back(svg.substr(fill, svg.find('"', fill) - fill));
  }
  REQUIRE(fills.size() == 3);
  CHECK(fills[0] != fills[1]);
  CHECK(fills[0] == fills[2]);
}

TEST_CASE("svg: a large trace is drawn compact, about one box per pixel") {
  // 4 workers x 8000 forwards of 1 us: 32000 spans, each far thinner than a pixel.
  constexpr int kWorkers = 4;
  constexpr int kPerWorker = 8000;
  Trace trace;
  for (int w = 0; w < kWorkers; ++w) trace.workers.push_back(WorkerInfo{w, 0, w, {}});
  for (int i = 0; i < kPerWorker; ++i) {
    for (int w = 0; w < kWorkers; ++w) {
      const double start_ms = i * 1e-3 + (i / 1000) * 0.5;  // a 0.5 ms gap every 1000
      trace.spans.push_back(
          make_span(w, i, "s" + std::to_string(w) + ":F" + std::to_string(i), start_ms, start_ms + 1e-3));
    }
  }
  GanttOptions options;
  const std::string svg = trace_to_svg(trace, options);
  std::string why;
  CHECK(well_formed(svg, why));
  INFO(why);
  CHECK(svg.find("merged (&lt; 1 px") != std::string::npos);
  CHECK(svg.find("<title>") == std::string::npos);
  // Each worker's run of 1000 back-to-back spans merges into one block.
  CHECK(count_substring(svg, "<rect class=\"cM") == kWorkers * kPerWorker / 1000);
  CHECK(svg.size() < 100 * 1000);

  options.detailed_span_limit = kWorkers * kPerWorker;  // now at the limit: every span drawn
  CHECK(count_substring(trace_to_svg(trace, options), "<rect class=\"c") == kWorkers * kPerWorker);
}

TEST_CASE("svg compare: two labelled charts on one time scale") {
  const Trace predicted = small_trace();
  Trace measured = small_trace();
  measured.origin = "measured";
  // A measured clock starting at 100 s: each chart counts from its first span,
  // so identical timelines give identical boxes.
  for (Span& span : measured.spans) {
    span.start += Seconds(100.0);
    span.end += Seconds(100.0);
  }
  GanttOptions options;
  options.title = "compare";
  const std::string svg = traces_to_svg_compare(predicted, measured, options);
  std::string why;
  CHECK(well_formed(svg, why));
  INFO(why);
  CHECK(svg.find("class=\"heading\">predicted") != std::string::npos);
  CHECK(svg.find("class=\"heading\">measured") != std::string::npos);
  const int boxes = count_if_span(predicted, is_compute_span);
  CHECK(count_substring(svg, "<rect class=\"c") == 2 * boxes);
  // Same x and width for the same span in both charts.
  const std::string first_box = svg.substr(svg.find("<rect class=\"cF\""), 60);
  CHECK(count_substring(svg, first_box) == 2);
  CHECK(svg == traces_to_svg_compare(predicted, measured, options));
}

TEST_CASE("svg compare: the longer trace sets the scale") {
  const Trace predicted = small_trace();
  Trace measured = small_trace();
  for (Span& span : measured.spans) {
    span.start = span.start * 2.0;
    span.end = span.end * 2.0;
  }
  measured.origin.clear();
  const std::string svg = traces_to_svg_compare(predicted, measured);
  // 20.2 ms over about 13 ticks: 2 ms steps up to 20.
  CHECK(svg.find(">20</text>") != std::string::npos);
  CHECK(svg.find(">19</text>") == std::string::npos);
  CHECK(svg.find("class=\"heading\">measured") != std::string::npos);  // fallback heading
}

TEST_CASE("svg: an empty trace still renders") {
  const std::string svg = trace_to_svg(Trace{});
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(count_substring(svg, "<rect class=\"c") == 0);
}

}  // namespace
}  // namespace baton
