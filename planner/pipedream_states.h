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
//   closure[j]        = the antichain and all its ancestors (nodes done),
//                       stored flat in closure_words (words_per_state words each);
//   cum_seconds[j]    = sum over closure[j] of forward + backward time;
//   cum_activation_bytes[j], cum_param_bytes[j] likewise;
//   edges             = the state DAG's edges (from, to), repeats kept.
//
// Ancestor states. The reference splits at the *ancestor states* of j: the
// states from which j can be reached in the state DAG. No table of them is
// kept (it would be S^2 bits: 6 GB for inception_v3); instead
//   k is an ancestor state of j  <=>  closure[k] is a strict subset of closure[j],
// a test on a few words (is_ancestor). Proof. (=>) An edge A -> A' adds y, with
// y not in closure(A) (y is not in A and has no descendant in U(A), so it is no
// ancestor of a member), and closure(A') = closure(A) + y + ancestors(y) (the
// antichain's closure is the down-set of U(A) - {x} + {y}, and x is a parent of
// y). So closures grow strictly along edges. (<=) Let closure(A) be a strict
// subset of closure(B), D = closure(B) - closure(A). Some y in D has a parent x
// in closure(A): along B's discovery path from the first state (whose closure,
// the first source, is in every closure), the first step whose closure meets D
// adds a node y of D consuming a node x of the previous closure, which lies in
// closure(B) - D = closure(A) (a step whose y is in closure(A) adds nothing of
// D, closure(A) being a down-set). This x is in U(A): either x is in A, or x is
// a strict ancestor of some a in A with the consumer y outside ancestors(a) +
// {a}. y is not in A and has no descendant in U(A) (either would put y in
// closure(A)), so A -> A'' with closure(A'') = closure(A) + y + ancestors(y), a
// subset of closure(B), is an edge; repeating from A'' (D shrinks) reaches the
// state whose closure is closure(B), which is B (an antichain is the set of
// maximal elements of its closure).
// tests/planner/pipedream_states_test.cc also checks it against reachability.
// Invariants: state 0 is the first state; the order is topological, so every
// ancestor state of j is < j.
// Complexity: O(S * (U * D * n / 64 + n)) for S states, augmented antichains of
// size U, out-degree D and n nodes; memory O(S * (n / 64 + D)).
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "planner/bitset.h"
#include "sim/profile.h"
#include "sim/result.h"

namespace baton {

// How the pre-processing treats each profile layer.
enum class LayerRole { kNode, kInput, kDroppedSink };

struct StateSpace {
  std::vector<LayerRole> role;       // per profile layer
  std::vector<int> node_layer;       // node index -> profile layer index (increasing)
  std::vector<double> output_bytes;  // per state, as above
  std::vector<double> cum_seconds;
  std::vector<double> cum_activation_bytes;
  std::vector<double> cum_param_bytes;
  int words_per_state = 0;
  std::vector<uint64_t> closure_words;     // closure(j) at j * words_per_state
  std::vector<std::pair<int, int>> edges;  // the state DAG, (from, to)

  int num_states() const { return static_cast<int>(cum_seconds.size()); }
  int num_nodes() const { return static_cast<int>(node_layer.size()); }
  // closure[j] as a set of nodes.
  Bitset closure(int j) const;
  // True when state k is an ancestor state of state j (see above).
  bool is_ancestor(int k, int j) const {
    if (k == j) return false;
    const uint64_t* a = closure_words.data() + static_cast<size_t>(k) * words_per_state;
    const uint64_t* b = closure_words.data() + static_cast<size_t>(j) * words_per_state;
    for (int w = 0; w < words_per_state; ++w)
      if ((a[w] & ~b[w]) != 0) return false;
    return true;
  }
};

// "profile 'vgg16'", or "the profile" when it has no model name (for messages).
std::string profile_label(const Profile& profile);

// Classifies layers (see the contract above). Fails when no node is left.
Result<std::vector<LayerRole>> classify_layers(const Profile& profile);

// Enumerates, orders and measures the states. Fails when no node is left or
// when the enumeration finds more than `max_states` states (the count grows
// with the product of the lengths of parallel branches: inception_v3 has
// 221,564).
Result<StateSpace> build_state_space(const Profile& profile, int max_states);

}  // namespace baton
