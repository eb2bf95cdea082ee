#include "tools/cli_support.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace baton::cli {

std::string read_file(const std::string& path) {
  // A folder opens as a stream of nothing on Linux: say what it is.
  if (std::error_code ec; std::filesystem::is_directory(path, ec))
    throw UsageError(fmt::format("{}: is a folder, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot open for reading", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw UsageError(fmt::format("{}: read failed", path));
  return text.str();
}

std::vector<std::string> command_line() {
  const std::string text = read_file("/proc/self/cmdline");
  std::vector<std::string> args;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\0', begin);
    args.push_back(text.substr(begin, end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return args;
}

void write_output(const std::string& path, const std::string& contents) {
  if (path.empty() || path == "-") {
    std::fputs(contents.c_str(), stdout);
  } else {
    write_file_atomic(path, contents);
  }
}

namespace {

// `contents` into PATH.tmp beside `path` (its folder made); UsageError naming
// `path` when that fails, with nothing left behind.
std::filesystem::path write_temporary(const std::string& path, const std::string& contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw UsageError(fmt::format("{}: cannot create folder: {}", path, ec.message()));
  }
  const fs::path temporary = fs::path(path + ".tmp");
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  if (!out) throw UsageError(fmt::format("{}: cannot open for writing", path));
  out << contents;
  out.flush();
  if (!out) {
    out.close();
    std::remove(temporary.c_str());
    throw UsageError(fmt::format("{}: write failed", path));
  }
  return temporary;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& contents) { write_files_atomic({{path, contents}}); }

void write_files_atomic(const OutputFiles& files) {
  namespace fs = std::filesystem;
  std::vector<fs::path> temporaries;
  const auto remove_temporaries = [&] {
    for (const fs::path& temporary : temporaries) std::remove(temporary.c_str());
  };
  try {
    for (const auto& [path, contents] : files) temporaries.push_back(write_temporary(path, contents));
  } catch (const UsageError&) {
    remove_temporaries();
    throw;
  }
  // Every file is written: move them into place. A rename fails only where
  // the target cannot be replaced (a folder of that name, say).
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    fs::rename(temporaries[i], files[i].first, ec);
    if (ec) {
      temporaries.erase(temporaries.begin(), temporaries.begin() + static_cast<std::ptrdiff_t>(i));
      remove_temporaries();
      throw UsageError(fmt::format("{}: cannot move into place: {}", files[i].first, ec.message()));
    }
  }
}

Profile load_profile_file(const std::string& path) { return take(parse_profile(read_file(path), path)); }

Topology load_topology_file(const std::string& path) { return take(parse_topology(read_file(path), path)); }

std::vector<Schedule> parse_schedule_list(const std::string& text) {
  if (text.empty()) throw UsageError(fmt::format("--schedule: expected one of {}, or a comma list", schedule_names()));
  std::vector<Schedule> schedules;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = text.find(',', begin);
    const std::string name = text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    auto schedule = parse_schedule(name);
    if (!schedule) throw UsageError("--schedule: " + schedule.error().message);
    schedules.push_back(*schedule);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return schedules;
}

Plan load_plan_file(const std::string& path) { return take(parse_plan(read_file(path), path)); }

void check_planner_microbatches(int64_t microbatches, const Profile& profile, std::string_view name) {
  const int64_t most = kMaxMicrobatchStages / std::max(1, profile.num_layers());
  if (microbatches > most)
    throw UsageError(fmt::format(
        "{} {}: at most {} for {} ({} layers, so up to {} stages), to keep microbatches x stages within "
        "the {} pairs baton simulates (about 1 GiB); fewer microbatches show the same steady state",
        name, microbatches, most, profile.model, profile.num_layers(), profile.num_layers(), kMaxMicrobatchStages));
}

std::string check_device_name(const std::string& name) {
  if (name == "cpu" || name == "cuda") return "";
  if (name.starts_with("cuda:") && name.size() > 5 && name.size() < 9 &&
      name.find_first_not_of("0123456789", 5) == std::string::npos)
    return "";
  return fmt::format("'{}' is not a device: cpu, cuda or cuda:N (N a GPU number)", name);
}

std::vector<std::string> given_flags(const CLI::App& cmd, std::initializer_list<const char*> flags) {
  std::vector<std::string> given;
  for (const char* flag : flags)
    if (cmd.count(flag) > 0) given.push_back(flag);
  return given;
}

std::string flags_go(const std::vector<std::string>& flags) {
  return fmt::format("{} {}", fmt::join(flags, ", "), flags.size() == 1 ? "goes" : "go");
}

namespace {

// A check() from a test of the value and what it must be.
CLI::Validator numeric_check(std::function<bool(double)> accepts, std::string must_be) {
  return CLI::Validator(
      [accepts = std::move(accepts), must_be](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value))
          return fmt::format("must be a number {}, got \"{}\"", must_be, text);
        return accepts(value) ? "" : fmt::format("must be {}, got {}", must_be, text);
      },
      must_be);
}

}  // namespace

CLI::Validator at_least(double minimum) {
  return numeric_check([minimum](double v) { return v >= minimum; }, fmt::format("at least {}", minimum));
}

CLI::Validator at_most(double maximum) {
  return numeric_check([maximum](double v) { return v <= maximum; }, fmt::format("at most {}", maximum));
}

CLI::Validator more_than(double bound) {
  return numeric_check([bound](double v) { return v > bound; }, fmt::format("more than {}", bound));
}

CLI::Validator in_range(double low, double high) {
  return numeric_check([low, high](double v) { return v >= low && v <= high; }, fmt::format("in [{}, {}]", low, high));
}

CLI::Validator above_and_at_most(double low, double high) {
  return numeric_check([low, high](double v) { return v > low && v <= high; }, fmt::format("in ({}, {}]", low, high));
}

}  // namespace baton::cli
