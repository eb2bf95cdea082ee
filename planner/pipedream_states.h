// The states of PipeDream's optimizer: the cuts of a profile's layer DAG that
// its dynamic program splits at, with their cumulative costs.
//
// Pre-processing (as the reference does it):
//   - a source layer (no inputs) whose description starts with "Input" is left
//     out, with its cost; the plan puts it in the first stage;
//   - then a sink layer (no consumer) whose description starts with
//     "__getitem__" is left out; the plan puts it with its producers.
//   Every other layer is a *node*.
//
// States. An antichain is a set of nodes none of which is an ancestor of
// another. The *augmented* antichain of A adds every strict ancestor p of a
// member a that has a consumer outside ancestors(a) + {a}. Starting from the
// antichain {first source} (the source node of smallest profile index), the
// enumeration takes, breadth first, from each antichain A and each node x of
// its augmented antichain U, each consumer y of x that is not in A and has no
// descendant in U, and forms the next antichain (U - {x} + {y}) less every
// member that is an ancestor of another member. Every distinct antichain met is
// one state; "A -> next" is an edge of the state DAG. For a chain, state i is
// "layers 0..i done"; branchy graphs give more states than nodes.
//
// Order. States are numbered by a depth-first topological order of the state
// DAG (reverse post-order from the first state, successors in the order they
// were found), the shape of the reference's order. The reference's own order
// varies between runs; its objective does not on the shipped profiles.
//
// Per state j (arrays indexed by that order):
//   output_bytes[j]   = sum of activation bytes over the augmented antichain
//                       (what the reference charges for the cut after j);
//   closure[j]        = the antichain and all its ancestors (nodes done);
//   cum_seconds[j]    = sum over closure[j] of forward + backward time;
//   cum_activation_bytes[j], cum_param_bytes[j] likewise;
//   ancestors[j]      = the states from which j can be reached (j excluded).
// Invariants: state 0 is the first state; ancestors[j] only holds states < j.
// Complexity: O(S * (U * D * n / 64 + n)) for S states, augmented antichains of
// size U, out-degree D and n nodes; plus O(S^2 / 64) for the ancestor bitsets.
// Thread safety: a plain value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "planner/bitset.h"
#include "sim/profile.h"
#include "sim/result.h"

namespace baton::planner {

// How the pre-processing treats each profile layer.
enum class LayerRole { kNode, kInput, kDroppedSink };

struct StateSpace {
  std::vector<LayerRole> role;       // per profile layer
  std::vector<int> node_layer;       // node index -> profile layer index (increasing)
  std::vector<double> output_bytes;  // per state, as above
  std::vector<double> cum_seconds;
  std::vector<double> cum_activation_bytes;
  std::vector<double> cum_param_bytes;
  std::vector<Bitset> ancestors;  // over states
  std::vector<Bitset> closure;    // over nodes

  int num_states() const { return static_cast<int>(cum_seconds.size()); }
  int num_nodes() const { return static_cast<int>(node_layer.size()); }
};

// "profile 'vgg16'", or "the profile" when it has no model name (for messages).
std::string profile_label(const Profile& profile);

// Classifies layers (see the contract above). Fails when no node is left.
Result<std::vector<LayerRole>> classify_layers(const Profile& profile);

// Enumerates, orders and measures the states. Fails when no node is left or
// when the enumeration finds more than `max_states` states (the count grows
// with the product of the lengths of parallel branches: inception_v3 has about
// 220,000, beyond any cubic dynamic program).
Result<StateSpace> build_state_space(const Profile& profile, int max_states);

}  // namespace baton::planner
