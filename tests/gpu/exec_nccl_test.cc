// The nccl backend (run --backend nccl): one process per worker, rank r on GPU
// r, activations, gradients and all-reduces over NCCL (exec/cuda/nccl_links.h),
// through the `baton` binary as a user starts it. Each run must end with the
// weights of the single-process reference trained on GPU 0 (fp32, relative
// 1e-5) and record one span per action. Exits 77 (ctest: skipped) with fewer
// than two GPUs: NCCL refuses two ranks on one GPU.
#define CATCH_CONFIG_RUNNER
#include "tests/catch_compat.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exec/fault.h"
#include "sim/schedules.h"
#include "sim/trace_reader.h"
#include "tests/cli/cli_runner.h"
#include "tests/exec/exec_test_support.h"

namespace baton::testing {

TEST_CASE("nccl ranks, one per GPU, reach the weights of the reference on the GPU", "[gpu][nccl]") {
  struct Case {
    const char* name;
    const char* stages;
    Schedule schedule;
    int microbatches;
  };
  const Case cases[] = {{"nccl-1f1b", "0-3,3-6", Schedule::kOneFOneB, 4},
                        {"nccl-gpipe", "0-2,2-6", Schedule::kGPipe, 4},
                        {"nccl-dp", "0-6x2", Schedule::kDataParallel, 4},
                        {"nccl-zb-h1", "0-3,3-6", Schedule::kZbH1, 6},
                        {"nccl-interleaved", "0-2,2-3,3-5,5-6", Schedule::kInterleaved1F1B, 4},
                        {"nccl-dualpipev", "0-2,2-3,3-5,5-6", Schedule::kDualPipeV, 4},
                        {"nccl-pipedream", "0-3,3-6", Schedule::kPipeDream, 4}};
  exec::TrainOptions options = train_options("mlp", 2);
  options.device = "cuda";
  for (const Case& c : cases) {
    INFO(c.name);
    const std::filesystem::path dir = scratch_dir(c.name);
    Plan plan = exec_plan(c.stages, c.schedule, c.microbatches);
    if (runs_chunks(c.schedule)) plan.virtual_stages = 2;
    const std::string plan_path = (dir / "plan.json").string();
    std::ofstream(plan_path) << plan_to_json(plan).dump(2);
    const std::string weights_path = (dir / "weights.json").string();
    const std::string trace_path = (dir / "trace.json").string();
    const CliRun run = run_baton(
        fmt::format("run --plan '{}' --model mlp --steps {} --lr {} --seed {} --timeout 60 --backend nccl --nproc {} "
                    "--save-weights '{}' --trace '{}'",
                    plan_path, options.steps, options.learning_rate, options.seed, plan.num_workers(), weights_path,
                    trace_path),
        c.name);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("backend nccl on cuda:0") != std::string::npos);
    auto weights = exec::weights_from_json(nlohmann::json::parse(slurp(weights_path)), weights_path);
    REQUIRE(weights.ok());
    auto reference = exec::train_reference(plan, options);
    INFO((reference ? std::string() : reference.error().message));
    REQUIRE(reference.ok());
    CHECK(exec::max_relative_error(*weights, reference->weights) <= kWeightTolerance);
    auto trace = parse_chrome_trace(slurp(trace_path), trace_path);
    REQUIRE(trace.ok());
    CHECK(static_cast<int64_t>(trace->spans.size()) == build_program(plan).num_actions());
  }
}

TEST_CASE("a silent or dead nccl rank ends the run within a bound set by --timeout, naming it", "[gpu][nccl]") {
  const std::filesystem::path dir = scratch_dir("nccl-faults");
  const std::string plan_path = (dir / "plan.json").string();
  std::ofstream(plan_path) << plan_to_json(exec_plan("0-3,3-6", Schedule::kOneFOneB, 4)).dump(2);
  const std::string command =
      fmt::format("run --plan '{}' --model mlp --steps 3 --backend nccl --nproc 2 --timeout 5", plan_path);
  // Starting two ranks with CUDA, one timeout, the launcher's 5 s of grace, slack.
  constexpr double kBoundS = 60.0;
  for (const char* kind : {"hang", "crash"}) {
    INFO(kind);
    ::setenv(exec::kFaultVariable, fmt::format("rank=1,step=1,kind={}", kind).c_str(), 1);
    const auto start = std::chrono::steady_clock::now();
    const CliRun run = run_baton(command, "nccl-faults");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ::unsetenv(exec::kFaultVariable);
    INFO(run.err);
    CHECK(run.exit_code == 1);
    CHECK(seconds < kBoundS);
    // Rank 0 waits for rank 1's gradients: NCCL reports rank 1 gone, or the wait runs out.
    CHECK(run.err.find("run: rank 0: worker 0, ") != std::string::npos);
    CHECK(run.err.find("from rank 1") != std::string::npos);
    const bool named = run.err.find("rank 1 is not responding") != std::string::npos ||
                       run.err.find("rank 1 is gone") != std::string::npos;
    CHECK(named);
  }
}

}  // namespace baton::testing

int main(int argc, char** argv) {
  if (baton::exec::cuda_device_count() < 2) {
    std::printf("fewer than 2 CUDA GPUs visible to this build: the nccl backend is not run (skipped)\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
