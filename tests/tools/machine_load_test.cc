// The machine's load from /proc/stat (tools/machine_load.h): the parser on
// written text, the load between two readings as arithmetic, the warning's
// threshold, and a sample of this machine with a busy thread beside it.
#include "tests/catch_compat.h"

#include <atomic>
#include <string>
#include <thread>

#include "tools/machine_load.h"

using namespace baton;
using namespace baton::cli;

TEST_CASE("parse_proc_stat sums the busy and total ticks of the aggregate cpu line and counts the CPUs",
          "[tools][machine_load]") {
  // Linux's layout: user nice system idle iowait irq softirq steal guest guest_nice.
  const std::string text =
      "cpu  100 5 40 800 20 3 2 10 7 0\n"
      "cpu0 50 2 20 400 10 1 1 5 3 0\n"
      "cpu1 50 3 20 400 10 2 1 5 4 0\n"
      "intr 12345 0 0\n"
      "ctxt 999\n";
  const auto times = parse_proc_stat(text);
  REQUIRE(times.has_value());
  CHECK(times->busy == 100 + 5 + 40 + 3 + 2 + 10);  // guest is already in user
  CHECK(times->total == times->busy + 800 + 20);
  CHECK(times->cpus == 2);
  // The four fields of old kernels are enough; fewer are not a reading.
  const auto old = parse_proc_stat("cpu 10 0 5 85\ncpu0 10 0 5 85\n");
  REQUIRE(old.has_value());
  CHECK(old->busy == 15);
  CHECK(old->total == 100);
  CHECK(old->cpus == 1);
  CHECK_FALSE(parse_proc_stat("cpu 10 0 5\n").has_value());
  CHECK_FALSE(parse_proc_stat("intr 1 2 3\n").has_value());
}

TEST_CASE("load_between is the CPUs times the busy share of the ticks between two readings", "[tools][machine_load]") {
  const CpuTimes before{1000, 4000, 4};
  const CpuTimes after{1300, 4400, 4};
  const MachineLoad load = load_between(before, after, Seconds(0.25));
  CHECK(load.busy_cpus == Approx(4.0 * 300.0 / 400.0));
  CHECK(load.cpus == 4);
  CHECK(load.window.value == 0.25);
  // No tick between the readings: nothing is known to be busy.
  CHECK(load_between(before, before, Seconds(0.25)).busy_cpus == 0.0);
}

TEST_CASE("busy_machine_warning speaks from half a CPU of other work on and names the load", "[tools][machine_load]") {
  CHECK(busy_machine_warning({kBusyCpusWarning - 0.01, 2, Seconds(0.25)}).empty());
  const std::string warning = busy_machine_warning({1.94, 2, Seconds(0.25)});
  CHECK(warning.find("1.9 of 2 CPUs busy with other work (0.25 s sampled)") != std::string::npos);
  CHECK(warning.find("idle machine") != std::string::npos);
  CHECK_FALSE(busy_machine_warning({kBusyCpusWarning, 2, Seconds(0.25)}).empty());
  // After a deadline, the same threshold decides whether the message grows.
  CHECK(busy_after_deadline({0.2, 2, Seconds(0.25)}).empty());
  CHECK(busy_after_deadline({1.5, 2, Seconds(0.25)}) ==
        " (after the ranks ended: 1.5 of 2 CPUs busy with other work (0.25 s sampled); they shared the CPUs with "
        "it)");
}

TEST_CASE("sample_machine_load sees a thread that keeps a CPU busy", "[tools][machine_load]") {
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  const auto load = sample_machine_load(Seconds(0.3));
  stop = true;
  spinner.join();
  REQUIRE(load.has_value());  // Linux: /proc/stat is there
  CHECK(load->cpus == static_cast<int>(std::thread::hardware_concurrency()));
  CHECK(load->busy_cpus <= load->cpus + 1e-9);
  // The spinner alone keeps one CPU busy, less what other runnable work takes
  // from it; whatever takes it is busy too.
  CHECK(load->busy_cpus >= kBusyCpusWarning);
  CHECK_FALSE(busy_machine_warning(*load).empty());
}
