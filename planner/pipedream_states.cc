#include "planner/pipedream_states.h"

#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace baton::planner {
namespace {

// The layer DAG restricted to nodes, with transitive relations as bitsets.
struct NodeGraph {
  std::vector<std::vector<int>> consumers;  // increasing node index
  std::vector<Bitset> ancestors;            // strict
  std::vector<Bitset> descendants;          // strict
  // escaping[a]: ancestors p of a with a consumer outside ancestors(a) + {a};
  // the augmented antichain of A is A plus the union of escaping[a], a in A.
  std::vector<Bitset> escaping;

  int size() const { return static_cast<int>(consumers.size()); }
};

// Consumers and ancestors, from the layers' inputs restricted to nodes.
void link_nodes(const Profile& profile, const StateSpace& space, NodeGraph& graph) {
  std::vector<int> node_of(profile.layers.size(), -1);
  for (int v = 0; v < space.num_nodes(); ++v) node_of[space.node_layer[v]] = v;
  for (int v = 0; v < space.num_nodes(); ++v) {
    for (int layer : profile.layers[space.node_layer[v]].inputs) {
      const int p = node_of[layer];
      if (p < 0) continue;  // an Input layer
      graph.consumers[p].push_back(v);
      graph.ancestors[v] |= graph.ancestors[p];
      graph.ancestors[v].set(p);
    }
  }
}

void find_descendants_and_escaping(NodeGraph& graph) {
  for (int v = graph.size() - 1; v >= 0; --v) {
    for (int c : graph.consumers[v]) {
      graph.descendants[v] |= graph.descendants[c];
      graph.descendants[v].set(c);
    }
  }
  for (int a = 0; a < graph.size(); ++a) {
    graph.ancestors[a].for_each([&](int p) {
      for (int c : graph.consumers[p]) {
        if (c != a && !graph.ancestors[a].test(c)) {
          graph.escaping[a].set(p);
          break;
        }
      }
    });
  }
}

NodeGraph make_node_graph(const Profile& profile, const StateSpace& space) {
  const int n = space.num_nodes();
  NodeGraph graph;
  graph.consumers.resize(n);
  graph.ancestors.assign(n, Bitset(n));
  graph.descendants.assign(n, Bitset(n));
  graph.escaping.assign(n, Bitset(n));
  link_nodes(profile, space, graph);
  find_descendants_and_escaping(graph);
  return graph;
}

// The state DAG as found: antichains by discovery id, edges in discovery order.
struct StateDag {
  std::vector<Bitset> antichains;
  std::vector<std::pair<int, int>> edges;  // (from, to), repeats kept
};

Bitset augmented(const NodeGraph& graph, const Bitset& antichain) {
  Bitset out = antichain;
  antichain.for_each([&](int a) { out |= graph.escaping[a]; });
  return out;
}

// Breadth-first enumeration of antichains (see the header). Expanding states in
// discovery order is the breadth-first order: a state is queued when found.
class Enumerator {
 public:
  Enumerator(const NodeGraph& graph, int max_states) : graph_(graph), max_states_(max_states) {}

  // False when more than max_states states exist.
  bool run(int first_source) {
    Bitset start(graph_.size());
    start.set(first_source);
    id_of(start);
    for (size_t id = 0; id < dag_.antichains.size(); ++id) {
      expand(static_cast<int>(id));
      if (static_cast<int>(dag_.antichains.size()) > max_states_) return false;
    }
    return true;
  }
  const StateDag& dag() const { return dag_; }

 private:
  int id_of(const Bitset& antichain) {
    const auto [it, inserted] = ids_.emplace(antichain, static_cast<int>(dag_.antichains.size()));
    if (inserted) dag_.antichains.push_back(antichain);
    return it->second;
  }

  // Members that are ancestors of another member are removed.
  Bitset deaugment(const Bitset& set) const {
    Bitset out = set;
    set.for_each([&](int z) {
      if (graph_.descendants[z].intersects(set)) out.reset(z);
    });
    return out;
  }

  void expand(int id) {
    const Bitset antichain = dag_.antichains[id];
    const Bitset augmented_set = augmented(graph_, antichain);
    Bitset extra = augmented_set;
    extra.subtract(antichain);
    auto advance = [&](int x) {
      for (int y : graph_.consumers[x]) {
        if (antichain.test(y) || graph_.descendants[y].intersects(augmented_set)) continue;
        Bitset next = augmented_set;
        next.reset(x);
        next.set(y);
        const int next_id = id_of(deaugment(next));
        dag_.edges.emplace_back(id, next_id);
      }
    };
    extra.for_each(advance);
    antichain.for_each(advance);
  }

