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

TEST_CASE("profile measure --streams: the whole model on several threads at once against one",
          "[exec][profile]") {
  exec::ProfileOptions options = short_run();
  const auto plain = exec::measure_profile("mlp", 8, options);
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->profile.shared_streams.has_value());  // only when asked
  options.streams = 2;
  const auto measured = exec::measure_profile("mlp", 8, options);
  INFO((measured ? std::string() : measured.error().message));
  REQUIRE(measured.ok());
  REQUIRE(measured->profile.shared_streams.has_value());
  const SharedStreams& shared = *measured->profile.shared_streams;
  CHECK(shared.streams == 2);
  // 2 x one thread's time / the two's: two threads can do no more than twice
  // one's work per second (a quarter above for a noisy machine), and on this
  // machine's cores at least a little of it.
  INFO("speedup " << shared.speedup);
  CHECK(shared.speedup > 0.25);
  CHECK(shared.speedup <= 2.0 * 1.25);
  // Kept in the profile's file, read back the same.
  const auto read = profile_from_json(profile_to_json(measured->profile), "p.json");
  REQUIRE(read.ok());
  CHECK(read->shared_streams == measured->profile.shared_streams);
  for (int bad : {0, 65}) {
    options.streams = bad;
    const auto refused = exec::measure_profile("mlp", 8, options);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message == "profile: streams must be 1 (none measured) to 64, got " + std::to_string(bad));
  }
}

}  // namespace
}  // namespace baton::testing
