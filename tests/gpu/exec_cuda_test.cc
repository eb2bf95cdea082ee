// The executor on a GPU (TrainOptions::device "cuda"): the threads backend with
// every worker on GPU 0, each on its own CUDA stream, against the
// single-process reference trained on the same GPU: every schedule the CPU
// executor runs must end with the same weights (fp32, relative 1e-5, as
// tests/exec/threads_equivalence_test.cc holds the CPU runs). Then what CUDA
// events time: spans on one time axis, each worker's compute spans in stream
// order, and the accounting equal to the spans. Exits 77 (ctest: skipped)
// where no GPU is visible or the build has no CUDA.
#define CATCH_CONFIG_RUNNER
#include "tests/catch_compat.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "sim/schedules.h"
#include "tests/cli/cli_runner.h"
#include "tests/exec/exec_test_support.h"

namespace baton::testing {
namespace {

exec::TrainOptions cuda_options(const std::string& model, int steps, double learning_rate = 0.1) {
  exec::TrainOptions options = train_options(model, steps, learning_rate);
  options.device = "cuda";
  return options;
}

double error_against_reference(const Plan& plan, const exec::TrainOptions& options) {
  auto run = exec::run_threads(plan, options);
  INFO((run ? std::string() : run.error().message));
  REQUIRE(run.ok());
  CHECK(run->device.starts_with("cuda:0"));
  auto reference = exec::train_reference(plan, options);
  INFO((reference ? std::string() : reference.error().message));
  REQUIRE(reference.ok());
  REQUIRE(run->steps.size() == reference->mean_loss.size());
  for (size_t s = 0; s < run->steps.size(); ++s)
    CHECK(run->steps[s].mean_loss == Approx(reference->mean_loss[s]).epsilon(1e-5));
  return exec::max_relative_error(run->weights, reference->weights);
}

}  // namespace

TEST_CASE("every schedule on one GPU equals the single-process reference on that GPU", "[gpu]") {
  struct Case {
    const char* stages;
    Schedule schedule;
    int virtual_stages;
    int microbatches;
  };
  const Case cases[] = {
      {"0-3,3-6", Schedule::kGPipe, 0, 4},         {"0-1,1-3,3-5,5-6", Schedule::kOneFOneB, 0, 4},
      {"0-3x2,3-6", Schedule::kOneFOneB, 0, 4},    {"0-6x2", Schedule::kDataParallel, 0, 4},
      {"0-2,2-4,4-6", Schedule::kZbH1, 0, 6},      {"0-2x2,2-4,4-6x2", Schedule::kZbH2, 0, 8},
      {"0-2,2-4,4-6", Schedule::kPipeDream, 0, 6}, {"0-1,1-2,2-3,3-4,4-5,5-6", Schedule::kInterleaved1F1B, 3, 4},
      {"0-2,2-3,3-5,5-6", Schedule::kZbV, 2, 4},   {"0-2x2,2-3x2,3-5x2,5-6x2", Schedule::kDualPipeV, 2, 8},
  };
  for (const Case& c : cases) {
    Plan plan = exec_plan(c.stages, c.schedule, c.microbatches);
    if (c.virtual_stages > 0) plan.virtual_stages = c.virtual_stages;
    INFO(schedule_name(c.schedule) << " " << c.stages << " M=" << c.microbatches);
    CHECK(error_against_reference(plan, cuda_options("mlp", 3)) <= kWeightTolerance);
  }
  // Convolutions (cuDNN) and attention with integer tokens.
  CHECK(error_against_reference(exec_plan("0-2,2-6", Schedule::kGPipe, 3, 2, "vgg-mini"),
                                cuda_options("vgg-mini", 2, 0.02)) <= kWeightTolerance);
  CHECK(error_against_reference(exec_plan("0-2,2-4,4-6", Schedule::kOneFOneB, 4, 2, "gpt-mini"),
                                cuda_options("gpt-mini", 2)) <= kWeightTolerance);
}

// On a GPU the samples are made one iteration ahead (exec/sample_loader.h): a
// run resumed at step 2 finds none made for it and must make step 2's at once,
// then run ahead again, and end where the uninterrupted run ends.
TEST_CASE("a GPU run resumed from its checkpoint continues where it stopped", "[gpu]") {
  const std::filesystem::path dir = scratch_dir("gpu-resume");
  const Plan plan = exec_plan("0-3,3-6", Schedule::kOneFOneB, 4);
  const auto [uninterrupted, resumed] = run_and_resume_at_two(plan, cuda_options("mlp", 4), dir.string());
  CHECK(resumed.steps[1].mean_loss == Approx(uninterrupted.steps[3].mean_loss).epsilon(1e-5));
  CHECK(exec::max_relative_error(resumed.weights, uninterrupted.weights) <= kWeightTolerance);
}

TEST_CASE("CUDA events time every action on one axis, each worker's compute in stream order", "[gpu]") {
  const Plan plan = exec_plan("0-2,2-4,4-6", Schedule::kOneFOneB, 6, 64);
  auto run = exec::run_threads(plan, cuda_options("mlp", 1));
  INFO((run ? std::string() : run.error().message));
  REQUIRE(run.ok());
  REQUIRE(static_cast<int64_t>(run->trace.spans.size()) == build_program(plan).num_actions());
  std::map<int, std::vector<const Span*>> compute;  // per worker, in action order
  std::map<int, double> compute_sum;
  for (const Span& span : run->trace.spans) {
    CHECK(span.start.value >= 0.0);
    CHECK(span.end.value >= span.start.value);
    CHECK(span.end.value <= run->steps[0].wall.value);
    if (!is_compute(span.action.kind)) continue;
    if (span.action.kind == ActionKind::kForward || span.action.kind == ActionKind::kBackward)
      CHECK(span.end.value > span.start.value);
    compute[span.worker].push_back(&span);
    compute_sum[span.worker] += span.end.value - span.start.value;
  }
  for (auto& [worker, spans] : compute) {
    std::sort(spans.begin(), spans.end(),
              [](const Span* a, const Span* b) { return a->action_index < b->action_index; });
    for (size_t i = 1; i < spans.size(); ++i) CHECK(spans[i]->start.value >= spans[i - 1]->end.value - 1e-6);
    CHECK(run->workers[static_cast<size_t>(worker)].compute.value == Approx(compute_sum[worker]).epsilon(1e-6));
    CHECK(run->workers[static_cast<size_t>(worker)].loop.value >= compute_sum[worker]);
  }
}

TEST_CASE("profile measure on the GPU times every layer with CUDA events", "[gpu]") {
  exec::ProfileOptions options;
  options.device = "cuda";
  options.warmup = 2;
  options.steps = 5;
  auto measured = exec::measure_profile("vgg-mini", 8, options);
  INFO((measured ? std::string() : measured.error().message));
  REQUIRE(measured.ok());
  CHECK(measured->profile.device.starts_with("cuda:0"));
  for (const auto& layer : measured->profile.layers) {
    INFO(layer.name);
    CHECK(layer.forward.value > 0.0);
    CHECK(layer.backward.value > 0.0);
    // The host's side rides along: each pass's issuing call, timed on the host.
    REQUIRE(layer.host_forward.has_value());
    REQUIRE(layer.host_backward.has_value());
    CHECK(layer.host_forward->value > 0.0);
    CHECK(layer.host_backward->value > 0.0);
  }
}

}  // namespace baton::testing

int main(int argc, char** argv) {
  if (baton::exec::cuda_device_count() == 0) {
    std::printf("no CUDA GPU visible to this build (it needs a LibTorch with CUDA and a GPU): skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
