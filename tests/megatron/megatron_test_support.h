// Helpers shared by the Megatron tests (and the planner's Megatron search test).
// Include after tests/catch_compat.h.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/megatron.h"
#include "sim/topology.h"
#include "sim/trace.h"

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

// A small Mixtral-like mixture of experts: `layers` of h 2048, 16 heads, 4
// key-value groups, `experts` SwiGLU experts of width 1408, top `topk`,
// sequence 2048.
inline GptModel small_moe(int64_t layers, int64_t experts, int64_t topk) {
  GptModel m = llama(layers, 2048, 16, 4, 5632, 32000);
  m.sequence = 2048;
  m.experts = experts;
  m.router_topk = topk;
  m.moe_ffn_hidden = 1408;
  return m;
}

// The compute span that `inside` (a collective drawn inside one) belongs to:
// the same worker and action; checks that it exists and holds `inside`.
inline const Span& owning_compute_span(const Trace& trace, const Span& inside) {
  const auto owner = std::find_if(trace.spans.begin(), trace.spans.end(), [&](const Span& s) {
    return s.stream == Stream::kCompute && s.worker == inside.worker && s.action_index == inside.action_index;
  });
  REQUIRE(owner != trace.spans.end());
  CHECK(inside.start >= owner->start);
  CHECK(inside.end <= owner->end);
  return *owner;
}

}  // namespace baton::testing
