#include "planner/pipedream_states.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

namespace baton {
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

// Node sets as rows of `words` 64-bit words in one array (the enumeration's
// hot loops: no allocation per set).
namespace words {

inline bool test(const uint64_t* set, int v) { return (set[v >> 6] >> (v & 63)) & 1u; }
inline void set(uint64_t* set, int v) { set[v >> 6] |= uint64_t{1} << (v & 63); }
inline void reset(uint64_t* set, int v) { set[v >> 6] &= ~(uint64_t{1} << (v & 63)); }
inline bool intersects(const uint64_t* a, const uint64_t* b, int count) {
  for (int w = 0; w < count; ++w)
    if ((a[w] & b[w]) != 0) return true;
  return false;
}
template <typename Visit>
void for_each(const uint64_t* set, int count, Visit&& visit) {
  for (int w = 0; w < count; ++w)
    for (uint64_t bits = set[w]; bits != 0; bits &= bits - 1) visit(w * 64 + std::countr_zero(bits));
}

}  // namespace words

// The node graph's relations as rows of words.
struct FlatGraph {
  int words = 0;
  std::vector<uint64_t> ancestors, descendants, escaping;  // node v at v * words

  explicit FlatGraph(const NodeGraph& graph)
      : words(static_cast<int>((graph.size() + 63) / 64)),
        ancestors(static_cast<size_t>(graph.size()) * words),
        descendants(ancestors.size()),
        escaping(ancestors.size()) {
    for (int v = 0; v < graph.size(); ++v) {
      const auto at = static_cast<std::ptrdiff_t>(v) * words;
      std::copy(graph.ancestors[v].words().begin(), graph.ancestors[v].words().end(), ancestors.begin() + at);
      std::copy(graph.descendants[v].words().begin(), graph.descendants[v].words().end(), descendants.begin() + at);
      std::copy(graph.escaping[v].words().begin(), graph.escaping[v].words().end(), escaping.begin() + at);
    }
  }
  const uint64_t* ancestors_of(int v) const { return ancestors.data() + row(v); }
  const uint64_t* descendants_of(int v) const { return descendants.data() + row(v); }
  const uint64_t* escaping_of(int v) const { return escaping.data() + row(v); }
  size_t row(int v) const { return static_cast<size_t>(v) * static_cast<size_t>(words); }
};

// out = the augmented antichain of `antichain`.
void augment(const FlatGraph& graph, const uint64_t* antichain, uint64_t* out) {
  std::copy(antichain, antichain + graph.words, out);
  words::for_each(antichain, graph.words, [&](int a) {
    const uint64_t* escaping = graph.escaping_of(a);
    for (int w = 0; w < graph.words; ++w) out[w] |= escaping[w];
  });
}

// Breadth-first enumeration of antichains (see the header). Expanding states in
// discovery order is the breadth-first order: a state is queued when found.
// Antichains are rows of one array, found again through an open-addressing
// table of state ids.
class Enumerator {
 public:
  Enumerator(const NodeGraph& graph, const FlatGraph& flat, int max_states)
      : graph_(graph),
        flat_(flat),
        words_(flat.words),
        max_states_(max_states),
        antichain_(static_cast<size_t>(words_)),
        augmented_(antichain_.size()),
        next_(antichain_.size()),
        reduced_(antichain_.size()),
        table_(size_t{1} << 12, -1) {}

  // False when more than max_states states exist.
  bool run(int first_source) {
    std::fill(next_.begin(), next_.end(), 0);
    words::set(next_.data(), first_source);
    id_of(next_.data());
    for (int id = 0; id < num_states(); ++id) {
      expand(id);
      if (num_states() > max_states_) return false;
    }
    return true;
  }
  int num_states() const { return static_cast<int>(hashes_.size()); }
  const uint64_t* antichain(int id) const { return antichains_.data() + row(id); }
  // (from, to) by discovery id, in discovery order: grouped by `from`, increasing.
  const std::vector<std::pair<int, int>>& edges() const { return edges_; }

 private:
  size_t row(int id) const { return static_cast<size_t>(id) * static_cast<size_t>(words_); }

  uint64_t hash(const uint64_t* set) const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int w = 0; w < words_; ++w) {
      h = (h ^ set[w]) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    return h;
  }

