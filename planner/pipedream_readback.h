// Reading a plan back out of solved PipeDream levels, and placing layers.
//
// read_back_stages: from the top level down, follows each level's decisions
// (planner/pipedream_level.h) for the range it is given on a whole unit, as the
// reference's analyze_partitioning does; returns the flattened stages in
// pipeline order with their replication at each level.
//
// assign_layers: stage of every profile layer. A node belongs to the first
// stage whose last state's closure holds it (a node no closure holds, which the
// enumeration does not produce on the shipped profiles, goes to the last
// stage); an `Input` layer belongs to stage 0; a dropped `__getitem__` sink to
// the latest stage among its inputs. Every edge then goes forward or stays in a
// stage, so the stable sort of layers by stage is a topological order.
// Complexity: O(stages x levels x one decision scan) and O(layers log layers).
#pragma once

#include <vector>

#include "planner/pipedream_level.h"
#include "planner/pipedream_states.h"
#include "sim/profile.h"

namespace baton {

struct StateStage {
  int first_state = 0;
  int last_state = 0;
  std::vector<int> replicas_per_level;  // innermost first
};

// `levels` innermost first; the top level must have a finite value for the
// whole range (0..N-1 on all its machines).
std::vector<StateStage> read_back_stages(const std::vector<LevelSolver*>& levels, int num_states);

struct LayerPlacement {
  std::vector<int> stage_of_layer;  // per profile layer
  std::vector<int> order;           // layers sorted by (stage, index)
  std::vector<LayerRange> ranges;   // per stage, positions in `order`
};

LayerPlacement assign_layers(const Profile& profile, const StateSpace& space, const std::vector<StateStage>& stages);

}  // namespace baton
