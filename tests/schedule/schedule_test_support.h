// Helpers shared by the schedule tests: plans built from replica counts and
// compact views of a worker's action list.
#pragma once

#include <string>
#include <vector>

#include "sim/plan.h"
#include "sim/program.h"

namespace baton::testing {

// A plan with one single-layer stage per entry of `replicas` (stage s has
// replicas[s] workers on consecutive devices) and `microbatches` microbatches.
inline Plan make_plan(Schedule schedule, const std::vector<int>& replicas, int microbatches) {
  Plan plan;
  plan.schedule = schedule;
  plan.batches = microbatches;
  int device = 0;
  for (size_t s = 0; s < replicas.size(); ++s) {
    StagePlan stage;
    stage.layers = LayerRange{static_cast<int>(s), static_cast<int>(s) + 1};
    stage.replicas = replicas[s];
    for (int r = 0; r < replicas[s]; ++r) stage.devices.push_back(device++);
    plan.stages.push_back(stage);
  }
  return plan;
}

// The actions of one worker in text form without the "sK:" prefix, space
// separated: "F0 F1 B0 SEND_ACT0>w1". `compute_only` keeps F/B/I/W/ALLREDUCE/STEP.
inline std::string order_of(const Program& program, int worker, bool compute_only = true) {
  std::string text;
  for (const Action& action : program.actions[worker]) {
    if (compute_only && (is_send(action.kind) || is_recv(action.kind))) continue;
    const std::string full = to_string(action);
    if (!text.empty()) text += ' ';
    text += full.substr(full.find(':') + 1);
  }
  return text;
}

// The same with the "sK:" prefixes kept (workers that run several chunks).
inline std::string order_of_full(const Program& program, int worker) {
  std::string text;
  for (const Action& action : program.actions[worker]) {
    if (is_send(action.kind) || is_recv(action.kind)) continue;
    if (!text.empty()) text += ' ';
    text += to_string(action);
  }
  return text;
}

// How many actions of `kind` worker `worker` runs.
inline int count_kind(const Program& program, int worker, ActionKind kind) {
  int count = 0;
  for (const Action& action : program.actions[worker]) count += action.kind == kind ? 1 : 0;
  return count;
}

}  // namespace baton::testing
