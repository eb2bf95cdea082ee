// The overlaps a plan was not asked for: what each would make of the chosen
// layout.
//
// The layout search does not choose Megatron's overlaps (MegatronAxes: each
// goes on every layout it applies to when asked, and on none otherwise), so a
// plan made without them says nothing of them unless told. For the chosen
// layout this simulates each overlap that applies to it and is off:
//   --overlap-grad-reduce (with d c > 1; with --overlap-param-gather when the
//     layout has the distributed optimizer, as Megatron asks the two
//     together), or --overlap-param-gather alone where the reduction is
//     already overlapped;
//   --tp-comm-overlap (with sequence parallelism);
//   --moe-shared-expert-overlap (a shared expert, the alltoall dispatcher);
//   --overlap-moe-expert-parallel-comm (ep >= 2, the alltoall dispatcher,
//     interleaved 1F1B, no full recomputation: the layouts the search puts it
//     on), and with it --delay-wgrad-compute.
// Each is the chosen layout with that overlap alone added, simulated as
// predict_megatron simulates any layout; another layout could gain more from
// it, which only a plan asked for it finds.
// Thread safety: pure.
#pragma once

#include <string>
#include <vector>

#include "sim/megatron_sim.h"

namespace baton {

struct OverlapOption {
  std::string flags;      // Megatron-LM's flags it adds, e.g. "--overlap-grad-reduce --overlap-param-gather"
  MegatronLayout layout;  // the chosen layout with them
  Seconds iteration_time;
  Bytes peak_memory;
  bool fits = true;
};

// The options for `chosen` (a layout predict_megatron accepts) in the order
// above; none for an overlap it already has or that does not apply to it.
Result<std::vector<OverlapOption>> overlaps_not_asked(const GptModel& model, const MegatronLayout& chosen,
                                                      const Topology& topology);

}  // namespace baton
