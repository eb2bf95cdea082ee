#include "planner/sweep_chart.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "planner/sweep_grid.h"

namespace baton {

namespace {

bool numeric_column(const SweepTable& table, int column) {
  return std::all_of(table.rows.begin(), table.rows.end(),
                     [&](const auto& row) { return parse_number(row[column]).has_value(); });
}

int x_column(const SweepTable& table) {
  for (int c : table.axis_columns())
    if (numeric_column(table, c)) return c;
  return -1;
}

std::string field(const SweepTable& table, const std::vector<std::string>& row, const char* name) {
  const int c = table.column(name);
  return c < 0 ? std::string() : row[c];
}

// The throughput of a row that ran and fits, else NaN.
double fitting_throughput(const SweepTable& table, const std::vector<std::string>& row) {
  if (field(table, row, "fits") != "yes" || !field(table, row, "error").empty()) return NAN;
  return parse_number(field(table, row, "throughput_samples_per_s")).value_or(NAN);
}

// "a on b": the model and the topologies of the rows.
std::string subject(const SweepTable& table) {
  if (table.rows.empty()) return "sweep";
  std::vector<std::string> topologies;
  for (const auto& row : table.rows)
    if (std::find(topologies.begin(), topologies.end(), row[3]) == topologies.end()) topologies.push_back(row[3]);
  const std::string where = topologies.size() <= 3 ? fmt::format("{}", fmt::join(topologies, ", "))
                                                   : fmt::format("{} topologies", topologies.size());
  return fmt::format("{} on {}", table.rows.front()[2], where);
}

}  // namespace

Result<std::vector<ChartSeries>> sweep_chart_series(const SweepTable& table) {
  const int x = x_column(table);
  if (x < 0) return Error{"--chart: the line chart needs a numeric --vary axis for its x axis; this sweep has none"};
  const int schedule = table.column("schedule");
  std::vector<int> others;
  for (int c : table.axis_columns())
    if (c != x) others.push_back(c);
  std::vector<ChartSeries> series;
  std::map<std::string, size_t> index_of;
  for (const auto& row : table.rows) {
    std::string colour, dash, name = "throughput";
    size_t first_dash = 0;
    if (schedule >= 0) {
      name = colour = row[schedule];
    } else if (!others.empty()) {
      colour = row[others[0]];  // the legend's heading names the axis
      name = table.header[others[0]] + "=" + colour;
      first_dash = 1;
    }
    for (size_t a = first_dash; a < others.size(); ++a)
      dash += fmt::format("{}{}={}", dash.empty() ? "" : ", ", table.header[others[a]], row[others[a]]);
    if (!dash.empty()) name += ", " + dash;
    auto [it, added] = index_of.emplace(name, series.size());
    if (added) series.push_back(ChartSeries{name, {}, {}, colour, dash});
    series[it->second].x.push_back(*parse_number(row[x]));  // x_column: every row's is a number
    series[it->second].y.push_back(fitting_throughput(table, row));
  }
  return series;
}

ChartOptions sweep_chart_options(const SweepTable& table) {
  ChartOptions chart;
  const std::string split = table.rows.empty() ? "" : field(table, table.rows.front(), "split");
  chart.title = subject(table) + ": throughput" + (split.empty() ? "" : " (" + split + ")");
  chart.note = "points that fail or do not fit in device memory are left out";
  const int x = x_column(table);
  chart.x_label = x < 0 ? "" : table.header[x];
  chart.y_label = "samples per second";
  std::vector<std::string> others;
  for (int c : table.axis_columns())
    if (c != x) others.push_back(table.header[c]);
  const bool by_schedule = table.column("schedule") >= 0;
  if (by_schedule)
    chart.colour_title = "schedule";
  else if (!others.empty())
    chart.colour_title = others.front();
  for (size_t a = by_schedule ? 0 : 1; a < others.size(); ++a)
    chart.dash_title += (chart.dash_title.empty() ? "" : ", ") + others[a];
  chart.log_x = chart.x_label.rfind("bandwidth", 0) == 0;
  return chart;
}

}  // namespace baton

