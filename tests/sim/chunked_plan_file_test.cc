// The chunked schedules' plans: what check_chunks and the plan file refuse,
// virtual_stages and paired_steady_state through the plan file.
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "sim/plan.h"
#include "sim/stage_costs.h"
#include "tests/sim/chunked_test_support.h"
#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

std::string refusal(const Plan& plan) {
  const Status ok = check_chunks(plan, "plan.json");
  return ok ? "(accepted)" : ok.error().message;
}

}  // namespace

TEST_CASE("chunked schedules: a plan that does not fit is refused, saying what would", "[sim][chunks][bad-input]") {
  CHECK(refusal(chunked_plan(Schedule::kInterleaved1F1B, 4, 1, 8)) ==
        "plan.json: virtual_stages must be >= 2 for interleaved-1f1b (with 1 chunk per device it is 1f1b: use "
        "--schedule 1f1b), got 1");
  Plan seven = chunked_plan(Schedule::kZbV, 4, 2, 8);
  seven.stages.pop_back();
  CHECK(refusal(seven) ==
        "plan.json: stages hold 7 stages, which zbv with 2 chunks per device cannot place: give a multiple of 2 "
        "(for example 6 or 8), got \"0-1x1,1-2x1,2-3x1,3-4x1,4-5x1,5-6x1,6-7x1\"");
  CHECK(refusal(chunked_plan(Schedule::kZbV, 2, 3, 8)) ==
        "plan.json: virtual_stages must be 2 for zbv (two chunks per device, a V), got 3");
  CHECK(refusal(chunked_plan(Schedule::kInterleaved1F1B, 4, 2, 10)) ==
        "plan.json: microbatches must be a multiple of 4 for interleaved-1f1b on 4 ranks x 1 replicas (microbatches "
        "advance in groups of p), for example 8 or 12, got 10");
  CHECK(refusal(chunked_plan(Schedule::kDualPipeV, 4, 2, 6)) ==
        "plan.json: microbatches must be at least 8 for dualpipev on 4 ranks x 1 replicas (2p per pipeline, to fill "
        "the V), got 6");
  Plan uneven = chunked_plan(Schedule::kInterleaved1F1B, 2, 2, 8, 2);
  uneven.stages[3].replicas = 1;
  CHECK(refusal(uneven) ==
        "plan.json: stages[3].replicas must be 2, stage 0's: interleaved-1f1b replicates whole pipelines (every "
        "stage alike), got 1");
  Plan flat = chunked_plan(Schedule::kOneFOneB, 4, 1, 8);
  flat.virtual_stages = 2;
  CHECK(refusal(flat) ==
        "plan.json: virtual_stages must be 1 for 1f1b (interleaved-1f1b, zbv and dualpipev run chunks), got 2");
}

TEST_CASE("chunked schedules: a plan file's virtual_stages must be one its schedule runs", "[sim][chunks][plan]") {
  const auto file = [](const std::string& schedule, int v) {
    nlohmann::json document = plan_to_json(chunked_plan(Schedule::kOneFOneB, 6, 1, 12));
    document["schedule"] = schedule;
    document["virtual_stages"] = v;
    return plan_from_json(document, "p.json");
  };
  // The schedules without chunks run one stage per device: v = 1, and nothing else.
  for (const char* flat : {"1f1b", "zb-h1", "zb-h2", "gpipe", "pipedream"}) {
    INFO(flat);
    const auto three = file(flat, 3);
    REQUIRE(!three.ok());
    CHECK(three.error().message == "p.json: virtual_stages must be 1 for " + std::string(flat) +
                                       " (interleaved-1f1b, zbv and dualpipev run chunks), got 3");
    CHECK(file(flat, 1).ok());
  }
  // The V shapes run 2 chunks per device, interleaved-1f1b at least 2.
  REQUIRE(!file("zbv", 3).ok());
  CHECK(file("zbv", 3).error().message ==
        "p.json: virtual_stages must be 2 for zbv (two chunks per device, a V), got 3");
  REQUIRE(!file("interleaved-1f1b", 1).ok());
  CHECK(file("zbv", 2).ok());
  CHECK(file("interleaved-1f1b", 3).ok());
  // Without the key the loader leaves v to the schedule (plan_with_schedule).
  nlohmann::json unnamed = plan_to_json(chunked_plan(Schedule::kOneFOneB, 6, 1, 12));
  unnamed["schedule"] = "zbv";
  CHECK(plan_from_json(unnamed, "p.json").ok());
}

