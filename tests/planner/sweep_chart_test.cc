// The chart of a sweep table: the TP x PP heatmap's choice per cell, and the
// line chart of a GPT sweep without both axes.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "tests/catch_compat.h"

#include "planner/sweep_chart.h"

namespace baton {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A GPT sweep table over tp x pp x mbs with the given figures per row.
struct Row {
  const char *tp, *pp, *mbs;
  double throughput;  // NaN: an error
  double peak_gib;
  bool fits;
};

SweepTable table_of(const std::vector<Row>& rows) {
  SweepTable table{
      {"point", "grid_points", "model", "topology", "tensor-model-parallel-size", "pipeline-model-parallel-size",
       "micro-batch-size", "tensor_model_parallel_size", "data_parallel_size", "micro_batch_size",
       "recompute_granularity", "throughput_samples_per_s", "iteration_time_s", "model_tflops_per_gpu",
       "peak_memory_bytes", "memory_capacity_bytes", "fits", "error"},
      {}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const bool ran = std::isfinite(r.throughput);
    table.rows.push_back({std::to_string(i), std::to_string(rows.size()), "GPT", "c", r.tp, r.pp, r.mbs, r.tp, "1",
                          r.mbs, "none", ran ? fmt::format("{}", r.throughput) : "", ran ? "1" : "", ran ? "100" : "",
                          ran ? fmt::format("{:.0f}", r.peak_gib * kGiB) : "", fmt::format("{:.0f}", 80 * kGiB),
                          ran ? (r.fits ? "yes" : "no") : "", ran ? "" : "heads not divisible by t"});
  }
  return table;
}

TEST_CASE("sweep chart: a heatmap cell is the fastest point that fits, else why not", "[planner][sweep]") {
  const SweepTable table = table_of({
      {"1", "1", "1", 10.0, 70, true},
      {"1", "1", "2", 12.0, 79, true},  // cell (t 1, p 1): 12 fits
      {"2", "1", "1", 30.0, 90, false},
      {"2", "1", "2", 20.0, 85, false},  // nothing fits: least 85
      {"1", "2", "1", NAN, 0, false},
      {"1", "2", "2", NAN, 0, false},  // nothing runs
      {"2", "2", "1", 25.0, 60, true},
      {"2", "2", "2", 40.0, 95, false},  // 25: 40 does not fit
  });
  const auto map = sweep_heatmap(table);
  REQUIRE(map.ok());
  CHECK(map->options.columns == std::vector<std::string>{"1", "2"});
  CHECK(map->options.rows == std::vector<std::string>{"1", "2"});
  CHECK(map->options.note.find("over micro-batch-size") != std::string::npos);
  const auto& speed = map->panels[0].cells;
  const auto& memory = map->panels[1].cells;
  CHECK(speed[0][0].value == 12.0);
  CHECK(speed[0][0].label == "12.0/s");
  CHECK(memory[0][0].value == Approx(79.0 / 80.0));
  CHECK_FALSE(memory[0][0].flagged);
  CHECK(std::isnan(speed[0][1].value));
  CHECK(speed[0][1].label == "does not fit");
  CHECK(speed[0][1].detail == "least 85.0 GiB");
  CHECK(memory[0][1].flagged);
  CHECK(speed[1][0].label == "invalid");
  CHECK(speed[1][0].tooltip == "heads not divisible by t");
  CHECK(speed[1][1].value == 25.0);
  CHECK(memory[1][1].value == Approx(60.0 / 80.0));
  const auto svg = sweep_chart_svg(table);
  REQUIRE(svg.ok());
  CHECK(svg->find("tensor x pipeline parallelism") != std::string::npos);
}

TEST_CASE("sweep chart: a GPT sweep without both axes is a line per value of its second axis", "[planner][sweep]") {
  SweepTable table = table_of({{"1", "1", "1", 10.0, 70, true},
                               {"1", "1", "2", 12.0, 79, true},
                               {"2", "1", "1", 30.0, 90, false},
                               {"2", "1", "2", 20.0, 75, true}});
  // Drop the pipeline axis: the axes are tp (x) and mbs (a line each).
  for (auto* fields : {&table.header}) fields->erase(fields->begin() + 5);
  for (auto& row : table.rows) row.erase(row.begin() + 5);
  REQUIRE_FALSE(sweep_heatmap(table).ok());
  const auto series = sweep_chart_series(table);
  REQUIRE(series.ok());
  REQUIRE(series->size() == 2);
  CHECK((*series)[0].name == "micro-batch-size=1");
  CHECK((*series)[0].colour_key == "1");
  CHECK((*series)[0].x == std::vector<double>{1, 2});
  CHECK((*series)[0].y[0] == 10.0);
  CHECK(std::isnan((*series)[0].y[1]));  // does not fit
  CHECK((*series)[1].y == std::vector<double>{12.0, 20.0});
  const ChartOptions options = sweep_chart_options(table);
  CHECK(options.x_label == "tensor-model-parallel-size");
  CHECK(options.colour_title == "micro-batch-size");
}

}  // namespace
}  // namespace baton
