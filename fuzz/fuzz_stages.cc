// Fuzzes parse_stages (the CLI's --stages text) and what the CLI does next:
// check the stages as a plan against a fixed 8-layer profile on 64 devices,
// assigning devices first when the plan is small enough.
//
// Properties: no crash; stages_to_string's text parses back to the same
// ranges and replica counts (it leaves devices out).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.h"
#include "sim/plan.h"

namespace {

using baton::StagePlan;
using baton::fuzz::fail;

void check_round_trip(const std::vector<StagePlan>& stages) {
  const std::string text = baton::stages_to_string(stages);
  auto again = baton::parse_stages(text);
  if (!again) fail("stages_to_string parses back", text + "\n" + again.error().message);
  if (again->size() != stages.size()) fail("round trip keeps the stage count", text);
  for (size_t s = 0; s < stages.size(); ++s) {
    if ((*again)[s].layers != stages[s].layers || (*again)[s].replicas != stages[s].replicas)
      fail("round trip keeps ranges and replicas", text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto stages = baton::parse_stages(baton::fuzz::as_text(data, size));
  if (!stages) return 0;
  check_round_trip(*stages);
  baton::Plan plan;
  plan.batches = 8;
  plan.stages = std::move(*stages);
  const baton::Profile& profile = baton::fuzz::fixture_profile();
  const baton::Topology& topology = baton::fuzz::fixture_topology();
  (void)baton::check_plan(plan, profile, topology, "--stages");
  if (baton::fuzz::total_workers(plan.stages) > baton::fuzz::kMaxWorkers) return 0;
  if (!baton::assign_devices(plan, topology)) return 0;
  (void)baton::check_plan(plan, profile, topology, "--stages");
  return 0;
}
