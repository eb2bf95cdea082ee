// Inputs the fuzz targets (fuzz/) found crashing or misreading a loader, kept
// as unit tests so the fix stays. Each case names the target that found it.
#include <string>

#include "tests/catch_compat.h"

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/topology.h"

using namespace baton;

TEST_CASE("a number too large for a double is a JSON error, not an exception", "[fuzz][json]") {
  // fuzz_profile, fuzz_topology, fuzz_plan: nlohmann throws out_of_range.406
  // ("number overflow"), not parse_error, for these; it escaped the loaders.
  for (const std::string text : {"1e999", "4595e9595", "-5e77777", "[1e400]"}) {
    INFO(text);
    auto profile = parse_profile(text, "p.json");
    REQUIRE_FALSE(profile.ok());
    CHECK(profile.error().message.find("p.json: not valid JSON") == 0);
    CHECK_FALSE(parse_topology(text, "t.json").ok());
    CHECK_FALSE(parse_plan(text, "plan.json").ok());
  }
  const std::string in_a_field = R"({"format": "baton.topology.v1", "name": "t",
      "device": {"name": "g", "memory_gib": 1e999}, "levels": []})";
  CHECK_FALSE(parse_topology(in_a_field, "t.json").ok());
}

TEST_CASE("a device memory too large for Bytes is rejected", "[fuzz][topology]") {
  // fuzz_topology: memory_gib 1.6e44 overflowed the int64 in Bytes::from_gib
  // (undefined behaviour).
  const auto topology_with_memory = [](const std::string& gib) {
    return R"({"format": "baton.topology.v1", "name": "t",
               "device": {"name": "g", "memory_gib": )" +
           gib + R"(},
               "levels": [{"name": "l", "size": 2, "bandwidth_gbps": 1, "latency_us": 0}]})";
  };
  auto huge = parse_topology(topology_with_memory("165555555555555555555555555555555555555555555"), "t.json");
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().message.find("t.json: device.memory_gib must be <= 1048576") == 0);
  CHECK_FALSE(parse_topology(topology_with_memory("8589934592"), "t.json").ok());  // 2^33 GiB
  auto largest = parse_topology(topology_with_memory("1048576"), "t.json");
  REQUIRE(largest.ok());
  CHECK(largest->device.memory == Bytes(int64_t{1} << 50));
}

TEST_CASE("replica counts that overflow the worker count are rejected", "[fuzz][plan]") {
  // fuzz_stages: "0-1,5--41013x2147483647" parsed, and Plan::num_workers
  // (called by check_plan) overflowed int summing 1 + 2147483647.
  auto found = parse_stages("0-1,5--41013x2147483647");
  REQUIRE_FALSE(found.ok());
  CHECK(found.error().message.find("bad replica count") != std::string::npos);
  CHECK(parse_stages("0-1x1048576").ok());
  CHECK_FALSE(parse_stages("0-1x1048577").ok());
  // 17 stages of 2^20 replicas: each allowed, more than 2^24 workers in all.
  std::string many;
  for (int s = 0; s < 17; ++s) many += (s ? "," : "") + std::to_string(s) + "-" + std::to_string(s + 1) + "x1048576";
  auto too_many = parse_stages(many);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().message.find("more than 16777216 workers") != std::string::npos);
}

TEST_CASE("a plan file with more workers than an int holds is rejected", "[fuzz][plan]") {
  // The JSON form of the case above: 2048 stages of 2^20 replicas reach 2^31.
  std::string stages;
  for (int s = 0; s < 2048; ++s)
    stages += (s ? "," : "") + std::string(R"({"layers": [)") + std::to_string(s) + ", " + std::to_string(s + 1) +
              R"(], "replicas": 1048576})";
  const std::string text = R"({"format": "baton.plan.v1", "schedule": "1f1b", "microbatch_size": 1,
      "microbatches": 1, "stages": [)" +
                           stages + "]}";
  auto plan = parse_plan(text, "plan.json");
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().message.find("plan.json: stages use more than 16777216 workers") == 0);
}

TEST_CASE("integers too large for an int are rejected, not wrapped", "[fuzz][plan][profile]") {
  // fuzz_profile's and fuzz_plan's properties (a loaded value is written back
  // and loads again) on hand-made inputs: static_cast / get<int> wrapped
  // 4294967296 to 0, so microbatch_size became 0 and the layer range
  // [4294967296, 4294967304] was read as [0, 8].
  const std::string profile_text = R"({"format": "baton.profile.v1", "model": "m",
      "microbatch_size": 4294967296, "layers": [{"name": "a", "forward_ms": 1,
      "backward_ms": 2, "output_bytes": 1, "param_bytes": 0}]})";
  auto profile = parse_profile(profile_text, "p.json");
  REQUIRE_FALSE(profile.ok());
  CHECK(profile.error().message.find("p.json: microbatch_size is too large") == 0);

  const auto plan_with = [](const std::string& mbs, const std::string& layers) {
    return R"({"format": "baton.plan.v1", "schedule": "1f1b", "microbatch_size": )" + mbs +
           R"(, "microbatches": 2, "stages": [{"layers": )" + layers + "}]}";
  };
  auto wrapped_range = parse_plan(plan_with("1", "[4294967296, 4294967304]"), "plan.json");
  REQUIRE_FALSE(wrapped_range.ok());
  CHECK(wrapped_range.error().message.find("plan.json: stages[0].layers holds a layer index") == 0);
  CHECK_FALSE(parse_plan(plan_with("1", "[0, 18446744073709551615]"), "plan.json").ok());
  CHECK_FALSE(parse_plan(plan_with("4294967296", "[0, 8]"), "plan.json").ok());
  auto fine = parse_plan(plan_with("16777216", "[0, 8]"), "plan.json");
  REQUIRE(fine.ok());
  CHECK(fine->microbatch_size == 1 << 24);
  CHECK(fine->stages[0].layers == LayerRange{0, 8});
}

namespace baton {
namespace {

// A mistyped --microbatches 100000000 made the simulator build a Program of
// hundreds of millions of actions and end in std::bad_alloc; check_plan now
// bounds microbatches x stages by kMaxMicrobatchStages.
TEST_CASE("microbatches x stages beyond kMaxMicrobatchStages are refused by check_plan", "[fuzz][plan]") {
  Profile profile;
  profile.model = "two";
  profile.microbatch_size = 1;
  for (int i = 0; i < 2; ++i) {
    Layer layer;
    layer.name = "l" + std::to_string(i);
    layer.forward = Seconds(1e-3);
    layer.backward = Seconds(2e-3);
    profile.layers.push_back(layer);
  }
  auto topology = parse_topology(R"({"format": "baton.topology.v1", "name": "two",
      "device": {"name": "d", "memory_gib": 16},
      "levels": [{"name": "l", "size": 2, "bandwidth_gbps": 10, "latency_us": 0}]})",
                                 "two.json");
  REQUIRE(topology.ok());
  Plan plan;
  auto stages = parse_stages("0-1,1-2");
  REQUIRE(stages.ok());
  plan.stages = *stages;
  plan.microbatch_size = 1;
  plan.batches = static_cast<int>(kMaxMicrobatchStages / 2);
  REQUIRE(assign_devices(plan, *topology).ok());
  CHECK(check_plan(plan, profile, *topology, "--stages").ok());
  plan.batches += 1;
  const Status too_many = check_plan(plan, profile, *topology, "--stages");
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().message.find("microbatches") != std::string::npos);
  CHECK(too_many.error().message.find(std::to_string(kMaxMicrobatchStages)) != std::string::npos);
}

}  // namespace
}  // namespace baton
