// Plan layouts that more than one command builds: data parallelism (dp) as a
// plan. dp runs the whole model, layers [0, num_layers), as one stage
// replicated on every worker, replica j on device j; each replica takes every
// W-th microbatch and the replicas all-reduce their gradients (the schedule
// itself is sim/schedules.h's make_data_parallel).
// Thread safety: pure functions.
#pragma once

#include "sim/plan.h"
#include "sim/profile.h"

namespace baton {

// The dp plan of `profile` on `workers` devices: the profile's model and
// microbatch size, `microbatches` per iteration, one stage of every layer with
// `workers` replicas on devices 0 .. workers-1.
Plan data_parallel_plan(const Profile& profile, int workers, int microbatches);

// `plan` run under `schedule`, every other field kept. dp needs one stage: a
// plan of several stages becomes one stage of layers [0, num_layers) on as
// many workers as the plan had, on devices 0 .. W-1 (whatever devices the
// stages named); a plan of one stage is kept as it is, devices included.
// virtual_stages becomes 2 for zbv and dualpipev and 1 for the schedules
// that run no chunks; interleaved-1f1b keeps the plan's, or 2 where the plan
// has one chunk per device.
Plan plan_with_schedule(const Plan& plan, Schedule schedule, int num_layers);

}  // namespace baton
