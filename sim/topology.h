// Topology: a hierarchical cluster of identical devices.
//
// Levels are listed innermost first. Level 0 groups `levels[0].size` devices
// into a unit (a server); level 1 groups `levels[1].size` level-0 units, and so
// on. Devices are numbered so that the devices of one unit are consecutive:
// device d sits in unit d / devices_per_unit(L) of level L.
//
// Link model: inside a unit of level L, every child (a device at level 0, a
// unit of level L-1 above it) has one full-duplex link of `bandwidth_gbps`
// into the level's switch. A transfer between two devices crosses the
// innermost level that contains both: it uses the sender child's uplink and the
// receiver child's downlink of that level and pays that level's latency once.
//
// File format `baton.topology.v1`:
//   {"format": "baton.topology.v1", "name": str, optional "source": str,
//    "device": {"name": str, "memory_gib": num > 0, optional "relative_speed": num > 0,
//               optional "compute_noise": [num > 0, ...],
//               optional "allreduce_noise_us": [num, ...],
//               optional "transfer_noise_us": [num, ...],
//               optional "transfer_noise_ready_us": [num, ...]},
//    "levels": [{"name": str, "size": int >= 1, "bandwidth_gbps": num > 0,
//                "latency_us": num >= 0, optional "rails": int >= 1,
//                optional "shared_compute": bool (level 0 only),
//                optional "shared_speedup": num >= 1 (level 0, with shared_compute),
//                optional "allreduce_bandwidth_gbps": num > 0,
//                optional "allreduce_latency_us": num >= 0}],
//    optional "calibration": {optional "point_to_point", "allreduce",
//                "allreduce_undisturbed", "allreduce_model": [{"bytes": int >= 0,
//                  "seconds": num >= 0}],
//                optional "allreduce_every_seconds": [[num, ...] per size],
//                optional "latency_us", "bandwidth_gbps", "max_relative_residual",
//                  "allreduce_max_relative_residual": num >= 0,
//                optional "gloo_io_threads": "idle" | "normal"}}
// These are all the keys: the loader refuses any other (a misspelled
// `bandwith_gbps` is an error naming the object and the key, not a level
// without bandwidth). The noise fields and `calibration` joined v1 after its
// first files without a new format string: they change no figure of a
// deterministic simulation, and a file without them means what it meant.
// `rails` and `shared_compute` joined v1 later too, and they do change
// figures, but only those of a file that uses them: a file without them means
// what it meant, and a reader older than them refuses a file with them (an
// unknown key) rather than misreading it. A field that would change what an
// existing file means comes with a new format string.
// `rails` (default 1) says the level's uplink is that many parallel links
// (a server's NICs, one per GPU), bandwidth_gbps / rails each: a device
// sends and receives on its own rail (rail_of), so one transfer between two
// devices gets one rail, while a collective whose members fill the unit uses
// all of them (sim/network.h).
// `shared_compute` (level 0 only; default false) says the devices of one
// unit of level 0 are not devices of their own but streams of one physical
// device, as the workers of the threads backend sharing one GPU are: their
// compute takes turns on that device's one compute stream (the simulator
// grants it first come, first served; Topology::compute_unit), while their
// transfers and all-reduces still cross the level's links (the hand-overs
// between streams that `baton calibrate --device cuda` measures).
// `shared_speedup` (with shared_compute; default 1) is how much more work
// the unit's device does per second with its streams computing at once than
// with one: kernels of small passes leave most of a GPU idle, so a second
// stream's kernels run beside the first's. Above 1 the simulator gives an
// action that starts on an idle unit the whole device (as profiled, rate 1)
// and one that starts while others run what they leave of the unit's
// capacity: rate min(1, shared_speedup - the rates already committed), the
// rest of its work at rate 1 once they end; an action keeps the rates it was
// given (a kernel launched first holds the SMs it took). The unit's workers
// share its host's issuing, their launches interleaved call by call: an
// action issues its pass's host share of its time (the profile's host times,
// StageCost; the whole action without them), so at rate r it holds r x share
// of the issuing, and the actions running at once hold at most all of it:
// passes of small kernels, which the host launches no faster than the GPU
// runs them, gain nothing, as the H200's runs at micro-batch 64 showed;
// gpt-mini at micro-batch 16384 (host 30-55% of the device's time) ran
// 12-15% faster than taking turns (bench/RESULTS.md). 1: the one compute
// stream taken in turns. `baton profile measure --streams N` measures it for a model (the
// profile's "shared_streams") and `baton validate` moves it here.
// The optional allreduce_* fields are the effective link parameters of the
// ring all-reduce on that level where they differ from point-to-point ones
// (a collective library's own protocol, threads and reduction cost), as
// `baton calibrate` measures them; each defaults to its point-to-point value.
// `relative_speed` scales profile compute times (2.0 = twice as fast as the
// profiled device; default 1).
// `compute_noise` describes a shared machine's noise: a sample of the factor
// by which one layer's forward or backward takes longer or shorter than its
// profiled time (1 = as profiled), as `baton validate` measures it with
// every rank profiling at once. `allreduce_noise_us` is a sample of the time
// one all-reduce takes beyond the level's ring model (which then describes an
// undisturbed all-reduce), as `baton calibrate` measures it. `transfer_noise_us`
// and `transfer_noise_ready_us` are samples of the time a point-to-point
// message's receiver waits beyond the link model while both ends compute (from
// the later of the modelled arrival and the receive's wait to its end), as
// `baton calibrate` measures them in a loaded exchange: the first of receives
// that waited for their data (reached before the modelled arrival), the second
// of receives whose data were there. Only simulations
// given a noise seed (SimOptions::noise_seed) draw from them.
// `calibration` holds the raw measurements `baton calibrate` fitted the level
// to (message sizes and times), which `baton validate` sets beside the model
// in its report; the simulator and planner ignore it.
// Thread safety: immutable after construction.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/result.h"
#include "sim/units.h"

