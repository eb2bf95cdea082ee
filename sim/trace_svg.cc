// SVG Gantt chart writer (see trace_writers.h for what is drawn).
//
// Picture, top to bottom: title, legend, then per chart an optional heading,
// one row per worker (a compute row and, below it, a thin communication
// sub-row), and a time axis. Coordinates are written with 2 decimals and
// colours are computed from fixed constants, so output is deterministic.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "sim/svg_util.h"
#include "sim/trace_svg_style.h"
#include "sim/trace_writers.h"

namespace baton {
namespace {

// The geometry and palette: sim/trace_svg_style.h.
using namespace gantt_style;

const CommStyle& comm_style(ActionKind kind) {
  switch (kind) {
    case ActionKind::kSendAct: return kCommStyles[0];
    case ActionKind::kSendGrad: return kCommStyles[1];
    case ActionKind::kAllReduce: return kCommStyles[3];
    default: return kCommStyles[2];
  }
}

std::string hsl_hex(double hue, Shade shade) { return baton::hsl_hex(hue, shade.saturation, shade.lightness); }

int palette_index(int microbatch) { return ((microbatch % kPaletteSize) + kPaletteSize) % kPaletteSize; }

std::string compute_fill(const Action& action) {
  const double hue = kHues[palette_index(action.batch())];
  switch (action.kind) {
    case ActionKind::kForward: return hsl_hex(hue, kForwardShade);
    case ActionKind::kBackwardInput: return hsl_hex(hue, kInputShade);
    case ActionKind::kBackwardWeight: return fmt::format("url(#h{})", palette_index(action.batch()));
    case ActionKind::kStep: return kStepFill;
    default: return hsl_hex(hue, kBackwardShade);
  }
}

// --- time axis ---------------------------------------------------------------

struct AxisUnit {
  const char* name;
  double per_second;
};

AxisUnit axis_unit(double length_s) { return length_s < 1.0 ? AxisUnit{"ms", 1e3} : AxisUnit{"s", 1.0}; }

// Maps a time to an x coordinate. The same length and width for every chart
// of a picture gives them one scale; each keeps its own origin.
struct TimeScale {
  double origin_s = 0;
  double length_s = 1e-3;
  double width_px = 0;

  double x(Seconds t) const { return kLeftPx + (t.value - origin_s) / length_s * width_px; }
};

// --- one chart -----------------------------------------------------------------

struct Chart {
  const Trace* trace = nullptr;
  std::vector<WorkerInfo> workers;
  TimeScale scale;
  AxisUnit unit{"ms", 1e3};
  std::string heading;  // empty: no heading band
  std::string summary;  // "5 workers, 400 spans, 219.956 ms"
  bool compact = false;
  bool comm_rows = false;
  double compute_px = kComputeRowPx;

