// The chart of a sweep, drawn from its table (planner/sweep_table.h) alone,
// so that a merged sweep charts exactly as the unsharded run does.
//
// A table whose axes include both tensor-model-parallel-size and
// pipeline-model-parallel-size is drawn as a heatmap (what layouts are judged
// by): a column per tensor-parallel size, a row per pipeline size, two panels:
//   throughput  the best samples/s among the cell's points that fit (over the
//               other axes, which the cell's second line and tooltip name);
//               grey when none fits (its second line: the least peak memory)
//               or none runs (the first error);
//   memory      that point's peak memory per GPU as a fraction of the device's,
//               red-bordered when over it.
// Any other table is a line chart of throughput against the first numeric
// axis: one line per schedule (profile sweeps; colour) or per value of the
// first other axis (GPT sweeps; colour), and per value of the remaining axes
// (dash). Points that fail or do not fit are left out of their line.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "planner/sweep_table.h"
#include "sim/chart_svg.h"
#include "sim/heatmap_svg.h"
#include "sim/result.h"

namespace baton {

// The line chart's series and options (above). Error: no numeric axis.
Result<std::vector<ChartSeries>> sweep_chart_series(const SweepTable& table);
ChartOptions sweep_chart_options(const SweepTable& table);

// The heatmap's panels and options; Error when the table has not both axes.
struct SweepHeatmap {
  std::vector<HeatmapPanel> panels;
  HeatmapOptions options;
};
Result<SweepHeatmap> sweep_heatmap(const SweepTable& table);

// The SVG: a heatmap where the table has both axes, else the line chart.
Result<std::string> sweep_chart_svg(const SweepTable& table);

}  // namespace baton
