// A profile's call_cost (sim/profile.h): a stage of n layers runs each pass as
// one call where the profile timed one call per layer, so it costs its layers'
// sum less n - 1 calls. Free communication, so the expected times are sums.
#include "tests/catch_compat.h"

#include <nlohmann/json.hpp>

#include "sim/stage_costs.h"
#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;
using nlohmann::json;

namespace {

const Seconds kForward = Seconds::from_ms(3.0);
const Seconds kBackward = Seconds::from_ms(5.0);
const Seconds kStep = Seconds::from_ms(0.4);

Profile with_call_cost(int layers, CallCost call) {
  Profile profile = make_uniform_profile(layers, kForward, kBackward, Bytes(0), Bytes(0));
  for (Layer& layer : profile.layers) layer.optimizer = kStep;
  profile.call_cost = call;
  return profile;
}

std::string refusal(const Result<Profile>& result) { return result ? "" : result.error().message; }

}  // namespace

TEST_CASE("call_cost: a stage of n layers costs its layers' sum less n - 1 calls", "[sim][call-cost]") {
  const CallCost call{Seconds::from_ms(0.5), Seconds::from_ms(0.8), Seconds::from_ms(0.1)};
  const Profile profile = with_call_cost(6, call);
  const Topology topology = make_flat_topology(3, 1e6, Seconds(0.0));
  const Plan plan = make_plan("0-1,1-3,3-6", Schedule::kOneFOneB, 4, topology);
  const std::vector<StageCost> costs = stage_costs(profile, plan, topology);
  for (int s = 0; s < 3; ++s) {
    const int n = plan.stages[s].layers.size();
    INFO("stage " << s << ", " << n << " layers");
    CHECK(close_rel(costs[s].forward.value, n * kForward.value - (n - 1) * call.forward.value));
    CHECK(close_rel(costs[s].backward.value, n * kBackward.value - (n - 1) * call.backward.value));
    // I and W (half of B each, unprofiled): the backward's saving shared in
    // proportion, half each.
    CHECK(close_rel(costs[s].backward_input.value, n * kBackward.value / 2 - (n - 1) * call.backward.value / 2));
    CHECK(close_rel((costs[s].backward_input + costs[s].backward_weight).value, costs[s].backward.value));
    CHECK(close_rel(costs[s].step.value, n * kStep.value - (n - 1) * call.optimizer.value));
  }
  // A device twice as fast halves the calls too.
  Topology faster = topology;
  faster.device.relative_speed = 2.0;
  CHECK(close_rel(stage_costs(profile, plan, faster)[2].forward.value,
                  (3 * kForward.value - 2 * call.forward.value) / 2));
  // A profiled split shares the saving in proportion: W = B / 100 gives up a
  // hundredth of it, and I + W stays the one-call backward.
  Profile split = profile;
  for (Layer& layer : split.layers) {
    layer.backward_input = kBackward * 0.99;
    layer.backward_weight = kBackward * 0.01;
  }
  const StageCost three = stage_costs(split, plan, topology)[2];
  CHECK(close_rel(three.backward_weight.value, 0.01 * (3 * kBackward.value - 2 * call.backward.value)));
  CHECK(close_rel((three.backward_input + three.backward_weight).value, three.backward.value));
  // Never below zero.
  const Profile absurd = with_call_cost(6, CallCost{Seconds::from_ms(10.0), Seconds(0.0), Seconds(0.0)});
  CHECK(stage_costs(absurd, plan, topology)[2].forward.value == 0.0);
}

TEST_CASE("call_cost: gpipe's makespan with stages of k layers", "[sim][call-cost]") {
  // (M + S - 1)(k (tF + tB) - (k - 1)(cF + cB)), docs/SIMULATOR.md's closed
  // form with each stage's pass k layers less k - 1 calls.
  const CallCost call{Seconds::from_ms(0.5), Seconds::from_ms(0.8), Seconds(0.0)};
  const int stages = 3, k = 2, microbatches = 8;
  const Profile profile = with_call_cost(stages * k, call);
  const Topology topology = make_flat_topology(stages, 1e6, Seconds(0.0));
  const Plan plan = make_plan("0-2,2-4,4-6", Schedule::kGPipe, microbatches, topology);
  Profile no_steps = profile;
  for (Layer& layer : no_steps.layers) layer.optimizer = Seconds(0.0);
  const double stage = k * (kForward + kBackward).value - (k - 1) * (call.forward + call.backward).value;
  CHECK(close_rel(simulate_ok(plan, no_steps, topology).metrics.iteration_time.value,
                  (microbatches + stages - 1) * stage));
}

TEST_CASE("call_cost: read, written only when set, and checked", "[sim][call-cost][loaders]") {
  const Profile profile =
      with_call_cost(2, CallCost{Seconds::from_ms(0.25), Seconds::from_ms(0.5), Seconds::from_ms(0.125)});
  const json written = profile_to_json(profile);
  CHECK(written["call_cost_ms"] == json{{"forward", 0.25}, {"backward", 0.5}, {"optimizer", 0.125}});
  const auto read = profile_from_json(written, "p.json");
  REQUIRE(read.ok());
  CHECK(read->call_cost == profile.call_cost);
  CHECK_FALSE(profile_to_json(with_call_cost(2, CallCost{}))["call_cost_ms"].is_object());

  json negative = written;
  negative["call_cost_ms"]["backward"] = -0.1;
  CHECK(refusal(profile_from_json(negative, "p.json")).find("call_cost_ms.backward") != std::string::npos);
  json misspelt = written;
  misspelt["call_cost_ms"]["fwd"] = 0.1;
  CHECK(refusal(profile_from_json(misspelt, "p.json")) ==
        R"(p.json: call_cost_ms has an unknown key "fwd" (expected one of: forward, backward, optimizer))");
  json missing = written;
  missing["call_cost_ms"].erase("optimizer");
  CHECK(refusal(profile_from_json(missing, "p.json")) == "p.json: call_cost_ms.optimizer is missing");
}
