// worker_demand (sim/worker_demand.h): what a worker's action list asks of its
// device, counted from the generated Program. Expected values follow from
// each generator's contract (sim/schedules.h) and MemoryTracker's accounting.
#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "sim/worker_demand.h"
#include "tests/schedule/schedule_test_support.h"

using namespace baton;
using namespace baton::testing;

TEST_CASE("worker demand: 1f1b stage s holds min(S - s, M) microbatches, one version", "[worker_demand]") {
  const int stages = 4;
  for (int microbatches : {1, 2, 8}) {
    const Program program = build_program(make_plan(Schedule::kOneFOneB, {1, 1, 1, 1}, microbatches));
    for (int s = 0; s < stages; ++s) {
      INFO("M=" << microbatches << " s=" << s);
      const WorkerDemand d = worker_demand(program, s);
      CHECK(d.forwards == microbatches);
      CHECK(d.backwards == microbatches);
      CHECK(d.allreduces == 0);
      CHECK(d.steps == 1);
      CHECK(d.peak_in_flight() == std::min(stages - s, microbatches));
      CHECK(d.peak_versions() == 1);
    }
  }
}

TEST_CASE("worker demand: gpipe holds all M of its microbatches, replicas split them", "[worker_demand]") {
  // Stage 0 on 2 replicas, M = 5: replica 0 gets microbatches 0, 2, 4; replica 1 gets 1, 3.
  const Program program = build_program(make_plan(Schedule::kGPipe, {2, 1}, 5));
  CHECK(worker_demand(program, 0).forwards == 3);
  CHECK(worker_demand(program, 0).peak_in_flight() == 3);
  CHECK(worker_demand(program, 0).allreduces == 1);
  CHECK(worker_demand(program, 1).forwards == 2);
  CHECK(worker_demand(program, 2).peak_in_flight() == 5);
  CHECK(worker_demand(program, 2).allreduces == 0);  // one replica: no all-reduce
}

TEST_CASE("worker demand: pipedream stashes warm-up + 1 versions and microbatches", "[worker_demand]") {
  // S = 3 straight, N = 12: stage s warms up with S - s - 1 forwards and holds
  // that many + 1 microbatches, each on its own weight version (a STEP after
  // every backward), and all-reduces never (one replica).
  const Program program = build_program(make_plan(Schedule::kPipeDream, {1, 1, 1}, 12));
  for (int s = 0; s < 3; ++s) {
    const WorkerDemand d = worker_demand(program, s);
    CHECK(d.peak_in_flight() == 3 - s);
    CHECK(d.peak_versions() == 3 - s);
    CHECK(d.steps == 12);
  }
  // With 2 replicas of stage 0 before one of stage 1: an all-reduce per backward.
  const Program replicated = build_program(make_plan(Schedule::kPipeDream, {2, 1}, 12));
  CHECK(worker_demand(replicated, 0).allreduces == 6);
  CHECK(worker_demand(replicated, 0).forwards == 6);
}

TEST_CASE("worker demand: peak bytes over the frontier of (versions, in flight)", "[worker_demand]") {
  // pipedream stage 0 of 3: 3 versions and 3 microbatches at once:
  //   params x 3 + params + params x 2 (Adam) + stash x 3.
  const Program program = build_program(make_plan(Schedule::kPipeDream, {1, 1, 1}, 12));
  const WorkerDemand d = worker_demand(program, 0);
  const Bytes params(1000), stash(10);
  CHECK(d.peak_bytes(params, stash, 2.0) == params * 3 + params + params * 2 + stash * 3);
  CHECK(d.peak_bytes(Bytes(0), stash, 2.0) == stash * 3);
  // A worker that never runs a forward holds one version and nothing in flight.
  WorkerDemand idle;
  CHECK(idle.peak_bytes(params, stash, 1.0) == params * 3);
}

TEST_CASE("worker demand: no frontier point is dominated by another", "[worker_demand]") {
  const Program program = build_program(make_plan(Schedule::kPipeDream, {2, 1, 1}, 24));
  for (int w = 0; w < program.num_workers(); ++w) {
    const WorkerDemand d = worker_demand(program, w);
    for (const MemoryPoint& a : d.memory)
      for (const MemoryPoint& b : d.memory)
        if (!(a == b)) CHECK_FALSE((a.versions <= b.versions && a.in_flight <= b.in_flight));
  }
}
