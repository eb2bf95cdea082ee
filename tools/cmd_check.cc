// `baton check CASE|DIR...`: planner regression. Every case named (a folder
// stands for its *.json files) names a profile, a topology, planner options
// and the expected result; the case is planned again and compared.
//
// Case format `baton.check.v1`:
//   {"format": "baton.check.v1", optional "name": str (default: the file's stem),
//    "profile": path, "topology": path        (see resolve: beside the case file, in a folder
//                                               above it, or in the current directory),
//    optional "options": {"cost_model", "straight", "activation_compression", "memory_limit_gib",
//                "schedule", "microbatches"}   (all optional; the same meaning as `baton plan`'s),
//    "expected": {"time_per_minibatch_s": num, "stages": "0-13x15,13-39x1", optional "schedule": str},
//    optional "tolerance": {"time_relative": num}}     (default 1e-9)
// or, for a GPT layout, "gpt": {...} instead of "profile" and "options", and
// "expected": {"iteration_time_s": num, "layout": str} (tools/check_gpt.h).
// These are all the keys: a case with any other is refused (exit 2), naming
// the file, the object and the key. Every case, with its profile and
// topology, is read before the first is planned, so a refused case leaves
// every file as it was, with --update too (which rewrites "expected" only and
// needs none there).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/planner.h"
#include "sim/json_fields.h"
#include "sim/topology.h"
#include "tools/check_gpt.h"
#include "tools/cli_support.h"
#include "tools/commands.h"

