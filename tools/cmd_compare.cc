// `baton compare`: a prediction against a measurement of the same Program
// (the figures are defined in sim/trace_compare.h), optionally with both
// Gantt charts one above the other on one time scale.
#include <memory>

#include <fmt/format.h>

#include "sim/trace_compare.h"
#include "sim/trace_reader.h"
#include "sim/trace_writers.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/compare_report.h"

namespace baton::cli {

namespace {

struct CompareArgs {
  std::string predicted;
  std::string measured;
  std::string svg;
  bool json = false;
  bool partial = false;
};

std::string shape_text(const TraceShape& shape) {
  return fmt::format("{} workers, {} stages, {} batches, {} action spans", shape.workers, shape.stages, shape.batches,
                     shape.spans);
}

// Refuses traces whose spans do not all pair (unless --partial): their
// iteration times would be of different work. Says how the two Programs
// differ, or where their actions first part when the shapes agree.
void check_same_program(const CompareArgs& args, const Trace& predicted, const Trace& measured,
                        const TraceComparison& c) {
  if (args.partial || (c.only_predicted == 0 && c.only_measured == 0)) return;
  const TraceShape p = trace_shape(predicted);
  const TraceShape m = trace_shape(measured);
  std::string how;
  if (!(p == m)) {
    how = fmt::format("{} has {}; {} has {}", args.predicted, shape_text(p), args.measured, shape_text(m));
  } else {
    how = fmt::format(
        "both have {}, but {} of {}'s actions and {} of {}'s find no partner with the same action at "
        "the same (worker, action index): a different schedule or stage split",
        shape_text(p), c.only_predicted, args.predicted, c.only_measured, args.measured);
  }
  throw UsageError(fmt::format(
      "compare: the traces are not of the same Program: {}. Simulate and run one plan (the same --stages, "
      "--schedule and --microbatches; pipedream's simulation raises the minibatches to reach a steady state, "
      "its report says to how many), or give --partial to compare only the spans that pair",
      how));
}

std::string comparison_text(const TraceComparison& c, const CompareArgs& args) {
  std::string out = fmt::format("predicted: {}\nmeasured:  {}\n", args.predicted, args.measured);
  out += fmt::format("spans: {} paired by (worker, action index), {} only predicted, {} only measured\n\n", c.paired,
                     c.only_predicted, c.only_measured);
  return out + comparison_tables(c, false);
}

int run_compare(const CompareArgs& args) {
  Trace predicted = take(parse_chrome_trace(read_file(args.predicted), args.predicted));
  Trace measured = take(parse_chrome_trace(read_file(args.measured), args.measured));
  if (predicted.origin.empty()) predicted.origin = "predicted";
  if (measured.origin.empty()) measured.origin = "measured";
  const TraceComparison comparison = compare_traces(predicted, measured);
  if (comparison.paired == 0) {
    throw UsageError(
        fmt::format("compare: no span of {} pairs with a span of {} by (worker, action index, "
                    "action): are they runs of the same plan?",
                    args.predicted, args.measured));
  }
  check_same_program(args, predicted, measured, comparison);
  if (!args.svg.empty()) {
    GanttOptions gantt;
    gantt.title = fmt::format("{} vs {}", predicted.origin, measured.origin);
    write_file_atomic(args.svg, traces_to_svg_compare(predicted, measured, gantt));
  }
  std::fputs(
      args.json ? (comparison_json(comparison).dump(2) + "\n").c_str() : comparison_text(comparison, args).c_str(),
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
      "charts one above the other in one SVG. Every action span of one trace must pair with a span of the\n"
      "other at the same (worker, action index) with the same action; traces of different Programs (other\n"
      "microbatches, schedule or stages) are refused unless --partial.\n\n"
      "Example:\n"
      "  baton compare out/predicted.json out/measured.json --svg out/compare.svg");
  cmd->add_option("predicted", args->predicted, "predicted trace (Chrome trace JSON)")->required();
  cmd->add_option("measured", args->measured, "measured trace (Chrome trace JSON)")->required();
  cmd->add_option("--svg", args->svg, "write both Gantt charts to this SVG file");
  cmd->add_flag("--json", args->json, "print the figures as JSON");
  cmd->add_flag("--partial", args->partial,
                "compare the spans that pair even when the traces are of different Programs (the iteration time "
                "then compares unlike work)");
  cmd->callback([args, &result] { result.exit_code = run_compare(*args); });
}

}  // namespace baton::cli
