// `baton check DIR`: planner regression. Every *.json case in DIR names a
// profile, a topology, planner options and the expected result; the case is
// planned again and compared.
//
// Case format `baton.check.v1`:
//   {"format": "baton.check.v1", "name": str,
//    "profile": path, "topology": path        (relative to the repository root or the case file),
//    "options": {"cost_model", "straight", "activation_compression", "memory_limit_gib",
//                "schedule", "microbatches"}   (all optional; the same meaning as `baton plan`'s),
//    "expected": {"time_per_minibatch_s": num, "stages": "0-13x15,13-39x1", "schedule": str},
//    "tolerance": {"time_relative": num}}     (default 1e-9)
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "planner/planner.h"
#include "sim/json_fields.h"
#include "tools/cli_support.h"
#include "tools/commands.h"

namespace baton::cli {

namespace {

namespace fs = std::filesystem;
using json_fields::FieldPath;
using nlohmann::json;

struct CheckArgs {
  std::string dir;
  bool update = false;
};

struct CaseOutcome {
  bool passed = true;
  std::string report;
};

std::string resolve(const std::string& path, const fs::path& case_file) {
  if (fs::exists(path)) return path;
  const fs::path beside = case_file.parent_path() / path;
  return fs::exists(beside) ? beside.string() : path;
}

PlannerOptions case_options(const json& document, const std::string& source) {
  PlannerOptions options;
  const json options_json = document.value("options", json::object());
  const FieldPath at = FieldPath(source).field("options");
  take(json_fields::check_object(options_json, at));
  options.cost_model = take(parse_cost_model(take(json_fields::read_string_or(options_json, at, "cost_model", "baton"))));
  if (options_json.contains("straight")) {
    if (!options_json["straight"].is_boolean()) throw UsageError(at.field("straight").error("must be true or false", options_json["straight"]).message);
    options.straight = options_json["straight"].get<bool>();
  }
  options.activation_compression =
      take(json_fields::read_number_or(options_json, at, "activation_compression", 0.0, false, 0.0));
  const double limit = take(json_fields::read_number_or(options_json, at, "memory_limit_gib", 0.0, false, 0.0));
  if (limit > 0) options.memory_limit = Bytes::from_gib(limit);
  const std::string schedule = take(json_fields::read_string_or(options_json, at, "schedule", "auto"));
  if (schedule != "auto") options.schedule = take(parse_schedule(schedule));
  options.microbatches = static_cast<int>(take(json_fields::read_integer_or(options_json, at, "microbatches", 0, 0)));
  return options;
}

double outcome_time(const PlannerOutcome& outcome) {
  return outcome.pipedream_time ? outcome.pipedream_time->value : outcome.best.estimate.iteration_time.value;
}

CaseOutcome check_case(const fs::path& file, bool update) {
  const std::string source = file.string();
  json document = take(json_fields::parse_json_text(read_file(source), source));
  const FieldPath root(source);
  take(json_fields::check_format(document, root, "baton.check.v1"));
  const std::string name = take(json_fields::read_string_or(document, root, "name", file.stem().string()));
  const Profile profile = load_profile_file(resolve(take(json_fields::read_string(document, root, "profile")), file));
  const Topology topology = load_topology_file(resolve(take(json_fields::read_string(document, root, "topology")), file));
  auto outcome = make_plan(profile, topology, case_options(document, source));
  if (!outcome) return CaseOutcome{false, fmt::format("FAIL {}: planning failed: {}\n", name, outcome.error().message)};
  const double time = outcome_time(*outcome);
  const std::string stages = stages_to_string(outcome->best.plan.stages);
  const std::string schedule(schedule_name(outcome->best.plan.schedule));
  if (update) {
    document["expected"] = {{"time_per_minibatch_s", time}, {"stages", stages}, {"schedule", schedule}};
    write_file_atomic(source, document.dump(2) + "\n");
    return CaseOutcome{true, fmt::format("updated {}\n", name)};
  }
  const json expected = document.value("expected", json::object());
  const FieldPath at = root.field("expected");
  const double want = take(json_fields::read_number(expected, at, "time_per_minibatch_s", 0.0, true));
  const std::string want_stages = take(json_fields::read_string(expected, at, "stages"));
  const std::string want_schedule = take(json_fields::read_string_or(expected, at, "schedule", schedule));
  const double tolerance = take(json_fields::read_number_or(document.value("tolerance", json::object()),
                                                            root.field("tolerance"), "time_relative", 0.0, false, 1e-9));
  const double moved = time / want - 1.0;
  std::string diff;
  if (std::abs(moved) > tolerance)
    diff += fmt::format("    time      expected {:.9g} s, got {:.9g} s ({:+.3g}%, tolerance {:.3g}%)\n", want, time,
                        100 * moved, 100 * tolerance);
  if (stages != want_stages) diff += fmt::format("    stages    expected {}\n              got      {}\n", want_stages, stages);
  if (schedule != want_schedule) diff += fmt::format("    schedule  expected {}, got {}\n", want_schedule, schedule);
  if (diff.empty()) return CaseOutcome{true, fmt::format("ok   {} ({:.6g} s, {} {})\n", name, time, schedule, stages)};
  return CaseOutcome{false, fmt::format("FAIL {} ({})\n{}", name, source, diff)};
}

int run_check(const CheckArgs& args) {
  if (!fs::is_directory(args.dir)) throw UsageError(fmt::format("{}: not a folder of check cases", args.dir));
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(args.dir))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw UsageError(fmt::format("{}: holds no *.json check cases", args.dir));
  int failed = 0;
  for (const fs::path& file : files) {
    const CaseOutcome outcome = check_case(file, args.update);
    std::fputs(outcome.report.c_str(), stdout);
    failed += outcome.passed ? 0 : 1;
  }
  std::printf("%zu passed, %d failed\n", files.size() - failed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

void add_check_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand("check", "Planner regression: re-plan saved cases and compare");
  cmd->footer(
      "Re-plans every case (*.json, format baton.check.v1) in DIR and compares the time per minibatch\n"
      "(within the case's tolerance) and the chosen split and schedule with the expected ones. Prints a\n"
      "diff for every case that moved and exits 1 if any did. --update rewrites the expectations (read the\n"
      "diff first). Example: baton check tests/planner_cases");
  cmd->add_option("dir", args->dir, "folder of check cases")->required();
  cmd->add_flag("--update", args->update, "write the current results as the expected ones");
  cmd->callback([args, &result] { result.exit_code = run_check(*args); });
}

}  // namespace baton::cli
