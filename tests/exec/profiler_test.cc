// exec::measure_profile on the CPU: the device's times and the host's side
// (exec::HostTimes) of every layer.
#include "tests/catch_compat.h"

#include "exec/executor.h"

namespace baton::testing {
namespace {

TEST_CASE("profile measure: every layer's host time is the issuing call's, within its timed region",
          "[exec][profile]") {
  exec::ProfileOptions options;
  options.warmup = 1;
  options.steps = 5;
  const auto measured = exec::measure_profile("mlp", 8, options);
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

}  // namespace
}  // namespace baton::testing
