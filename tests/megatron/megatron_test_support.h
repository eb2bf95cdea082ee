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

// A Llama-style decoder (sim/megatron.h's llama_style) of sequence 4096.
inline GptModel llama(int64_t layers, int64_t hidden, int64_t heads, int64_t groups, int64_t ffn, int64_t vocab) {
  return llama_style(layers, hidden, heads, groups, ffn, vocab, 4096);
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

// DeepSeek's models as Megatron-core takes them: RMSNorm, SwiGLU, no biases,
// untied output, rotary positions, the latents' norms (--qk-layernorm), and
// experts of width F with S wide shared ones, the first `dense` blocks dense.
struct DeepSeek {
  int64_t layers, hidden, heads, q_lora, ffn, expert_ffn, experts, shared, topk, dense, vocab;
};
inline GptModel deepseek(const DeepSeek& d) {
  GptModel m = testing::llama(d.layers, d.hidden, d.heads, d.heads, d.ffn, d.vocab);
  m.query_groups = 0;  // every head its own keys and values
  m.sequence = 4096;
  m.mla = true;
  m.q_lora_rank = d.q_lora;
  m.kv_lora_rank = 512;
  m.qk_head_dim = 128;
  m.qk_pos_head_dim = 64;
  m.v_head_dim = 128;
  m.qk_layernorm = true;
  m.experts = d.experts;
  m.moe_ffn_hidden = d.expert_ffn;
  m.shared_expert_ffn = d.shared;
  m.router_topk = d.topk;
  m.moe_layer_pattern.assign(static_cast<size_t>(d.layers), 1);
  for (int64_t i = 0; i < d.dense; ++i) m.moe_layer_pattern[static_cast<size_t>(i)] = 0;
  m.moe_layer_freq = 0;
  return m;
}
// DeepSeek-V3 (arXiv 2412.19437, section 4.2 and its config.json): 61 layers
// of h 7168, 128 heads, q_lora 1536, 256 experts of width 2048 and one shared,
// top 8, the first 3 blocks dense (width 18432), vocabulary 129280.
inline const DeepSeek kV3 = {61, 7168, 128, 1536, 18432, 2048, 256, 2048, 8, 3, 129280};
// DeepSeek-V2 (arXiv 2405.04434, section 3.1.1): 60 layers of h 5120, 128
// heads, q_lora 1536, 160 experts of width 1536 and two shared, top 6, the
// first block dense (width 12288), vocabulary 102400.
inline const DeepSeek kV2 = {60, 5120, 128, 1536, 12288, 1536, 160, 2 * 1536, 6, 1, 102400};
// DeepSeek-V2-Lite (the same paper, appendix B): 27 layers of h 2048, 16
// heads, no query latent, 64 experts of width 1408 and two shared, top 6, the
// first block dense (width 10944), vocabulary 102400.
inline const DeepSeek kV2Lite = {27, 2048, 16, 0, 10944, 1408, 64, 2 * 1408, 6, 1, 102400};

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

// h100_32x8: NVLink 3600 Gb/s a GPU (450 GB/s), 3 us; 8 x 400 Gb/s rails a
// server (50 GB/s a GPU), 5 us.
constexpr double kNvlink = 450e9, kRail = 50e9, kNvlinkLatency = 3e-6, kRailLatency = 5e-6;

// t x d GPUs (one stage, one microbatch each), the experts over ep of them
// with the flex dispatcher (etp 0: t), bf16, sequence parallel with t > 1.
inline MegatronLayout flex_layout(int t, int d, int ep, int etp = 0) {
  MegatronLayout l = megatron_layout(t, 1, d, 1, d);
  l.expert_parallel = ep;
  l.expert_tensor = etp;
  l.moe_dispatcher = MoeDispatcher::kFlex;
  l.sequence_parallel = t > 1;
  l.bf16 = true;
  return l;
}

// The chance that none of k experts drawn from E without replacement is
// among `held` of them: C(E - held, k) / C(E, k).
inline double none_of(double experts, int k, double held) {
  double p = 1.0;
  for (int i = 0; i < k; ++i) p *= std::max(0.0, (experts - held - i) / (experts - i));
  return p;
}

}  // namespace baton::testing
