#include "sim/chart_svg.h"

#include <algorithm>
#include <cmath>
#include "sim/svg_util.h"

#include <fmt/format.h>

namespace baton {

namespace {

// Tableau's ten: told apart by most readers, colour-blind ones included in pairs.
constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
// Dash patterns and markers cycle together: (dash, marker) pairs repeat after lcm(6, 4) = 12 keys.
constexpr const char* kDashes[] = {"", "9,4", "2,3", "12,3,3,3", "5,5", "14,3,2,3,2,3"};
constexpr const char* kMarkers[] = {"circle", "square", "triangle", "diamond"};
constexpr const char* kDashEntryColour = "#444";

constexpr int kLeft = 80, kBottom = 60, kTitleTop = 50, kNoteHeight = 18;
constexpr int kLegendGap = 28;      // between the plot's right edge and the legend
constexpr int kLegendPadding = 16;  // right of the longest legend label
constexpr int kSwatchPx = 36, kSwatchTextGap = 8;
constexpr int kRowPx = 18, kHeadingPx = 20, kGroupGapPx = 10;
constexpr int kMinPlotWidthPx = 420;
// An upper estimate of one character's advance in 12 px sans-serif (DejaVu
// Sans averages about 6.9 px over lower case and digits), so a label's right
// edge is never further than estimated.
constexpr double kCharPx = 7.4;

// Tick values at 1-2-5 steps covering [low, high].
std::vector<double> nice_ticks(double low, double high) {
  const double step = nice_step(std::max(high - low, 1e-12), 6);
  std::vector<double> ticks;
  for (double t = std::ceil(low / step) * step; t <= high + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

std::string tick_label(double value) {
  if (value != 0 && (std::fabs(value) >= 1e6 || std::fabs(value) < 1e-3)) return fmt::format("{:.2g}", value);
  return fmt::format("{:g}", value);
}

struct Scale {
  double low, high;
  int from_px, to_px;
  bool log;
  double operator()(double v) const {
    const double a = log ? std::log10(low) : low, b = log ? std::log10(high) : high;
    const double t = ((log ? std::log10(v) : v) - a) / std::max(b - a, 1e-300);
    return from_px + t * (to_px - from_px);
  }
};

void bounds(const std::vector<ChartSeries>& series, double& x0, double& x1, double& y1) {
  x0 = INFINITY;
  x1 = -INFINITY;
  y1 = 0;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      if (std::isfinite(s.y[i])) y1 = std::max(y1, s.y[i]);
    }
  if (!std::isfinite(x0)) {
    x0 = 0;
    x1 = 1;
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= 0) y1 = 1;
  y1 *= 1.08;
}

const std::string& colour_key_of(const ChartSeries& s) { return s.colour_key.empty() ? s.name : s.colour_key; }

// Index of `key` among the distinct keys seen so far, adding it when new.
size_t key_index(std::vector<std::string>& keys, const std::string& key) {
  const auto found = std::find(keys.begin(), keys.end(), key);
  if (found != keys.end()) return static_cast<size_t>(found - keys.begin());
  keys.push_back(key);
  return keys.size() - 1;
}

ChartStyle dash_style(size_t index, const std::string& colour) {
  return ChartStyle{colour, kDashes[index % std::size(kDashes)], kMarkers[index % std::size(kMarkers)]};
}

// The legend's entries, top to bottom, with y offsets from the legend's top and x left at 0.
std::vector<ChartLegendEntry> legend_entries(const std::vector<std::string>& colour_keys,
                                             const std::vector<std::string>& dash_keys, const ChartOptions& o,
                                             int& height_px) {
  std::vector<ChartLegendEntry> entries;
  int y = 0;
  const auto heading = [&](const std::string& title) {
    if (title.empty()) return;
    y += kHeadingPx;
    entries.push_back(ChartLegendEntry{title, true, {}, 0, y - 6});
  };
  heading(o.colour_title);
  for (size_t k = 0; k < colour_keys.size(); ++k) {
    y += kRowPx;
    entries.push_back(ChartLegendEntry{colour_keys[k], false, {kPalette[k % std::size(kPalette)], "", ""}, 0, y - 5});
  }
  if (!dash_keys.empty()) {
    y += kGroupGapPx;
    heading(o.dash_title);
    for (size_t k = 0; k < dash_keys.size(); ++k) {
      y += kRowPx;
      entries.push_back(ChartLegendEntry{dash_keys[k], false, dash_style(k, kDashEntryColour), 0, y - 5});
    }
  }
  height_px = y + 6;
  return entries;
}

int label_width_px(const ChartLegendEntry& entry) {
  const double px = static_cast<double>(entry.label.size()) * kCharPx * (entry.heading ? 1.1 : 1.0);
  return static_cast<int>(std::ceil(px)) + (entry.heading ? 0 : kSwatchPx + kSwatchTextGap);
}

int plot_top(const ChartOptions& o) { return kTitleTop + (o.note.empty() ? 0 : kNoteHeight); }

}  // namespace

ChartLayout chart_layout(const std::vector<ChartSeries>& series, const ChartOptions& options) {
  ChartLayout layout;
  std::vector<std::string> colour_keys, dash_keys;
  for (const ChartSeries& s : series) {
    const size_t colour = key_index(colour_keys, colour_key_of(s));
    const char* colour_hex = kPalette[colour % std::size(kPalette)];
    if (s.dash_key.empty())
      layout.styles.push_back(ChartStyle{colour_hex, "", "circle"});
    else
      layout.styles.push_back(dash_style(key_index(dash_keys, s.dash_key), colour_hex));
  }
  int legend_height = 0;
  layout.legend = legend_entries(colour_keys, dash_keys, options, legend_height);
  int legend_width = 0;
  for (const ChartLegendEntry& entry : layout.legend) legend_width = std::max(legend_width, label_width_px(entry));

  layout.plot_left_px = kLeft;
  layout.plot_top_px = plot_top(options);
  const int right_margin = kLegendGap + legend_width + kLegendPadding;
  layout.width_px = std::max(options.width_px, kLeft + kMinPlotWidthPx + right_margin);
  layout.plot_right_px = layout.width_px - right_margin;
  layout.height_px = std::max(options.height_px, layout.plot_top_px + legend_height + kBottom);
  layout.plot_bottom_px = layout.height_px - kBottom;

  const int legend_left = layout.plot_right_px + kLegendGap;
  for (ChartLegendEntry& entry : layout.legend) {
    entry.x_px = legend_left;
    entry.y_px += layout.plot_top_px;
  }
  layout.legend_right_px = legend_left + legend_width;
  return layout;
}

namespace {

std::string axes(const ChartOptions& o, const ChartLayout& l, const Scale& sx, const Scale& sy,
                 const std::vector<double>& xticks) {
  std::string out;
  const int left = l.plot_left_px, right = l.plot_right_px, top = l.plot_top_px, bottom = l.plot_bottom_px;
  out += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#333'/>\n", left, bottom, right, bottom);
  out += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#333'/>\n", left, top, left, bottom);
  for (double t : xticks) {
    const double px = sx(t);
    out += fmt::format("<line x1='{:.1f}' y1='{}' x2='{:.1f}' y2='{}' stroke='#eee'/>\n", px, top, px, bottom);
    out += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>\n", px, bottom + 18, tick_label(t));
  }
  for (double t : nice_ticks(0, sy.high)) {
    const double py = sy(t);
    out += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#eee'/>\n", left, py, right, py);
    out += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{}</text>\n", left - 6, py + 4, tick_label(t));
  }
  out += fmt::format("<text x='{}' y='{}' text-anchor='middle'>{}</text>\n", (left + right) / 2, bottom + 42,
                     xml_escape(o.x_label));
  out += fmt::format("<text transform='translate(18,{}) rotate(-90)' text-anchor='middle'>{}</text>\n",
                     (top + bottom) / 2, xml_escape(o.y_label));
  return out;
}

// A point marker centred on (cx, cy); `inner` goes inside the element (a tooltip).
std::string marker(const ChartStyle& style, double cx, double cy, const std::string& inner) {
  std::string shape;
  if (style.marker == "square")
    shape = fmt::format("<rect x='{:.1f}' y='{:.1f}' width='7' height='7'", cx - 3.5, cy - 3.5);
  else if (style.marker == "triangle")
    shape = fmt::format("<path d='M{:.1f},{:.1f} l4.5,8 l-9,0 z'", cx, cy - 5);
  else if (style.marker == "diamond")
    shape = fmt::format("<path d='M{:.1f},{:.1f} l4.5,4.5 l-4.5,4.5 l-4.5,-4.5 z'", cx, cy - 4.5);
  else
    shape = fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3.5'", cx, cy);
  if (inner.empty()) return shape + fmt::format(" fill='{}'/>\n", style.colour);
  return shape + fmt::format(" fill='{}'>{}</{}>\n", style.colour, inner, shape.substr(1, shape.find(' ') - 1));
}

std::string lines(const std::vector<ChartSeries>& series, const ChartLayout& l, const Scale& sx, const Scale& sy) {
  std::string out;
  for (size_t k = 0; k < series.size(); ++k) {
    const ChartSeries& s = series[k];
    const ChartStyle& style = l.styles[k];
    std::string path, markers;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", sx(s.x[i]), sy(s.y[i]));
      markers +=
          marker(style, sx(s.x[i]), sy(s.y[i]),
                 fmt::format("<title>{}: x={} y={:.4g}</title>", xml_escape(s.name), tick_label(s.x[i]), s.y[i]));
    }
    if (!path.empty())
      out += fmt::format(
          "<path class='series' d='{}' fill='none' stroke='{}' stroke-width='2' "
          "stroke-dasharray='{}'/>\n",
          path, style.colour, style.dash);
    out += markers;
  }
  return out;
}

std::string legend(const ChartLayout& l) {
  std::string out;
  for (const ChartLegendEntry& e : l.legend) {
    if (e.heading) {
      out += fmt::format("<text class='legend-heading' x='{}' y='{}' font-weight='bold'>{}</text>\n", e.x_px,
                         e.y_px + 4, xml_escape(e.label));
      continue;
    }
    out += fmt::format(
        "<g class='legend-entry'><line x1='{}' y1='{}' x2='{}' y2='{}' stroke='{}' stroke-width='2.5' "
        "stroke-dasharray='{}'/>\n",
        e.x_px, e.y_px, e.x_px + kSwatchPx, e.y_px, e.style.colour, e.style.dash);
    if (!e.style.marker.empty()) out += marker(e.style, e.x_px + kSwatchPx / 2.0, e.y_px, "");
    out += fmt::format("<text x='{}' y='{}'>{}</text></g>\n", e.x_px + kSwatchPx + kSwatchTextGap, e.y_px + 4,
                       xml_escape(e.label));
  }
  return out;
}

}  // namespace

std::string line_chart_svg(const std::vector<ChartSeries>& series, const ChartOptions& options) {
  const ChartLayout layout = chart_layout(series, options);
  double x0, x1, y1;
  bounds(series, x0, x1, y1);
  const bool log_x = options.log_x && x0 > 0;
  const Scale sx{x0, x1, layout.plot_left_px, layout.plot_right_px, log_x};
  const Scale sy{0, y1, layout.plot_bottom_px, layout.plot_top_px, false};
  std::vector<double> xticks;
  if (log_x) {
    for (double d = std::pow(10.0, std::floor(std::log10(x0))); d <= x1 * 1.0001; d *= 10)
      for (double m : {1.0, 2.0, 5.0})
        if (d * m >= x0 * 0.9999 && d * m <= x1 * 1.0001) xticks.push_back(d * m);
  } else {
    xticks = nice_ticks(x0, x1);
  }
  std::string out = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' viewBox='0 0 {0} {1}' "
      "font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n",
      layout.width_px, layout.height_px);
  out += fmt::format("<text x='{}' y='28' font-size='16' font-weight='bold'>{}</text>\n", kLeft,
                     xml_escape(options.title));
  if (!options.note.empty())
    out += fmt::format("<text x='{}' y='46' fill='#666'>{}</text>\n", kLeft, xml_escape(options.note));
  out += axes(options, layout, sx, sy, xticks);
  out += lines(series, layout, sx, sy);
  out += legend(layout);
  return out + "</svg>\n";
}

}  // namespace baton
