// Helpers shared by the Megatron tests (and the planner's Megatron search test).
// Include after tests/catch_compat.h.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/megatron.h"
#include "sim/topology.h"

namespace baton::testing {

using baton::megatron_layout;  // sim/megatron.h

// A topology shipped in topologies/; fails the test when it does not load.
inline Topology shipped_topology(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(BATON_SOURCE_DIR) / "topologies" / name;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto topology = parse_topology(text.str(), path.string());
  REQUIRE(topology.ok());
  return *topology;
}

}  // namespace baton::testing
