#include "sim/chart_svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace baton {

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kLeft = 80, kRight = 190, kTop = 50, kBottom = 60;

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Tick values at 1-2-5 steps covering [low, high].
std::vector<double> nice_ticks(double low, double high) {
  const double span = std::max(high - low, 1e-12);
  const double raw = span / 6.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) { step = m * magnitude; break; }
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
  x0 = INFINITY; x1 = -INFINITY; y1 = 0;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      if (std::isfinite(s.y[i])) y1 = std::max(y1, s.y[i]);
    }
  if (!std::isfinite(x0)) { x0 = 0; x1 = 1; }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= 0) y1 = 1;
  y1 *= 1.08;
}

std::string axes(const ChartOptions& o, const Scale& sx, const Scale& sy, const std::vector<double>& xticks) {
  std::string out;
  const int bottom = o.height_px - kBottom;
  const int right = o.width_px - kRight;
  out += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#333'/>\n", kLeft, bottom, right, bottom);
  out += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#333'/>\n", kLeft, kTop, kLeft, bottom);
  for (double t : xticks) {
    const double px = sx(t);
    out += fmt::format("<line x1='{:.1f}' y1='{}' x2='{:.1f}' y2='{}' stroke='#eee'/>\n", px, kTop, px, bottom);
    out += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>\n", px, bottom + 18, tick_label(t));
  }
  for (double t : nice_ticks(0, sy.high)) {
    const double py = sy(t);
    out += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#eee'/>\n", kLeft, py, right, py);
    out += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{}</text>\n", kLeft - 6, py + 4, tick_label(t));
  }
  out += fmt::format("<text x='{}' y='{}' text-anchor='middle'>{}</text>\n", (kLeft + right) / 2, bottom + 42,
                     escape(o.x_label));
  out += fmt::format("<text transform='translate(18,{}) rotate(-90)' text-anchor='middle'>{}</text>\n",
                     (kTop + bottom) / 2, escape(o.y_label));
  return out;
}

std::string lines(const std::vector<ChartSeries>& series, const ChartOptions& o, const Scale& sx, const Scale& sy) {
  std::string out;
  for (size_t k = 0; k < series.size(); ++k) {
    const ChartSeries& s = series[k];
    const char* colour = kPalette[k % std::size(kPalette)];
    std::string path;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", sx(s.x[i]), sy(s.y[i]));
      out += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'><title>{}: x={} y={:.4g}</title></circle>\n",
                         sx(s.x[i]), sy(s.y[i]), colour, escape(s.name), tick_label(s.x[i]), s.y[i]);
    }
    // Colours repeat after ten series; the dash pattern tells those apart.
    const char* dash = k / std::size(kPalette) == 0 ? "" : (k / std::size(kPalette) == 1 ? "6,3" : "2,3");
    if (!path.empty())
      out += fmt::format("<path d='{}' fill='none' stroke='{}' stroke-width='2' stroke-dasharray='{}'/>\n", path,
                         colour, dash);
    const int ly = kTop + 10 + 20 * static_cast<int>(k);
    const int lx = o.width_px - kRight + 16;
    out += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='{}' stroke-width='3' stroke-dasharray='{}'/>\n",
                       lx, ly, lx + 22, ly, colour, dash);
    out += fmt::format("<text x='{}' y='{}'>{}</text>\n", lx + 28, ly + 4, escape(s.name));
  }
  return out;
}

}  // namespace

std::string line_chart_svg(const std::vector<ChartSeries>& series, const ChartOptions& options) {
  double x0, x1, y1;
  bounds(series, x0, x1, y1);
  const bool log_x = options.log_x && x0 > 0;
  const Scale sx{x0, x1, kLeft, options.width_px - kRight, log_x};
  const Scale sy{0, y1, options.height_px - kBottom, kTop, false};
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
      options.width_px, options.height_px);
  out += fmt::format("<text x='{}' y='28' font-size='16' font-weight='bold'>{}</text>\n", kLeft, escape(options.title));
  out += axes(options, sx, sy, xticks);
  out += lines(series, options, sx, sy);
  return out + "</svg>\n";
}

}  // namespace baton
