#include "planner/planner.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/baton_choose.h"
#include "planner/baton_search.h"
#include "planner/chunked_plans.h"
#include "planner/pipedream_dp.h"
#include "sim/plan_layouts.h"
#include "sim/schedules.h"
#include "sim/stage_costs.h"

namespace baton {

Result<CostModel> parse_cost_model(std::string_view name) {
  if (name == "baton") return CostModel::kBaton;
  if (name == "pipedream") return CostModel::kPipeDream;
  return Error{fmt::format("unknown cost model \"{}\" (expected baton or pipedream)", name)};
}

double PlanChoice::time_per_sample_s() const {
  return estimate.iteration_time.value / std::max(estimate.samples_per_iteration, 1.0);
}

namespace {

constexpr int kPipeDreamMinibatches = 64;

bool fits(const PlanChoice& choice, Bytes limit) { return choice.estimate.peak_memory <= limit; }

Profile compressed(Profile profile, double ratio) {
  if (ratio <= 0) return profile;
  for (Layer& layer : profile.layers) layer.output_bytes = Bytes::counted(double(layer.output_bytes.value) / ratio);
  return profile;
}

// The estimate is a simulation of the plan's Program; its run is the choice's
// simulated figures.
void simulate_choice(PlanChoice& choice) {
  if (choice.estimate.rated) choice.simulated = choice.estimate.simulated;
}

// A chunked schedule's best layout (planner/chunked_plans.h): every candidate
// rated by simulation, the fastest that fits the memory limit. Candidates come
// on ever fewer workers; once the whole model's work per microbatch over the
// workers (a bound under every time per sample on that many) reaches the
// best, none after can win.
std::optional<PlanChoice> best_chunked(const Profile& profile, const Topology& topology, const PlannerOptions& options,
                                       Schedule schedule, int microbatches, Bytes limit, Bytes* smallest) {
  const StageCost whole = stage_cost(profile, LayerRange{0, profile.num_layers()}, topology.device.relative_speed);
  const double work_per_sample = (whole.forward + whole.backward).value / std::max(profile.microbatch_size, 1);
  std::optional<PlanChoice> best;
  for (Plan& plan : chunked_candidates(profile, topology, schedule, microbatches, options.virtual_stages)) {
    if (best && work_per_sample / plan.num_workers() >= best->time_per_sample_s()) break;
    PlanEstimate estimate = estimate_plan(profile, topology, plan, options.optimizer);
    if (estimate_tier(estimate) != 0) continue;
    if (estimate.peak_memory > limit) {
      if (smallest->value == 0 || estimate.peak_memory < *smallest) *smallest = estimate.peak_memory;
      continue;
    }
    PlanChoice choice{std::move(plan), std::move(estimate), std::nullopt};
    if (!best || choice.time_per_sample_s() < best->time_per_sample_s()) best = std::move(choice);
  }
  return best;
}

// The best candidate of one (schedule, microbatches) search, by the estimate.
std::optional<PlanChoice> best_for(const Profile& profile, const Topology& topology, const PlannerOptions& options,
                                   Schedule schedule, int microbatches, Bytes limit, Bytes* smallest) {
  if (runs_chunks(schedule)) return best_chunked(profile, topology, options, schedule, microbatches, limit, smallest);
  SearchOptions search{schedule, microbatches, profile.microbatch_size, options.straight, limit, options.optimizer, 8};
  const SearchResult found = search_plans(profile, topology, search);
  if (found.candidates.empty()) {
    if (smallest->value == 0 || found.smallest_feasible_memory < *smallest) *smallest = found.smallest_feasible_memory;
    return std::nullopt;
  }
  std::vector<Plan> candidates = found.candidates;
  if (runs_steady_state(schedule))
    for (Plan& plan : candidates) plan.batches = kPipeDreamMinibatches;
  auto chosen = choose_plan(candidates, profile, topology, options.optimizer);  // the rule the tests check
  if (!chosen) return std::nullopt;
  return PlanChoice{std::move(chosen->plan), std::move(chosen->estimate), std::nullopt};
}

std::vector<std::pair<Schedule, int>> combinations(const PlannerOptions& options) {
  const std::vector<Schedule> schedules =
      options.schedule ? std::vector<Schedule>{*options.schedule}
                       : std::vector<Schedule>{Schedule::kPipeDream, Schedule::kOneFOneB, Schedule::kGPipe,
                                               Schedule::kZbH1,      Schedule::kZbH2,     Schedule::kInterleaved1F1B,
                                               Schedule::kZbV,       Schedule::kDualPipeV};
  const std::vector<int> counts =
      options.microbatches > 0 ? std::vector<int>{options.microbatches} : std::vector<int>{8, 16, 32, 64};
  std::vector<std::pair<Schedule, int>> all;
  for (Schedule schedule : schedules) {
    if (runs_steady_state(schedule)) {
      all.emplace_back(schedule, 1);
    } else if (schedule != Schedule::kDataParallel) {
      for (int m : counts) all.emplace_back(schedule, m);
    }
  }
  return all;
}

PlanChoice data_parallel_choice(const Profile& profile, const Topology& topology, Optimizer optimizer,
                                int microbatches) {
  const Plan plan = data_parallel_plan(profile, topology.num_devices(), microbatches);
  return PlanChoice{plan, estimate_plan(profile, topology, plan, optimizer), std::nullopt};
}

// The baseline's microbatches per step: a flush schedule's M (the same samples
// per optimizer step, each replica accumulating M / D of them), never fewer
// than one per device; PipeDream's steady state, which flushes nothing, against
// the paper's baseline of one microbatch per device and an all-reduce per step.
int data_parallel_baseline_microbatches(const Plan& chosen, int devices) {
  return runs_steady_state(chosen.schedule) ? devices : std::max(chosen.batches, devices);
}

Error no_fit_error(const Profile& profile, const Topology& topology, Bytes limit, Bytes smallest) {
  return Error{
      fmt::format("no split of {} over the {} devices of {} fits {:.2f} GiB per device; the smallest memory any "
                  "split needs is {:.2f} GiB (use a larger --memory-limit-gib, more devices, or a smaller microbatch)",
                  profile.model, topology.num_devices(), topology.name, limit.gib(), smallest.gib())};
}

// A chunked schedule (asked for alone) with no layout at all for the
// microbatch count: what the schedule asks (chunked_plans.h, check_chunks).
Error no_chunked_layout_error(const Profile& profile, Schedule schedule, int microbatches) {
  const std::string name(schedule_name(schedule));
  if (profile.num_layers() < 4)  // 2 ranks x 2 chunks, one layer each
    return Error{fmt::format("{} needs at least 4 layers (2 ranks x 2 chunks); {} has {}", name, profile.model,
                             profile.num_layers())};
  return Error{fmt::format(
      "no layout of {} takes {} microbatches per iteration: on p ranks x r replicas (p >= 2) it needs {} "
      "(--microbatches)",
      name, microbatches,
      schedule == Schedule::kInterleaved1F1B ? "a multiple of p r, so at least 2" : "at least 2 p r, so at least 4")};
}

Result<PlannerOutcome> plan_with_baton(const Profile& profile, const Topology& topology, const PlannerOptions& options,
                                       Bytes limit) {
  PlannerOutcome outcome;
  Bytes smallest;
  std::vector<PlanChoice> choices;
  const auto all = combinations(options);
  for (size_t k = 0; k < all.size(); ++k) {
    const auto& [schedule, microbatches] = all[k];
    auto best = best_for(profile, topology, options, schedule, microbatches, limit, &smallest);
    if (best) choices.push_back(std::move(*best));
    if (options.progress)
      options.progress(runs_steady_state(schedule) ? std::string(schedule_name(schedule))
                                                   : fmt::format("{} M={}", schedule_name(schedule), microbatches),
                       static_cast<int>(k + 1), static_cast<int>(all.size()));
  }
  if (options.schedule == Schedule::kDataParallel) {
    const int microbatches = options.microbatches > 0 ? options.microbatches : topology.num_devices();
    PlanChoice dp = data_parallel_choice(profile, topology, options.optimizer, microbatches);
    if (dp.estimate.peak_memory > limit) return no_fit_error(profile, topology, limit, dp.estimate.peak_memory);
    choices.push_back(std::move(dp));
  }
  if (choices.empty() && options.schedule && runs_chunks(*options.schedule)) {
    // Nothing rated at all: no layout takes the microbatch count.
    const bool none = std::all_of(all.begin(), all.end(), [&](const auto& combination) {
      return chunked_candidates(profile, topology, combination.first, combination.second, options.virtual_stages)
          .empty();
    });
    if (none) return no_chunked_layout_error(profile, *options.schedule, options.microbatches);
  }
  if (choices.empty()) {
    Error error = no_fit_error(profile, topology, limit, smallest);
    // A chunked schedule at a fixed microbatch count may feed fewer workers than the devices.
    if (options.schedule && runs_chunks(*options.schedule) && options.microbatches > 0) {
      const int most = most_chunked_workers(*options.schedule, options.microbatches);
      if (most < topology.num_devices())
        error.message += fmt::format(
            "; {} at {} microbatches runs on at most {} of the {} devices, so more "
            "microbatches (--microbatches) let it use more",
            schedule_name(*options.schedule), options.microbatches, most, topology.num_devices());
    }
    return error;
  }
  for (PlanChoice& choice : choices) simulate_choice(choice);
  std::stable_sort(choices.begin(), choices.end(), [&](const PlanChoice& a, const PlanChoice& b) {
    const bool fa = fits(a, limit), fb = fits(b, limit);
    if (fa != fb) return fa;
    return a.time_per_sample_s() < b.time_per_sample_s();
  });
  outcome.best = std::move(choices.front());
  outcome.runners_up.assign(std::make_move_iterator(choices.begin() + 1), std::make_move_iterator(choices.end()));
  return outcome;
}

PipeDreamOptions pipedream_options(const Topology& topology, const PlannerOptions& options, Bytes limit) {
  PipeDreamOptions pd;
  for (const Level& level : topology.levels) pd.levels.push_back(PipeDreamLevel{level.size, level.bandwidth()});
  pd.straight_pipeline = options.straight;
  if (options.activation_compression > 0) pd.activation_compression = options.activation_compression;
  // As the reference: the memory constraint only when asked for (--use_memory_constraint -s).
  if (options.memory_limit) pd.memory_size = limit;
  return pd;
}

Result<PlannerOutcome> plan_with_pipedream(const Profile& profile, const Topology& topology,
                                           const PlannerOptions& options, Bytes limit) {
  auto planned = plan_pipedream(profile, pipedream_options(topology, options, limit));
  if (!planned) return planned.error();
  auto ordered = reorder_layers(profile, planned->layer_order);
  if (!ordered) return ordered.error();
  Plan plan;
  plan.model = profile.model;
  plan.schedule = Schedule::kPipeDream;
  plan.microbatch_size = profile.microbatch_size;
  plan.batches = kPipeDreamMinibatches;
  plan.stages = stage_plans(*planned);
  if (auto ok = assign_devices(plan, topology); !ok) return ok.error();
  PlannerOutcome outcome;
  outcome.best = PlanChoice{plan, estimate_plan(*ordered, topology, plan, options.optimizer), std::nullopt};
  simulate_choice(outcome.best);
  outcome.pipedream_time = planned->time_per_minibatch;
  outcome.layer_order = planned->layer_order;
  return outcome;
}

}  // namespace

Result<PlannerOutcome> make_plan(const Profile& profile, const Topology& topology, const PlannerOptions& options) {
  const Bytes limit = options.memory_limit.value_or(topology.device.memory);
  const Profile effective =
      options.cost_model == CostModel::kBaton ? compressed(profile, options.activation_compression) : profile;
  auto outcome = options.cost_model == CostModel::kPipeDream ? plan_with_pipedream(profile, topology, options, limit)
                                                             : plan_with_baton(effective, topology, options, limit);
  if (!outcome) return outcome;
  outcome->memory_limit = limit;
  // The whole model as one stage, priced as the simulator prices a stage.
  const StageCost whole = stage_cost(profile, LayerRange{0, profile.num_layers()}, topology.device.relative_speed);
  outcome->single_device_per_sample = (whole.forward + whole.backward) / double(profile.microbatch_size);
  if (!options.straight && topology.num_devices() > 1)
    outcome->data_parallel =
        data_parallel_choice(effective, topology, options.optimizer,
                             data_parallel_baseline_microbatches(outcome->best.plan, topology.num_devices()));
  if (outcome->layer_order.empty())
    for (int i = 0; i < profile.num_layers(); ++i) outcome->layer_order.push_back(i);
  return outcome;
}

}  // namespace baton