namespace baton {

namespace {

constexpr const char* kTensorAxis = "tensor-model-parallel-size";
constexpr const char* kPipelineAxis = "pipeline-model-parallel-size";

// The axis' distinct values, numerically ascending.
std::vector<std::string> axis_values(const SweepTable& table, int column) {
  std::vector<std::string> values;
  for (const auto& row : table.rows)
    if (std::find(values.begin(), values.end(), row[column]) == values.end()) values.push_back(row[column]);
  std::sort(values.begin(), values.end(),
            [](const std::string& a, const std::string& b) { return std::stod(a) < std::stod(b); });
  return values;
}

double number(const SweepTable& table, const std::vector<std::string>& row, const char* name) {
  return parse_number(field(table, row, name)).value_or(NAN);
}

// "d 4, b 1, selective, sp": what a GPT row's layout chose beside t and p.
std::string layout_detail(const SweepTable& table, const std::vector<std::string>& row) {
  std::string text =
      fmt::format("d {}, b {}", field(table, row, "data_parallel_size"), field(table, row, "micro_batch_size"));
  const std::string per = field(table, row, "num_layers_per_virtual_pipeline_stage");
  if (!per.empty() && per != "0") text += ", vpp " + per;
  const std::string recompute = field(table, row, "recompute_granularity");
  if (!recompute.empty() && recompute != "none") text += ", " + recompute.substr(0, 3);
  if (field(table, row, "sequence_parallel") == "yes") text += ", sp";
  return text;
}

struct CellPick {
  const std::vector<std::string>* best = nullptr;   // fastest that fits
  const std::vector<std::string>* least = nullptr;  // least peak memory among those that ran
  const std::vector<std::string>* failed = nullptr;
};

void fill_cells(const SweepTable& table, const CellPick& pick, HeatmapCell& speed, HeatmapCell& memory) {
  speed.value = memory.value = NAN;
  const auto* shown = pick.best ? pick.best : pick.least;
  if (shown != nullptr) {
    const double peak = number(table, *shown, "peak_memory_bytes"),
                 limit = number(table, *shown, "memory_capacity_bytes");
    memory.value = peak / limit;
    memory.label = fmt::format("{:.1f} GiB", peak / double(1ull << 30));
    memory.detail = fmt::format("{:.0f}% of {:.0f} GiB", 100 * peak / limit, limit / double(1ull << 30));
    memory.flagged = peak > limit;
    memory.tooltip = layout_detail(table, *shown);
  }
  if (pick.best != nullptr) {
    const auto& row = *pick.best;
    speed.value = fitting_throughput(table, row);
    speed.label = fmt::format("{:.1f}/s", speed.value);
    speed.detail = layout_detail(table, row);
    speed.tooltip =
        fmt::format("{:.3f} samples/s, {} s per iteration, {} TFLOP/s per GPU; {}", speed.value,
                    field(table, row, "iteration_time_s"), field(table, row, "model_tflops_per_gpu"), speed.detail);
  } else if (pick.least != nullptr) {
    speed.label = "does not fit";
    speed.detail = "least " + memory.label;
    speed.tooltip = "no point of this cell fits in device memory; the least peak is " + memory.label;
  } else if (pick.failed != nullptr) {
    const std::string error = field(table, *pick.failed, "error");
    speed.label = memory.label = "invalid";
    speed.detail = error.size() > 18 ? error.substr(0, 17) + "..." : error;
    speed.tooltip = memory.tooltip = error;
  }
}

CellPick pick_cell(const SweepTable& table, const std::string& t, const std::string& p, int tc, int pc) {
  CellPick pick;
  for (const auto& row : table.rows) {
    if (row[tc] != t || row[pc] != p) continue;
    const double speed = fitting_throughput(table, row);
    if (std::isfinite(speed) && (!pick.best || speed > fitting_throughput(table, *pick.best))) pick.best = &row;
    const double peak = number(table, row, "peak_memory_bytes");
    if (!field(table, row, "error").empty()) {
      if (!pick.failed) pick.failed = &row;
    } else if (std::isfinite(peak) && (!pick.least || peak < number(table, *pick.least, "peak_memory_bytes"))) {
      pick.least = &row;
    }
  }
  return pick;
}

}  // namespace

Result<SweepHeatmap> sweep_heatmap(const SweepTable& table) {
  int tc = -1, pc = -1;
  std::vector<std::string> others;
  for (int c : table.axis_columns()) {
    if (table.header[c] == kTensorAxis)
      tc = c;
    else if (table.header[c] == kPipelineAxis)
      pc = c;
    else
      others.push_back(table.header[c]);
  }
  if (tc < 0 || pc < 0)
    return Error{"a heatmap needs both tensor-model-parallel-size and pipeline-model-parallel-size axes"};
  SweepHeatmap map;
  HeatmapOptions& o = map.options;
  o.title = subject(table) + ": tensor x pipeline parallelism";
  o.note =
      fmt::format("each cell: the fastest of its points that fit{}; grey: none fits, or none is valid (hover for why)",
                  others.empty() ? "" : fmt::format(" (over {})", fmt::join(others, ", ")));
  o.x_label = kTensorAxis;
  o.y_label = kPipelineAxis;
  o.columns = axis_values(table, tc);
  o.rows = axis_values(table, pc);
  HeatmapPanel speed{"throughput (samples per second)", HeatmapScale::kHigherIsBetter, {}};
  HeatmapPanel memory{"peak memory per GPU", HeatmapScale::kFractionOfLimit, {}};
  for (const std::string& p : o.rows) {
    speed.cells.emplace_back(o.columns.size());
    memory.cells.emplace_back(o.columns.size());
    for (size_t c = 0; c < o.columns.size(); ++c)
      fill_cells(table, pick_cell(table, o.columns[c], p, tc, pc), speed.cells.back()[c], memory.cells.back()[c]);
  }
  map.panels = {speed, memory};
  return map;
}

Result<std::string> sweep_chart_svg(const SweepTable& table) {
  if (auto map = sweep_heatmap(table)) return heatmap_svg(map->panels, map->options);
  auto series = sweep_chart_series(table);
  if (!series) return series.error();
  return line_chart_svg(*series, sweep_chart_options(table));
}

}  // namespace baton
