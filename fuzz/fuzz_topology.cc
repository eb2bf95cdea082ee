// Fuzzes parse_topology: any text must give a Topology or an Error, never a
// crash. An accepted topology must describe at least one device with a
// positive memory and speed, what topology_to_json writes must load again,
// and with a key the format does not have it must be refused.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "sim/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using baton::fuzz::fail;
  auto topology = baton::parse_topology(baton::fuzz::as_text(data, size), "fuzz.topology.json");
  if (!topology) return 0;
  if (topology->levels.empty()) fail("topology has a level", "");
  if (topology->num_devices() < 1) fail("topology has a device", "");
  if (topology->device.relative_speed <= 0) fail("relative_speed > 0", "");
  // The simulator asks which level joins two devices; the last pair spans all.
  const int last = topology->num_devices() - 1;
  if (topology->common_level(0, last) >= topology->num_levels()) fail("common_level in range", "");
  const nlohmann::json written = baton::topology_to_json(*topology);
  auto again = baton::topology_from_json(written, "rewritten");
  if (!again) fail("the written topology loads again", again.error().message);
  if (again->num_devices() != topology->num_devices()) fail("rewriting keeps the devices", "");
  baton::fuzz::check_unknown_key_refused(
      written, [](const nlohmann::json& document) { return baton::topology_from_json(document, "extended"); });
  return 0;
}
