// A line chart in SVG (used by `baton sweep`): one line per series over a
// shared numeric x axis, with axes, "nice" ticks, a legend and a title.
// Deterministic output; points with a non-finite y are left out of a line.
#pragma once

#include <string>
#include <vector>

namespace baton {

struct ChartSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;  // same length as x
};

struct ChartOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // logarithmic x axis (all x must be > 0)
  int width_px = 900;
  int height_px = 520;
};

std::string line_chart_svg(const std::vector<ChartSeries>& series, const ChartOptions& options);

}  // namespace baton
