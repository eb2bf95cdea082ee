// Simulator speed and memory: simulated actions per second on one core for a
// 64-stage, 1024-microbatch 1F1B program, and peak heap bytes as the program
// grows (it should grow linearly with the number of actions); then every
// flush schedule on 64 devices and 1024 microbatches (128 one-layer chunks,
// two per device, for interleaved-1f1b, zbv and dualpipev), the schedules
// interleaved round by round (each first in turn, best of 3 runs in a round)
// so that a noisy machine slows them alike, each one's actions/s as a ratio
// to 1F1B's in the same round.
//
// Usage: bench_simulator [repeats]   (prints two Markdown tables)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "sim/schedules.h"
#include "sim/simulator.h"

namespace {

// Heap accounting through the global allocation functions.
std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};

void note_allocation(int64_t size) {
  const int64_t live = g_live_bytes.fetch_add(size) + size;
  int64_t peak = g_peak_bytes.load();
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
}

}  // namespace

// Not inlined: inlined into the containers' code, GCC 14 takes the header
// arithmetic for an access outside the caller's object (-Warray-bounds,
// -Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t size) {
  auto* block = static_cast<int64_t*>(std::malloc(size + 16));
  if (block == nullptr) throw std::bad_alloc();
  block[0] = static_cast<int64_t>(size);
  note_allocation(static_cast<int64_t>(size));
  return block + 2;
}
[[gnu::noinline]] void operator delete(void* pointer) noexcept {
  if (pointer == nullptr) return;
  auto* block = static_cast<int64_t*>(pointer) - 2;
  g_live_bytes.fetch_sub(block[0]);
  std::free(block);
}
void operator delete(void* pointer, std::size_t) noexcept { operator delete(pointer); }

namespace {

using namespace baton;

// `stages` devices; a schedule that runs chunks gets 2 per device (2 x stages stages).
Plan uniform_plan(Schedule schedule, int stages, int microbatches, const Topology& topology) {
  Plan plan;
  plan.schedule = schedule;
  if (runs_chunks(schedule)) {
    plan.virtual_stages = 2;
    stages *= 2;
  }
  plan.batches = microbatches;
  plan.microbatch_size = 1;
  for (int s = 0; s < stages; ++s) plan.stages.push_back(StagePlan{LayerRange{s, s + 1}, 1, {}});
  if (!assign_devices(plan, topology)) std::abort();
  return plan;
}

struct Measurement {
  int64_t actions = 0;
  double seconds = 0.0;
  int64_t peak_bytes = 0;
};

Measurement measure(int stages, int microbatches, int repeats, Schedule schedule = Schedule::kOneFOneB) {
  const Topology topology = make_flat_topology(stages, 100.0, Seconds::from_us(5));
  const Profile profile = make_uniform_profile(runs_chunks(schedule) ? 2 * stages : stages, Seconds::from_ms(1),
                                               Seconds::from_ms(2), Bytes(1 << 20), Bytes(1 << 24));
  const Plan plan = uniform_plan(schedule, stages, microbatches, topology);
  const Program program = build_program(plan);
  const auto costs = stage_costs(profile, plan, topology);
  SimOptions options;
  options.record_trace = false;
  Measurement best;
  best.seconds = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const int64_t before = g_live_bytes.load();
    g_peak_bytes.store(before);
    const auto start = std::chrono::steady_clock::now();
    auto sim = simulate_program(program, costs, topology, 1, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!sim) std::abort();
    best.actions = program.num_actions();
    best.seconds = std::min(best.seconds, seconds);
    best.peak_bytes = g_peak_bytes.load() - before;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  std::printf(
      "| stages | microbatches | actions | best time (s) | actions/s | peak heap (MiB) | heap bytes/action |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int microbatches : {128, 256, 512, 1024, 2048}) {
    const Measurement m = measure(64, microbatches, repeats);
    std::printf("| 64 | %d | %lld | %.4f | %.3g | %.1f | %.1f |\n", microbatches, static_cast<long long>(m.actions),
                m.seconds, double(m.actions) / m.seconds, double(m.peak_bytes) / (1 << 20),
                double(m.peak_bytes) / double(m.actions));
  }
  const std::vector<Schedule> schedules = {Schedule::kOneFOneB, Schedule::kGPipe,           Schedule::kZbH1,
                                           Schedule::kZbH2,     Schedule::kInterleaved1F1B, Schedule::kZbV,
                                           Schedule::kDualPipeV};
  std::vector<std::vector<double>> ratios(schedules.size());
  std::vector<Measurement> best(schedules.size());
  for (int round = 0; round < repeats; ++round) {
    std::vector<double> rate(schedules.size());
    for (size_t k = 0; k < schedules.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % schedules.size();  // each goes first in turn
      const Measurement m = measure(64, 1024, 3, schedules[i]);
      rate[i] = double(m.actions) / m.seconds;
      if (round == 0 || m.seconds < best[i].seconds) best[i] = m;
    }
    for (size_t i = 0; i < schedules.size(); ++i) ratios[i].push_back(rate[i] / rate[0]);
  }
  std::printf(
      "\n| schedule (64 devices, 1024 microbatches; 2 chunks per device where the schedule runs chunks) | actions "
      "| best actions/s | vs 1f1b, per round: median (min-max) |\n");
  std::printf("|---|---|---|---|\n");
  for (size_t i = 0; i < schedules.size(); ++i) {
    std::vector<double> r = ratios[i];
    std::sort(r.begin(), r.end());
    std::printf("| %s | %lld | %.3g | %.2f (%.2f-%.2f) |\n", std::string(schedule_name(schedules[i])).c_str(),
                static_cast<long long>(best[i].actions), double(best[i].actions) / best[i].seconds, r[r.size() / 2],
                r.front(), r.back());
  }
  return 0;
}
