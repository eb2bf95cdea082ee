// Network: the communication cost model of the simulator.
//
// Point-to-point transfers (the sharing model):
//   A transfer from device a to device b crosses L = topology.common_level(a, b).
//   It occupies two directional links of level L for bytes / bandwidth_L
//   seconds: the uplink of a's child unit and the downlink of b's child unit
//   (links are full duplex: each direction is its own resource). A link serves
//   one transfer at a time, in the order transfers are issued (FIFO); a
//   transfer starts on the wire when it has been issued and both of its links
//   are free, and is delivered latency_L after it leaves the wire:
//     wire_start = max(issue, free(up), free(down))
//     wire_end   = wire_start + bytes / bandwidth_L      (both links busy until then)
//     delivered  = wire_end + latency_L
//   So two transfers of x bytes issued together on one link are delivered at
//   x/B + lat and 2x/B + lat: the link's bandwidth is shared by taking turns,
//   and its total throughput never exceeds B. Transfers inside one device are
//   free and instantaneous.
//   With rails_L > 1 (topology.h) a child unit's link is that many rails of
//   bandwidth_L / rails_L each, and every device uses its own rail
//   (Topology::rail_of): the links above are the sender's and the receiver's
//   rails, and bandwidth_L reads bandwidth_L / rails_L.
//
// Collective all-reduce (gradient sync of replicas), hierarchical ring:
//   For every level L, let n_L be the largest number of distinct children of
//   one level-L unit that the group touches. Levels with n_L = 1 cost nothing.
//   After the lower levels reduce-scatter, each of the c_L = prod_{l<L} n_l
//   members in a child unit holds D / c_L, and all of them cross the child's
//   uplink: D in all, on min(c_L, rails_L) of its rails_L rails:
//     time = sum_L [ 2 (n_L - 1) / n_L * D / (bandwidth_L * min(c_L, rails_L) / rails_L)
//                    + 2 (n_L - 1) latency_L ]
//   which for one level is the classic ring 2 (n - 1)/n * D / B.
//   All-reduce traffic is not queued on the point-to-point links (it is
//   modelled as a separate collective channel, as NCCL/Gloo run it on their own
//   connections); this is a stated simplification.
//
// Thread safety: a Network holds mutable link state; use one per simulation.
#pragma once

#include <span>
#include <vector>

#include "sim/topology.h"
#include "sim/units.h"

namespace baton {

struct TransferTimes {
  Seconds wire_start;
  Seconds delivered;
};

class Network {
 public:
  explicit Network(Topology topology);

  // Books the transfer on its links and returns when it starts and arrives.
  TransferTimes transfer(int src_device, int dst_device, Bytes size, Seconds issue);

  // Time a ring all-reduce of `size` bytes takes among `devices` (any order).
  Seconds allreduce_time(std::span<const int> devices, Bytes size) const;

  // Time an all-to-all takes among `devices` (any order), each sending `size`
  // bytes in all, an equal share to each of the n members (its own share
  // stays): what leaves a child unit of each level goes through its uplink,
  // m (n - m) / n x size from the m members inside it, on min(m, rails) of
  // the level's rails. Nothing aggregates (the shares are distinct), so unlike
  // the all-reduce the members of a server do not pool their bytes; the levels'
  // links move side by side: the slowest level's time, plus (k - 1) latencies
  // of each level whose units hold members in k of their children (the
  // level's point-to-point latency). Within one level, with no all-reduce
  // bandwidth or latency of its own, it is half an all-reduce of `size`.
  Seconds all_to_all_time(std::span<const int> devices, Bytes size) const;

  // The two directional links a transfer from `src_device` to `dst_device`
  // occupies (its sender's uplink and its receiver's downlink, as indices of
  // this network's links), or {-1, -1} inside one device.
  std::pair<int, int> links_of(int src_device, int dst_device) const;

  // The directional links, and when each is next free.
  int num_links() const { return static_cast<int>(link_free_.size()); }
  Seconds link_free(int link) const { return link_free_[link]; }
  // Moves every link's next free time `by` later (a jump in simulated time).
  void delay(Seconds by) {
    for (Seconds& free : link_free_) free += by;
  }

 private:
  // The directional link (child unit's rail) `device` uses at `level`.
  int link_index(int level, int device, bool down) const;

  // A transfer's level and links, remembered for the last two destinations
  // of each source device (a pipeline stage sends to its two neighbours).
  struct Route {
    int dst = -1;
    int level = -1;
    int up = -1, down = -1;
  };
  const Route& route(int src_device, int dst_device);

  Topology topology_;
  std::vector<Route> routes_;       // [2 src + slot]
  std::vector<int> link_offset_;    // first link index of each level
  std::vector<Seconds> link_free_;  // when each directional link is next free
};

}  // namespace baton
