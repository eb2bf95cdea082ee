// The threads backend against single-process references: after K steps the
// weights of every flush schedule equal plain SGD on the same minibatches, and
// pipedream equals a reference that applies its staleness rule.
#include "tests/exec/exec_test_support.h"

#include <algorithm>

#include "sim/schedules.h"

namespace baton::testing {
namespace {

struct Outcome {
  double error = 0.0;  // max relative weight error against the reference
  exec::RunReport run;
  exec::ReferenceReport reference;
};

Outcome run_against_reference(const Plan& plan, const exec::TrainOptions& options) {
  auto run = exec::run_threads(plan, options);
  INFO((run ? std::string() : run.error().message));
  REQUIRE(run.ok());
  auto reference = exec::train_reference(plan, options);
  INFO((reference ? std::string() : reference.error().message));
  REQUIRE(reference.ok());
  return Outcome{exec::max_relative_error(run->weights, reference->weights), *run, *reference};
}

}  // namespace

TEST_CASE("flush schedules on threads equal single-process SGD on the same minibatches", "[exec][threads]") {
  struct Case {
    const char* stages;
    Schedule schedule;
    int microbatches;
  };
  const Case cases[] = {
      {"0-3,3-6", Schedule::kGPipe, 4},
      {"0-2,2-4,4-6", Schedule::kGPipe, 4},
      {"0-1,1-3,3-5,5-6", Schedule::kGPipe, 5},
      {"0-3,3-6", Schedule::kOneFOneB, 4},
      {"0-2,2-4,4-6", Schedule::kOneFOneB, 6},
      {"0-1,1-3,3-5,5-6", Schedule::kOneFOneB, 4},
      {"0-3x2,3-6", Schedule::kOneFOneB, 4},
      {"0-6x2", Schedule::kDataParallel, 4},
      {"0-6x3", Schedule::kDataParallel, 6},
      {"0-6x4", Schedule::kDataParallel, 8},
      // Zero bubble: I and W apart, W's held back past later I's.
      {"0-2,2-4,4-6", Schedule::kZbH1, 6},
      {"0-1,1-3,3-5,5-6", Schedule::kZbH1, 8},
      {"0-3x2,3-6", Schedule::kZbH1, 4},
      {"0-2,2-4,4-6", Schedule::kZbH2, 6},
      {"0-1,1-3,3-5,5-6", Schedule::kZbH2, 8},
      {"0-2x2,2-4,4-6x2", Schedule::kZbH2, 8},
  };
  for (const Case& c : cases) {
    const Plan plan = exec_plan(c.stages, c.schedule, c.microbatches);
    INFO(schedule_name(c.schedule) << " " << c.stages << " M=" << c.microbatches);
    const Outcome outcome = run_against_reference(plan, train_options("mlp", 3));
    CHECK(outcome.error <= kWeightTolerance);
    REQUIRE(outcome.run.steps.size() == 3);
    for (size_t s = 0; s < 3; ++s)
      CHECK(outcome.run.steps[s].mean_loss == Approx(outcome.reference.mean_loss[s]).epsilon(1e-5));
    // Each worker ran its 3 steps on one thread: LibTorch's per-thread caches
    // (cuDNN's execution plans on a GPU) outlive a step (exec/run_threads.cc).
    for (const exec::WorkerStats& worker : outcome.run.workers) CHECK(worker.threads == 1);
    // Compute and waiting (RECV, STEP's wait for its ALLREDUCE, an ALLREDUCE's
    // issue) are disjoint parts of the action loop: what is left, the
    // executor's overhead, is never negative (1 us for the clock's rounding).
    for (const exec::WorkerStats& worker : outcome.run.workers) CHECK(worker.overhead().value >= -1e-6);
  }
}

TEST_CASE("schedules that run several chunks per worker on threads equal single-process SGD",
          "[exec][threads][chunks]") {
  struct Case {
    const char* stages;
    Schedule schedule;
    int virtual_stages;
    int microbatches;
  };
  // mlp's six layers as 4 or 6 chunks; p = stages / v ranks (x2: two whole pipelines).
  const Case cases[] = {
      {"0-2,2-3,3-5,5-6", Schedule::kInterleaved1F1B, 2, 4},
      {"0-1,1-2,2-3,3-4,4-5,5-6", Schedule::kInterleaved1F1B, 3, 4},
      {"0-1,1-2,2-3,3-4,4-5,5-6", Schedule::kInterleaved1F1B, 2, 6},
      {"0-2x2,2-3x2,3-5x2,5-6x2", Schedule::kInterleaved1F1B, 2, 8},
      {"0-2,2-3,3-5,5-6", Schedule::kZbV, 2, 4},
      {"0-1,1-2,2-3,3-4,4-5,5-6", Schedule::kZbV, 2, 7},
      {"0-2x2,2-3x2,3-5x2,5-6x2", Schedule::kZbV, 2, 8},
      {"0-2,2-3,3-5,5-6", Schedule::kDualPipeV, 2, 4},
      {"0-1,1-2,2-3,3-4,4-5,5-6", Schedule::kDualPipeV, 2, 9},
      {"0-2x2,2-3x2,3-5x2,5-6x2", Schedule::kDualPipeV, 2, 8},
  };
  for (const Case& c : cases) {
    Plan plan = exec_plan(c.stages, c.schedule, c.microbatches);
    plan.virtual_stages = c.virtual_stages;
    INFO(schedule_name(c.schedule) << " " << c.stages << " v=" << c.virtual_stages << " M=" << c.microbatches);
    const Outcome outcome = run_against_reference(plan, train_options("mlp", 3));
    CHECK(outcome.error <= kWeightTolerance);
    REQUIRE(outcome.run.steps.size() == 3);
    for (size_t s = 0; s < 3; ++s)
      CHECK(outcome.run.steps[s].mean_loss == Approx(outcome.reference.mean_loss[s]).epsilon(1e-5));
    // One span per action of the Program, keyed by the simulator's action ids.
    CHECK(static_cast<int64_t>(outcome.run.trace.spans.size()) == build_program(plan).num_actions());
  }
}

TEST_CASE("gpt-mini (integer tokens in, attention blocks) and vgg-mini pipelines equal their references",
          "[exec][threads]") {
  const Outcome gpt = run_against_reference(exec_plan("0-2,2-4,4-6", Schedule::kOneFOneB, 4, 2, "gpt-mini"),
                                            train_options("gpt-mini", 2));
  CHECK(gpt.error <= kWeightTolerance);
  const Outcome vgg = run_against_reference(exec_plan("0-2,2-6", Schedule::kGPipe, 3, 2, "vgg-mini"),
                                            train_options("vgg-mini", 2, 0.02));
  CHECK(vgg.error <= kWeightTolerance);
}

TEST_CASE("pipedream with weight stashing equals the staleness-rule reference", "[exec][threads][pipedream]") {
  const char* layouts[] = {"0-3,3-6", "0-2,2-4,4-6", "0-1,1-3,3-5,5-6", "0-3x2,3-6", "0-2,2-4x2,4-6"};
  for (const char* stages : layouts) {
    INFO(stages);
    const Outcome outcome = run_against_reference(exec_plan(stages, Schedule::kPipeDream, 8), train_options("mlp", 2));
    CHECK(outcome.error <= kWeightTolerance);
  }
}

TEST_CASE("pipedream with vertical sync equals the reference that uses stage 0's versions",
          "[exec][threads][pipedream]") {
  Plan plan = exec_plan("0-2,2-4,4-6", Schedule::kPipeDream, 8);
  plan.vertical_sync = true;
  const Outcome synced = run_against_reference(plan, train_options("mlp", 2));
  CHECK(synced.error <= kWeightTolerance);
  // Vertical sync changes the training (stages 1 and 2 use older versions).
  plan.vertical_sync = false;
  auto plain = exec::run_threads(plan, train_options("mlp", 2));
  REQUIRE(plain.ok());
  CHECK(exec::max_relative_error(plain->weights, synced.run.weights) > 100 * kWeightTolerance);
}

TEST_CASE("pipedream without weight stashing departs from the staleness rule, and the test sees it",
          "[exec][threads][pipedream]") {
  const Plan plan = exec_plan("0-2,2-4,4-6", Schedule::kPipeDream, 8);
  exec::TrainOptions options = train_options("mlp", 2);
  const Outcome stashed = run_against_reference(plan, options);
  options.weight_stashing = false;
  const Outcome unstashed = run_against_reference(plan, options);
  CHECK(stashed.error <= kWeightTolerance);
  CHECK(unstashed.error > 100 * kWeightTolerance);
}

TEST_CASE("pipedream holds warm-up + 1 weight versions per worker, flush schedules one", "[exec][threads][pipedream]") {
  // In steady state a worker has warm-up + 1 microbatches in flight after a
  // forward, each stashing the version it used; the newest used the live one.
  const Plan plan = exec_plan("0-1,1-3,3-5,5-6", Schedule::kPipeDream, 8);
  auto run = exec::run_threads(plan, train_options("mlp", 1));
  REQUIRE(run.ok());
  for (int s = 0; s < plan.num_stages(); ++s) {
    const int warmup = warmup_forwards(plan, s, plan.batches);
    INFO("stage " << s << " warm-up " << warmup);
    CHECK(run->workers[static_cast<size_t>(s)].peak_weight_versions == warmup + 1);
  }
  auto flush = exec::run_threads(exec_plan("0-1,1-3,3-5,5-6", Schedule::kOneFOneB, 8), train_options("mlp", 2));
  REQUIRE(flush.ok());
  for (const exec::WorkerStats& worker : flush->workers) CHECK(worker.peak_weight_versions == 1);
}

TEST_CASE("the loss falls on the synthetic task under every schedule", "[exec][threads]") {
  struct Case {
    const char* stages;
    Schedule schedule;
  };
  const Case cases[] = {{"0-2,2-4,4-6", Schedule::kGPipe},  {"0-2,2-4,4-6", Schedule::kOneFOneB},
                        {"0-2,2-4,4-6", Schedule::kZbH1},   {"0-2,2-4,4-6", Schedule::kZbH2},
                        {"0-6x2", Schedule::kDataParallel}, {"0-3x2,3-6", Schedule::kPipeDream}};
  for (const Case& c : cases) {
    INFO(schedule_name(c.schedule));
    auto run = exec::run_threads(exec_plan(c.stages, c.schedule, 4, 4, "gpt-mini"), train_options("gpt-mini", 8, 0.3));
    REQUIRE(run.ok());
    const double first = run->steps.front().mean_loss;
    const double last = run->steps.back().mean_loss;
    CHECK(last < 0.9 * first);
  }
}

}  // namespace baton::testing