  double pitch() const { return compute_px + (comm_rows ? kCommGapPx + kCommRowPx : 0) + kRowGapPx; }
  double heading_px() const { return heading.empty() ? 0 : kHeadingBandPx; }
  double rows_px() const { return static_cast<double>(workers.size()) * pitch(); }
  double height() const { return heading_px() + rows_px() + kAxisBandPx; }
  double row_top(int worker) const { return heading_px() + worker * pitch() + kRowGapPx / 2; }
  double comm_top(int worker) const { return row_top(worker) + compute_px + kCommGapPx; }
};

std::string summary_of(const Trace& trace, size_t workers) {
  const double length_s = trace_extent(trace).length_s;
  const AxisUnit unit = axis_unit(length_s);
  return fmt::format("{} workers, {} spans, {:.3f} {}", workers, trace.spans.size(), length_s * unit.per_second,
                     unit.name);
}

Chart make_chart(const Trace& trace, const GanttOptions& options, double length_s, double plot_width_px,
                 std::string heading) {
  Chart chart;
  chart.trace = &trace;
  chart.workers = trace_workers(trace);
  chart.scale = {trace_extent(trace).start_s, length_s, plot_width_px};
  chart.unit = axis_unit(length_s);
  chart.summary = summary_of(trace, chart.workers.size());
  chart.heading = std::move(heading);
  chart.compact = static_cast<int64_t>(trace.spans.size()) > options.detailed_span_limit;
  chart.comm_rows = !chart.compact && has_stream(trace, Stream::kComm);
  if (chart.workers.size() > kManyWorkers) chart.compute_px = kSmallComputeRowPx;
  return chart;
}

std::string time_text(const Chart& chart, Seconds t) {
  return fmt::format("{:.3f}", (t.value - chart.scale.origin_s) * chart.unit.per_second);
}

void draw_rows(std::string& out, const Chart& chart) {
  for (size_t w = 0; w < chart.workers.size(); ++w) {
    const int worker = static_cast<int>(w);
    const double top = chart.row_top(worker);
    const double height = chart.pitch() - kRowGapPx;
    if (w % 2 == 0) {
      put(out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"/>\n", kLeftPx,
          top - kRowGapPx / 4, chart.scale.width_px, height + kRowGapPx / 2, kStripeFill);
    }
    std::string stages = fmt::format("s{}", chart.workers[w].stage);
    for (size_t c = 1; c < chart.workers[w].chunks.size(); ++c)
      stages += fmt::format("+s{}", chart.workers[w].chunks[c]);
    put(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"end\">w{} {}</text>\n", kLeftPx - 8,
        top + chart.compute_px / 2 + 4, worker, stages);
  }
}

void draw_grid_and_axis(std::string& out, const Chart& chart) {
  const double length_units = chart.scale.length_s * chart.unit.per_second;
  const int target = std::max(3, static_cast<int>(chart.scale.width_px / 100 * kTicksPer100Px));
  const double step = nice_step(length_units, target);
  const int decimals = step_decimals(step);
  const double top = chart.heading_px();
  const double axis_y = top + chart.rows_px() + 2;
  std::string grid;
  std::string labels;
  for (int k = 0; k * step <= length_units * (1 + 1e-9); ++k) {
    const double x = kLeftPx + k * step / length_units * chart.scale.width_px;
    put(grid, "M{:.2f} {:.2f}V{:.2f}", x, top, axis_y + 5);
    put(labels, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{:.{}f}</text>\n", x, axis_y + 17, k * step,
        decimals);
  }
  put(out, "<path d=\"{}\" stroke=\"{}\" fill=\"none\"/>\n", grid, kGridStroke);
  put(out, "<path d=\"M{:.2f} {:.2f}H{:.2f}\" stroke=\"#444\"/>\n", kLeftPx, axis_y, kLeftPx + chart.scale.width_px);
  out += labels;
  put(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"end\" class=\"axis\">time ({})</text>\n",
      kLeftPx + chart.scale.width_px, axis_y + 30, chart.unit.name);
}

const char* compute_class(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return "cF";
    case ActionKind::kBackwardInput: return "cI";
    case ActionKind::kBackwardWeight: return "cW";
    case ActionKind::kStep: return "cS";
    default: return "cB";
  }
}

void put_tooltip(std::string& out, const Chart& chart, const Span& span) {
  put(out, "<title>w{} {} [{}, {}] {}", span.worker, xml_escape(to_string(span.action)), time_text(chart, span.start),
      time_text(chart, span.end), chart.unit.name);
  if (span.bytes.value > 0) put(out, " {:.3f} MiB", span.bytes.mib());
  out += "</title>";
}

// Which of its worker's chunks an action runs: 0 for the first (or only) one.
int chunk_index(const Chart& chart, const Span& span) {
  if (span.worker < 0 || span.worker >= static_cast<int>(chart.workers.size())) return 0;
  const std::vector<int>& chunks = chart.workers[static_cast<size_t>(span.worker)].chunks;
  const auto it = std::find(chunks.begin(), chunks.end(), span.action.stage);
  return it == chunks.end() ? 0 : static_cast<int>(it - chunks.begin());
}

// The microbatch number, centred in its box, when it fits; one prime per
// chunk after the worker's first (3' = microbatch 3 on the second chunk).
void put_box_label(std::string& out, const Chart& chart, const Span& span, double x, double width) {
  if (span.action.kind == ActionKind::kStep || chart.compute_px < kComputeRowPx) return;
  const std::string text =
      fmt::format("{}{}", span.action.batch(), std::string(static_cast<size_t>(chunk_index(chart, span)), '\''));
  if (width < static_cast<double>(text.size()) * kCharPx + 4) return;
  const bool light = span.action.kind == ActionKind::kForward;
  put(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" class=\"{}\">{}</text>\n", x + width / 2,
      chart.row_top(span.worker) + chart.compute_px / 2 + 3.5, light ? "ld" : "ll", text);
}

void draw_compute_span(std::string& out, const Chart& chart, const Span& span) {
  const double x = chart.scale.x(span.start);
  const double min_width = span.action.kind == ActionKind::kStep ? kStepWidthPx : 0.5;
  const double width = std::max(chart.scale.x(span.end) - x, min_width);
  put(out, "<rect class=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\">",
      compute_class(span.action.kind), x, chart.row_top(span.worker), width, chart.compute_px,
      compute_fill(span.action));
  if (!chart.compact) put_tooltip(out, chart, span);
  out += "</rect>\n";
  if (!chart.compact) put_box_label(out, chart, span, x, width);
}

// The collectives inside a compute span (tensor-parallel: dark; the
// context-parallel exchange: orange; the expert-parallel all-to-alls:
// purple) as a strip along its bottom.
constexpr const char* kTensorFill = "#222";
constexpr const char* kContextFill = "#b35c00";
constexpr const char* kExpertFill = "#6a3d9a";
void draw_tensor_span(std::string& out, const Chart& chart, const Span& span) {
  const double x = chart.scale.x(span.start);
  const double width = chart.scale.x(span.end) - x;
  if (width <= 0) return;
  const double height = chart.compute_px / 4;
  struct Strip {
    const char* css_class;
    const char* fill;
    const char* what;
  };
  const Strip strip = span.stream == Stream::kContextComm  ? Strip{"cp", kContextFill, "context-parallel exchange"}
                      : span.stream == Stream::kExpertComm ? Strip{"ep", kExpertFill, "expert-parallel all-to-alls"}
                                                           : Strip{"tp", kTensorFill, "tensor-parallel collectives"};
  put(out, "<rect class=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\">",
      strip.css_class, x, chart.row_top(span.worker) + chart.compute_px - height, std::max(width, 0.5), height,
      strip.fill);
  put(out, "<title>w{} {} of {}: {} {}</title>", span.worker, strip.what, xml_escape(to_string(span.action)),
      fmt::format("{:.3f}", (span.end - span.start).value * chart.unit.per_second), chart.unit.name);
  out += "</rect>\n";
}

void draw_comm_span(std::string& out, const Chart& chart, const Span& span) {
  const double x = chart.scale.x(span.start);
  const double width = chart.scale.x(span.end) - x;
  if (width <= 0) return;  // a receive whose data had already arrived
  put(out, "<rect class=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\">",
      comm_style(span.action.kind).css_class, x, chart.comm_top(span.worker), std::max(width, 0.5), kCommRowPx);
  put_tooltip(out, chart, span);
  out += "</rect>\n";
}

// Compact form: runs of compute spans thinner than a pixel, each starting
// within a pixel of the previous one's end, become one grey block.
// A block's opacity is the share of its width the device was busy, so a
// block full of gaps reads lighter.
struct MergeRun {
  const Span* first = nullptr;
  double x0 = 0;
  double x1 = 0;
  double busy_px = 0;
  int count = 0;
  bool thin = false;
};

void flush_run(std::string& out, const Chart& chart, MergeRun& run) {
  if (run.count == 1) draw_compute_span(out, chart, *run.first);
  if (run.count > 1) {
    const double width = std::max(run.x1 - run.x0, 1.0);
    const double opacity = std::clamp(run.busy_px / width, kMinMergedOpacity, 1.0);
    put(out,
        "<rect class=\"cM\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
        "fill=\"{}\" fill-opacity=\"{:.2f}\"/>\n",
        run.x0, chart.row_top(run.first->worker), width, chart.compute_px, kMergedFill, opacity);
  }
  run = MergeRun{};
}

void draw_compact_compute(std::string& out, const Chart& chart) {
  std::vector<MergeRun> runs(chart.workers.size());
  for (const Span& span : chart.trace->spans) {
    if (span.stream != Stream::kCompute || span.worker < 0) continue;
    MergeRun& run = runs[static_cast<size_t>(span.worker)];
    const double x0 = chart.scale.x(span.start);
    const double x1 = chart.scale.x(span.end);
    const bool thin = x1 - x0 < 1.0;
    if (run.count > 0 && !(run.thin && thin && x0 <= run.x1 + 1.0)) flush_run(out, chart, run);
    if (run.count == 0) run = MergeRun{&span, x0, x1, 0, 0, thin};
    run.x1 = std::max(run.x1, x1);
    run.busy_px += x1 - x0;
    ++run.count;
  }
  for (MergeRun& run : runs) flush_run(out, chart, run);
}

void draw_spans(std::string& out, const Chart& chart) {
  if (chart.compact) {
    draw_compact_compute(out, chart);
    for (const Span& span : chart.trace->spans)  // collectives a pixel wide or more
      if (span.worker >= 0 && inside_compute(span.stream) && chart.scale.x(span.end) - chart.scale.x(span.start) >= 1.0)
        draw_tensor_span(out, chart, span);
    return;
  }
  for (const Span& span : chart.trace->spans) {
    if (span.worker < 0) continue;
    if (span.stream == Stream::kCompute) draw_compute_span(out, chart, span);
    if (span.stream == Stream::kComm) draw_comm_span(out, chart, span);
    if (inside_compute(span.stream)) draw_tensor_span(out, chart, span);
  }
}

void draw_chart(std::string& out, const Chart& chart, double top) {
  put(out, "<g transform=\"translate(0,{:.2f})\" class=\"{}\">\n", top, chart.compact ? "compact" : "detailed");
  if (!chart.heading.empty()) {
    put(out,
        "<text x=\"{:.2f}\" y=\"{:.2f}\" class=\"heading\">{}<tspan class=\"summary\" dx=\"8\">({})</tspan></text>\n",
        kMarginPx, 15.0, xml_escape(chart.heading), chart.summary);
  }
  draw_rows(out, chart);
  draw_grid_and_axis(out, chart);
  draw_spans(out, chart);
  out += "</g>\n";
}

// --- legend and document -------------------------------------------------------

struct LegendItem {
  std::string label;
  std::string fill;  // empty: text only
  double swatch_px = 14;
};

std::vector<LegendItem> legend_items(bool any_compact, bool any_comm, bool any_chunks, bool any_tensor,
                                     bool any_context, bool any_expert) {
  const double hue = kHues[0];
  std::vector<LegendItem> items = {
      {"forward (F)", hsl_hex(hue, kForwardShade)},
      {"backward (B)", hsl_hex(hue, kBackwardShade)},
      {"input-grad (I)", hsl_hex(hue, kInputShade)},
      {"weight-grad (W)", "url(#h0)"},
      {"step", kStepFill, kStepWidthPx},
  };
  if (any_comm)
    for (const CommStyle& style : kCommStyles) items.push_back({style.legend, style.fill});
  if (any_tensor) items.push_back({"tensor-parallel collectives (strip: their sum in the block)", kTensorFill});
  if (any_context) items.push_back({"context-parallel exchange (strip: its exposed sum in the block)", kContextFill});
  if (any_expert) items.push_back({"expert-parallel all-to-alls (strip: their sum in the block)", kExpertFill});
  if (any_compact) items.push_back({"merged (< 1 px; lighter = more idle)", kMergedFill});
  items.push_back(
      {any_comm ? "colour = microbatch mod 10; thin row = communication" : "colour = microbatch mod 10", ""});
  if (any_chunks) items.push_back({"3' = microbatch 3 on the worker's 2nd chunk (3'' its 3rd)", ""});
  return items;
}

double legend_item_px(const LegendItem& item) {
  return (item.fill.empty() ? 0 : item.swatch_px + 5) + item.label.size() * kCharPx + 16;
}

// Lays the items out left to right, wrapping at `width_px`; returns the
// number of lines, and draws them when `out` is not null.
int layout_legend(std::string* out, const std::vector<LegendItem>& items, double width_px, double top) {
  double x = kLeftPx;
  int line = 0;
  for (const LegendItem& item : items) {
    if (x + legend_item_px(item) > width_px - kRightPx && x > kLeftPx) {
      x = kLeftPx;
      ++line;
    }
    const double y = top + line * kLegendRowPx;
    if (out != nullptr && !item.fill.empty()) {
      put(*out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"12\" fill=\"{}\"/>\n", x, y, item.swatch_px,
          item.fill);
    }
    const double text_x = x + (item.fill.empty() ? 0 : item.swatch_px + 5);
    if (out != nullptr) {
      put(*out, "<text x=\"{:.2f}\" y=\"{:.2f}\">{}</text>\n", text_x, y + 10, xml_escape(item.label));
    }
    x += legend_item_px(item);
  }
  return line + 1;
}

void put_defs(std::string& out) {
  out +=
      "<defs>\n<style>text{fill:#222}.title{font-size:16px;font-weight:bold}"
      ".heading{font-size:13px;font-weight:bold}.axis{fill:#555}"
      ".summary{fill:#555;font-size:11px;font-weight:normal}"
      ".ll,.ld{font-size:10px;text-anchor:middle}.ll{fill:#fff}.ld{fill:#222}"
      ".detailed .cF,.detailed .cB,.detailed .cI,.detailed .cW"
      "{stroke:#fff;stroke-width:0.6}";
  for (const CommStyle& style : kCommStyles) put(out, ".{}{{fill:{}}}", style.css_class, style.fill);
  out += "</style>\n";
  for (int i = 0; i < kPaletteSize; ++i) {
    put(out,
        "<pattern id=\"h{}\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" "
        "patternTransform=\"rotate(45)\"><path d=\"M0 0H5V5H0Z\" fill=\"{}\"/>"
        "<path d=\"M0 0V5\" stroke=\"#fff\" stroke-width=\"2\" stroke-opacity=\"0.6\"/></pattern>\n",
        i, hsl_hex(kHues[i], kBackwardShade));
  }
  out += "</defs>\n";
}

// The title, and for a single chart its origin and size at the right.
void draw_title(std::string& out, const std::vector<Chart>& charts, const std::string& title, int width_px) {
  put(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" class=\"title\">{}</text>\n", kMarginPx, kMarginPx + 16, xml_escape(title));
  if (charts.size() != 1) return;
  const std::string& origin = charts[0].trace->origin;
  put(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"end\" class=\"summary\">{}{}</text>\n", width_px - kRightPx,
      kMarginPx + 16, origin.empty() ? "" : xml_escape(origin) + ": ", charts[0].summary);
}

std::string render(const std::vector<Chart>& charts, const GanttOptions& options, int width_px) {
  const bool any_compact = std::any_of(charts.begin(), charts.end(), [](const Chart& c) { return c.compact; });
  const bool any_comm = std::any_of(charts.begin(), charts.end(), [](const Chart& c) { return c.comm_rows; });
  const bool any_chunks = std::any_of(charts.begin(), charts.end(), [](const Chart& c) {
    return std::any_of(c.workers.begin(), c.workers.end(), [](const WorkerInfo& w) { return w.chunks.size() > 1; });
  });
  const auto any_stream = [&](Stream stream) {
    return std::any_of(charts.begin(), charts.end(), [&](const Chart& c) { return has_stream(*c.trace, stream); });
  };
  const std::vector<LegendItem> items = legend_items(any_compact, any_comm, any_chunks, any_stream(Stream::kTensorComm),
                                                     any_stream(Stream::kContextComm), any_stream(Stream::kExpertComm));
  const double title_px = options.title.empty() ? 0 : kTitleBandPx;
  const double legend_top = kMarginPx + title_px;
  const int legend_lines = layout_legend(nullptr, items, width_px, legend_top);
  double height = legend_top + legend_lines * kLegendRowPx + kMarginPx;
  for (const Chart& chart : charts) height += chart.height() + kChartGapPx;

  std::string out;
  put(out,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0} {1:.0f}\" font-family=\"sans-serif\" font-size=\"11\">\n",
      width_px, std::ceil(height));
  put_defs(out);
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  if (!options.title.empty()) draw_title(out, charts, options.title, width_px);
  layout_legend(&out, items, width_px, legend_top);
  double top = legend_top + legend_lines * kLegendRowPx + kMarginPx;
  for (const Chart& chart : charts) {
    draw_chart(out, chart, top);
    top += chart.height() + kChartGapPx;
  }
  out += "</svg>\n";
  return out;
}

