// check_plan_for_model: a plan is refused before any worker or rank starts.
#include <fmt/format.h>

#include "exec/executor.h"

namespace baton::exec {

Status check_plan_for_model(const Plan& plan, const ModelInfo& model, const std::string& source) {
  const int layers = static_cast<int>(model.layer_names.size());
  if (plan.stages.empty()) return Error{fmt::format("{}: the plan has no stages", source)};
  if (Status chunks = check_chunks(plan, source); !chunks) return chunks.error();
  if (plan.microbatch_size < 1 || plan.batches < 1) {
    return Error{fmt::format("{}: microbatch_size and microbatches must be >= 1, got {} and {}", source,
                             plan.microbatch_size, plan.batches)};
  }
  int expected_begin = 0;
  for (int s = 0; s < plan.num_stages(); ++s) {
    const StagePlan& stage = plan.stages[static_cast<size_t>(s)];
    if (stage.layers.begin != expected_begin || stage.layers.end <= stage.layers.begin) {
      return Error{
          fmt::format("{}: stages[{}].layers = [{}, {}) does not continue the previous stage "
                      "(expected a non-empty range starting at layer {})",
                      source, s, stage.layers.begin, stage.layers.end, expected_begin)};
    }
    if (stage.layers.end > layers) {
      return Error{
          fmt::format("{}: stages[{}].layers = [{}, {}) goes past the end of model '{}', which has "
                      "{} layers",
                      source, s, stage.layers.begin, stage.layers.end, model.name, layers)};
    }
    if (stage.replicas < 1)
      return Error{fmt::format("{}: stages[{}].replicas must be >= 1, got {}", source, s, stage.replicas)};
    if (plan.schedule == Schedule::kPipeDream && plan.batches % stage.replicas != 0) {
      return Error{
          fmt::format("{}: pipedream needs microbatches ({}) to be a multiple of stages[{}].replicas "
                      "({}) so every replica runs as many all-reduces",
                      source, plan.batches, s, stage.replicas)};
    }
    expected_begin = stage.layers.end;
  }
  if (expected_begin != layers) {
    return Error{fmt::format("{}: the stages cover layers [0, {}) but model '{}' has {} layers ({} ... {})", source,
                             expected_begin, model.name, layers, model.layer_names.front(), model.layer_names.back())};
  }
  return ok_status();
}

}  // namespace baton::exec