TEST_CASE("chunked schedules: virtual_stages round-trips through the plan file", "[sim][chunks][plan]") {
  const Plan plan = chunked_plan(Schedule::kInterleaved1F1B, 2, 3, 4);
  auto loaded = plan_from_json(plan_to_json(plan), "p.json");
  REQUIRE(loaded.ok());
  CHECK(loaded->virtual_stages == 3);
  CHECK(loaded->schedule == Schedule::kInterleaved1F1B);
  CHECK(loaded->num_workers() == 2);
  CHECK(loaded->rank_of(4) == 0);
  // A one-chunk plan's file does not name it.
  CHECK(!plan_to_json(chunked_plan(Schedule::kOneFOneB, 3, 1, 4)).contains("virtual_stages"));
}

TEST_CASE("paired_steady_state: interleaved-1f1b or 1f1b on one stage only, and it round-trips through the plan file",
          "[sim][chunks][plan][bad-input]") {
  Plan plan = chunked_plan(Schedule::kInterleaved1F1B, 2, 2, 4);
  plan.paired_steady_state = true;
  const auto back = plan_from_json(plan_to_json(plan), "plan.json");
  REQUIRE(back.ok());
  CHECK(back->paired_steady_state);
  CHECK_FALSE(plan_to_json(chunked_plan(Schedule::kInterleaved1F1B, 2, 2, 4)).contains("paired_steady_state"));
  nlohmann::json one = plan_to_json(chunked_plan(Schedule::kOneFOneB, 2, 1, 4));
  one["paired_steady_state"] = true;
  const auto refused = plan_from_json(one, "plan.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message ==
        "plan.json: paired_steady_state pairs the steady state of interleaved-1f1b, or of 1f1b on one stage, not of "
        "1f1b on 2 stages");
  nlohmann::json gpipe = plan_to_json(chunked_plan(Schedule::kGPipe, 1, 1, 4));
  gpipe["paired_steady_state"] = true;
  const auto not_1f1b = plan_from_json(gpipe, "plan.json");
  REQUIRE_FALSE(not_1f1b.ok());
  CHECK(not_1f1b.error().message ==
        "plan.json: paired_steady_state pairs the steady state of interleaved-1f1b, or of 1f1b on one stage, not of "
        "gpipe");
  // 1f1b on one stage (Megatron-core's no-pipelining schedule) pairs.
  nlohmann::json alone = plan_to_json(chunked_plan(Schedule::kOneFOneB, 1, 1, 4));
  alone["paired_steady_state"] = true;
  const auto one_stage = plan_from_json(alone, "plan.json");
  REQUIRE(one_stage.ok());
  CHECK(one_stage->paired_steady_state);
  CHECK(one_stage->has_pairs());
  Plan programmatic = chunked_plan(Schedule::kOneFOneB, 2, 1, 4);
  programmatic.paired_steady_state = true;
  const Topology topology = make_flat_topology(8, 100.0, Seconds(0.0));
  REQUIRE(assign_devices(programmatic, topology).ok());
  CHECK_FALSE(check_plan(programmatic, uniform_split(2, Times{1.0, 1.0, 1.0}), topology, "plan").ok());
  // delay_wgrad_compute: with the pairs only, and it round-trips too.
  plan.delay_wgrad_compute = true;
  const auto delayed = plan_from_json(plan_to_json(plan), "plan.json");
  REQUIRE(delayed.ok());
  CHECK(delayed->delay_wgrad_compute);
  nlohmann::json unpaired = plan_to_json(chunked_plan(Schedule::kInterleaved1F1B, 2, 2, 4));
  unpaired["delay_wgrad_compute"] = true;
  const auto lone = plan_from_json(unpaired, "plan.json");
  REQUIRE_FALSE(lone.ok());
  CHECK(lone.error().message ==
        "plan.json: delay_wgrad_compute delays the weight gradients of paired_steady_state's pairs only");
}
