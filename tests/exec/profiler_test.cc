// exec::measure_profile on the CPU: the device's times and the host's side
// (exec::HostTimes) of every layer.
#include <algorithm>

#include "tests/catch_compat.h"

#include "exec/executor.h"

namespace baton::testing {
namespace {

// A short measurement: one warm-up step, five measured.
exec::ProfileOptions short_run() {
  exec::ProfileOptions options;
  options.warmup = 1;
  options.steps = 5;
  return options;
}

TEST_CASE("profile measure: every layer's host time is the issuing call's, within its timed region",
          "[exec][profile]") {
  const auto measured = exec::measure_profile("mlp", 8, short_run());
  INFO((measured ? std::string() : measured.error().message));
  REQUIRE(measured.ok());
  REQUIRE(measured->host.size() == measured->profile.layers.size());
  for (size_t l = 0; l < measured->host.size(); ++l) {
    const Layer& layer = measured->profile.layers[l];
    const exec::HostTimes& host = measured->host[l];
    INFO(layer.name << ": forward " << layer.forward.value << " s, host " << host.forward.value << " s; backward "
                    << layer.backward.value << " s, host " << host.backward.value << " s");
    // On the CPU the call is the pass: positive, and (the medians of samples
    // each inside the device's timed region of the same pass) no longer than it.
    CHECK(host.forward.value > 0.0);
    CHECK(host.backward.value > 0.0);
    CHECK(host.forward.value <= layer.forward.value);
    CHECK(host.backward.value <= layer.backward.value);
  }
}

TEST_CASE("profile measure --whole-pass: the whole model's passes, one call each, and the cost per call",
          "[exec][profile]") {
  exec::ProfileOptions options = short_run();
  const auto plain = exec::measure_profile("mlp", 8, options);
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->whole_pass.has_value());  // only when asked: it lengthens every step
  options.whole_pass = true;
  const auto measured = exec::measure_profile("gpt-mini", 4, options);
  INFO((measured ? std::string() : measured.error().message));
  REQUIRE(measured.ok());
  REQUIRE(measured->whole_pass.has_value());
  const WholePass& whole = *measured->whole_pass;
  CHECK(whole.forward.value > 0.0);
  CHECK(whole.backward.value > 0.0);
  CHECK(whole.optimizer.value > 0.0);
  // (sum of the layers - whole) / (layers - 1), per pass.
  const Profile& profile = measured->profile;
  double forward = 0.0, backward = 0.0, optimizer = 0.0;
  for (const Layer& layer : profile.layers) {
    forward += layer.forward.value;
    backward += layer.backward.value;
    optimizer += layer.optimizer.value;
  }
  const double calls = profile.num_layers() - 1;
  const CallCost per_call = per_call_cost(profile, whole);
  CHECK(per_call.forward.value == Approx((forward - whole.forward.value) / calls));
  CHECK(per_call.backward.value == Approx((backward - whole.backward.value) / calls));
  CHECK(per_call.optimizer.value == Approx((optimizer - whole.optimizer.value) / calls));
  // The profile keeps it, never below zero.
  CHECK(profile.call_cost.forward.value == std::max(0.0, per_call.forward.value));
  CHECK(profile.call_cost.backward.value == std::max(0.0, per_call.backward.value));
  CHECK(profile.call_cost.optimizer.value == std::max(0.0, per_call.optimizer.value));
  CHECK(plain->profile.call_cost == CallCost{});
  // One layer: no second call to compare with.
  Profile one = profile;
  one.layers.resize(1);
  CHECK(per_call_cost(one, whole).forward.value == 0.0);
}

}  // namespace
}  // namespace baton::testing
