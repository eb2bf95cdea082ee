// The sweep's line chart: which line gets which colour, dash and marker, where
// the legend goes, and that the SVG draws exactly that.
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tests/catch_compat.h"

#include "sim/chart_svg.h"
#include "tests/trace/svg_checks.h"
#include "tests/trace/trace_fixtures.h"

namespace baton {
namespace {

using testing::count_substring;
using testing::well_formed;

const std::vector<std::string> kSchedules = {"pipedream", "1f1b", "gpipe", "dp"};
const std::vector<std::string> kServers = {"servers=1", "servers=2", "servers=4"};

// schedules x servers lines, as `baton sweep` makes them: the schedule is the
// colour key, the other axis's value the dash key; y = line index + x.
std::vector<ChartSeries> grid_series(const std::vector<std::string>& colours, const std::vector<std::string>& dashes) {
  std::vector<ChartSeries> series;
  for (const std::string& dash : dashes)
    for (const std::string& colour : colours) {
      const double k = static_cast<double>(series.size());
      series.push_back(ChartSeries{colour + ", " + dash, {1, 10, 100}, {k + 1, k + 10, k + 100}, colour, dash});
    }
  return series;
}

ChartOptions sweep_like_options() {
  ChartOptions options;
  options.title = "vgg16 on a cluster: throughput";
  options.x_label = "bandwidth_gbps.1";
  options.y_label = "samples per second";
  options.colour_title = "schedule";
  options.dash_title = "servers";
  options.log_x = true;
  return options;
}

std::vector<const ChartLegendEntry*> swatches(const ChartLayout& layout) {
  std::vector<const ChartLegendEntry*> out;
  for (const ChartLegendEntry& entry : layout.legend)
    if (!entry.heading) out.push_back(&entry);
  return out;
}

TEST_CASE("chart: 12 lines take one colour per schedule and one dash per second-axis value") {
  const auto series = grid_series(kSchedules, kServers);
  REQUIRE(series.size() == 12);
  const ChartLayout layout = chart_layout(series, sweep_like_options());
  REQUIRE(layout.styles.size() == series.size());
  std::set<std::string> colours, dashes;
  for (size_t i = 0; i < series.size(); ++i) {
    for (size_t j = 0; j < series.size(); ++j) {
      INFO(series[i].name << " and " << series[j].name);
      CHECK((layout.styles[i].colour == layout.styles[j].colour) == (series[i].colour_key == series[j].colour_key));
      CHECK((layout.styles[i].dash == layout.styles[j].dash) == (series[i].dash_key == series[j].dash_key));
      CHECK((layout.styles[i].marker == layout.styles[j].marker) == (series[i].dash_key == series[j].dash_key));
    }
    colours.insert(layout.styles[i].colour);
    dashes.insert(layout.styles[i].dash);
  }
  CHECK(colours.size() == kSchedules.size());
  CHECK(dashes.size() == kServers.size());
}

TEST_CASE("chart: the legend lists each schedule and each second-axis value once, beside the plot") {
  const ChartLayout layout = chart_layout(grid_series(kSchedules, kServers), sweep_like_options());
  // Two headings, then 4 colour entries and 3 dash entries: 7, not 12.
  REQUIRE(layout.legend.size() == 2 + kSchedules.size() + kServers.size());
  CHECK(layout.legend[0].heading);
  CHECK(layout.legend[0].label == "schedule");
  CHECK(layout.legend[1 + kSchedules.size()].heading);
  CHECK(layout.legend[1 + kSchedules.size()].label == "servers");
  const auto entries = swatches(layout);
  REQUIRE(entries.size() == kSchedules.size() + kServers.size());
  for (size_t k = 0; k < kSchedules.size(); ++k) {
    CHECK(entries[k]->label == kSchedules[k]);
    CHECK(entries[k]->style.dash.empty());  // a colour entry is solid
  }
  for (size_t k = 0; k < kServers.size(); ++k) CHECK(entries[kSchedules.size() + k]->label == kServers[k]);
  int previous_y = 0;
  for (const ChartLegendEntry& entry : layout.legend) {
    INFO(entry.label);
    CHECK(entry.x_px > layout.plot_right_px);  // right of the plot, not over it
    CHECK(entry.y_px > previous_y);            // one row each, top to bottom
    CHECK(entry.y_px < layout.height_px);
    previous_y = entry.y_px;
  }
  CHECK(layout.legend_right_px < layout.width_px);
  CHECK(layout.plot_left_px < layout.plot_right_px);
  CHECK(layout.plot_top_px < layout.plot_bottom_px);
}

TEST_CASE("chart: the SVG draws one path per line in its style and one legend entry per key") {
  const auto series = grid_series(kSchedules, kServers);
  const ChartOptions options = sweep_like_options();
  const ChartLayout layout = chart_layout(series, options);
  const std::string svg = line_chart_svg(series, options);
  std::string why;
  CHECK(well_formed(svg, why));
  INFO(why);
  CHECK(count_substring(svg, "<path class='series'") == static_cast<int>(series.size()));
  CHECK(count_substring(svg, "class='legend-entry'") == static_cast<int>(kSchedules.size() + kServers.size()));
  CHECK(count_substring(svg, "class='legend-heading'") == 2);
  for (const ChartStyle& style : layout.styles)
    CHECK(svg.find(fmt::format("stroke='{}' stroke-width='2' stroke-dasharray='{}'", style.colour, style.dash)) !=
          std::string::npos);
  CHECK(svg.find(fmt::format("width='{}' height='{}'", layout.width_px, layout.height_px)) != std::string::npos);
}

TEST_CASE("chart: twelve dash keys stay apart, long labels widen the chart, a long legend heightens it") {
  std::vector<std::string> many;
  for (int k = 0; k < 12; ++k) many.push_back("microbatches=" + std::to_string(1 << k));
  const ChartOptions options = sweep_like_options();
  const ChartLayout layout = chart_layout(grid_series({"pipedream", "1f1b"}, many), options);
  std::set<std::pair<std::string, std::string>> dash_markers;
  for (const ChartStyle& style : layout.styles) dash_markers.emplace(style.dash, style.marker);
  CHECK(dash_markers.size() == many.size());

  // 2 headings and 2 + 24 entries take 2 x 20 + 26 x 18 + 10 + 6 = 524 px, more
  // than the 520 - 60 - 50 px beside the plot.
  for (int k = 12; k < 24; ++k) many.push_back("microbatches=" + std::to_string(1 << k));
  const ChartLayout tall = chart_layout(grid_series({"pipedream", "1f1b"}, many), options);
  CHECK(tall.height_px > options.height_px);
  CHECK(tall.legend.back().y_px < tall.plot_bottom_px);

  const std::string long_name(60, 'x');
  const ChartLayout wide = chart_layout(grid_series({long_name}, {"servers=1"}), options);
  CHECK(wide.width_px > options.width_px);
  CHECK(wide.legend_right_px < wide.width_px);
  CHECK(wide.plot_right_px - wide.plot_left_px >= 400);
}

TEST_CASE("chart: without dash keys every line is its own legend entry, in its own colour") {
  std::vector<ChartSeries> series;
  for (int k = 0; k < 5; ++k)
    series.push_back(ChartSeries{"line " + std::to_string(k), {0, 1}, {1.0 * k, 2.0 * k}, "", ""});
  const ChartLayout layout = chart_layout(series, ChartOptions{});
  REQUIRE(layout.legend.size() == series.size());  // no headings without titles
  std::set<std::string> colours;
  for (size_t k = 0; k < series.size(); ++k) {
    CHECK(layout.legend[k].label == series[k].name);
    CHECK(layout.legend[k].style.colour == layout.styles[k].colour);
    colours.insert(layout.styles[k].colour);
  }
  CHECK(colours.size() == series.size());
}

TEST_CASE("chart: a point with no figure is left out of its line") {
  const std::vector<ChartSeries> series = {ChartSeries{"a", {1, 2, 3}, {1, NAN, 3}, "a", ""}};
  const std::string svg = line_chart_svg(series, ChartOptions{});
  CHECK(count_substring(svg, "<title>a: x=") == 2);
}

}  // namespace
}  // namespace baton
