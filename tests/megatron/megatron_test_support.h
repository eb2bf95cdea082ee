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

// A Llama-style decoder (sim/megatron.h's architecture beyond GPT-3's):
// SwiGLU MLP of width `ffn`, `groups` key-value groups (a group per head when
// equal to the heads), no biases, an untied output layer, rotary positions,
// RMSNorm; sequence 4096, Megatron's own attention.
inline GptModel llama(int64_t layers, int64_t hidden, int64_t heads, int64_t groups, int64_t ffn, int64_t vocab) {
  GptModel m{layers, hidden, heads, 4096, vocab};
  m.ffn_hidden = ffn;
  m.query_groups = groups == heads ? 0 : groups;
  m.swiglu = true;
  m.linear_bias = false;
  m.tied_output = false;
  m.rope = true;
  m.rms_norm = true;
  return m;
}

}  // namespace baton::testing
