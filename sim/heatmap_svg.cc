#include "sim/heatmap_svg.h"

#include <algorithm>
#include <cmath>

#include "sim/svg_util.h"

namespace baton {

namespace {

constexpr int kCellW = 104, kCellH = 46, kRowHeadW = 56, kPanelGap = 48;
constexpr int kTop = 92, kColumnHeadH = 22, kBottom = 48, kMargin = 24;
constexpr const char* kNoValueFill = "#e6e6e6";

void panel_range(const HeatmapPanel& panel, double& low, double& high) {
  low = INFINITY;
  high = -INFINITY;
  for (const auto& row : panel.cells)
    for (const HeatmapCell& cell : row)
      if (std::isfinite(cell.value)) {
        low = std::min(low, cell.value);
        high = std::max(high, cell.value);
      }
}

// Whether "#rrggbb" is dark enough to take white text.
bool dark(const std::string& fill) {
  if (fill.size() != 7) return false;
  int sum = 0;
  for (int i : {1, 3, 5}) sum += std::stoi(fill.substr(i, 2), nullptr, 16);
  return sum < 3 * 128;
}

void draw_cell(std::string& out, const HeatmapCell& cell, const std::string& fill, int x, int y) {
  put(out, "<g class='cell'>");
  if (!cell.tooltip.empty()) put(out, "<title>{}</title>", xml_escape(cell.tooltip));
  put(out, "<rect x='{}' y='{}' width='{}' height='{}' fill='{}' stroke='{}' stroke-width='{}'/>", x, y, kCellW, kCellH,
      std::isfinite(cell.value) ? fill : "url(#none)", cell.flagged ? "#c00000" : "#ffffff", cell.flagged ? 2.5 : 1);
  const char* ink = std::isfinite(cell.value) && dark(fill) ? "#ffffff" : "#111111";
  const int first = cell.detail.empty() ? y + kCellH / 2 + 5 : y + kCellH / 2 - 2;
  put(out, "<text x='{}' y='{}' text-anchor='middle' font-weight='bold' fill='{}'>{}</text>", x + kCellW / 2, first,
      ink, xml_escape(cell.label));
  if (!cell.detail.empty())
    put(out, "<text x='{}' y='{}' text-anchor='middle' font-size='10' fill='{}'>{}</text>", x + kCellW / 2,
        y + kCellH / 2 + 13, ink, xml_escape(cell.detail));
  put(out, "</g>\n");
}

void draw_panel(std::string& out, const HeatmapPanel& panel, const HeatmapOptions& options, int left) {
  double low = 0, high = 0;
  panel_range(panel, low, high);
  const int grid_left = left + kRowHeadW;
  put(out, "<text x='{}' y='{}' text-anchor='middle' font-weight='bold'>{}</text>\n",
      grid_left + kCellW * static_cast<int>(options.columns.size()) / 2, kTop - kColumnHeadH - 8,
      xml_escape(panel.title));
  for (size_t c = 0; c < options.columns.size(); ++c)
    put(out, "<text x='{}' y='{}' text-anchor='middle'>{}</text>\n",
        grid_left + kCellW * static_cast<int>(c) + kCellW / 2, kTop - 6, xml_escape(options.columns[c]));
  for (size_t r = 0; r < options.rows.size(); ++r) {
    const int y = kTop + kCellH * static_cast<int>(r);
    put(out, "<text x='{}' y='{}' text-anchor='end'>{}</text>\n", grid_left - 8, y + kCellH / 2 + 4,
        xml_escape(options.rows[r]));
    for (size_t c = 0; c < options.columns.size(); ++c) {
      const HeatmapCell& cell = panel.cells[r][c];
      draw_cell(out, cell, heatmap_fill(cell, panel.scale, low, high), grid_left + kCellW * static_cast<int>(c), y);
    }
  }
  const int bottom = kTop + kCellH * static_cast<int>(options.rows.size());
  put(out, "<text x='{}' y='{}' text-anchor='middle'>{}</text>\n",
      grid_left + kCellW * static_cast<int>(options.columns.size()) / 2, bottom + 28, xml_escape(options.x_label));
  put(out, "<text transform='translate({},{}) rotate(-90)' text-anchor='middle'>{}</text>\n", left + 14,
      (kTop + bottom) / 2, xml_escape(options.y_label));
}

}  // namespace

std::string heatmap_fill(const HeatmapCell& cell, HeatmapScale scale, double low, double high) {
  if (!std::isfinite(cell.value)) return kNoValueFill;
  if (scale == HeatmapScale::kFractionOfLimit) {
    const double t = std::clamp(cell.value, 0.0, 1.0);
    return hsl_hex(120.0 * (1.0 - t), 0.65, 0.72);
  }
  const double t = high > low ? (cell.value - low) / (high - low) : 1.0;
  return hsl_hex(212.0, 0.65, 0.93 - 0.58 * t);
}

std::string heatmap_svg(const std::vector<HeatmapPanel>& panels, const HeatmapOptions& options) {
  const int columns = static_cast<int>(options.columns.size()), rows = static_cast<int>(options.rows.size());
  const int panel_w = kRowHeadW + kCellW * columns;
  const int width = std::max(2 * kMargin + static_cast<int>(panels.size()) * (panel_w + kPanelGap) - kPanelGap,
                             static_cast<int>(options.title.size() * 8) + 2 * kMargin);
  const int height = kTop + kCellH * rows + kBottom;
  std::string out;
  put(out,
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' viewBox='0 0 {} {}' font-family='sans-serif' "
      "font-size='12'>\n",
      width, height, width, height);
  put(out,
      "<defs><pattern id='none' width='8' height='8' patternUnits='userSpaceOnUse' "
      "patternTransform='rotate(45)'><rect width='8' height='8' fill='{}'/><line x1='0' y1='0' x2='0' y2='8' "
      "stroke='#c8c8c8' stroke-width='3'/></pattern></defs>\n",
      kNoValueFill);
  put(out, "<rect width='100%' height='100%' fill='#ffffff'/>\n");
  put(out, "<text x='{}' y='24' font-size='15' font-weight='bold'>{}</text>\n", kMargin, xml_escape(options.title));
  if (!options.note.empty())
    put(out, "<text x='{}' y='42' fill='#666666'>{}</text>\n", kMargin, xml_escape(options.note));
  for (size_t p = 0; p < panels.size(); ++p)
    draw_panel(out, panels[p], options, kMargin + static_cast<int>(p) * (panel_w + kPanelGap));
  out += "</svg>\n";
  return out;
}

}  // namespace baton
