#include "sim/network.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace baton {

Network::Network(Topology topology) : topology_(std::move(topology)) {
  int total = 0;
  for (int level = 0; level < topology_.num_levels(); ++level) {
    link_offset_.push_back(total);
    const int children = topology_.num_devices() / topology_.devices_per_unit(level - 1);
    total += 2 * children;
  }
  link_free_.assign(static_cast<size_t>(total), Seconds(0.0));
}

int Network::link_index(int level, int child, bool down) const {
  return link_offset_[level] + 2 * child + (down ? 1 : 0);
}

TransferTimes Network::transfer(int src_device, int dst_device, Bytes size, Seconds issue) {
  const int level = topology_.common_level(src_device, dst_device);
  if (level < 0) return TransferTimes{issue, issue};
  const Level& spec = topology_.levels[level];
  Seconds& up = link_free_[link_index(level, topology_.child_of(src_device, level), false)];
  Seconds& down = link_free_[link_index(level, topology_.child_of(dst_device, level), true)];
  const Seconds start = max(issue, max(up, down));
  const Seconds wire_end = start + transfer_time(size, spec.bandwidth());
  up = wire_end;
  down = wire_end;
  return TransferTimes{start, wire_end + spec.latency};
}

Seconds Network::allreduce_time(std::span<const int> devices, Bytes size) const {
  Seconds total;
  double shard = static_cast<double>(size.value);
  for (int level = 0; level < topology_.num_levels(); ++level) {
    // Distinct children touched, per unit of this level.
    std::map<int, std::set<int>> children_of_unit;
    const int unit_size = topology_.devices_per_unit(level);
    for (int device : devices) children_of_unit[device / unit_size].insert(topology_.child_of(device, level));
    size_t widest = 1;
    for (const auto& [unit, children] : children_of_unit) widest = std::max(widest, children.size());
    const double n = static_cast<double>(widest);
    if (widest <= 1) continue;
    const Level& spec = topology_.levels[level];
    total += Seconds(2.0 * (n - 1.0) / n * shard / spec.ring_bandwidth().bytes_per_s);
    total += spec.ring_latency() * (2.0 * (n - 1.0));
    shard /= n;
  }
  return total;
}

}  // namespace baton
