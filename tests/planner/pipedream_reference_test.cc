// Opt-in: the reference optimizer's objective on its own profiles. Runs when
// BATON_PIPEDREAM_PROFILES names the folder holding <model>/graph.txt (the
// profiles are not part of this repository); otherwise it warns and passes.
// Reference values: measured by running the reference optimizer, every case with
// --activation_compression_ratio 1.
#include "tests/catch_compat.h"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "planner/pipedream_dp.h"
#include "planner/pipedream_import.h"
#include "planner/pipedream_states.h"
#include "tests/planner/pipedream_profiles.h"
#include "tests/planner/plain_pipedream_dp.h"

using namespace baton;
using pipedream_testing::load;
using pipedream_testing::profiles_folder;

namespace {

PipeDreamOptions options_for(std::vector<PipeDreamLevel> levels, bool straight) {
  PipeDreamOptions options;
  options.levels = std::move(levels);
  options.straight_pipeline = straight;
  options.activation_compression = 1.0;
  return options;
}

struct ReferenceCase {
  const char* model;
  std::vector<PipeDreamLevel> levels;
  bool straight;
  double objective;  // seconds per minibatch
};

}  // namespace

TEST_CASE("the reference optimizer's objective on its profiles", "[planner][pipedream][reference]") {
  const auto folder = profiles_folder();
  if (!folder) {
    WARN("BATON_PIPEDREAM_PROFILES is not set: reference comparison skipped");
    return;
  }
  const std::vector<ReferenceCase> cases = {
      {"vgg16", {{4, {1e10}}, {4, {1.25e9}}}, false, 0.06713399693333331},
      {"vgg16", {{8, {2.5e10}}, {2, {3.125e9}}}, false, 0.06576668672},
      {"vgg16", {{4, {1e10}}}, false, 0.17017906240000003},
      {"vgg16", {{4, {1e10}}, {4, {1.25e9}}}, true, 0.23559000000000002},
      {"alexnet", {{16, {1e9}}}, false, 0.018874368},
      {"gnmt", {{8, {2.5e10}}, {2, {3.125e9}}}, false, 0.00989322663111111},
      {"gnmt", {{4, {1e10}}}, false, 0.025868000000000002},
      {"resnet18", {{4, {1e10}}, {4, {1.25e9}}}, false, 0.023493207200000008},
  };
  for (const ReferenceCase& c : cases) {
    const Profile profile = load(*folder, c.model);
    auto plan = plan_pipedream(profile, options_for(c.levels, c.straight));
    INFO(c.model << " with " << c.levels.size() << " levels, straight " << c.straight);
    REQUIRE(plan.ok());
    CHECK(plan->time_per_minibatch.value == Approx(c.objective).epsilon(1e-9));
  }
}

TEST_CASE("the fast solver equals the plain recurrence on the small reference profiles",
          "[planner][pipedream][reference]") {
  const auto folder = profiles_folder();
  if (!folder) {
    WARN("BATON_PIPEDREAM_PROFILES is not set: reference comparison skipped");
    return;
  }
  const std::vector<std::vector<PipeDreamLevel>> layouts = {{{16, {1e9}}},
                                                            {{4, {1e10}}},
                                                            {{4, {1e10}}, {4, {1.25e9}}},
                                                            {{8, {2.5e10}}, {2, {3.125e9}}},
                                                            {{4, {1e10}}, {3, {1.25e9}}}};
  for (const char* model : {"alexnet", "vgg16", "resnet18", "squeezenet1_0", "gnmt"}) {
    const Profile profile = load(*folder, model);
    auto space = build_state_space(profile, 10000);
    REQUIRE(space.ok());
    for (const auto& levels : layouts) {
      for (int variant = 0; variant < 4; ++variant) {
        PipeDreamOptions options = options_for(levels, variant % 2 == 1);
        if (variant >= 2) options.memory_size = Bytes(16'000'000'000);
        const double plain = testing::plain_pipedream_objective(*space, options);
        auto plan = plan_pipedream(profile, options);
        INFO(model << " levels " << levels.size() << " variant " << variant);
        if (std::isinf(plain)) {
          CHECK_FALSE(plan.ok());
          continue;
        }
        REQUIRE(plan.ok());
        CHECK(plan->time_per_minibatch.value == Approx(plain).epsilon(1e-12));
        if (levels.size() == 1)
          CHECK(testing::replay_one_level(*space, *plan, options) == plan->time_per_minibatch.value);
      }
    }
  }
}
