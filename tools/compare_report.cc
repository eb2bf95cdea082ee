#include "tools/compare_report.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tools/report.h"

namespace baton::cli {

namespace {

std::vector<std::string> figure_row(std::string label, const ComparedFigure& f, bool with_count) {
  std::vector<std::string> row{std::move(label)};
  if (with_count) row.push_back(std::to_string(f.count));
  row.insert(row.end(), {human_seconds(f.predicted), human_seconds(f.measured),
                         f.has_error() ? signed_percent(f.error()) : std::string("n/a")});
  return row;
}

nlohmann::json figure_json(const ComparedFigure& f) {
  return {{"predicted_s", f.predicted.value},
          {"measured_s", f.measured.value},
          {"error", f.has_error() ? nlohmann::json(f.error()) : nlohmann::json(nullptr)},
          {"spans", f.count}};
}

}  // namespace

std::string signed_percent(double fraction) { return fmt::format("{:+.1f}%", 100.0 * fraction); }

std::string comparison_tables(const TraceComparison& c, bool markdown) {
  const auto table = markdown ? render_markdown_table : render_table;
  std::string out = table({{"", "predicted", "measured", "error"}, figure_row("iteration time", c.iteration, false)});
  std::vector<std::vector<std::string>> stages{{"stage", "predicted", "measured", "error"}};
  for (const auto& [stage, figure] : c.stages) stages.push_back(figure_row(fmt::format("s{}", stage), figure, false));
  out += "\nper stage (compute time per worker)\n\n" + table(stages);
  std::vector<std::vector<std::string>> kinds{{"kind", "spans", "predicted", "measured", "error"}};
  for (const auto& [name, figure] : c.kinds) kinds.push_back(figure_row(name, figure, true));
  out += "\nper action kind (mean duration)\n\n" + table(kinds);
  return out;
}

nlohmann::json comparison_json(const TraceComparison& c) {
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [stage, figure] : c.stages) stages[std::to_string(stage)] = figure_json(figure);
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [name, figure] : c.kinds) kinds[name] = figure_json(figure);
  return {{"paired_spans", c.paired},
          {"only_predicted", c.only_predicted},
          {"only_measured", c.only_measured},
          {"iteration", figure_json(c.iteration)},
          {"stages", stages},
          {"kinds", kinds}};
}

}  // namespace baton::cli
