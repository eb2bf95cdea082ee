// Shared plumbing of the `baton` command line: reading input files, writing
// outputs whole (or not at all), and turning library Errors into exit code 2.
//
// Contract: a command body throws `UsageError` for bad input; `main` prints its
// message to stderr and exits 2. Outputs go through `write_file_atomic`, which
// writes a temporary file beside the target and renames it, so a failure never
// leaves a half-written file.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/topology.h"

namespace baton::cli {

constexpr int kExitBadInput = 2;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Unwraps a Result or throws UsageError with its message.
template <typename T>
T take(Result<T> result) {
  if (!result) throw UsageError(result.error().message);
  return std::move(result).value();
}
inline void take(const Status& status) {
  if (!status) throw UsageError(status.error().message);
}

std::string read_file(const std::string& path);
// This process's argv, argv[0] first (from /proc/self/cmdline).
std::vector<std::string> command_line();
void write_file_atomic(const std::string& path, const std::string& contents);
// Files to write, as (path, contents).
using OutputFiles = std::vector<std::pair<std::string, std::string>>;
// Several files, each written beside its path first and moved into place only
// once all are written: a path that cannot be written leaves none of them.
void write_files_atomic(const OutputFiles& files);
// `contents` to standard output when `path` is empty or "-", else to the file (write_file_atomic).
void write_output(const std::string& path, const std::string& contents);

Profile load_profile_file(const std::string& path);
Topology load_topology_file(const std::string& path);
Plan load_plan_file(const std::string& path);

// A plan may cut as many stages as the model has layers, and check_plan bounds
// microbatches x stages (kMaxMicrobatchStages): a microbatch count the plans
// a search would try cannot all be simulated with is a UsageError before the
// search starts. `name` is what the user wrote it as ("--microbatches", a
// check case's "case.json: options.microbatches").
void check_planner_microbatches(int64_t microbatches, const Profile& profile, std::string_view name);

// "pipedream,1f1b" -> schedules; an unknown name is a UsageError.
std::vector<Schedule> parse_schedule_list(const std::string& text);

// The flags among `flags` that `cmd`'s command line gave, in that order, and
// the subject of a refusal of them: "--a goes" or "--a, --b go".
std::vector<std::string> given_flags(const CLI::App& cmd, std::initializer_list<const char*> flags);
std::string flags_go(const std::vector<std::string>& flags);

// A --device value: "cpu", "cuda" or "cuda:N". Empty when it is one, else why
// not (CLI11's check() form).
std::string check_device_name(const std::string& name);

// check()s for numeric flags: CLI11 prefixes the flag, so a refusal reads
// "--gpus: must be at least 1, got 0" (not CLI11's "Value 0 not in range
// 0.000000 to 1.79e308"). A value that is no number, or not a finite one
// (inf, nan), is refused likewise.
CLI::Validator at_least(double minimum);                    // value >= minimum
CLI::Validator at_most(double maximum);                     // value <= maximum
CLI::Validator more_than(double bound);                     // value > bound
CLI::Validator in_range(double low, double high);           // low <= value <= high
CLI::Validator above_and_at_most(double low, double high);  // low < value <= high

}  // namespace baton::cli