  int id_of(const uint64_t* set) {
    const uint64_t h = hash(set);
    const size_t mask = table_.size() - 1;
    size_t b = static_cast<size_t>(h) & mask;
    for (; table_[b] >= 0; b = (b + 1) & mask) {
      const int id = table_[b];
      if (hashes_[id] == h && std::equal(set, set + words_, antichain(id))) return id;
    }
    const int id = num_states();
    table_[b] = id;
    hashes_.push_back(h);
    antichains_.insert(antichains_.end(), set, set + words_);
    if (2 * hashes_.size() > table_.size()) grow();
    return id;
  }

  void grow() {
    std::vector<int> table(table_.size() * 2, -1);
    const size_t mask = table.size() - 1;
    for (int id = 0; id < num_states(); ++id) {
      size_t b = static_cast<size_t>(hashes_[id]) & mask;
      while (table[b] >= 0) b = (b + 1) & mask;
      table[b] = id;
    }
    table_.swap(table);
  }

  // reduced_ = next_ less every member that is an ancestor of another member.
  void deaugment() {
    std::copy(next_.begin(), next_.end(), reduced_.begin());
    words::for_each(next_.data(), words_, [&](int z) {
      if (words::intersects(flat_.descendants_of(z), next_.data(), words_)) words::reset(reduced_.data(), z);
    });
  }

  void expand(int id) {
    std::copy(antichain(id), antichain(id) + words_, antichain_.begin());
    augment(flat_, antichain_.data(), augmented_.data());
    auto advance = [&](int x) {
      for (int y : graph_.consumers[x]) {
        if (words::test(antichain_.data(), y) || words::intersects(flat_.descendants_of(y), augmented_.data(), words_))
          continue;
        std::copy(augmented_.begin(), augmented_.end(), next_.begin());
        words::reset(next_.data(), x);
        words::set(next_.data(), y);
        deaugment();
        edges_.emplace_back(id, id_of(reduced_.data()));
      }
    };
    // The members of the augmented antichain not in it, then the antichain.
    for (int w = 0; w < words_; ++w)
      for (uint64_t bits = augmented_[w] & ~antichain_[w]; bits != 0; bits &= bits - 1)
        advance(w * 64 + std::countr_zero(bits));
    words::for_each(antichain_.data(), words_, advance);
  }

  const NodeGraph& graph_;
  const FlatGraph& flat_;
  const int words_;
  const int max_states_;
  std::vector<uint64_t> antichain_, augmented_, next_, reduced_;  // scratch rows
  std::vector<uint64_t> antichains_;                              // by id
  std::vector<uint64_t> hashes_;                                  // by id
  std::vector<int> table_;                                        // ids, -1 = free
  std::vector<std::pair<int, int>> edges_;
};

