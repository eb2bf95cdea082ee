// `baton compare`: a prediction against a measurement of the same Program.
//
// Spans pair up by (worker, action_index). Figures, each with its relative
// error (measured - predicted) / predicted ("n/a" where the prediction is 0):
// - iteration time: each trace's makespan (last span end - first span start);
// - per stage: compute time (F, B, I, W, STEP spans) per worker of the stage,
//   summed over the paired spans and averaged over the stage's workers;
// - per action kind: mean duration of the paired spans of that kind.
// Optionally both Gantt charts, one above the other, on one time scale.
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "sim/trace_reader.h"
#include "sim/trace_writers.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

struct CompareArgs {
  std::string predicted;
  std::string measured;
  std::string svg;
  bool json = false;
};

struct Figure {
  double predicted = 0.0;  // seconds
  double measured = 0.0;
  int count = 0;
  bool has_error() const { return predicted > 0.0; }
  double error() const { return has_error() ? (measured - predicted) / predicted : 0.0; }
};

struct Comparison {
  int paired = 0;
  int only_predicted = 0;
  int only_measured = 0;
  Figure iteration;
  std::map<int, Figure> stages;                 // stage -> compute time per worker
  std::map<std::string, Figure> kinds;          // kind name -> mean duration
};

using SpanKey = std::pair<int32_t, int32_t>;  // (worker, action_index)

std::map<SpanKey, const Span*> index_spans(const Trace& trace) {
  std::map<SpanKey, const Span*> index;
  for (const Span& span : trace.spans) index[{span.worker, span.action_index}] = &span;
  return index;
}

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

std::vector<std::string> figure_row(std::string label, const Figure& f, bool with_count) {
  std::vector<std::string> row{std::move(label)};
  if (with_count) row.push_back(std::to_string(f.count));
  row.insert(row.end(), {human_seconds(Seconds(f.predicted)), human_seconds(Seconds(f.measured)),
                         f.has_error() ? signed_percent(f.error()) : std::string("n/a")});
  return row;
}

std::string comparison_text(const Comparison& c, const CompareArgs& args) {
  std::string out = fmt::format("predicted: {}\nmeasured:  {}\n", args.predicted, args.measured);
  out += fmt::format("spans: {} paired by (worker, action index), {} only predicted, {} only measured\n\n",
                     c.paired, c.only_predicted, c.only_measured);
  out += render_table({{"", "predicted", "measured", "error"}, figure_row("iteration time", c.iteration, false)});
  std::vector<std::vector<std::string>> stages{{"stage", "predicted", "measured", "error"}};
  for (const auto& [stage, figure] : c.stages) stages.push_back(figure_row(fmt::format("s{}", stage), figure, false));
  out += "\nper stage (compute time per worker)\n" + render_table(stages);
  std::vector<std::vector<std::string>> kinds{{"kind", "spans", "predicted", "measured", "error"}};
  for (const auto& [name, figure] : c.kinds) kinds.push_back(figure_row(name, figure, true));
  out += "\nper action kind (mean duration)\n" + render_table(kinds);
  return out;
}

nlohmann::json figure_json(const Figure& f) {
  return {{"predicted_s", f.predicted},
          {"measured_s", f.measured},
          {"error", f.has_error() ? nlohmann::json(f.error()) : nlohmann::json(nullptr)},
          {"spans", f.count}};
}

nlohmann::json comparison_json(const Comparison& c) {
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [stage, figure] : c.stages) stages[std::to_string(stage)] = figure_json(figure);
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [name, figure] : c.kinds) kinds[name] = figure_json(figure);
  return {{"paired_spans", c.paired}, {"only_predicted", c.only_predicted}, {"only_measured", c.only_measured},
          {"iteration", figure_json(c.iteration)}, {"stages", stages}, {"kinds", kinds}};
}

int run_compare(const CompareArgs& args) {
  Trace predicted = take(parse_chrome_trace(read_file(args.predicted), args.predicted));
  Trace measured = take(parse_chrome_trace(read_file(args.measured), args.measured));
  if (predicted.origin.empty()) predicted.origin = "predicted";
  if (measured.origin.empty()) measured.origin = "measured";
  const Comparison comparison = compare_traces(predicted, measured);
  if (comparison.paired == 0) {
    throw UsageError(fmt::format("compare: no span of {} pairs with a span of {} by (worker, action index, "
                                 "action): are they runs of the same plan?",
                                 args.predicted, args.measured));
  }
  if (!args.svg.empty()) {
    GanttOptions gantt;
    gantt.title = fmt::format("{} vs {}", predicted.origin, measured.origin);
    write_file_atomic(args.svg, traces_to_svg_compare(predicted, measured, gantt));
  }
  std::fputs(args.json ? (comparison_json(comparison).dump(2) + "\n").c_str()
                       : comparison_text(comparison, args).c_str(),
             stdout);
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "Put a predicted and a measured trace side by side");
  cmd->footer(
      "Compare a predicted trace (baton simulate --trace) with a measured one (baton run --trace) of the\n"
      "same plan: iteration-time error, per-stage and per-action-kind errors, and optionally both Gantt\n"
      "charts one above the other in one SVG.\n\n"
      "Example:\n"
      "  baton compare out/predicted.json out/measured.json --svg out/compare.svg");
  cmd->add_option("predicted", args->predicted, "predicted trace (Chrome trace JSON)")->required();
  cmd->add_option("measured", args->measured, "measured trace (Chrome trace JSON)")->required();
  cmd->add_option("--svg", args->svg, "write both Gantt charts to this SVG file");
  cmd->add_flag("--json", args->json, "print the figures as JSON");
  cmd->callback([args, &result] { result.exit_code = run_compare(*args); });
}

}  // namespace baton::cli
