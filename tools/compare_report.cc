#include "tools/compare_report.h"

#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tools/report.h"

namespace baton::cli {

namespace {

using SpanKey = std::pair<int32_t, int32_t>;  // (worker, action_index)

std::map<SpanKey, const Span*> index_spans(const Trace& trace) {
  std::map<SpanKey, const Span*> index;
  for (const Span& span : trace.spans) index[{span.worker, span.action_index}] = &span;
  return index;
}

std::vector<std::string> figure_row(std::string label, const Figure& f, bool with_count) {
  std::vector<std::string> row{std::move(label)};
  if (with_count) row.push_back(std::to_string(f.count));
  row.insert(row.end(), {human_seconds(Seconds(f.predicted)), human_seconds(Seconds(f.measured)),
                         f.has_error() ? signed_percent(f.error()) : std::string("n/a")});
  return row;
}

nlohmann::json figure_json(const Figure& f) {
  return {{"predicted_s", f.predicted},
          {"measured_s", f.measured},
          {"error", f.has_error() ? nlohmann::json(f.error()) : nlohmann::json(nullptr)},
          {"spans", f.count}};
}

}  // namespace

Seconds makespan(const Trace& trace) {
  if (trace.spans.empty()) return Seconds(0);
  Seconds first = trace.spans.front().start;
  Seconds last = trace.spans.front().end;
  for (const Span& span : trace.spans) {
    first = min(first, span.start);
    last = max(last, span.end);
  }
  return last - first;
}

Comparison compare_traces(const Trace& predicted, const Trace& measured) {
  Comparison c;
  const auto measured_index = index_spans(measured);
  std::map<int, std::set<int32_t>> stage_workers;
  for (const auto& [key, p] : index_spans(predicted)) {
    auto it = measured_index.find(key);
    if (it == measured_index.end() || !(it->second->action == p->action)) {
      ++c.only_predicted;
      continue;
    }
    ++c.paired;
    const double dp = (p->end - p->start).value;
    const double dm = (it->second->end - it->second->start).value;
    Figure& kind = c.kinds[std::string(kind_name(p->action.kind))];
    kind.predicted += dp;
    kind.measured += dm;
    ++kind.count;
    if (!is_compute(p->action.kind)) continue;
    Figure& stage = c.stages[p->action.stage];
    stage.predicted += dp;
    stage.measured += dm;
    ++stage.count;
    stage_workers[p->action.stage].insert(p->worker);
  }
  c.only_measured = static_cast<int>(measured_index.size()) - c.paired;
  for (auto& [name, kind] : c.kinds) {
    kind.predicted /= kind.count;
    kind.measured /= kind.count;
  }
  for (auto& [stage, figure] : c.stages) {
    const double workers = static_cast<double>(stage_workers[stage].size());
    figure.predicted /= workers;
    figure.measured /= workers;
  }
  c.iteration = Figure{makespan(predicted).value, makespan(measured).value, 1};
  return c;
}

std::string signed_percent(double fraction) { return fmt::format("{:+.1f}%", 100.0 * fraction); }

std::string comparison_tables(const Comparison& c, bool markdown) {
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

nlohmann::json comparison_json(const Comparison& c) {
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [stage, figure] : c.stages) stages[std::to_string(stage)] = figure_json(figure);
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [name, figure] : c.kinds) kinds[name] = figure_json(figure);
  return {{"paired_spans", c.paired}, {"only_predicted", c.only_predicted}, {"only_measured", c.only_measured},
          {"iteration", figure_json(c.iteration)}, {"stages", stages}, {"kinds", kinds}};
}

}  // namespace baton::cli