namespace baton {

// The most memory a device may have (1 PiB): a topology file's memory_gib and
// the flags that set a device's memory are held to it.
constexpr double kMaxDeviceMemoryGib = 1048576.0;

struct DeviceType {
  std::string name;
  Bytes memory;
  double relative_speed = 1.0;
  std::vector<double> compute_noise;          // empty: none
  std::vector<Seconds> allreduce_noise;       // empty: none
  std::vector<Seconds> transfer_noise;        // receives that waited for their data; empty: none
  std::vector<Seconds> transfer_noise_ready;  // receives whose data were there; empty: none

  bool noisy() const {
    return !compute_noise.empty() || !allreduce_noise.empty() || !transfer_noise.empty() ||
           !transfer_noise_ready.empty();
  }
};

struct Level {
  std::string name;
  int size = 1;  // children per unit of this level
  double bandwidth_gbps = 0.0;
  Seconds latency;
  std::optional<double> allreduce_bandwidth_gbps;
  std::optional<Seconds> allreduce_latency;
  // Parallel links (NICs, "rails") the unit's uplink of bandwidth_gbps is made
  // of, each rails-th of it; 1: one link.
  int rails = 1;
  // Level 0 only: the unit's devices are streams of one physical device that
  // share its compute (see the file format above).
  bool shared_compute = false;
  // With shared_compute: the unit's throughput with its streams computing at
  // once, relative to one stream (see the file format above); >= 1.
  double shared_speedup = 1.0;

  Bandwidth bandwidth() const { return Bandwidth::from_gbps(bandwidth_gbps); }
  // What one point-to-point transfer gets: one rail.
  Bandwidth rail_bandwidth() const { return Bandwidth::from_gbps(bandwidth_gbps / rails); }
  Bandwidth ring_bandwidth() const { return Bandwidth::from_gbps(allreduce_bandwidth_gbps.value_or(bandwidth_gbps)); }
  Seconds ring_latency() const { return allreduce_latency.value_or(latency); }
};

struct Topology {
  std::string name;
  std::string source;  // where the numbers come from
  DeviceType device;
  std::vector<Level> levels;  // innermost first; at least one

  int num_levels() const { return static_cast<int>(levels.size()); }
  int num_devices() const;
  // The compute stream `device` computes on: the device itself, or with
  // levels[0].shared_compute the unit of level 0 that holds it; and how many
  // there are.
  int compute_unit(int device) const { return levels.front().shared_compute ? device / levels.front().size : device; }
  int num_compute_units() const {
    return levels.front().shared_compute ? num_devices() / levels.front().size : num_devices();
  }
  // The device whose memory `device` holds its data in: itself, or with
  // levels[0].shared_compute the first device of its unit (the streams of one
  // physical device share its memory as they share its compute).
  int memory_device(int device) const {
    return levels.front().shared_compute ? compute_unit(device) * levels.front().size : device;
  }
  // Devices in one unit of level `level` (level -1: a single device).
  int devices_per_unit(int level) const;
  // Innermost level whose unit contains both devices; -1 when a == b.
  int common_level(int device_a, int device_b) const;
  // Global index of the child unit of `level` that holds `device`
  // (the device itself at level 0).
  int child_of(int device, int level) const { return device / devices_per_unit(level - 1); }
  // The rail (0 .. levels[level].rails - 1) of its child unit's uplink that
  // `device` sends and receives on at `level`: the child's devices spread
  // evenly over its rails in order (one NIC per GPU when rails = devices).
  int rail_of(int device, int level) const {
    const int per_child = devices_per_unit(level - 1);
    const int rails = levels[level].rails;
    return static_cast<int>(static_cast<int64_t>(device % per_child) * rails / per_child);
  }
};

Result<Topology> topology_from_json(const nlohmann::json& document, const std::string& source);
Result<Topology> parse_topology(std::string_view text, const std::string& source);
nlohmann::json topology_to_json(const Topology& topology);

// A one-level topology of `devices` devices, for tests: every pair of devices
// talks over one switch of `bandwidth_gbps` and `latency`.
Topology make_flat_topology(int devices, double bandwidth_gbps, Seconds latency, Bytes memory = Bytes::from_gib(16));

}  // namespace baton
