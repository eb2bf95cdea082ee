// Helpers shared by the executor tests. Torch-free: the tests see the
// executor only through exec/executor.h.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "tests/catch_compat.h"

#include "exec/executor.h"
#include "sim/plan.h"
#include "sim/profile.h"

namespace baton::testing {

// A plan for a zoo model: stages as "0-3,3-6x2", no devices (CPU runs need none).
inline Plan exec_plan(const std::string& stages, Schedule schedule, int microbatches, int microbatch_size = 4,
                      const std::string& model = "mlp") {
  Plan plan;
  plan.model = model;
  plan.schedule = schedule;
  plan.batches = microbatches;
  plan.microbatch_size = microbatch_size;
  auto parsed = parse_stages(stages);
  REQUIRE(parsed.ok());
  plan.stages = *parsed;
  return plan;
}

inline exec::TrainOptions train_options(const std::string& model, int steps, double learning_rate = 0.1) {
  exec::TrainOptions options;
  options.model = model;
  options.steps = steps;
  options.learning_rate = learning_rate;
  options.seed = 7;
  options.timeout = Seconds(60);
  return options;
}

// Relative weight error tolerated between a distributed run and its reference (fp32).
constexpr double kWeightTolerance = 1e-5;

// A threads run of `whole.steps` (4) steps, and the same run stopped after a
// checkpoint at step 2 in `checkpoint_dir` and resumed from it.
struct ResumedRun {
  exec::RunReport uninterrupted;
  exec::RunReport resumed;
};
inline ResumedRun run_and_resume_at_two(const Plan& plan, const exec::TrainOptions& whole,
                                        const std::string& checkpoint_dir) {
  auto uninterrupted = exec::run_threads(plan, whole);
  INFO((uninterrupted ? std::string() : uninterrupted.error().message));
  REQUIRE(uninterrupted.ok());
  exec::TrainOptions first_half = whole;
  first_half.steps = 2;
  first_half.checkpoint_dir = checkpoint_dir;
  first_half.checkpoint_every = 2;
  REQUIRE(exec::run_threads(plan, first_half).ok());
  exec::TrainOptions second_half = whole;
  second_half.checkpoint_dir = checkpoint_dir;
  second_half.resume = true;
  auto resumed = exec::run_threads(plan, second_half);
  INFO((resumed ? std::string() : resumed.error().message));
  REQUIRE(resumed.ok());
  CHECK(resumed->first_step == 2);
  REQUIRE(resumed->steps.size() == 2);
  return ResumedRun{std::move(*uninterrupted), std::move(*resumed)};
}

// A profile of `layers` identical layers named as those of zoo model
// `named_as` (the first ones, then "extra<l>"), under the model name `model`.
inline std::string write_profile(const std::filesystem::path& dir, const std::string& model,
                                 const std::string& named_as, int layers) {
  Profile profile = make_uniform_profile(layers, Seconds(1e-3), Seconds(2e-3), Bytes(1024), Bytes(4096), 4);
  profile.model = model;
  auto info = exec::model_info(named_as);
  REQUIRE(info.ok());
  for (int l = 0; l < layers; ++l) {
    profile.layers[static_cast<size_t>(l)].name = static_cast<size_t>(l) < info->layer_names.size()
                                                      ? info->layer_names[static_cast<size_t>(l)]
                                                      : fmt::format("extra{}", l);
  }
  const std::filesystem::path path = dir / (model + "-as-" + named_as + ".profile.json");
  std::ofstream(path) << profile_to_json(profile).dump(2);
  return path.string();
}

}  // namespace baton::testing