namespace baton::cli {

namespace {

namespace fs = std::filesystem;
using json_fields::FieldPath;
using nlohmann::json;

struct CheckArgs {
  std::vector<std::string> paths;
  bool update = false;
};

struct CaseOutcome {
  bool passed = true;
  std::string report;
};

struct Expectation {
  double time_per_minibatch_s = 0.0;  // a GPT case: iteration_time_s
  std::string stages;                 // a GPT case: its layout
  std::string schedule;               // empty: any
};

// One case file, read and checked whole before any case is planned, so that
// a refused case leaves every file as it was (`--update` included).
struct CheckCase {
  std::string source;
  json document;  // rewritten by --update, which replaces "expected" only
  std::string name;
  Profile profile;
  Topology topology;
  PlannerOptions options;
  std::optional<GptCheck> gpt;          // a GPT case (no profile, no options)
  std::optional<Expectation> expected;  // read unless updating
  double tolerance = 1e-9;
};

// A case's relative path is looked up beside the case file, then in each
// folder above it (so the shipped cases, which name their files from the
// repository root, work from any directory), then in the current directory.
// An absolute path is taken as it is. Error when none of these holds it.
std::string resolve(const std::string& path, const fs::path& case_file, const FieldPath& at) {
  if (fs::path(path).is_absolute()) return path;
  for (fs::path dir = fs::absolute(case_file).parent_path();; dir = dir.parent_path()) {
    if (fs::exists(dir / path)) return (dir / path).string();
    if (dir == dir.parent_path()) break;
  }
  if (fs::exists(path)) return path;
  throw UsageError(at.error("is found neither beside the case file, nor in a folder above it, nor in the current "
                            "directory",
                            path)
                       .message);
}

// The object at `name`, checked to hold only `known` keys; nullptr when absent.
const json* read_section(const json& document, const FieldPath& root, const char* name,
                         std::initializer_list<std::string_view> known) {
  auto it = document.find(name);
  if (it == document.end()) return nullptr;
  take(json_fields::check_object(*it, root.field(name)));
  take(json_fields::check_known_keys(*it, root.field(name), known));
  return &*it;
}

PlannerOptions case_options(const json& document, const FieldPath& root) {
  PlannerOptions options;
  const json* section = read_section(
      document, root, "options",
      {"cost_model", "straight", "activation_compression", "memory_limit_gib", "schedule", "microbatches"});
  if (section == nullptr) return options;
  const json& options_json = *section;
  const FieldPath at = root.field("options");
  const std::string cost_model = take(json_fields::read_string_or(options_json, at, "cost_model", "baton"));
  auto parsed_model = parse_cost_model(cost_model);
  if (!parsed_model) throw UsageError(at.field("cost_model").error("must be baton or pipedream", cost_model).message);
  options.cost_model = *parsed_model;
  if (options_json.contains("straight")) {
    if (!options_json["straight"].is_boolean())
      throw UsageError(at.field("straight").error("must be true or false", options_json["straight"]).message);
    options.straight = options_json["straight"].get<bool>();
  }
  options.activation_compression =
      take(json_fields::read_number_or(options_json, at, "activation_compression", 1.0, false, 0.0));
  const double limit = take(json_fields::read_number_or(options_json, at, "memory_limit_gib", 0.0, false, 0.0));
  if (limit > kMaxDeviceMemoryGib) {
    throw UsageError(at.field("memory_limit_gib")
                         .error(fmt::format("must be <= {}", kMaxDeviceMemoryGib), options_json["memory_limit_gib"])
                         .message);
  }
  if (limit > 0) options.memory_limit = Bytes::from_gib(limit);
  const std::string schedule = take(json_fields::read_string_or(options_json, at, "schedule", "auto"));
  if (schedule != "auto") {
    auto parsed = parse_schedule(schedule);
    if (!parsed)
      throw UsageError(at.field("schedule").error(fmt::format("must be auto, {}", schedule_names()), schedule).message);
    options.schedule = *parsed;
  }
  // Held to the simulator's pairs here; against the case's model in load_case.
  options.microbatches = static_cast<int>(
      take(json_fields::read_integer_or(options_json, at, "microbatches", 0, 0, kMaxMicrobatchStages)));
  return options;
}

Expectation case_expectation(const json& document, const FieldPath& root) {
  const json* expected = read_section(document, root, "expected", {"time_per_minibatch_s", "stages", "schedule"});
  const FieldPath at = root.field("expected");
  if (expected == nullptr) throw UsageError(at.error("is missing (`baton check --update` writes it)").message);
  Expectation expectation;
  expectation.time_per_minibatch_s = take(json_fields::read_number(*expected, at, "time_per_minibatch_s", 0.0, true));
  expectation.stages = take(json_fields::read_string(*expected, at, "stages"));
  expectation.schedule = take(json_fields::read_string_or(*expected, at, "schedule", ""));
  return expectation;
}

Expectation gpt_expectation(const json& document, const FieldPath& root) {
  const json* expected = read_section(document, root, "expected", {"iteration_time_s", "layout"});
  const FieldPath at = root.field("expected");
  if (expected == nullptr) throw UsageError(at.error("is missing (`baton check --update` writes it)").message);
  Expectation expectation;
  expectation.time_per_minibatch_s = take(json_fields::read_number(*expected, at, "iteration_time_s", 0.0, true));
  expectation.stages = take(json_fields::read_string(*expected, at, "layout"));
  return expectation;
}

double case_tolerance(const json& document, const FieldPath& root) {
  const json* tolerance = read_section(document, root, "tolerance", {"time_relative"});
  if (tolerance == nullptr) return 1e-9;
  return take(json_fields::read_number_or(*tolerance, root.field("tolerance"), "time_relative", 0.0, false, 1e-9));
}

CheckCase load_case(const fs::path& file, bool update) {
  CheckCase c;
  c.source = file.string();
  c.document = take(json_fields::parse_json_text(read_file(c.source), c.source));
  const FieldPath root(c.source);
  take(json_fields::check_object(c.document, root));
  take(json_fields::check_format(c.document, root, "baton.check.v1"));
  take(json_fields::check_known_keys(
      c.document, root, {"format", "name", "profile", "gpt", "topology", "options", "expected", "tolerance"}));
  c.name = take(json_fields::read_string_or(c.document, root, "name", file.stem().string()));
  c.topology = load_topology_file(
      resolve(take(json_fields::read_string(c.document, root, "topology")), file, root.field("topology")));
  c.tolerance = case_tolerance(c.document, root);
  if (c.document.contains("gpt")) {
    if (c.document.contains("profile") || c.document.contains("options"))
      throw UsageError(root.error("has \"gpt\" and \"profile\" or \"options\": a GPT case pins its layout in "
                                  "gpt.pinned")
                           .message);
    c.gpt = read_gpt_check(c.document["gpt"], root.field("gpt"));
    if (!update) c.expected = gpt_expectation(c.document, root);
    return c;
  }
  c.profile = load_profile_file(
      resolve(take(json_fields::read_string(c.document, root, "profile")), file, root.field("profile")));
  c.options = case_options(c.document, root);
  check_planner_microbatches(c.options.microbatches, c.profile, c.source + ": options.microbatches");
  if (!update) c.expected = case_expectation(c.document, root);
  return c;
}

double outcome_time(const PlannerOutcome& outcome) {
  return outcome.pipedream_time ? outcome.pipedream_time->value : outcome.best.estimate.iteration_time.value;
}

// The time, split (or layout) and schedule a case gives now; Error when it cannot be planned.
struct Planned {
  double time = 0.0;
  std::string stages;
  std::string schedule;
};

Result<Planned> plan_case(const CheckCase& c) {
  if (c.gpt) {
    auto found = plan_gpt_check(*c.gpt, c.topology);
    if (!found) return found.error();
    return Planned{found->iteration_time_s, found->layout, ""};
  }
  auto outcome = make_plan(c.profile, c.topology, c.options);
  if (!outcome) return outcome.error();
  return Planned{outcome_time(*outcome), stages_to_string(outcome->best.plan.stages),
                 std::string(schedule_name(outcome->best.plan.schedule))};
}

CaseOutcome check_case(CheckCase& c) {
  auto outcome = plan_case(c);
  if (!outcome)
    return CaseOutcome{false, fmt::format("FAIL {}: planning failed: {}\n", c.name, outcome.error().message)};
  const double time = outcome->time;
  const std::string& stages = outcome->stages;
  const std::string& schedule = outcome->schedule;
  // A plan without a finite, positive time is no expectation to keep (JSON
  // would hold null, which the next check refuses) nor one to compare with.
  if (!(std::isfinite(time) && time > 0))
    return CaseOutcome{false,
                       fmt::format("FAIL {}: the plan ({}) has no positive, finite time per iteration ({}); nothing "
                                   "written\n",
                                   c.name, stages, time)};
  if (!c.expected) {
    c.document["expected"] = c.gpt ? json{{"iteration_time_s", time}, {"layout", stages}}
                                   : json{{"time_per_minibatch_s", time}, {"stages", stages}, {"schedule", schedule}};
    write_file_atomic(c.source, c.document.dump(2) + "\n");
    return CaseOutcome{true, fmt::format("updated {}\n", c.name)};
  }
  const Expectation& want = *c.expected;
  const std::string want_schedule = want.schedule.empty() ? schedule : want.schedule;
  const double moved = time / want.time_per_minibatch_s - 1.0;
  std::string diff;
  if (std::abs(moved) > c.tolerance)
    diff += fmt::format("    time      expected {:.9g} s, got {:.9g} s ({:+.3g}%, tolerance {:.3g}%)\n",
                        want.time_per_minibatch_s, time, 100 * moved, 100 * c.tolerance);
  if (stages != want.stages)
    diff += fmt::format("    {}    expected {}\n              got      {}\n", c.gpt ? "layout" : "stages", want.stages,
                        stages);
  if (schedule != want_schedule) diff += fmt::format("    schedule  expected {}, got {}\n", want_schedule, schedule);
  if (diff.empty())
    return CaseOutcome{
        true, fmt::format("ok   {} ({:.6g} s, {}{})\n", c.name, time, schedule.empty() ? "" : schedule + " ", stages)};
  return CaseOutcome{false, fmt::format("FAIL {} ({})\n{}", c.name, c.source, diff)};
}

// The case files named: each folder's *.json in name order, each file as
// given. All are read before any is re-planned, so a bad one fails at once.
std::vector<fs::path> case_files(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& path : paths) {
    if (fs::is_regular_file(path)) {
      files.emplace_back(path);
      continue;
    }
    if (!fs::is_directory(path))
      throw UsageError(fmt::format("{}: neither a check case file nor a folder of them", path));
    std::vector<fs::path> in_folder;
    for (const auto& entry : fs::directory_iterator(path))
      if (entry.path().extension() == ".json") in_folder.push_back(entry.path());
    if (in_folder.empty()) throw UsageError(fmt::format("{}: holds no *.json check cases", path));
    std::sort(in_folder.begin(), in_folder.end());
    files.insert(files.end(), in_folder.begin(), in_folder.end());
  }
  return files;
}

int run_check(const CheckArgs& args) {
  const std::vector<fs::path> files = case_files(args.paths);
  std::vector<CheckCase> cases;
  for (const fs::path& file : files) cases.push_back(load_case(file, args.update));
  int failed = 0;
  for (CheckCase& c : cases) {
    const CaseOutcome outcome = check_case(c);
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
      "Re-plans every case (format baton.check.v1) named: a folder stands for its *.json files. Compares\n"
      "the time per minibatch (within the case's tolerance) and the chosen split and schedule with the\n"
      "expected ones. Prints a diff for every case that moved and exits 1 if any did. --update rewrites\n"
      "the expectations (read the diff first). Examples: baton check tests/planner_cases;\n"
      "baton check tests/planner_cases/vgg16_b_zbv_m16.json\n\n"
      "A case's \"profile\" and \"topology\" paths, unless absolute, are looked up beside the case file,\n"
      "then in each folder above it, then in the current directory: the shipped cases name theirs from\n"
      "the repository root (\"traces/...\", \"topologies/...\") and run from any directory.");
  cmd->add_option("cases", args->paths, "check case files, or folders of them")->required();
  cmd->add_flag("--update", args->update, "write the current results as the expected ones");
  cmd->callback([args, &result] { result.exit_code = run_check(*args); });
}

}  // namespace baton::cli
