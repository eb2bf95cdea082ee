// What the schedule generators share (sim/schedules.cc, sim/schedules_chunked.cc):
// each worker's microbatches and an empty Program of the plan's placement.
// Internal to sim/; thread safety: pure functions.
#pragma once

#include <vector>

#include "sim/plan.h"
#include "sim/program.h"

namespace baton::schedules_detail {

// Microbatches that replica `replica` of a stage with `replicas` replicas runs.
std::vector<int> local_microbatches(int microbatches, int replicas, int replica);
// Those of a worker of the plan.
std::vector<int> local_microbatches(const Plan& plan, const WorkerInfo& worker);
// A Program with the plan's placement and an empty action list per worker.
Program empty_program(const Plan& plan);

}  // namespace baton::schedules_detail
