// GPT layout sweep speed: GPT-3 175B (96 layers, h 12288, 96 heads, s 2048,
// global batch 1536, fp16) on topologies/h100_32x8.json (256 H100s), each
// point's layout simulated as given (`baton sweep` without --plan: the
// analogue of a fixed split), over
//   tp 1, 2, 4, 8 x pp 1, 2, 4, 8, 16, 32 x micro-batch 1, 2, 4
//   x recompute none, selective, full x layers per virtual stage 0 (none), 1, 2, 3
// = 864 points with sequence parallelism where t > 1. Points whose layout is
// invalid (layers not divisible among p x v chunks, microbatches not a
// multiple of p when interleaved) come back at once with their error and are
// counted apart: "simulated/s" counts only the points the simulator ran.
// The allocator keeps freed memory, as in the baton CLI (sim/allocator.h).
// Usage: bench_gpt_sweep REPO_ROOT [threads...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "planner/gpt_sweep.h"
#include "sim/allocator.h"

int main(int argc, char** argv) {
  using namespace baton;
  keep_freed_memory();  // as the baton CLI runs a sweep
  const std::string root = argc > 1 ? argv[1] : ".";
  auto topology = parse_topology(bench::read_text(root + "/topologies/h100_32x8.json"), "h100_32x8");
  if (!topology) {
    std::fprintf(stderr, "cannot load topologies/h100_32x8.json from %s\n", root.c_str());
    return 2;
  }
  GptSweepSpec spec;
  spec.model = GptModel{96, 12288, 96, 2048, 50257};
  spec.layout.global_batch = 1536;
  spec.layout.data = 0;  // each point: 256 / (t p)
  spec.layout.sequence_parallel = true;
  spec.axes = {{"tp", {"1", "2", "4", "8"}},
               {"pp", {"1", "2", "4", "8", "16", "32"}},
               {"mbs", {"1", "2", "4"}},
               {"recompute-granularity", {"none", "selective", "full"}},
               {"vpp", {"0", "1", "2", "3"}}};
  std::vector<int> thread_counts;
  for (int a = 2; a < argc; ++a) thread_counts.push_back(std::atoi(argv[a]));
  if (thread_counts.empty()) thread_counts.push_back(1);
  std::printf("| threads | points | simulated | refused | seconds | simulated/s | simulated/s per thread |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int threads : thread_counts) {
    spec.threads = threads;
    const auto start = std::chrono::steady_clock::now();
    auto table = run_gpt_sweep(spec, *topology, [](size_t, size_t) {});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!table) {
      std::fprintf(stderr, "%s\n", table.error().message.c_str());
      return 1;
    }
    size_t simulated = 0;
    for (const auto& row : table->rows) simulated += row[table->column("error")].empty() ? 1 : 0;
    std::printf("| %d | %zu | %zu | %zu | %.3f | %.0f | %.0f |\n", threads, table->rows.size(), simulated,
                table->rows.size() - simulated, seconds, simulated / seconds, simulated / seconds / threads);
  }
  return 0;
}
