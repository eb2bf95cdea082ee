// Executor overhead: what the interpreter itself costs per action
// (scheduling, bookkeeping, stashing, span recording, in-process transfers),
// measured against the compute it ran.
//
// For every worker the executor accounts loop time (its action loop),
// compute (the bodies of F, B and STEP: tensor work, including data
// generation and the loss) and waiting (blocked in RECV or in STEP on the
// all-reduce). Overhead = loop - compute - waiting, summed over workers and
// divided by the actions they ran. The same from thread CPU time,
// loop_cpu - compute_cpu, counts only what the workers' threads consumed: it
// leaves out the time the OS ran something else (other workers, other
// processes), which the wall-clock figure includes whenever runnable threads
// outnumber cores. Each configuration runs once to warm up
// (allocator, LibTorch's lazy initialisation) and is then measured over
// `steps` iterations, with one intra-op thread per process.
//
// Usage: bench_executor [steps]   (prints a Markdown table; default 10 steps)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#if BATON_HAVE_EXEC
#include "exec/executor.h"
#endif

namespace {

#if BATON_HAVE_EXEC

using namespace baton;

struct Config {
  const char* label;
  const char* model;
  const char* stages;
  Schedule schedule;
  int microbatches;
  int microbatch_size;
};

Plan plan_of(const Config& config) {
  Plan plan;
  plan.model = config.model;
  plan.schedule = config.schedule;
  plan.batches = config.microbatches;
  plan.microbatch_size = config.microbatch_size;
  auto stages = parse_stages(config.stages);
  if (!stages) std::abort();
  plan.stages = *stages;
  return plan;
}

void measure(const Config& config, int steps) {
  exec::TrainOptions options;
  options.model = config.model;
  options.steps = 1;
  options.learning_rate = 0.01;
  const Plan plan = plan_of(config);
  if (!exec::run_threads(plan, options)) std::abort();  // warm-up
  options.steps = steps;
  auto run = exec::run_threads(plan, options);
  if (!run) {
    std::fprintf(stderr, "%s: %s\n", config.label, run.error().message.c_str());
    std::exit(1);
  }
  int64_t actions = 0;
  double compute = 0.0, waiting = 0.0, overhead = 0.0, overhead_cpu = 0.0;
  for (const exec::WorkerStats& w : run->workers) {
    actions += w.actions;
    compute += w.compute.value;
    waiting += w.waiting.value;
    overhead += w.overhead().value;
    overhead_cpu += w.overhead_cpu().value;
  }
  double wall = 0.0;
  for (const exec::StepReport& step : run->steps) wall += step.wall.value;
  const double per_action = 1e6 / static_cast<double>(actions);
  std::printf("| %s | %s | %lld | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f%% |\n", config.label,
              std::string(schedule_name(config.schedule)).c_str(), static_cast<long long>(actions), wall * 1e3 / steps,
              compute * per_action, waiting * per_action, overhead * per_action, overhead_cpu * per_action,
              100.0 * overhead_cpu / compute);
}

#endif  // BATON_HAVE_EXEC

}  // namespace

int main(int argc, char** argv) {
#if BATON_HAVE_EXEC
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  const Config configs[] = {
      {"mlp, 1 worker, M=32 x 8", "mlp", "0-6", baton::Schedule::kOneFOneB, 32, 8},
      {"mlp, 2 stages, M=32 x 8", "mlp", "0-3,3-6", baton::Schedule::kOneFOneB, 32, 8},
      {"mlp, 2 stages, M=32 x 8", "mlp", "0-3,3-6", baton::Schedule::kPipeDream, 32, 8},
      {"gpt-mini, 1 worker, M=16 x 8", "gpt-mini", "0-6", baton::Schedule::kOneFOneB, 16, 8},
      {"gpt-mini, 2 stages, M=16 x 8", "gpt-mini", "0-3,3-6", baton::Schedule::kGPipe, 16, 8},
      {"gpt-mini, 2 stages, M=16 x 8", "gpt-mini", "0-3,3-6", baton::Schedule::kPipeDream, 16, 8},
      {"gpt-mini, 2 replicas, M=16 x 8", "gpt-mini", "0-6x2", baton::Schedule::kDataParallel, 16, 8},
  };
  std::printf("Executor overhead, threads backend, %d measured steps after one warm-up step\n\n", steps);
  std::printf(
      "| configuration | schedule | actions | wall/step (ms) | compute/action (us) | "
      "waiting/action (us) | overhead/action, wall (us) | overhead/action, CPU (us) | "
      "CPU overhead/compute |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Config& config : configs) measure(config, steps);
  return 0;
#else
  (void)argc;
  (void)argv;
  std::printf("bench_executor: built without LibTorch (no executor); nothing to measure\n");
  return 0;
#endif
}
