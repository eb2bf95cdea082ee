// The PipeDream-compatible planner (`--cost-model pipedream`): PipeDream's
// hierarchical dynamic program over DAG states, reproducing the objective of
// the reference optimizer (optimizer_graph_hierarchical.py) on its profiles.
//
// What it returns. T = the reference's objective: the time per minibatch of the
// slowest stage in steady state (throughput 1 / T), from the recurrence in
// planner/pipedream_level.h applied level by level: the innermost level is
// solved for every range of states it is asked about; each level above uses, as
// the "compute time" of a range on one of its units, the level below's best time
// for that range on a whole unit. The plan is read back top-down: each unit of a
// replicated stage gets the same inner split, so a stage's flattened replication
// is the product of its replications per level.
//
// Pre-processing follows the reference (see planner/pipedream_states.h):
// `Input*` sources and `__getitem__` sinks are left out of the DP; the plan puts
// inputs in the first stage and dropped sinks with their producers.
//
// Stages and layer order. For a chain, stage s covers a layer range of the
// profile. For a DAG, stage s holds the layers of the closure of its last state
// not held by an earlier stage; every edge goes from a stage to the same or a
// later one, so sorting layers by (stage, profile index) is a topological order
// in which each stage is contiguous. `layer_order` is that permutation of profile
// layer indices and each stage's `layers` is a range of positions in it;
// `reorder_layers` turns the profile into that order, after which `stage_plans`
// are ordinary baton stages. For a chain the permutation is the identity.
//
// Deviations from the reference, all documented: only the options below (no
// use_fewer_machines, no num_machines_in_first_level); its state order and ties
// vary from run to run, so only T is comparable, not the split; it crashes on a
// single-node graph, where this returns one stage.
// Complexity: see planner/pipedream_level.h and bench/RESULTS.md; every shipped
// profile, inception_v3 (221,564 states) included, plans in under a second on
// the reference's layouts, with or without the memory limit and activation
// transfers (480 cases; the slowest, inception_v3 flat-16 straight, 0.62 s).
// Thread safety: a pure function; concurrent calls are independent.
#pragma once

#include <optional>
#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/units.h"

namespace baton {

// One level of the cluster, as the reference's `-n` and `-b` give it.
struct PipeDreamLevel {
  int machines = 1;     // units of the level below (devices at the innermost) per unit here
  Bandwidth bandwidth;  // per link at this level, bytes per second
};

struct PipeDreamOptions {
  // Innermost first, at least one. `-n 4 4 -b 1e10 1.25e9` is
  // {{4, {1e10}}, {4, {1.25e9}}}; the reference's default bandwidth is 1e9 B/s.
  std::vector<PipeDreamLevel> levels;
  // No replication: every stage on one machine, at every level.
  bool straight_pipeline = false;
  // R: when set, activation transfers 2 x bytes / (B r) / R are counted; when
  // absent they are not (the reference's default).
  std::optional<double> activation_compression;
  // S: when set, a stage is rejected when (activations + parameters) x
  // ceil((M - m) / r) > S (the reference's --use_memory_constraint -s S).
  std::optional<Bytes> memory_size;
  // Refuse graphs with more states than this. Memory grows with the states
  // and the state DAG's edges (inception_v3: 221,564 states, 1.4 million
  // edges, about 100 MB in all), and the DP's worst case is cubic in them.
  int max_states = 2'000'000;
};

struct PipeDreamStage {
  LayerRange layers;                    // positions in PipeDreamPlan::layer_order
  int replicas = 1;                     // product of replicas_per_level
  std::vector<int> replicas_per_level;  // innermost first
  int first_state = 0;                  // DP states first..last (inclusive)
  int last_state = 0;
  Seconds compute;  // forward + backward of the stage's states, as the DP counts it
  Seconds time;     // compute / replicas (T also counts all-reduce and transfers)
};

struct PipeDreamPlan {
  Seconds time_per_minibatch;    // T
  std::vector<int> layer_order;  // permutation of profile layer indices
  std::vector<PipeDreamStage> stages;
  int num_states = 0;

  bool keeps_profile_order() const;
};

// Fails on invalid options (no level, machines < 1, bandwidth <= 0, R <= 0,
// negative memory), on a profile with no node left or too many states, and
// when no plan is feasible (memory limit, or a straight pipeline with fewer
// states than machines).
Result<PipeDreamPlan> plan_pipedream(const Profile& profile, const PipeDreamOptions& options);

// The profile with its layers in `order` (a permutation of layer indices in
// which every layer comes after its inputs); inputs are renumbered.
Result<Profile> reorder_layers(const Profile& profile, const std::vector<int>& order);

// The plan's stages as baton stages (ranges index the reordered profile; no
// devices assigned).
std::vector<StagePlan> stage_plans(const PipeDreamPlan& plan);

}  // namespace baton
