#include "planner/pipedream_readback.h"

#include <algorithm>
#include <numeric>

namespace baton {
namespace {

struct Piece {
  int first_state;
  int last_state;
  int replicas;
};

// The stages one level splits states first..last into on `machines` machines.
std::vector<Piece> split_range(LevelSolver& level, int first, int last, int machines) {
  std::vector<Piece> pieces;
  for (int end = last, left = machines;;) {
    const LevelDecision decision = level.decision(first, end, left);
    if (decision.single_stage) {
      pieces.push_back(Piece{first, end, left});
      break;
    }
    pieces.push_back(Piece{decision.split + 1, end, decision.last_replicas});
    end = decision.split;
    left -= decision.last_replicas;
  }
  std::reverse(pieces.begin(), pieces.end());
  return pieces;
}

void expand(const std::vector<LevelSolver*>& levels, int level, const Piece& range, std::vector<int>& replicas,
            std::vector<StateStage>& out) {
  for (const Piece& piece : split_range(*levels[level], range.first_state, range.last_state, range.replicas)) {
    replicas[level] = piece.replicas;
    if (level == 0) {
      out.push_back(StateStage{piece.first_state, piece.last_state, replicas});
    } else {
      const Piece whole_unit{piece.first_state, piece.last_state, levels[level - 1]->machines()};
      expand(levels, level - 1, whole_unit, replicas, out);
    }
  }
}

}  // namespace

std::vector<StateStage> read_back_stages(const std::vector<LevelSolver*>& levels, int num_states) {
  const int top = static_cast<int>(levels.size()) - 1;
  std::vector<int> replicas(levels.size(), 1);
  std::vector<StateStage> out;
  expand(levels, top, Piece{0, num_states - 1, levels[top]->machines()}, replicas, out);
  return out;
}

LayerPlacement assign_layers(const Profile& profile, const StateSpace& space, const std::vector<StateStage>& stages) {
  const int num_layers = profile.num_layers();
  const int last_stage = static_cast<int>(stages.size()) - 1;
  LayerPlacement placement;
  placement.stage_of_layer.assign(num_layers, -1);
  std::vector<int>& stage_of = placement.stage_of_layer;
  for (int s = 0; s <= last_stage; ++s) {
    space.closure(stages[s].last_state).for_each([&](int node) {
      int& stage = stage_of[space.node_layer[node]];
      if (stage < 0) stage = s;
    });
  }
  for (int l = 0; l < num_layers; ++l) {
    if (stage_of[l] >= 0) continue;
    switch (space.role[l]) {
      case LayerRole::kNode: stage_of[l] = last_stage; break;
      case LayerRole::kInput: stage_of[l] = 0; break;
      case LayerRole::kDroppedSink:
        stage_of[l] = 0;
        for (int p : profile.layers[l].inputs) stage_of[l] = std::max(stage_of[l], stage_of[p]);
        break;
    }
  }
  placement.order.resize(num_layers);
  std::iota(placement.order.begin(), placement.order.end(), 0);
  std::stable_sort(placement.order.begin(), placement.order.end(),
                   [&](int a, int b) { return stage_of[a] < stage_of[b]; });
  placement.ranges.assign(stages.size(), LayerRange{});
  for (int p = num_layers - 1; p >= 0; --p) placement.ranges[stage_of[placement.order[p]]].begin = p;
  for (int p = 0; p < num_layers; ++p) placement.ranges[stage_of[placement.order[p]]].end = p + 1;
  // An empty stage (possible only for a first stage whose states add no layer)
  // gets the empty range at its place.
  for (int s = 0; s <= last_stage; ++s) {
    if (placement.ranges[s].end > placement.ranges[s].begin) continue;
    const int at = s == 0 ? 0 : placement.ranges[s - 1].end;
    placement.ranges[s] = LayerRange{at, at};
  }
  return placement;
}

}  // namespace baton
