#include "sim/network.h"

#include <algorithm>
#include <utility>

namespace baton {

Network::Network(Topology topology) : topology_(std::move(topology)) {
  int total = 0;
  for (int level = 0; level < topology_.num_levels(); ++level) {
    link_offset_.push_back(total);
    const int children = topology_.num_devices() / topology_.devices_per_unit(level - 1);
    total += 2 * children * topology_.levels[level].rails;
  }
  link_free_.assign(static_cast<size_t>(total), Seconds(0.0));
  routes_.assign(2 * static_cast<size_t>(topology_.num_devices()), Route{});
}

const Network::Route& Network::route(int src_device, int dst_device) {
  Route* slots = &routes_[2 * static_cast<size_t>(src_device)];
  if (slots[0].dst == dst_device) return slots[0];
  if (slots[1].dst == dst_device) return slots[1];
  slots[1] = slots[0];  // the older one goes
  Route& fresh = slots[0];
  fresh.dst = dst_device;
  fresh.level = topology_.common_level(src_device, dst_device);
  if (fresh.level >= 0) {
    fresh.up = link_index(fresh.level, src_device, false);
    fresh.down = link_index(fresh.level, dst_device, true);
  }
  return fresh;
}

int Network::link_index(int level, int device, bool down) const {
  const int child = topology_.child_of(device, level);
  const int rail = topology_.rail_of(device, level);
  return link_offset_[level] + 2 * (child * topology_.levels[level].rails + rail) + (down ? 1 : 0);
}

TransferTimes Network::transfer(int src_device, int dst_device, Bytes size, Seconds issue) {
  const Route& path = route(src_device, dst_device);
  if (path.level < 0) return TransferTimes{issue, issue};
  const Level& spec = topology_.levels[path.level];
  Seconds& up = link_free_[path.up];
  Seconds& down = link_free_[path.down];
  const Seconds start = max(issue, max(up, down));
  const Seconds wire_end = start + transfer_time(size, spec.rail_bandwidth());
  up = wire_end;
  down = wire_end;
  return TransferTimes{start, wire_end + spec.latency};
}

std::pair<int, int> Network::links_of(int src_device, int dst_device) const {
  const int level = topology_.common_level(src_device, dst_device);
  if (level < 0) return {-1, -1};
  return {link_index(level, src_device, false), link_index(level, dst_device, true)};
}

namespace {

// Each device's (unit, child) at `level`, sorted: runs of one child, runs of
// one unit.
std::vector<std::pair<int, int>> units_and_children(const Topology& topology, std::span<const int> devices, int level) {
  std::vector<std::pair<int, int>> at;
  at.reserve(devices.size());
  const int unit_size = topology.devices_per_unit(level);
  for (int device : devices) at.emplace_back(device / unit_size, topology.child_of(device, level));
  std::sort(at.begin(), at.end());
  return at;
}

}  // namespace

Seconds Network::allreduce_time(std::span<const int> devices, Bytes size) const {
  Seconds total;
  const double bytes = static_cast<double>(size.value);
  double members = 1.0;  // of the group in one child unit of the level
  for (int level = 0; level < topology_.num_levels(); ++level) {
    // Distinct children touched, per unit of this level: the most (unit,
    // child) pairs of one unit.
    std::vector<std::pair<int, int>> touched = units_and_children(topology_, devices, level);
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    size_t widest = 1;
    for (size_t i = 0, run = 0; i < touched.size(); ++i) {
      run = i > 0 && touched[i].first == touched[i - 1].first ? run + 1 : 1;
      widest = std::max(widest, run);
    }
    const double n = static_cast<double>(widest);
    if (widest <= 1) continue;
    const Level& spec = topology_.levels[level];
    // The members of a child unit each carry bytes / members through its
    // uplink, on a rail each when it has rails: min(members, rails) of them.
    const double rails = static_cast<double>(spec.rails);
    const double share = std::min(members, rails) / rails;
    total += Seconds(2.0 * (n - 1.0) / n * bytes / (spec.ring_bandwidth().bytes_per_s * share));
    total += spec.ring_latency() * (2.0 * (n - 1.0));
    members *= n;
  }
  return total;
}

Seconds Network::all_to_all_time(std::span<const int> devices, Bytes size) const {
  const double n = static_cast<double>(devices.size());
  if (n < 2.0) return Seconds(0.0);
  const double bytes = static_cast<double>(size.value);
  Seconds slowest, latencies;
  for (int level = 0; level < topology_.num_levels(); ++level) {
    // Members per (unit, child) of this level: the fullest child's m.
    const std::vector<std::pair<int, int>> at = units_and_children(topology_, devices, level);
    double m = 0.0;
    size_t children = 1;  // the most children of one unit holding members
    for (size_t i = 0, run = 0, touched = 0; i < at.size(); ++i) {
      const bool same_child = i > 0 && at[i] == at[i - 1];
      const bool same_unit = i > 0 && at[i].first == at[i - 1].first;
      run = same_child ? run + 1 : 1;
      touched = same_child ? touched : same_unit ? touched + 1 : 1;
      m = std::max(m, static_cast<double>(run));
      children = std::max(children, touched);
    }
    if (m >= n) continue;  // every member in one child: nothing crosses this level
    const Level& spec = topology_.levels[level];
    const double rails = static_cast<double>(spec.rails);
    const double share = std::min(m, rails) / rails;
    slowest = max(slowest, Seconds(m * (n - m) / n * bytes / (spec.bandwidth().bytes_per_s * share)));
    latencies += spec.latency * static_cast<double>(children - 1);
  }
  return slowest + latencies;
}

}  // namespace baton
