#include "tools/machine_load.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace baton::cli {

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
  std::optional<CpuTimes> out;
  int cpus = 0;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (name.size() > 3 && name.rfind("cpu", 0) == 0) {
      ++cpus;
      continue;
    }
    if (name != "cpu") continue;
    std::vector<double> ticks;
    for (double value = 0.0; fields >> value;) ticks.push_back(value);
    if (ticks.size() < 4) return std::nullopt;
    ticks.resize(8, 0.0);  // user nice system idle iowait irq softirq steal
    CpuTimes times;
    times.busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7];
    times.total = times.busy + ticks[3] + ticks[4];
    out = times;
  }
  if (out) out->cpus = cpus;
  return out;
}

MachineLoad load_between(const CpuTimes& before, const CpuTimes& after, Seconds window) {
  MachineLoad load;
  load.cpus = after.cpus;
  load.window = window;
  const double total = after.total - before.total;
  if (total > 0.0) load.busy_cpus = after.cpus * (after.busy - before.busy) / total;
  return load;
}

namespace {

std::optional<CpuTimes> read_proc_stat() {
  std::ifstream file("/proc/stat");
  if (!file) return std::nullopt;
  std::ostringstream text;
  text << file.rdbuf();
  return parse_proc_stat(text.str());
}

}  // namespace

std::optional<MachineLoad> sample_machine_load(Seconds window) {
  const auto before = read_proc_stat();
  if (!before) return std::nullopt;
  std::this_thread::sleep_for(std::chrono::duration<double>(window.value));
  const auto after = read_proc_stat();
  if (!after || after->total <= before->total || after->cpus <= 0) return std::nullopt;
  return load_between(*before, *after, window);
}

std::string describe_load(const MachineLoad& load) {
  return fmt::format("{:.1f} of {} CPUs busy with other work ({:g} s sampled)", load.busy_cpus, load.cpus,
                     load.window.value);
}

std::string busy_machine_warning(const MachineLoad& load) {
  if (!is_busy(load)) return "";
  return fmt::format(
      "this machine is busy: {}. The ranks share the CPUs with it, so what is measured says more about the other "
      "work than about the plan; measure on an idle machine",
      describe_load(load));
}

std::string busy_after_deadline(const MachineLoad& load) {
  if (!is_busy(load)) return "";
  return fmt::format(" (after the ranks ended: {}; they shared the CPUs with it)", describe_load(load));
}

}  // namespace baton::cli
