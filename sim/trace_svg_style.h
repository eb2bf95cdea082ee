// The SVG Gantt chart's geometry and palette (sim/trace_svg.cc draws with
// them): sizes in pixels, one hue per microbatch (mod 10) in three shades for
// forward, input-gradient and whole backward passes, and the greys of the
// communication row. Fixed constants, so a chart is the same bytes every time.
#pragma once

namespace baton::gantt_style {

// Geometry, in pixels.
inline constexpr int kMinWidthPx = 400;
inline constexpr double kLeftPx = 64;  // worker labels live left of this
inline constexpr double kRightPx = 28;
inline constexpr double kMarginPx = 10;
inline constexpr double kTitleBandPx = 28;
inline constexpr double kLegendRowPx = 20;
inline constexpr double kHeadingBandPx = 22;  // origin heading above each compared chart
inline constexpr double kAxisBandPx = 34;
inline constexpr double kChartGapPx = 16;
inline constexpr double kRowGapPx = 6;
inline constexpr double kCommGapPx = 2;
inline constexpr double kCommRowPx = 6;
inline constexpr double kComputeRowPx = 18;
inline constexpr double kSmallComputeRowPx = 10;  // above kManyWorkers rows
inline constexpr int kManyWorkers = 32;
inline constexpr double kCharPx = 6.0;       // mean width of a character at 11 px
inline constexpr double kStepWidthPx = 2.5;  // STEP bars are at least this wide
inline constexpr double kTicksPer100Px = 1.0;

// Microbatch k takes hue kHues[k mod 10]; neighbours contrast.
inline constexpr int kPaletteSize = 10;
inline constexpr double kHues[kPaletteSize] = {210, 28, 130, 355, 270, 185, 320, 48, 95, 240};

struct Shade {
  double saturation;
  double lightness;
};
inline constexpr Shade kForwardShade{0.75, 0.78};
inline constexpr Shade kInputShade{0.60, 0.52};
inline constexpr Shade kBackwardShade{0.58, 0.35};

inline constexpr const char* kStepFill = "#1f1f1f";
inline constexpr const char* kMergedFill = "#5c6b7a";
inline constexpr double kMinMergedOpacity = 0.2;
inline constexpr const char* kGridStroke = "#e2e4e8";
inline constexpr const char* kStripeFill = "#f4f5f7";

// Communication greys, one per family of kinds.
struct CommStyle {
  const char* css_class;
  const char* fill;
  const char* legend;
};
inline constexpr CommStyle kCommStyles[] = {
    {"m0", "#b4b4b4", "send act"},
    {"m1", "#8a8a8a", "send grad"},
    {"m2", "#dadada", "recv wait"},
    {"m3", "#555555", "all-reduce"},
};

}  // namespace baton::gantt_style
