#include "sim/topology.h"

#include <limits>

#include <fmt/format.h>

#include "sim/json_fields.h"

namespace baton {

using json_fields::FieldPath;
using nlohmann::json;

int Topology::num_devices() const { return devices_per_unit(num_levels() - 1); }

int Topology::devices_per_unit(int level) const {
  int count = 1;
  for (int l = 0; l <= level && l < num_levels(); ++l) count *= levels[l].size;
  return count;
}

int Topology::common_level(int device_a, int device_b) const {
  if (device_a == device_b) return -1;
  int unit = 1;
  for (int l = 0; l < num_levels(); ++l) {
    unit *= levels[l].size;
    if (device_a / unit == device_b / unit) return l;
  }
  return num_levels() - 1;
}

namespace {

Result<DeviceType> read_device(const json& document, const FieldPath& root) {
  auto it = document.find("device");
  const FieldPath at = root.field("device");
  if (it == document.end()) return at.error("is missing");
  if (auto ok = json_fields::check_object(*it, at); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(*it, at,
                                              {"name", "memory_gib", "relative_speed", "compute_noise",
                                               "allreduce_noise_us", "transfer_noise_us", "transfer_noise_ready_us"});
      !ok)
    return ok.error();
  DeviceType device;
  auto name = json_fields::read_string(*it, at, "name");
  if (!name) return name.error();
  device.name = *name;
  auto memory = json_fields::read_number(*it, at, "memory_gib", 0.0, /*strict=*/true);
  if (!memory) return memory.error();
  // Bytes holds an int64; 1 PiB keeps the conversion (and sums of it) far from overflow.
  if (*memory > kMaxDeviceMemoryGib)
    return at.field("memory_gib").error(fmt::format("must be <= {}", kMaxDeviceMemoryGib), (*it)["memory_gib"]);
  device.memory = Bytes::from_gib(*memory);
  auto speed = json_fields::read_number_or(*it, at, "relative_speed", 0.0, true, 1.0);
  if (!speed) return speed.error();
  device.relative_speed = *speed;
  if (it->contains("compute_noise")) {
    auto noise = json_fields::read_number_list((*it)["compute_noise"], at.field("compute_noise"), /*positive=*/true);
    if (!noise) return noise.error();
    device.compute_noise = std::move(*noise);
  }
  for (auto [key, list] : {std::pair{"allreduce_noise_us", &device.allreduce_noise},
                           std::pair{"transfer_noise_us", &device.transfer_noise},
                           std::pair{"transfer_noise_ready_us", &device.transfer_noise_ready}}) {
    if (!it->contains(key)) continue;
    auto noise = json_fields::read_number_list((*it)[key], at.field(key), /*positive=*/false);
    if (!noise) return noise.error();
    for (double us : *noise) list->push_back(Seconds::from_us(us));
  }
  return device;
}

// A list of {"bytes", "seconds"} measurements.
Status check_samples(const json& value, const FieldPath& at) {
  if (!value.is_array()) return at.error("must be an array of {\"bytes\", \"seconds\"}", value);
  for (size_t i = 0; i < value.size(); ++i) {
    const FieldPath here = at.index(i);
    if (auto ok = json_fields::check_object(value[i], here); !ok) return ok;
    if (auto ok = json_fields::check_known_keys(value[i], here, {"bytes", "seconds"}); !ok) return ok;
    if (auto bytes = json_fields::read_integer(value[i], here, "bytes", 0); !bytes) return bytes.error();
    if (auto seconds = json_fields::read_number(value[i], here, "seconds", 0.0, false); !seconds)
      return seconds.error();
  }
  return ok_status();
}

// What `baton calibrate` measured, kept beside the fitted model for reports
// (`baton validate`); the simulator reads none of it, but its keys and
// numbers are checked like the rest of the file.
Status check_calibration(const json& value, const FieldPath& at) {
  if (auto ok = json_fields::check_object(value, at); !ok) return ok;
  if (auto ok = json_fields::check_known_keys(
          value, at,
          {"point_to_point", "allreduce", "allreduce_undisturbed", "allreduce_model", "allreduce_every_seconds",
           "loaded_exchange", "loaded_forward_ms", "latency_us", "bandwidth_gbps", "max_relative_residual",
           "allreduce_max_relative_residual", "gloo_io_threads"});
      !ok)
    return ok;
  if (auto io = value.find("gloo_io_threads"); io != value.end() && *io != "idle" && *io != "normal")
    return at.field("gloo_io_threads").error("must be \"idle\" or \"normal\" (the class of Gloo's I/O threads)", *io);
  if (auto loaded = value.find("loaded_exchange"); loaded != value.end()) {
    const FieldPath here = at.field("loaded_exchange");
    if (!loaded->is_array())
      return here.error("must be an array of {\"bytes\", \"sent_s\", \"waited_s\", \"completed_s\"}", *loaded);
    for (size_t i = 0; i < loaded->size(); ++i) {
      const json& message = (*loaded)[i];
      if (auto ok = json_fields::check_object(message, here.index(i)); !ok) return ok;
      if (auto ok =
              json_fields::check_known_keys(message, here.index(i), {"bytes", "sent_s", "waited_s", "completed_s"});
          !ok)
        return ok;
      if (auto bytes = json_fields::read_integer(message, here.index(i), "bytes", 0); !bytes) return bytes.error();
      for (const char* time : {"sent_s", "waited_s", "completed_s"})
        if (auto t =
                json_fields::read_number(message, here.index(i), time, std::numeric_limits<double>::lowest(), false);
            !t)
          return t.error();
    }
  }
  if (auto range = value.find("loaded_forward_ms"); range != value.end()) {
    const FieldPath here = at.field("loaded_forward_ms");
    if (!range->is_array() || range->size() != 2 || !(*range)[0].is_number() || !(*range)[1].is_number() ||
        !((*range)[0].get<double>() > 0.0) || !((*range)[0].get<double>() <= (*range)[1].get<double>()))
      return here.error("must be [LO, HI], 0 < LO <= HI (ms: the loaded exchange's forwards)", *range);
  }
  for (const char* samples : {"point_to_point", "allreduce", "allreduce_undisturbed", "allreduce_model"}) {
    if (!value.contains(samples)) continue;
    if (auto ok = check_samples(value[samples], at.field(samples)); !ok) return ok;
  }
  if (auto every = value.find("allreduce_every_seconds"); every != value.end()) {
    const FieldPath here = at.field("allreduce_every_seconds");
    if (!every->is_array()) return here.error("must be an array (per size) of arrays of seconds", *every);
    for (size_t i = 0; i < every->size(); ++i) {
      const json& times = (*every)[i];
      if (!times.is_array()) return here.index(i).error("must be an array of seconds", times);
      for (size_t k = 0; k < times.size(); ++k)
        if (!times[k].is_number()) return here.index(i).index(k).error("must be a number", times[k]);
    }
  }
  for (const char* number :
       {"latency_us", "bandwidth_gbps", "max_relative_residual", "allreduce_max_relative_residual"}) {
    if (auto ok = json_fields::read_number_or(value, at, number, 0.0, false, 0.0); !ok) return ok.error();
  }
  return ok_status();
}

Result<Level> read_level(const json& value, const FieldPath& at) {
  if (auto ok = json_fields::check_object(value, at); !ok) return ok.error();
  if (auto ok =
          json_fields::check_known_keys(value, at,
                                        {"name", "size", "bandwidth_gbps", "latency_us", "rails", "shared_compute",
                                         "shared_speedup", "allreduce_bandwidth_gbps", "allreduce_latency_us"});
      !ok)
    return ok.error();
  Level level;
  auto name = json_fields::read_string(value, at, "name");
  if (!name) return name.error();
  level.name = *name;
  auto size = json_fields::read_integer(value, at, "size", 1);
  if (!size) return size.error();
  if (*size > (1 << 20)) return at.field("size").error("must be <= 1048576", value["size"]);
  level.size = static_cast<int>(*size);
  auto bandwidth = json_fields::read_number(value, at, "bandwidth_gbps", 0.0, /*strict=*/true);
  if (!bandwidth) return bandwidth.error();
  level.bandwidth_gbps = *bandwidth;
  auto latency = json_fields::read_number(value, at, "latency_us", 0.0, false);
  if (!latency) return latency.error();
  level.latency = Seconds::from_us(*latency);
  if (value.contains("rails")) {
    auto rails = json_fields::read_integer(value, at, "rails", 1);
    if (!rails) return rails.error();
    if (*rails > (1 << 20)) return at.field("rails").error("must be <= 1048576", value["rails"]);
    level.rails = static_cast<int>(*rails);
  }
  if (value.contains("shared_compute")) {
    if (!value["shared_compute"].is_boolean())
      return at.field("shared_compute").error("must be true or false", value["shared_compute"]);
    level.shared_compute = value["shared_compute"].get<bool>();
  }
  if (value.contains("shared_speedup")) {
    auto speedup = json_fields::read_number(value, at, "shared_speedup", 1.0, /*strict=*/false);
    if (!speedup) return speedup.error();
    if (!level.shared_compute)
      return at.field("shared_speedup")
          .error("needs \"shared_compute\": true (the streams of one device)", value["shared_speedup"]);
    level.shared_speedup = *speedup;
  }
  if (value.contains("allreduce_bandwidth_gbps")) {
    auto ring = json_fields::read_number(value, at, "allreduce_bandwidth_gbps", 0.0, /*strict=*/true);
    if (!ring) return ring.error();
    level.allreduce_bandwidth_gbps = *ring;
  }
  if (value.contains("allreduce_latency_us")) {
    auto ring = json_fields::read_number(value, at, "allreduce_latency_us", 0.0, false);
    if (!ring) return ring.error();
    level.allreduce_latency = Seconds::from_us(*ring);
  }
  return level;
}

}  // namespace

Result<Topology> topology_from_json(const json& document, const std::string& source) {
  const FieldPath root(source);
  if (auto ok = json_fields::check_object(document, root); !ok) return ok.error();
  if (auto ok = json_fields::check_format(document, root, "baton.topology.v1"); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(document, root,
                                              {"format", "name", "source", "device", "levels", "calibration"});
      !ok)
    return ok.error();
  if (auto it = document.find("calibration"); it != document.end()) {
    if (auto ok = check_calibration(*it, root.field("calibration")); !ok) return ok.error();
  }
  Topology topology;
  auto name = json_fields::read_string(document, root, "name");
  if (!name) return name.error();
  topology.name = *name;
  auto origin = json_fields::read_string_or(document, root, "source", "");
  if (!origin) return origin.error();
  topology.source = *origin;
  auto device = read_device(document, root);
  if (!device) return device.error();
  topology.device = *device;
  auto levels = json_fields::read_array(document, root, "levels", /*non_empty=*/true);
  if (!levels) return levels.error();
  int64_t devices = 1;
  for (size_t i = 0; i < (*levels)->size(); ++i) {
    auto level = read_level((**levels)[i], root.field("levels").index(i));
    if (!level) return level.error();
    if (level->shared_compute && i > 0)
      return root.field("levels")
          .index(i)
          .field("shared_compute")
          .error("is for level 0 only (the streams of one device)", (**levels)[i]["shared_compute"]);
    if (level->rails > devices)
      return root.field("levels").index(i).field("rails").error(
          fmt::format("must be at most the {} devices under one child of the level (one rail per device)", devices),
          (**levels)[i]["rails"]);
    devices *= level->size;
    if (devices > (1 << 24)) return root.field("levels").error("describe more than 16777216 devices", **levels);
    topology.levels.push_back(*level);
  }
  return topology;
}

Result<Topology> parse_topology(std::string_view text, const std::string& source) {
  auto document = json_fields::parse_json_text(text, source);
  if (!document) return document.error();
  return topology_from_json(*document, source);
}

json topology_to_json(const Topology& topology) {
  json levels = json::array();
  for (const Level& level : topology.levels) {
    json entry = {{"name", level.name},
                  {"size", level.size},
                  {"bandwidth_gbps", level.bandwidth_gbps},
                  {"latency_us", level.latency.us()}};
    if (level.rails != 1) entry["rails"] = level.rails;
    if (level.shared_compute) entry["shared_compute"] = true;
    if (level.shared_speedup != 1.0) entry["shared_speedup"] = level.shared_speedup;
    if (level.allreduce_bandwidth_gbps) entry["allreduce_bandwidth_gbps"] = *level.allreduce_bandwidth_gbps;
    if (level.allreduce_latency) entry["allreduce_latency_us"] = level.allreduce_latency->us();
    levels.push_back(std::move(entry));
  }
  json document = {{"format", "baton.topology.v1"},
                   {"name", topology.name},
                   {"device",
                    {{"name", topology.device.name},
                     {"memory_gib", topology.device.memory.gib()},
                     {"relative_speed", topology.device.relative_speed}}},
                   {"levels", levels}};
  if (!topology.device.compute_noise.empty()) document["device"]["compute_noise"] = topology.device.compute_noise;
  for (auto [key, list] : {std::pair{"allreduce_noise_us", &topology.device.allreduce_noise},
                           std::pair{"transfer_noise_us", &topology.device.transfer_noise},
                           std::pair{"transfer_noise_ready_us", &topology.device.transfer_noise_ready}}) {
    if (list->empty()) continue;
    json extra = json::array();
    for (Seconds t : *list) extra.push_back(t.us());
    document["device"][key] = extra;
  }
  if (!topology.source.empty()) document["source"] = topology.source;
  return document;
}

Topology make_flat_topology(int devices, double bandwidth_gbps, Seconds latency, Bytes memory) {
  Topology topology;
  topology.name = "flat";
  topology.device = DeviceType{"synthetic", memory, 1.0, {}, {}, {}, {}};
  topology.levels.push_back(Level{"switch", devices, bandwidth_gbps, latency, {}, {}});
  return topology;
}

}  // namespace baton
