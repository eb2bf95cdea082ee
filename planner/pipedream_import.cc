#include "planner/pipedream_import.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

namespace baton {
namespace {

constexpr std::string_view kSeparator = " -- ";
constexpr double kMaxBytes = 1e18;  // keeps byte counts and their sums inside int64

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// One line of the file, kept for error messages.
struct SourceLine {
  int number = 0;  // 1-based
  std::string_view text;
};

struct RawNode {
  std::string id;
  std::string description;
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double activation_bytes = 0.0;
  double param_bytes = 0.0;
};

struct RawEdge {
  int from = 0;  // node indices in file order
  int to = 0;
  SourceLine line;
};

class Parser {
 public:
  explicit Parser(const std::string& source) : source_(source) {}
  Result<Profile> run(std::string_view text);

 private:
  Error error_at(SourceLine line, std::string_view what) const {
    return Error{fmt::format("{}:{}: {}: \"{}\"", source_, line.number, what, trim(line.text))};
  }
  Status parse_node(SourceLine line);
  Status parse_edge(SourceLine line);
  Status resolve_edges();
  Result<std::vector<int>> topological_order() const;
  Error cycle_error(const std::vector<int>& in_degree) const;
  Profile build(const std::vector<int>& order) const;

  const std::string& source_;
  std::vector<RawNode> nodes_;
  std::unordered_map<std::string, int> index_of_;
  std::vector<std::pair<std::string, std::string>> edge_names_;
  std::vector<SourceLine> edge_lines_;
  std::vector<RawEdge> edges_;
};

std::vector<std::string_view> split(std::string_view s, std::string_view separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t at = s.find(separator); at != std::string_view::npos; at = s.find(separator, start)) {
    parts.push_back(s.substr(start, at - start));
    start = at + separator.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

// A finite number >= 0, the whole of `text`.
std::optional<double> parse_number(std::string_view text) {
  text = trim(text);
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  if (!std::isfinite(value) || value < 0.0) return std::nullopt;
  return value;
}

// "123.0" or "[a; b; c]" (the sum).
std::optional<double> parse_activation(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.front() != '[') return parse_number(text);
  if (text.back() != ']') return std::nullopt;
  double total = 0.0;
  for (std::string_view part : split(text.substr(1, text.size() - 2), ";")) {
    const auto value = parse_number(part);
    if (!value) return std::nullopt;
    total += *value;
  }
  return total;
}

// "forward_compute_time=F, backward_compute_time=B, activation_size=A, parameter_size=P"
std::optional<std::string> parse_metadata(std::string_view text, RawNode& node) {
  const std::string_view keys[] = {"forward_compute_time", "backward_compute_time", "activation_size",
                                   "parameter_size"};
  double* targets[] = {&node.forward_ms, &node.backward_ms, &node.activation_bytes, &node.param_bytes};
  const auto fields = split(text, ",");
  if (fields.size() != 4) return "expected 4 comma-separated fields after the description";
  for (size_t f = 0; f < 4; ++f) {
    const std::string_view field = trim(fields[f]);
    const auto equals = field.find('=');
    if (equals == std::string_view::npos || trim(field.substr(0, equals)) != keys[f])
      return fmt::format("field {} must be {}=<number>", f + 1, keys[f]);
    const std::string_view value = field.substr(equals + 1);
    const auto number = f == 2 ? parse_activation(value) : parse_number(value);
    if (!number) return fmt::format("{} must be a finite number >= 0", keys[f]);
    if (f >= 2 && *number > kMaxBytes) return fmt::format("{} is too large", keys[f]);
    *targets[f] = *number;
  }
  return std::nullopt;
}

Status Parser::parse_node(SourceLine line) {
  auto parts = split(trim(line.text), kSeparator);
  // An optional trailing "stage_id=S" (written by the reference after planning).
  if (parts.size() >= 4 && trim(parts.back()).starts_with("stage_id=")) parts.pop_back();
  if (parts.size() < 3) return error_at(line, "expected 'id -- description -- metadata' or a tab-indented edge");
  RawNode node;
  node.id = std::string(trim(parts.front()));
  if (node.id.empty()) return error_at(line, "node id is empty");
  // A description that itself contains " -- " is kept whole.
  const std::string_view text = trim(line.text);
  const size_t desc_begin = parts[0].size() + kSeparator.size();
  const size_t desc_end = static_cast<size_t>(parts.back().data() - text.data()) - kSeparator.size();
  node.description = std::string(text.substr(desc_begin, desc_end - desc_begin));
  if (auto problem = parse_metadata(parts.back(), node)) return error_at(line, *problem);
  if (!index_of_.emplace(node.id, static_cast<int>(nodes_.size())).second)
    return error_at(line, fmt::format("node id '{}' repeats an earlier node", node.id));
  nodes_.push_back(std::move(node));
  return ok_status();
}

Status Parser::parse_edge(SourceLine line) {
  const auto parts = split(trim(line.text), kSeparator);
  if (parts.size() != 2 || trim(parts[0]).empty() || trim(parts[1]).empty())
    return error_at(line, "expected an edge 'nodeX -- nodeY'");
  edge_names_.emplace_back(std::string(trim(parts[0])), std::string(trim(parts[1])));
  edge_lines_.push_back(line);
  return ok_status();
}

// Edges may name nodes defined further down, so they are resolved at the end.
Status Parser::resolve_edges() {
  std::unordered_set<uint64_t> seen;
  for (size_t e = 0; e < edge_names_.size(); ++e) {
    const auto& [from_name, to_name] = edge_names_[e];
    const auto from = index_of_.find(from_name);
    const auto to = index_of_.find(to_name);
    if (from == index_of_.end() || to == index_of_.end()) {
      const std::string& unknown = from == index_of_.end() ? from_name : to_name;
      return error_at(edge_lines_[e], fmt::format("edge names unknown node '{}'", unknown));
    }
    const uint64_t key = (static_cast<uint64_t>(from->second) << 32) | static_cast<uint32_t>(to->second);
    if (!seen.insert(key).second) return error_at(edge_lines_[e], "edge repeats an earlier edge");
    edges_.push_back(RawEdge{from->second, to->second, edge_lines_[e]});
  }
  return ok_status();
}

// Sort key of a node id: its trailing number, then the text.
std::pair<uint64_t, std::string_view> id_key(std::string_view id) {
  size_t digits = id.size();
  while (digits > 0 && id[digits - 1] >= '0' && id[digits - 1] <= '9') --digits;
  uint64_t number = std::numeric_limits<uint64_t>::max();
  if (digits < id.size()) {
    const auto [end, ec] = std::from_chars(id.data() + digits, id.data() + id.size(), number);
    if (ec != std::errc()) number = std::numeric_limits<uint64_t>::max();
  }
  return {number, id};
}

// Kahn's algorithm; ties go to the smallest id key.
Result<std::vector<int>> Parser::topological_order() const {
  const int n = static_cast<int>(nodes_.size());
  std::vector<std::vector<int>> consumers(static_cast<size_t>(n));
  std::vector<int> in_degree(static_cast<size_t>(n), 0);
  for (const RawEdge& edge : edges_) {
    consumers[edge.from].push_back(edge.to);
    ++in_degree[edge.to];
  }
  auto later = [&](int a, int b) { return id_key(nodes_[a].id) > id_key(nodes_[b].id); };
  std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
  for (int v = 0; v < n; ++v)
    if (in_degree[v] == 0) ready.push(v);
  std::vector<int> order;
  while (!ready.empty()) {
    const int v = ready.top();
    ready.pop();
    order.push_back(v);
    for (int w : consumers[v])
      if (--in_degree[w] == 0) ready.push(w);
  }
  if (static_cast<int>(order.size()) != n) return cycle_error(in_degree);
  return order;
}

// Walks producers backwards among the nodes Kahn could not place until a node
// repeats; the edges walked from that node on form a cycle.
Error Parser::cycle_error(const std::vector<int>& in_degree) const {
  int v = 0;
  while (in_degree[v] == 0) ++v;
  std::vector<int> visited_at(nodes_.size(), -1);
  std::vector<const RawEdge*> walk;
  while (visited_at[v] < 0) {
    visited_at[v] = static_cast<int>(walk.size());
    for (const RawEdge& edge : edges_) {
      if (edge.to == v && in_degree[edge.from] > 0) {
        walk.push_back(&edge);
        v = edge.from;
        break;
      }
    }
  }
  const RawEdge* first = walk[visited_at[v]];
  std::string path = nodes_[v].id;
  for (size_t k = walk.size(); k-- > static_cast<size_t>(visited_at[v]);) {
    path += " -> " + nodes_[walk[k]->to].id;
    if (walk[k]->line.number < first->line.number) first = walk[k];
  }
  return error_at(first->line, fmt::format("edge is part of a cycle ({})", path));
}

Bytes whole_bytes(double value) { return Bytes(static_cast<int64_t>(std::llround(value))); }

Profile Parser::build(const std::vector<int>& order) const {
  std::vector<int> position(nodes_.size());
  for (size_t p = 0; p < order.size(); ++p) position[order[p]] = static_cast<int>(p);
  Profile profile;
  profile.layers.resize(order.size());
  for (size_t p = 0; p < order.size(); ++p) {
    const RawNode& node = nodes_[order[p]];
    Layer& layer = profile.layers[p];
    layer.name = node.id;
    layer.description = node.description;
    layer.forward = Seconds::from_ms(node.forward_ms);
    layer.backward = Seconds::from_ms(node.backward_ms);
    layer.output_bytes = whole_bytes(node.activation_bytes);
    layer.param_bytes = whole_bytes(node.param_bytes);
  }
  for (const RawEdge& edge : edges_) profile.layers[position[edge.to]].inputs.push_back(position[edge.from]);
  return profile;
}

Result<Profile> Parser::run(std::string_view text) {
  int number = 0;
  for (std::string_view rest = text; !rest.empty() || number == 0;) {
    const size_t end = rest.find('\n');
    SourceLine line{++number, rest.substr(0, end)};
    if (!line.text.empty() && line.text.back() == '\r') line.text.remove_suffix(1);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (trim(line.text).empty()) continue;
    const bool is_edge = line.text.front() == '\t' || line.text.front() == ' ';
    if (auto ok = is_edge ? parse_edge(line) : parse_node(line); !ok) return ok.error();
  }
  if (nodes_.empty()) return Error{fmt::format("{}: no nodes (empty profile)", source_)};
  if (auto ok = resolve_edges(); !ok) return ok.error();
  auto order = topological_order();
  if (!order) return order.error();
  return build(*order);
}

}  // namespace

Result<Profile> import_pipedream_graph(std::string_view text, const std::string& source) {
  return Parser(source).run(text);
}

}  // namespace baton
