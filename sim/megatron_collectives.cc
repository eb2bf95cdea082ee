// The collectives of a Megatron layout timed on the topology (sim/megatron_sim.h):
// the tensor-parallel all-reduce, the embedding group's, context and expert
// parallelism's exchanges, the experts' gradient weight, and the topology of
// tensor-parallel groups they run on.
#include "sim/megatron_sim.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "sim/network.h"

namespace baton {

namespace {

Status not_a_group(const Topology& topology, int tensor, const Level& level) {
  return Error{
      fmt::format("--tensor-model-parallel-size {} does not tile topology '{}': its level '{}' has {} children, and a "
                  "tensor-parallel group must fill whole units of a level or divide it",
                  tensor, topology.name, level.name, level.size)};
}

}  // namespace

CollectiveTime tensor_allreduce(const Topology& topology, int tensor) {
  // Linear in bytes: measured at two sizes once.
  std::vector<int> group;
  for (int i = 0; i < tensor; ++i) group.push_back(i);
  const Network network(topology);
  const double probe = 1e9;
  const double fixed = network.allreduce_time(group, Bytes(0)).value;
  const double per_byte = (network.allreduce_time(group, Bytes(static_cast<int64_t>(probe))).value - fixed) / probe;
  return [fixed, per_byte](double bytes) { return Seconds(fixed + per_byte * bytes); };
}

CollectiveTime embedding_allreduce(const Topology& topology, const MegatronLayout& layout) {
  // One copy of the word embedding where the first and the last chunk share
  // a rank (p = 1, or a V): nothing to keep equal.
  if (layout.pipeline < 2 || layout.v_schedule != VSchedule::kNone) return [](double) { return Seconds(0.0); };
  const std::vector<int> pair = {0, (layout.pipeline - 1) * layout.tensor * layout.replicas()};
  const Network network(topology);
  return [network, pair](double bytes) { return network.allreduce_time(pair, Bytes::counted(bytes)); };
}

CollectiveTime context_comm_time(const Topology& topology, const MegatronLayout& layout) {
  const int c = layout.context;
  if (c < 2) return {};
  if (layout.context_comm != ContextComm::kP2P) {
    // GPU 0 of each of the c ranks: one of t such groups, each GPU on its
    // own links. On the ring model an all-gather is half an all-reduce of
    // the gathered bytes; an all-to-all moves (c - 1) / c of each GPU's
    // bytes (Network::all_to_all_time).
    std::vector<int> group;
    for (int j = 0; j < c; ++j) group.push_back(j * layout.tensor);
    const Network network(topology);
    if (layout.context_comm == ContextComm::kAllToAll)
      return [network, group](double bytes) { return network.all_to_all_time(group, Bytes::counted(bytes)); };
    return [network, group, c](double bytes) { return network.allreduce_time(group, Bytes::counted(bytes * c)) * 0.5; };
  }
  // Linear in bytes, measured at two sizes on each hop j -> j + 1 of the
  // ring (rank j's GPU 0 at j t); the slowest hop sets every step's pace.
  const double probe = 1e9;
  double fixed = 0.0, per_byte = 0.0;
  for (int j = 0; j < c; ++j) {
    const int from = j * layout.tensor, to = (j + 1) % c * layout.tensor;
    const double empty = Network(topology).transfer(from, to, Bytes(0), Seconds(0.0)).delivered.value;
    const double full =
        Network(topology).transfer(from, to, Bytes(static_cast<int64_t>(probe)), Seconds(0.0)).delivered.value;
    if (full > fixed + per_byte * probe) {
      fixed = empty;
      per_byte = (full - empty) / probe;
    }
  }
  return [fixed, per_byte](double bytes) { return Seconds(fixed + per_byte * bytes); };
}

CollectiveTime expert_all_to_all_time(const Topology& topology, const MegatronLayout& layout) {
  const int ep = layout.expert_parallel;
  if (ep < 2) return {};
  std::vector<int> group;
  for (int j = 0; j < ep; ++j) group.push_back(j * layout.expert_tensor_parallel());
  const Network network(topology);
  return [network, group](double bytes) { return network.all_to_all_time(group, Bytes::counted(bytes)); };
}

namespace {

// The chance that none of a token's k experts, drawn without replacement
// from E, is among `held` of them (balanced, independent routing).
double untouched(double experts, double topk, double held) {
  double p = 1.0;
  for (int i = 0; i < static_cast<int>(topk); ++i) p *= std::max(0.0, (experts - held - i) / (experts - i));
  return p;
}

double log_choose(double n, double r) { return std::lgamma(n + 1.0) - std::lgamma(r + 1.0) - std::lgamma(n - r + 1.0); }

// The chance that none of a token's k experts is among experts [begin, end)
// of the model's E. With group-limited routing the token's K groups are K of
// the g drawn without replacement, its k experts drawn from their K E / g:
// summed over how many of the range's whole groups (and which of its at most
// two partial ones) are among the K, each term untouched() within them.
double untouched_range(const GptModel& model, int64_t begin, int64_t end) {
  const double k = static_cast<double>(model.router_topk);
  const int64_t g = model.router_groups, chosen_groups = model.router_group_topk;
  const int64_t size = g > 0 ? model.experts / g : 0;
  // Without groups (or with groups check_megatron_layout refuses: fewer than one expert each, K > g).
  if (!model.group_limited() || size < 1 || chosen_groups > g)
    return untouched(static_cast<double>(model.experts), k, static_cast<double>(end - begin));
  int64_t whole = 0;
  std::vector<int64_t> partial;  // the experts of the range in a group it shares
  for (int64_t j = begin / size; j * size < end; ++j) {
    const int64_t overlap = std::min(end, (j + 1) * size) - std::max(begin, j * size);
    if (overlap == size)
      ++whole;
    else
      partial.push_back(overlap);
  }
  const int64_t others = g - whole - static_cast<int64_t>(partial.size());
  double p = 0.0;
  for (int64_t j = 0; j <= std::min(whole, chosen_groups); ++j) {
    for (unsigned mask = 0; mask < (1u << partial.size()); ++mask) {
      int64_t picked = j, inside = j * size;
      for (size_t i = 0; i < partial.size(); ++i) {
        if ((mask >> i & 1u) == 0) continue;
        ++picked;
        inside += partial[i];
      }
      if (picked > chosen_groups || chosen_groups - picked > others) continue;
      const double ways =
          std::exp(log_choose(static_cast<double>(whole), static_cast<double>(j)) +
                   log_choose(static_cast<double>(others), static_cast<double>(chosen_groups - picked)) -
                   log_choose(static_cast<double>(g), static_cast<double>(chosen_groups)));
      p += ways * untouched(static_cast<double>(chosen_groups * size), k, static_cast<double>(inside));
    }
  }
  return p;
}

}  // namespace

CollectiveTime flex_dispatch_time(const Topology& topology, const GptModel& model, const MegatronLayout& layout) {
  const int etp = layout.expert_tensor_parallel(), ep = std::max(1, layout.expert_parallel);
  const int group = etp * ep;  // GPUs 0 .. G - 1 (the tp_ep group), etp shards of an ep rank side by side
  if (group < 2 || !model.moe()) return {};
  const double kept = model.expert_copies() / static_cast<double>(model.router_topk);  // dropped copies are not sent
  const int64_t per_rank = model.experts / ep;
  double per_byte = 0.0;  // the slowest level's seconds per byte of one copy of the GPU's tokens
  Seconds latencies;
  for (int level = 0; level < topology.num_levels(); ++level) {
    // m GPUs of the group in each of the level's n children.
    const int m = std::min(group, topology.devices_per_unit(level - 1));
    if (m >= group) break;
    const int n = (group + m - 1) / m;
    // A token leaves its child once for each other child holding one of its
    // experts (a GPU the shards of its ep rank's E / ep, a wider child its
    // ep ranks' experts): summed over the children, (n - 1) / n of it for a
    // token from any one of them.
    double touched = 0.0;
    for (int c = 0; c < n; ++c) {
      const int first = c * m, last = std::min(group, first + m) - 1;  // the child's GPUs
      touched += 1.0 - untouched_range(model, first / etp * per_rank, (last / etp + 1) * per_rank);
    }
    const double leaving = touched * (n - 1.0) / n * kept;
    const Level& spec = topology.levels[level];
    const double rails = static_cast<double>(spec.rails);
    const double each = spec.bandwidth().bytes_per_s * std::min<double>(m, rails) / rails / m;  // a GPU's share
    per_byte = std::max(per_byte, leaving / each);
    latencies += spec.latency;
  }
  return [per_byte, latencies](double bytes) { return Seconds(per_byte * bytes) + latencies; };
}

CollectiveTime expert_dispatch_time(const Topology& topology, const GptModel& model, const MegatronLayout& layout) {
  if (layout.moe_dispatcher == MoeDispatcher::kFlex) return flex_dispatch_time(topology, model, layout);
  if (layout.moe_dispatcher == MoeDispatcher::kAllToAll) return expert_all_to_all_time(topology, layout);
  const int group = layout.expert_tensor_parallel() * std::max(1, layout.expert_parallel);
  if (group < 2) return {};
  std::vector<int> gpus;
  for (int j = 0; j < group; ++j) gpus.push_back(j);
  const Network network(topology);
  return [network, gpus](double bytes) { return network.allreduce_time(gpus, Bytes::counted(bytes)); };
}

double expert_gradient_weight(const Topology& topology, const MegatronLayout& layout) {
  const int ep = std::max(1, layout.expert_parallel);
  if (ep == 1) return 1.0;
  if (layout.expert_replicas() < 2) return 0.0;
  // The dense reduction among the d c tensor-parallel groups, the experts'
  // among the expert-tensor-parallel groups ep apart (groups of etp GPUs:
  // the t groups when etp = t), each on its groups' topology.
  const int etp = layout.expert_tensor_parallel();
  auto groups = tensor_group_topology(topology, layout.tensor);
  auto expert_groups = tensor_group_topology(topology, etp);
  if (!groups || !expert_groups) return 1.0;  // predict_megatron reports the error
  std::vector<int> dense, experts;
  for (int j = 0; j < layout.replicas(); ++j) dense.push_back(j);
  for (int j = 0; j < layout.expert_replicas(); ++j) experts.push_back(j * ep);
  // Per byte, from the difference of two sizes (the fixed latencies apart).
  const Bytes probe(int64_t{1} << 30);
  auto per_byte = [&](const Topology& on, const std::vector<int>& group) {
    const Network network(on);
    return (network.allreduce_time(group, probe) - network.allreduce_time(group, Bytes(0))).value;
  };
  // A device of a group topology reduces its group's bytes, t (etp) GPUs'
  // worth over their links together: per byte of one GPU, etp / t as much.
  const double base = per_byte(*groups, dense) * layout.tensor;
  return base > 0.0 ? per_byte(*expert_groups, experts) * etp / base : 1.0;
}

Result<Topology> tensor_group_topology(const Topology& topology, int tensor) {
  Topology out = topology;
  out.name = fmt::format("{} in groups of {}", topology.name, tensor);
  out.levels.clear();
  int remaining = tensor;  // group members still to place at this level and above
  for (int index = 0; index < topology.num_levels(); ++index) {
    Level level = topology.levels[index];
    const int gpus_per_child = topology.devices_per_unit(index - 1);
    if (remaining >= level.size && remaining > 1) {
      if (remaining % level.size != 0) return not_a_group(topology, tensor, level).error();
      remaining /= level.size;
      continue;  // the whole unit is inside one group
    }
    if (remaining > 1) {
      if (level.size % remaining != 0) return not_a_group(topology, tensor, level).error();
      level.size /= remaining;
      level.bandwidth_gbps *= remaining;
      if (level.allreduce_bandwidth_gbps) *level.allreduce_bandwidth_gbps *= remaining;
      remaining = 1;
    }
    // A group owns its GPUs' share of each rail above it.
    const int group_gpus_in_child = std::min(tensor, gpus_per_child);
    const double rails_per_gpu = static_cast<double>(level.rails) / gpus_per_child;
    const double owned = std::min<double>(level.rails, std::max(1.0, rails_per_gpu * group_gpus_in_child));
    level.rails = std::max(1, static_cast<int>(std::lround(level.rails / owned)));
    out.levels.push_back(level);
  }
  if (remaining > 1)
    return Error{fmt::format("--tensor-model-parallel-size {} is larger than topology '{}'", tensor, topology.name)};
  if (out.levels.empty()) out.levels.push_back(Level{"one tensor-parallel group", 1, 1.0, Seconds(0.0), {}, {}});
  return out;
}

}  // namespace baton
