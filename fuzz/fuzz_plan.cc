// Fuzzes parse_plan and what the CLI does with a loaded plan: assign devices,
// check it against a fixed 8-layer profile on 64 devices, and, when it
// passes, generate its Program and validate it.
//
// Properties: no crash anywhere; what plan_to_json writes loads again to the
// same plan, and with a key the format does not have is refused; a checked plan yields a Program that validate_program
// accepts (pipedream only when every stage's replica count divides the microbatches, as sim/schedules.h states).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "sim/plan.h"
#include "sim/schedules.h"
#include "sim/validate.h"

namespace {

using baton::Plan;
using baton::fuzz::fail;

bool program_must_validate(const Plan& plan) {
  if (plan.schedule != baton::Schedule::kPipeDream) return true;
  for (const baton::StagePlan& stage : plan.stages) {
    if (plan.batches % stage.replicas != 0) return false;
  }
  return true;
}

void check_rewrite(const Plan& plan) {
  const nlohmann::json written = baton::plan_to_json(plan);
  auto again = baton::plan_from_json(written, "rewritten");
  if (!again) fail("the written plan loads again", again.error().message);
  if (baton::plan_to_json(*again) != written) fail("rewriting keeps the plan", written.dump());
  baton::fuzz::check_unknown_key_refused(
      written, [](const nlohmann::json& document) { return baton::plan_from_json(document, "extended"); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = baton::parse_plan(baton::fuzz::as_text(data, size), "fuzz.plan.json");
  if (!parsed) return 0;
  check_rewrite(*parsed);
  const baton::Profile& profile = baton::fuzz::fixture_profile();
  const baton::Topology& topology = baton::fuzz::fixture_topology();
  // check_plan must cope with any parsed plan, however large.
  (void)baton::check_plan(*parsed, profile, topology, "fuzz.plan.json");
  if (baton::fuzz::total_workers(parsed->stages) > baton::fuzz::kMaxWorkers ||
      parsed->batches > baton::fuzz::kMaxMicrobatches)
    return 0;
  Plan plan = *parsed;
  if (!baton::assign_devices(plan, topology)) return 0;
  if (!baton::check_plan(plan, profile, topology, "fuzz.plan.json")) return 0;
  const baton::Program program = baton::build_program(plan);
  auto valid = baton::validate_program(program);
  if (!valid && program_must_validate(plan)) fail("a checked plan's program validates", valid.error().message);
  return 0;
}
