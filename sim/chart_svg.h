// A line chart in SVG (used by `baton sweep`): lines over a shared numeric x
// axis, with axes, "nice" ticks, a legend and a title. Deterministic output;
// points with a non-finite y are left out of a line.
//
// Readable with many lines: a line's colour comes from its colour key (in
// sweeps the schedule) and its dash pattern and point marker from its dash key
// (in sweeps the values of the other axes, "servers=4"). The legend lists each
// distinct colour key once and each distinct dash key once, in first-seen
// order, so 4 schedules x 3 server counts draw 12 lines and a legend of 4 + 3
// entries. Distinct up to 10 colour keys and 12 dash keys; beyond that they
// repeat. The legend sits in a right margin sized to its longest label, and the
// chart grows (never shrinks) past width_px / height_px to fit it.
#pragma once

#include <string>
#include <vector>

namespace baton {

struct ChartSeries {
  std::string name;  // the whole name, shown in each point's tooltip
  std::vector<double> x;
  std::vector<double> y;   // same length as x
  std::string colour_key;  // series with one key share a colour; empty: the name
  std::string dash_key;    // series with one key share a dash and marker; empty: solid, dots
};

struct ChartOptions {
  std::string title;
  std::string note;  // a grey line under the title (what is left out); may be empty
  std::string x_label;
  std::string y_label;
  std::string colour_title;  // legend heading over the colour keys; may be empty
  std::string dash_title;    // legend heading over the dash keys; may be empty
  bool log_x = false;        // logarithmic x axis (all x must be > 0)
  int width_px = 900;        // at least; grows for a wide legend
  int height_px = 520;       // at least; grows for a long legend
};

struct ChartStyle {
  std::string colour;  // "#rrggbb"
  std::string dash;    // SVG stroke-dasharray, "" for solid
  std::string marker;  // "circle", "square", "triangle" or "diamond"
};

struct ChartLegendEntry {
  std::string label;
  bool heading = false;  // a bold group title, no swatch
  ChartStyle style;      // the swatch: a colour entry is solid, a dash entry grey
  int x_px = 0;          // left of the swatch
  int y_px = 0;          // the swatch's centre line
};

// Where everything goes; line_chart_svg draws exactly this.
struct ChartLayout {
  int width_px = 0;
  int height_px = 0;
  int plot_left_px = 0;
  int plot_right_px = 0;
  int plot_top_px = 0;
  int plot_bottom_px = 0;
  std::vector<ChartStyle> styles;  // one per series, in order
  std::vector<ChartLegendEntry> legend;
  int legend_right_px = 0;  // the widest label's estimated right edge
};

ChartLayout chart_layout(const std::vector<ChartSeries>& series, const ChartOptions& options);
std::string line_chart_svg(const std::vector<ChartSeries>& series, const ChartOptions& options);

}  // namespace baton