// Reverse post-order of a depth-first search from state 0, successors in the
// order they were found (`edges` grouped by `from`, increasing). Returns the
// position of each state.
std::vector<int> depth_first_positions(int num_states, const std::vector<std::pair<int, int>>& edges) {
  std::vector<size_t> first_edge(static_cast<size_t>(num_states) + 1, 0);
  for (const auto& edge : edges) ++first_edge[static_cast<size_t>(edge.first) + 1];
  for (int k = 0; k < num_states; ++k) first_edge[k + 1] += first_edge[k];
  std::vector<int> post_order;
  post_order.reserve(static_cast<size_t>(num_states));
  std::vector<char> seen(num_states, 0);
  std::vector<std::pair<int, size_t>> stack{{0, first_edge[0]}};
  seen[0] = 1;
  while (!stack.empty()) {
    auto& [state, next] = stack.back();
    if (next < first_edge[static_cast<size_t>(state) + 1]) {
      const int child = edges[next++].second;
      if (!seen[child]) {
        seen[child] = 1;
        stack.emplace_back(child, first_edge[child]);
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

// Per node, the terms of the state sums, and their running sums in node order:
// a closure's sum taken in node order equals the running sum up to its first
// missing node plus its members from there on, with the same roundings.
struct NodeTerms {
  std::vector<double> output, seconds, activation, params;
  std::vector<double> seconds_before, activation_before, params_before;  // n + 1 each

  NodeTerms(const Profile& profile, const StateSpace& space) {
    for (int layer_index : space.node_layer) {
      const Layer& layer = profile.layers[layer_index];
      output.push_back(static_cast<double>(layer.output_bytes.value));
      seconds.push_back((layer.forward + layer.backward).value);
      activation.push_back(static_cast<double>(layer.output_bytes.value));
      params.push_back(static_cast<double>(layer.param_bytes.value));
    }
    seconds_before = running(seconds);
    activation_before = running(activation);
    params_before = running(params);
  }
  static std::vector<double> running(const std::vector<double>& terms) {
    std::vector<double> out(terms.size() + 1, 0.0);
    for (size_t v = 0; v < terms.size(); ++v) out[v + 1] = out[v] + terms[v];
    return out;
  }
};

// The closure of a state (into `closure`) and its sums: output bytes over the
// augmented antichain, the rest over the closure, each in node order.
void measure_state(const FlatGraph& graph, const NodeTerms& terms, const uint64_t* antichain, uint64_t* augmented,
                   uint64_t* closure, StateSpace& space, int j) {
  const int count = graph.words;
  augment(graph, antichain, augmented);
  std::fill(closure, closure + count, 0);
  double output = 0.0;
  words::for_each(augmented, count, [&](int v) {
    const uint64_t* ancestors = graph.ancestors_of(v);
    for (int w = 0; w < count; ++w) closure[w] |= ancestors[w];
    words::set(closure, v);
    output += terms.output[v];
  });
  int first_missing = 0;
  while (first_missing < count && closure[first_missing] == ~uint64_t{0}) ++first_missing;
  int from = first_missing * 64;
  if (first_missing < count) from += std::countr_one(closure[first_missing]);
  const int nodes = static_cast<int>(terms.seconds.size());
  from = std::min(from, nodes);
  double seconds = terms.seconds_before[from];
  double activation = terms.activation_before[from];
  double params = terms.params_before[from];
  words::for_each(closure, count, [&](int v) {
    if (v < from) return;
    seconds += terms.seconds[v];
    activation += terms.activation[v];
    params += terms.params[v];
  });
  space.output_bytes[j] = output;
  space.cum_seconds[j] = seconds;
  space.cum_activation_bytes[j] = activation;
  space.cum_param_bytes[j] = params;
}

void fill_states(const Profile& profile, const FlatGraph& graph, const Enumerator& found, StateSpace& space) {
  const int num_states = found.num_states();
  const std::vector<int> position = depth_first_positions(num_states, found.edges());
  space.output_bytes.assign(num_states, 0.0);
  space.cum_seconds.assign(num_states, 0.0);
  space.cum_activation_bytes.assign(num_states, 0.0);
  space.cum_param_bytes.assign(num_states, 0.0);
  space.words_per_state = graph.words;
  space.closure_words.assign(static_cast<size_t>(num_states) * graph.words, 0);
  const NodeTerms terms(profile, space);
  std::vector<uint64_t> augmented(static_cast<size_t>(graph.words));
  for (int id = 0; id < num_states; ++id) {
    const int j = position[id];
    uint64_t* closure = space.closure_words.data() + static_cast<size_t>(j) * graph.words;
    measure_state(graph, terms, found.antichain(id), augmented.data(), closure, space, j);
  }
  space.edges.reserve(found.edges().size());
  for (const auto& [from, to] : found.edges()) space.edges.emplace_back(position[from], position[to]);
}

}  // namespace

Bitset StateSpace::closure(int j) const {
  Bitset out(num_nodes());
  words::for_each(closure_words.data() + static_cast<size_t>(j) * words_per_state, words_per_state,
                  [&](int v) { out.set(v); });
  return out;
}

std::string profile_label(const Profile& profile) {
  return profile.model.empty() ? std::string("the profile") : fmt::format("profile '{}'", profile.model);
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
    return Error{
        fmt::format("{}: nothing to plan once Input and __getitem__ layers are left out", profile_label(profile))};
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
  const FlatGraph flat(graph);
  Enumerator enumerator(graph, flat, max_states);
  if (!enumerator.run(first_source))
    return Error{
        fmt::format("{}: its layer graph has more than {} states (cuts); the PipeDream "
                    "cost model cannot plan it",
                    profile_label(profile), max_states)};
  fill_states(profile, flat, enumerator, space);
  return space;
}

}  // namespace baton
