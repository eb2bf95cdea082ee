#include "planner/pipedream_dp.h"

#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "planner/pipedream_level.h"
#include "planner/pipedream_level_detail.h"
#include "planner/pipedream_readback.h"
#include "planner/pipedream_states.h"

namespace baton {
namespace {

using detail::kInfinity;

Status check_options(const PipeDreamOptions& options) {
  if (options.levels.empty()) return Error{"pipedream planner: at least one level is needed"};
  for (size_t l = 0; l < options.levels.size(); ++l) {
    const PipeDreamLevel& level = options.levels[l];
    if (level.machines < 1)
      return Error{fmt::format("pipedream planner: levels[{}].machines must be >= 1, got {}", l, level.machines)};
    if (!(level.bandwidth.bytes_per_s > 0.0) || !std::isfinite(level.bandwidth.bytes_per_s))
      return Error{fmt::format("pipedream planner: levels[{}].bandwidth must be > 0 B/s, got {}", l,
                               level.bandwidth.bytes_per_s)};
  }
  if (options.activation_compression && !(*options.activation_compression > 0.0))
    return Error{
        fmt::format("pipedream planner: activation compression must be > 0, got {}", *options.activation_compression)};
  if (options.memory_size && options.memory_size->value < 0)
    return Error{fmt::format("pipedream planner: memory size must be >= 0 bytes, got {}", options.memory_size->value)};
  if (options.max_states < 1)
    return Error{fmt::format("pipedream planner: max_states must be >= 1, got {}", options.max_states)};
  return ok_status();
}

// The solvers, innermost first; each level above reads the one below.
std::vector<std::unique_ptr<LevelSolver>> make_levels(const StateSpace& space, const StatesByWork& index,
                                                      const PipeDreamOptions& options) {
  SharedParams shared;
  shared.straight_pipeline = options.straight_pipeline;
  shared.compression = options.activation_compression;
  if (options.memory_size) shared.memory_bytes = static_cast<double>(options.memory_size->value);
  std::vector<std::unique_ptr<LevelSolver>> levels;
  int within = 1;
  int devices = 1;
  for (const PipeDreamLevel& level : options.levels) {
    const LevelParams params{level.machines, level.bandwidth.bytes_per_s, within, devices};
    LevelSolver* below = levels.empty() ? nullptr : levels.back().get();
    levels.push_back(std::make_unique<LevelSolver>(space, index, params, shared, below));
    within = level.machines;
    devices *= level.machines;
  }
  return levels;
}

// T = A(0..N-1, M) at the top level, by rising limits: each round asks the
// top level's root for T below a limit L (LevelSolver::root_value_below), so
// that its scans can skip every prefix known to reach L (or the lower best
// value found so far); a round that fails proves T >= L, and the next L is
// higher by a step that doubles each round. The first L is the root's lower
// bound. What earlier rounds learnt stays in the memo as lower bounds. The
// result is exact (the last round finds T below its limit); after
// kMaxRounds, or when a round proves the problem infeasible, a search without
// a limit decides.
double solve_top(LevelSolver& top) {
  constexpr int kMaxRounds = 12;
  constexpr double kFirstStep = 0.02;
  double limit = top.root_lower_bound();
  if (limit > 0.0 && std::isfinite(limit)) {
    double step = kFirstStep;
    for (int round = 0; round < kMaxRounds; ++round, step *= 2.0) {
      limit *= 1.0 + step;
      const double value = top.root_value_below(limit);
      if (value < limit || std::isinf(value)) return value;
      limit = value;  // T >= value >= limit
    }
  }
  return top.root_value_below(kInfinity);
}

Error infeasible(const Profile& profile, const PipeDreamOptions& options) {
  std::string why = "no split satisfies the constraints";
  if (options.memory_size)
    why = fmt::format("no split fits the memory limit of {} bytes per machine", options.memory_size->value);
  else if (options.straight_pipeline)
    why = "a straight pipeline needs at least as many states as machines at every level";
  return Error{fmt::format("pipedream planner: {}: {}", profile_label(profile), why)};
}

PipeDreamPlan make_plan(const Profile& profile, const StateSpace& space, double objective,
                        const std::vector<StateStage>& stages) {
  const LayerPlacement placement = assign_layers(profile, space, stages);
  PipeDreamPlan plan;
  plan.time_per_minibatch = Seconds(objective);
  plan.layer_order = placement.order;
  plan.num_states = space.num_states();
  for (size_t s = 0; s < stages.size(); ++s) {
    const StateStage& stage = stages[s];
    PipeDreamStage out;
    out.layers = placement.ranges[s];
    out.replicas_per_level = stage.replicas_per_level;
    out.replicas = 1;
    for (int r : stage.replicas_per_level) out.replicas *= r;
    out.first_state = stage.first_state;
    out.last_state = stage.last_state;
    const double before = stage.first_state > 0 ? space.cum_seconds[stage.first_state - 1] : 0.0;
    out.compute = Seconds(space.cum_seconds[stage.last_state] - before);
    out.time = out.compute / out.replicas;
    plan.stages.push_back(std::move(out));
  }
  return plan;
}

}  // namespace

bool PipeDreamPlan::keeps_profile_order() const {
  for (size_t p = 0; p < layer_order.size(); ++p)
    if (layer_order[p] != static_cast<int>(p)) return false;
  return true;
}

Result<PipeDreamPlan> plan_pipedream(const Profile& profile, const PipeDreamOptions& options) {
  if (auto ok = check_options(options); !ok) return ok.error();
  auto space = build_state_space(profile, options.max_states);
  if (!space) return space.error();
  const StatesByWork index(*space);
  const auto levels = make_levels(*space, index, options);
  LevelSolver& top = *levels.back();
  const double objective = solve_top(top);
  if (std::isinf(objective)) return infeasible(profile, options);
  std::vector<LevelSolver*> solvers;
  for (const auto& level : levels) solvers.push_back(level.get());
  return make_plan(profile, *space, objective, read_back_stages(solvers, space->num_states()));
}

Result<Profile> reorder_layers(const Profile& profile, const std::vector<int>& order) {
  const int n = profile.num_layers();
  std::vector<int> position(n, -1);
  if (static_cast<int>(order.size()) != n)
    return Error{fmt::format("reorder_layers: order has {} entries for {} layers", order.size(), n)};
  for (int p = 0; p < n; ++p) {
    if (order[p] < 0 || order[p] >= n || position[order[p]] >= 0)
      return Error{fmt::format("reorder_layers: order is not a permutation (entry {})", p)};
    position[order[p]] = p;
  }
  Profile out = profile;
  for (int p = 0; p < n; ++p) {
    Layer& layer = out.layers[p];
    layer = profile.layers[order[p]];
    for (int& input : layer.inputs) {
      input = position[input];
      if (input >= p) return Error{fmt::format("reorder_layers: layer '{}' would come before its input", layer.name)};
    }
  }
  return out;
}

std::vector<StagePlan> stage_plans(const PipeDreamPlan& plan) {
  std::vector<StagePlan> out;
  for (const PipeDreamStage& stage : plan.stages) {
    StagePlan stage_plan;
    stage_plan.layers = stage.layers;
    stage_plan.replicas = stage.replicas;
    out.push_back(stage_plan);
  }
  return out;
}

}  // namespace baton