  const NodeGraph& graph_;
  const int max_states_;
  StateDag dag_;
  std::unordered_map<Bitset, int, BitsetHash> ids_;
};

// Reverse post-order of a depth-first search from state 0, successors in the
// order they were found. Returns the position of each state.
std::vector<int> depth_first_positions(int num_states,
                                       const std::vector<std::pair<int, int>>& edges) {
  std::vector<std::vector<int>> successors(num_states);
  for (const auto& [from, to] : edges) successors[from].push_back(to);
  std::vector<int> post_order;
  std::vector<char> seen(num_states, 0);
  std::vector<std::pair<int, size_t>> stack{{0, 0}};
  seen[0] = 1;
  while (!stack.empty()) {
    auto& [state, next] = stack.back();
    if (next < successors[state].size()) {
      const int child = successors[state][next++];
      if (!seen[child]) {
        seen[child] = 1;
        stack.emplace_back(child, 0);
      }
      continue;
    }
    post_order.push_back(state);
    stack.pop_back();
  }
  std::vector<int> position(num_states);
  for (int p = 0; p < num_states; ++p) position[post_order[num_states - 1 - p]] = p;
  return position;
}

struct StateSums {
  double output_bytes = 0.0;
  double seconds = 0.0;
  double activation_bytes = 0.0;
  double param_bytes = 0.0;
};

// Sums over the augmented antichain (output) and over the closure (the rest);
// fills `closure`.
StateSums measure_state(const Profile& profile, const StateSpace& space, const NodeGraph& graph,
                        const Bitset& augmented_set, Bitset& closure) {
  StateSums sums;
  augmented_set.for_each([&](int v) {
    closure |= graph.ancestors[v];
    closure.set(v);
    sums.output_bytes +=
        static_cast<double>(profile.layers[space.node_layer[v]].output_bytes.value);
  });
  closure.for_each([&](int v) {
    const Layer& layer = profile.layers[space.node_layer[v]];
    sums.seconds += (layer.forward + layer.backward).value;
    sums.activation_bytes += static_cast<double>(layer.output_bytes.value);
    sums.param_bytes += static_cast<double>(layer.param_bytes.value);
  });
  return sums;
}

void fill_state_ancestors(const StateDag& dag, const std::vector<int>& position,
                          StateSpace& space) {
  const int num_states = static_cast<int>(position.size());
  std::vector<std::vector<int>> predecessors(num_states);
  for (const auto& [from, to] : dag.edges) predecessors[position[to]].push_back(position[from]);
  space.ancestors.assign(num_states, Bitset(num_states));
  for (int j = 0; j < num_states; ++j) {
    for (int p : predecessors[j]) {
      space.ancestors[j] |= space.ancestors[p];
      space.ancestors[j].set(p);
    }
  }
}

void fill_states(const Profile& profile, const NodeGraph& graph, const StateDag& dag,
                 StateSpace& space) {
  const int num_states = static_cast<int>(dag.antichains.size());
  const std::vector<int> position = depth_first_positions(num_states, dag.edges);
  space.output_bytes.assign(num_states, 0.0);
  space.cum_seconds.assign(num_states, 0.0);
  space.cum_activation_bytes.assign(num_states, 0.0);
  space.cum_param_bytes.assign(num_states, 0.0);
  space.closure.assign(num_states, Bitset(graph.size()));
  for (int id = 0; id < num_states; ++id) {
    const int j = position[id];
    const StateSums sums = measure_state(profile, space, graph,
                                         augmented(graph, dag.antichains[id]), space.closure[j]);
    space.output_bytes[j] = sums.output_bytes;
    space.cum_seconds[j] = sums.seconds;
    space.cum_activation_bytes[j] = sums.activation_bytes;
    space.cum_param_bytes[j] = sums.param_bytes;
  }
  fill_state_ancestors(dag, position, space);
}

}  // namespace

std::string profile_label(const Profile& profile) {
  return profile.model.empty() ? std::string("the profile")
                               : fmt::format("profile '{}'", profile.model);
}

Result<std::vector<LayerRole>> classify_layers(const Profile& profile) {
  const int n = profile.num_layers();
  std::vector<LayerRole> role(n, LayerRole::kNode);
  std::vector<char> has_consumer(n, 0);
  for (const Layer& layer : profile.layers)
    for (int p : layer.inputs) has_consumer[p] = 1;
  int nodes = n;
  for (int l = 0; l < n; ++l) {
    const Layer& layer = profile.layers[l];
    if (layer.inputs.empty() && layer.description.starts_with("Input")) {
      role[l] = LayerRole::kInput;
      --nodes;
    } else if (!has_consumer[l] && layer.description.starts_with("__getitem__")) {
      role[l] = LayerRole::kDroppedSink;
      --nodes;
    }
  }
  if (nodes == 0)
    return Error{fmt::format("{}: nothing to plan once Input and __getitem__ layers are left out",
                             profile_label(profile))};
  return role;
}

Result<StateSpace> build_state_space(const Profile& profile, int max_states) {
  auto role = classify_layers(profile);
  if (!role) return role.error();
  StateSpace space;
  space.role = std::move(*role);
  for (int l = 0; l < profile.num_layers(); ++l)
    if (space.role[l] == LayerRole::kNode) space.node_layer.push_back(l);
  const NodeGraph graph = make_node_graph(profile, space);
  int first_source = 0;
  while (graph.ancestors[first_source].any()) ++first_source;
  Enumerator enumerator(graph, max_states);
  if (!enumerator.run(first_source))
    return Error{
        fmt::format("{}: its layer graph has more than {} states (cuts); the PipeDream "
                    "cost model cannot plan it",
                    profile_label(profile), max_states)};
  fill_states(profile, graph, enumerator.dag(), space);
  return space;
}

}  // namespace baton::planner
