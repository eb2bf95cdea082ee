// How much of this machine's CPU other work takes, from /proc/stat.
//
// Ranks on a busy machine share its CPUs with the other work: what they
// measure says more about that work than about the plan, and Gloo's I/O
// threads, under SCHED_IDLE on an idle machine, get almost no CPU there (two
// busy loops beside a calibration on the 2-core machine: 61-65 s instead of
// 2-3 s; bench/RESULTS.md, "Gloo ranks on a busy machine"). So the local
// launcher samples the load before it starts ranks and picks the I/O threads'
// class by it (tools/rank_launch.h), validate and calibrate warn when it is
// high, and ranks that ran past their deadline are reported with the load the
// machine had then.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sim/units.h"

namespace baton::cli {

// The aggregate "cpu" line of /proc/stat, in clock ticks summed over the CPUs:
// busy = user + nice + system + irq + softirq + steal (guest time is already
// in user; a stolen tick is one this machine's CPUs did not get), total =
// busy + idle + iowait. `cpus` counts the per-CPU lines ("cpu0", "cpu1", ...).
struct CpuTimes {
  double busy = 0.0;
  double total = 0.0;
  int cpus = 0;
};
// nullopt when the text has no aggregate "cpu" line of at least the four
// fields Linux has always written (user nice system idle).
std::optional<CpuTimes> parse_proc_stat(std::string_view text);

// CPUs kept busy between two readings: cpus * (busy_b - busy_a) / (total_b - total_a).
struct MachineLoad {
  double busy_cpus = 0.0;
  int cpus = 0;
  Seconds window;
};
MachineLoad load_between(const CpuTimes& before, const CpuTimes& after, Seconds window);

// Reads /proc/stat, sleeps `window`, reads it again: the CPUs other processes
// kept busy meanwhile (this one sleeps). nullopt where /proc/stat is unreadable
// (not Linux) or no tick passed.
std::optional<MachineLoad> sample_machine_load(Seconds window = Seconds(0.25));

// Busy: half a CPU or more of other work. The one threshold for the warning,
// the deadline's note and the launcher's choice of the Gloo I/O class.
constexpr double kBusyCpusWarning = 0.5;
inline bool is_busy(const MachineLoad& load) { return load.busy_cpus >= kBusyCpusWarning; }
// When busy: a warning that names the load, what it does to measurements on
// this machine, and what to do ("" otherwise).
std::string busy_machine_warning(const MachineLoad& load);

// For ranks that ran past their deadline, sampled after they ended: at half a
// CPU or more of other work, " (after the ranks ended: <load>; ...)" to append
// to the launcher's message ("" below it).
std::string busy_after_deadline(const MachineLoad& load);

// "1.9 of 2 CPUs busy with other work (0.25 s sampled)"
std::string describe_load(const MachineLoad& load);

}  // namespace baton::cli
