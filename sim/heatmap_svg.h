// Heatmaps in SVG (used by `baton sweep` for tensor x pipeline parallelism):
// one or more panels side by side over the same rows and columns, each cell
// coloured by its value on the panel's scale and labelled with up to two
// lines of text. Deterministic output.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace baton {

struct HeatmapCell {
  double value = 0.0;    // NaN: no value (drawn grey, hatched)
  std::string label;     // the cell's first line (bold)
  std::string detail;    // a second, smaller line; may be empty
  std::string tooltip;   // shown on hover; may be empty
  bool flagged = false;  // drawn with a red border (in sweeps: does not fit)
};

enum class HeatmapScale {
  kHigherIsBetter,  // light (low) to dark blue (high)
  kFractionOfLimit  // green (0) through yellow to red (1 and over): values are fractions of a limit
};

struct HeatmapPanel {
  std::string title;
  HeatmapScale scale = HeatmapScale::kHigherIsBetter;
  std::vector<std::vector<HeatmapCell>> cells;  // [row][column], rows x columns of HeatmapOptions
};

struct HeatmapOptions {
  std::string title;
  std::string note;  // a grey line under the title; may be empty
  std::string x_label;
  std::string y_label;
  std::vector<std::string> columns;  // column headings, left to right
  std::vector<std::string> rows;     // row headings, top to bottom
};

// The cell's fill on its panel's scale, given the panel's finite low and high.
std::string heatmap_fill(const HeatmapCell& cell, HeatmapScale scale, double low, double high);

std::string heatmap_svg(const std::vector<HeatmapPanel>& panels, const HeatmapOptions& options);

}  // namespace baton
