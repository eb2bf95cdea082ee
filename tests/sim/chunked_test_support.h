// What the chunked-schedule tests share (tests/sim/chunked_schedules_test.cc,
// tests/sim/chunked_plan_file_test.cc): uniform one-layer profiles and plans
// of p v one-layer stages.
#pragma once

#include "sim/plan.h"
#include "sim/profile.h"
#include "tests/sim/test_support.h"

namespace baton::testing {

struct Times {
  double forward_ms, input_ms, weight_ms;
};

inline Profile uniform_split(int layers, const Times& t) {
  Profile profile = make_uniform_profile(layers, Seconds::from_ms(t.forward_ms),
                                         Seconds::from_ms(t.input_ms + t.weight_ms), Bytes(0), Bytes(0));
  for (Layer& layer : profile.layers) {
    layer.backward_input = Seconds::from_ms(t.input_ms);
    layer.backward_weight = Seconds::from_ms(t.weight_ms);
  }
  return profile;
}

// S = p v one-layer stages, `replicas` whole pipelines.
inline Plan chunked_plan(Schedule schedule, int ranks, int chunks, int microbatches, int replicas = 1) {
  Plan plan;
  plan.schedule = schedule;
  plan.virtual_stages = chunks;
  plan.batches = microbatches;
  for (int s = 0; s < ranks * chunks; ++s) plan.stages.push_back(StagePlan{LayerRange{s, s + 1}, replicas, {}});
  return plan;
}

}  // namespace baton::testing