int picture_width(const GanttOptions& options) { return std::max(options.width_px, kMinWidthPx); }

double plot_width(int width_px) { return width_px - kLeftPx - kRightPx; }

// A zero-length trace still gets a 1 ms axis.
double axis_length(double length_s) { return length_s > 0 ? length_s : 1e-3; }

}  // namespace

std::string trace_to_svg(const Trace& trace, const GanttOptions& options) {
  const int width_px = picture_width(options);
  const double length_s = axis_length(trace_extent(trace).length_s);
  std::vector<Chart> charts;
  charts.push_back(make_chart(trace, options, length_s, plot_width(width_px), ""));
  return render(charts, options, width_px);
}

std::string traces_to_svg_compare(const Trace& predicted, const Trace& measured, const GanttOptions& options) {
  const int width_px = picture_width(options);
  const double length_s = axis_length(std::max(trace_extent(predicted).length_s, trace_extent(measured).length_s));
  auto heading = [](const Trace& trace, const char* fallback) {
    return trace.origin.empty() ? std::string(fallback) : trace.origin;
  };
  std::vector<Chart> charts;
  charts.push_back(make_chart(predicted, options, length_s, plot_width(width_px), heading(predicted, "predicted")));
  charts.push_back(make_chart(measured, options, length_s, plot_width(width_px), heading(measured, "measured")));
  return render(charts, options, width_px);
}

}  // namespace baton
