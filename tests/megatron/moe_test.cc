// Mixture of experts (sim/megatron.h's GptModel::experts, router_topk,
// moe_ffn_hidden and grouped_gemm, MegatronLayout::expert_parallel;
// Megatron-core's --num-experts E, --moe-router-topk k, --moe-ffn-hidden-size
// F, --moe-grouped-gemm and --expert-model-parallel-size ep): the parameter
// counts, Megatron's FLOPs of the k experts a token passes through, a
// block's router, routing and permutation, its experts' GEMMs grouped or one
// after another, the parameters of a rank, the all-to-alls among the ep
// ranks, the experts' gradients reduced over the d c / ep ranks that hold
// them, their memory, the flags' checks and the plan file's arguments.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/network.h"
#include "sim/trace_reader.h"
#include "sim/trace_writers.h"

namespace baton {
namespace {

// Mixtral 8x7B (Jiang et al. 2024, "Mixtral of Experts", arXiv 2401.04088,
// Table 1): Mistral 7B's 32 layers of h 4096, 32 heads, 8 key-value groups,
// SwiGLU of width 14,336 as 8 experts, each token routed to 2; vocabulary
// 32,000, an untied output layer, RMSNorm, rotary positions, no biases.
GptModel mixtral() {
  GptModel m = testing::llama(32, 4096, 32, 8, 14336, 32000);
  m.experts = 8;
  m.router_topk = 2;
  return m;
}

// A small Mixtral-like model for the block's times: 4 layers, E experts of
// width 1408, top k.
GptModel small_moe(int64_t experts = 8, int64_t topk = 2) { return testing::small_moe(4, experts, topk); }

// The alltoall dispatcher's terms are this file's; tests/megatron/
// moe_dispatcher_test.cc has the allgather dispatcher's.
MegatronLayout with_experts(MegatronLayout l, int ep) {
  l.expert_parallel = ep;
  l.moe_dispatcher = MoeDispatcher::kAllToAll;
  return l;
}

const CollectiveTime kFree = [](double) { return Seconds(0.0); };

TEST_CASE("moe: Mixtral 8x7B has 46.7B parameters, 12.9B of them active per token", "[megatron][moe]") {
  const double L = 32, h = 4096, kv = 4096.0 / 32 * 8, F = 14336, E = 8, k = 2, V = 32000;
  const double attention = h * (h + 2 * kv) + h * h;  // QKV and the output projection
  // Each block: the attention, E SwiGLU experts (3 h F each), the router (h
  // E) and two RMSNorms; the word embedding and the untied output layer (V h
  // each), the final norm.
  const double total = L * (attention + E * 3 * h * F + h * E + 2 * h) + 2 * V * h + h;
  CHECK(total == 46'702'792'704.0);
  CHECK(gpt_parameters(mixtral(), 1) == total);
  // A token passes through k of the E experts (and the router).
  const double active = L * (attention + k * 3 * h * F + h * E + 2 * h) + 2 * V * h + h;
  CHECK(active == 12'879'925'248.0);
  CHECK(gpt_active_parameters(mixtral(), 1) == active);
  // The paper's "47B" parameters, "13B active".
  CHECK(std::round(total / 1e9) == 47);
  CHECK(std::round(active / 1e9) == 13);
  CHECK(gpt_block_expert_parameters(mixtral()) == E * 3 * h * F);
  CHECK(gpt_block_linear_parameters(mixtral()) == attention + E * 3 * h * F + h * E);
  CHECK(gpt_block_active_linear_parameters(mixtral()) == attention + k * 3 * h * F);
  // Every expert taken: all active. A dense model: its parameters.
  GptModel all = mixtral();
  all.router_topk = 8;
  CHECK(gpt_active_parameters(all, 1) == gpt_parameters(all, 1));
  const GptModel dense = testing::llama(32, 4096, 32, 8, 14336, 32000);
  CHECK(gpt_active_parameters(dense, 1) == gpt_parameters(dense, 1));
  CHECK(gpt_block_expert_parameters(dense) == 0.0);
  // With biases each expert has its own: 2 F (the gated up projection) and h.
  GptModel biased = small_moe();
  biased.linear_bias = true;
  CHECK(gpt_block_expert_parameters(biased) == 8 * (3.0 * 2048 * 1408 + 2 * 1408 + 2048));
}

TEST_CASE("moe: model FLOPs are a dense model's of width k F, the router not counted", "[megatron][moe]") {
  for (const Recompute r : {Recompute::kNone, Recompute::kFull}) {
    CAPTURE(static_cast<int>(r));
    MegatronLayout l = megatron_layout(1, 1, 8, 1, 64);
    l.recompute = r;
    const GptModel moe = small_moe(8, 2);
    GptModel dense = moe;
    dense.experts = 0;
    dense.moe_ffn_hidden = 0;
    dense.ffn_hidden = 2 * 1408;
    CHECK(megatron_model_flops(moe, l) == Approx(megatron_model_flops(dense, l)).epsilon(1e-15));
    // Megatron's formula with the active linear weights: k B s L (2 P + 4 s h) + 6 B s h V.
    const double B = 64, s = 2048, L = 4, h = 2048, V = 32000, passes = r == Recompute::kFull ? 4 : 3;
    const double active = h * (h + 2 * 512) + h * h + 2 * 3 * h * 1408;
    CHECK(megatron_model_flops(moe, l) ==
          Approx(passes * B * s * L * (2 * active + 4 * s * h) + 6 * B * s * h * V).epsilon(1e-12));
  }
}

TEST_CASE("moe: one expert of the dense width adds the router, the routing and the permutation", "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  GptModel dense = testing::llama(4, 2048, 16, 4, 5632, 32000);
  dense.sequence = 2048;
  GptModel one = dense;
  one.experts = 1;
  one.router_topk = 1;
  const MegatronLayout l = with_experts(megatron_layout(1, 1, 1, 2, 8), 1);
  const MegatronLayerTime a = make_megatron_profile(one, l, gpu, kFree).times[1];
  const MegatronLayerTime b = make_megatron_profile(dense, l, gpu, kFree).times[1];
  const double T = 2 * 2048, h = 2048, E = 1, k = 1;
  // The router's logits [T x h] x [h x E]; the softmax and top-k over T x E
  // values (read and written); each token copied to its k experts' order and
  // summed back (T k h values read and written each).
  const Seconds router = gpu.gemm(T, E, h);
  const Seconds routing = gpu.memory_bound(2 * T * E * 2) * 2;
  const Seconds permutation = gpu.memory_bound(2 * T * k * h * 2) * 2;
  CHECK((a.forward_compute - b.forward_compute).value == Approx((router + routing + permutation).value).epsilon(1e-9));
  // Backward: the router's input and weight gradients, the routing and the
  // permutation again.
  const Seconds router_weight = gpu.gemm(h, E, T);
  CHECK((a.backward_compute - b.backward_compute).value ==
        Approx((gpu.gemm(T, h, E) + router_weight + routing + permutation).value).epsilon(1e-9));
  CHECK((a.weight_gradient - b.weight_gradient).value == Approx(router_weight.value).epsilon(1e-9));
  CHECK(a.forward_comm.value == 0.0);
  CHECK(a.expert_forward.value == 0.0);
  // The router's h E weights beside the one expert's.
  CHECK(a.parameters - b.parameters == h * E);
  CHECK(a.expert_parameters == 3 * h * 5632);
}

TEST_CASE("moe: grouped experts run as one batched GEMM, the others one after another", "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const double E = 8, k = 2, ep = 2, t = 2, b = 1, s = 2048, h = 2048, F = 1408;
  MegatronLayout l = with_experts(megatron_layout(2, 1, 4, 1, 8), 2);
  l.sequence_parallel = true;
  GptModel m = small_moe(8, 2);
  const MegatronLayerTime sequential = make_megatron_profile(m, l, gpu, kFree).times[1];
  m.grouped_gemm = true;
  const MegatronLayerTime grouped = make_megatron_profile(m, l, gpu, kFree).times[1];
  // E / ep local experts, each on T k ep / E tokens: the up projection (2 F
  // wide, gated) and the down projection, both split over t.
  const double T = b * s, tokens = T * k * ep / E, local = E / ep, up = 2 * F / t, down = F / t;
  const Seconds one_by_one = (gpu.gemm(tokens, up, h) + gpu.gemm(tokens, h, down)) * local;
  const Seconds batched = gpu.gemm(tokens, up, h, local) + gpu.gemm(tokens, h, down, local);
  CHECK((sequential.forward_compute - grouped.forward_compute).value ==
        Approx((one_by_one - batched).value).epsilon(1e-9));
  const Seconds weights_one_by_one = (gpu.gemm(up, h, tokens) + gpu.gemm(h, down, tokens)) * local;
  const Seconds weights_batched = gpu.gemm(up, h, tokens, local) + gpu.gemm(h, down, tokens, local);
  CHECK((sequential.weight_gradient - grouped.weight_gradient).value ==
        Approx((weights_one_by_one - weights_batched).value).epsilon(1e-9));
  CHECK(grouped.forward_compute < sequential.forward_compute);
  // The same weights either way.
  CHECK(grouped.parameters == sequential.parameters);
}

TEST_CASE("moe: the experts' tensor-parallel collectives move k T h values in place of the MLP's T h",
          "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const double k = 2, t = 2, T = 2048, h = 2048, kv = 512;
  MegatronLayout l = with_experts(megatron_layout(2, 1, 1, 1, 8), 1);
  l.sequence_parallel = true;
  // A slow link, 1 GB/s: every collective outlasts the GEMM it could hide behind.
  const CollectiveTime slow = [](double bytes) { return Seconds(bytes / 1e9); };
  const MegatronLayerTime block = make_megatron_profile(small_moe(8, 2), l, gpu, slow).times[1];
  const double attention = T * h * 2, experts = T * k * h * 2;
  CHECK(block.forward_comm.value == Approx((attention + experts) / 1e9).epsilon(1e-12));
  // The backward: the attention's overlapped with the QKV weight gradient,
  // the experts' not overlapped.
  const Seconds qkv_weight = gpu.gemm((h + 2 * kv) / t, h, T);
  REQUIRE(attention / 1e9 > qkv_weight.value);
  CHECK(block.backward_comm.value == Approx(attention / 1e9 - qkv_weight.value + experts / 1e9).epsilon(1e-9));
}

TEST_CASE("moe: a rank holds 1 / t of the dense weights and 1 / (t ep) of the experts", "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const GptModel m = small_moe(8, 2);
  const double block = gpt_block_parameters(m), experts = gpt_block_expert_parameters(m);
  REQUIRE(experts == 8 * 3.0 * 2048 * 1408);
  for (const int t : {1, 2})
    for (const int ep : {1, 2, 4, 8}) {
      CAPTURE(t, ep);
      MegatronLayout l = with_experts(megatron_layout(t, 1, 8, 1, 8), ep);
      l.sequence_parallel = t > 1;
      REQUIRE(check_megatron_layout(m, l, 16).ok());
      const MegatronLayerTime time = make_megatron_profile(m, l, gpu, kFree).times[1];
      CHECK(time.parameters == Approx((block - experts) / t + experts / (t * ep)).epsilon(1e-15));
      CHECK(time.expert_parameters == Approx(experts / (t * ep)).epsilon(1e-15));
    }
}

TEST_CASE("moe: the dispatch and the combine are all-to-alls among the ep ranks, each way", "[megatron][moe]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  GptModel m = small_moe(8, 2);
  const double T = 2 * 2048, k = 2, h = 2048;
  MegatronLayout l = with_experts(megatron_layout(1, 1, 8, 2, 16), 1);
  l.bf16 = true;
  // ep = 1: no all-to-all.
  CHECK_FALSE(expert_all_to_all_time(topology, l));
  const auto alone = megatron_profile_on(m, l, topology);
  REQUIRE(alone.ok());
  CHECK(alone->times[1].expert_forward.value == 0.0);
  CHECK(alone->times[1].expert_backward.value == 0.0);
  // ep = 8, t = 1: GPUs 0 to 7, each holding its T k copies of h values.
  l.expert_parallel = 8;
  const double bytes = T * k * h * 2;
  const std::vector<int> group = {0, 1, 2, 3, 4, 5, 6, 7};
  const Seconds all_to_all = Network(topology).allreduce_time(group, Bytes::counted(bytes)) * 0.5;
  const CollectiveTime exchange = expert_all_to_all_time(topology, l);
  REQUIRE(exchange);
  CHECK(exchange(bytes).value == Approx(all_to_all.value).epsilon(1e-12));
  const auto split = megatron_profile_on(m, l, topology);
  REQUIRE(split.ok());
  const MegatronLayerTime& block = split->times[1];
  CHECK(block.expert_forward.value == Approx(2 * all_to_all.value).epsilon(1e-12));
  CHECK(block.expert_backward.value == Approx(2 * all_to_all.value).epsilon(1e-12));
  // The profile's layer carries them, each way.
  CHECK(split->profile.layers[1].forward.value ==
        Approx((block.forward_compute + block.forward_comm + block.expert_forward).value).epsilon(1e-12));
  // t = 2: the ep ranks are t GPUs apart (GPU 0 of each tensor-parallel group).
  MegatronLayout wide = with_experts(megatron_layout(2, 1, 8, 2, 16), 4);
  wide.sequence_parallel = true;
  const CollectiveTime spread = expert_all_to_all_time(topology, wide);
  REQUIRE(spread);
  CHECK(spread(bytes).value ==
        Approx(Network(topology).allreduce_time(std::vector<int>{0, 2, 4, 6}, Bytes::counted(bytes)).value * 0.5)
            .epsilon(1e-12));
}

TEST_CASE("moe: the experts' gradients are reduced over the d c / ep ranks that hold them", "[megatron][moe]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = small_moe(8, 2);
  const double g = 4;  // bf16: fp32 gradients
  const double experts = m.layers * gpt_block_expert_parameters(m);
  const double dense = gpt_parameters(m, 1) - experts;
  auto predicted = [&](int d, int ep) {
    MegatronLayout l = with_experts(megatron_layout(1, 1, d, 1, 2 * d), ep);  // p = 1: no embedding group
    l.bf16 = true;
    auto p = predict_megatron(m, l, topology, false);
    REQUIRE(p.ok());
    return *p;
  };
  // ep = d c = 8: every rank holds experts no other holds, nothing of theirs to reduce.
  CHECK(expert_gradient_weight(topology, with_experts(megatron_layout(1, 1, 8, 1, 16), 8)) == 0.0);
  const MegatronPrediction own = predicted(8, 8);
  const Network own_network(own.groups);
  CHECK(own.breakdown.data_allreduce.value ==
        Approx(own_network.allreduce_time(own.plan.stages[0].devices, Bytes::counted(dense * 1 * g)).value)
            .epsilon(1e-9));
  // ep = 1: the experts with the rest, over all d c.
  CHECK(expert_gradient_weight(topology, megatron_layout(1, 1, 8, 1, 16)) == 1.0);
  const MegatronPrediction all = predicted(8, 1);
  const Network all_network(all.groups);
  CHECK(all.breakdown.data_allreduce.value ==
        Approx(all_network.allreduce_time(all.plan.stages[0].devices, Bytes::counted((dense + experts) * g)).value)
            .epsilon(1e-9));
  // d 16, ep 2: the experts over the 8 ranks 2 apart that hold the same
  // ones (Megatron-core's expert-data-parallel group), the rest over the 16.
  const MegatronPrediction some = predicted(16, 2);
  const Network some_network(some.groups);
  std::vector<int> expert_group;
  for (int j = 0; j < 16; j += 2) expert_group.push_back(j);
  const Bytes expert_bytes = Bytes::counted(experts / 2 * g);
  const Seconds expected =
      some_network.allreduce_time(some.plan.stages[0].devices, Bytes::counted(dense * g)) +
      (some_network.allreduce_time(expert_group, expert_bytes) - some_network.allreduce_time(expert_group, Bytes(0)));
  CHECK(some.breakdown.data_allreduce.value == Approx(expected.value).epsilon(1e-9));
}

TEST_CASE("moe: the experts' optimizer states shard over the d c / ep ranks that hold them",
          "[megatron][moe][memory]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = small_moe(8, 2);
  const double experts = m.layers * gpt_block_expert_parameters(m);
  const double dense = gpt_parameters(m, 1) - experts;
  const double d = 8, ep = 2, g = 4;  // bf16
  MegatronLayout l = with_experts(megatron_layout(1, 1, 8, 1, 16), 2);
  l.bf16 = true;
  l.distributed_optimizer = true;
  const auto p = predict_megatron(m, l, topology, false);
  REQUIRE(p.ok());
  // Weights (2), gradients (g) and the 12 bytes of the distributed optimizer:
  // the dense weights' over the d c ranks, the experts' over the d c / ep.
  CHECK(static_cast<double>(p->memory.ranks[0].weights_and_optimizer.value) ==
        Approx(dense * (2 + g + 12 / d) + experts / ep * (2 + g + 12 / (d / ep))).epsilon(1e-9));
  // Without expert parallelism every rank holds them all, sharded over d.
  const auto whole = predict_megatron(m, with_experts(l, 1), topology, false);
  REQUIRE(whole.ok());
  CHECK(static_cast<double>(whole->memory.ranks[0].weights_and_optimizer.value) ==
        Approx((dense + experts) * (2 + g + 12 / d)).epsilon(1e-9));
}

TEST_CASE("moe: a block keeps k copies of its tokens through experts of width F, and the router's probabilities",
          "[megatron][moe][memory]") {
  const GptModel moe = small_moe(8, 2);
  GptModel dense = moe;
  dense.experts = 0;
  dense.moe_ffn_hidden = 0;
  dense.ffn_hidden = 1408;
  const double s = 2048, b = 1, h = 2048, F = 1408, E = 8, k = 2;
  for (const int t : {1, 2}) {
    CAPTURE(t);
    MegatronLayout l = megatron_layout(t, 1, 1, 1, 8);
    l.sequence_parallel = t > 1;
    // SwiGLU's 6 F / h of s b h per token, k times; and 2 k (the dispatched
    // copies, kept whole) and 4 E / (h t) (fp32 probabilities).
    const double extra = s * b * h * (6 * (k - 1) * F / h / t + 2 * k + 4 * E / (h * t));
    CHECK(megatron_layer_activation_bytes(moe, l) - megatron_layer_activation_bytes(dense, l) ==
          Approx(extra).epsilon(1e-12));
  }
}

TEST_CASE("moe: the trace draws the all-to-alls inside their compute spans, and reads back", "[megatron][moe][trace]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  MegatronLayout l = with_experts(megatron_layout(2, 2, 8, 1, 16), 8);  // ep 8 x t 2: across two servers
  l.sequence_parallel = true;
  l.recompute = Recompute::kFull;  // the backward repeats the forward's all-to-alls
  const auto p = predict_megatron(small_moe(), l, topology, true);
  REQUIRE(p.ok());
  const Trace& trace = p->simulation.trace;
  int expert_spans = 0;
  for (const Span& span : trace.spans) {
    if (span.stream != Stream::kExpertComm) continue;
    ++expert_spans;
    const Span& owner = testing::owning_compute_span(trace, span);
    // The stage's blocks' all-to-alls: the forward's, or the backward's with
    // the recomputed forward's; drawn before the tensor-parallel strip.
    const LayerRange range = p->plan.stages[span.action.stage].layers;
    Seconds expected, tensor;
    for (int layer = range.begin; layer < range.end; ++layer) {
      const MegatronLayerTime& t = p->profile.times[layer];
      const bool forward = span.action.kind == ActionKind::kForward;
      expected += forward ? t.expert_forward : t.expert_backward + t.expert_forward;
      // The recomputed forward's collectives: the blocks' (the embedding and
      // the head are not recomputed).
      tensor += forward ? t.forward_comm : t.backward_comm + (t.recompute.value > 0.0 ? t.forward_comm : Seconds(0.0));
    }
    CHECK(expected.value > 0.0);
    CHECK((span.end - span.start).value == Approx(expected.value).epsilon(1e-9));
    CHECK(span.end.value == Approx((owner.end - tensor).value).epsilon(1e-12));
  }
  CHECK(expert_spans > 0);
  const std::string json = trace_to_chrome_json(trace);
  auto back = parse_chrome_trace(json, "t.json");
  INFO((back.ok() ? std::string() : back.error().message));
  REQUIRE(back.ok());
  CHECK(std::count_if(back->spans.begin(), back->spans.end(),
                      [](const Span& s) { return s.stream == Stream::kExpertComm; }) == expert_spans);
  CHECK(json.find("\"expert-parallel all-to-alls\"") != std::string::npos);
  CHECK(json.find("\"EP F") != std::string::npos);
  const std::string svg = trace_to_svg(trace);
  CHECK(svg.find("class=\"ep\"") != std::string::npos);
  CHECK(svg.find("expert-parallel all-to-alls (strip") != std::string::npos);
}

TEST_CASE("moe: the checks name the flag", "[megatron][moe]") {
  GptModel m = small_moe(8, 2);
  m.flash_attention = true;
  const MegatronLayout l = with_experts(megatron_layout(1, 1, 8, 1, 16), 8);
  REQUIRE(check_megatron_layout(m, l, 8).ok());
  auto message = [&](const GptModel& model, const MegatronLayout& layout) {
    const Status status = check_megatron_layout(model, layout, 64);
    REQUIRE_FALSE(status.ok());
    return status.error().message;
  };
  GptModel dense = m;
  dense.experts = 0;
  CHECK_THAT(message(m, with_experts(l, 0)), Catch::Contains("--expert-model-parallel-size must be at least 1"));
  CHECK_THAT(message(dense, with_experts(l, 2)), Catch::Contains("--expert-model-parallel-size 2 needs --num-experts"));
  GptModel negative = m;
  negative.experts = -1;
  CHECK_THAT(message(negative, megatron_layout(1, 1, 8, 1, 16)), Catch::Contains("--num-experts must be at least 1"));
  CHECK_THAT(message(m, with_experts(megatron_layout(1, 1, 6, 1, 12), 3)),
             Catch::Contains("--num-experts 8 is not divisible by --expert-model-parallel-size 3"));
  CHECK_THAT(message(m, with_experts(megatron_layout(1, 1, 4, 1, 16), 8)),
             Catch::Contains("--expert-model-parallel-size 8 does not divide the 4 ranks"));
  // The d c ranks share the weights: d 2 x c 2 = 4 of them split the experts
  // 4 ways, not 8.
  MegatronLayout context = with_experts(megatron_layout(1, 1, 2, 1, 16), 8);
  context.context = 2;
  CHECK_THAT(message(m, context), Catch::Contains("(--data-parallel-size 2 x --context-parallel-size 2)"));
  context.expert_parallel = 4;
  CHECK(check_megatron_layout(m, context, 64).ok());
  for (const int64_t k : {0, 9}) {
    GptModel topk = m;
    topk.router_topk = k;
    CHECK_THAT(message(topk, l),
               Catch::Contains(fmt::format("--moe-router-topk {} must be between 1 and --num-experts 8", k)));
  }
  GptModel grouped = dense;
  grouped.grouped_gemm = true;
  CHECK_THAT(message(grouped, megatron_layout(1, 1, 8, 1, 16)),
             Catch::Contains("--moe-grouped-gemm needs --num-experts"));
  GptModel width = dense;
  width.moe_ffn_hidden = 1024;
  CHECK_THAT(message(width, megatron_layout(1, 1, 8, 1, 16)),
             Catch::Contains("--moe-ffn-hidden-size needs --num-experts"));
  // As Megatron-core asks: experts with tensor parallelism need sequence parallelism.
  MegatronLayout tensor = megatron_layout(2, 1, 8, 1, 16);
  CHECK_THAT(message(m, tensor), Catch::Contains("--sequence-parallel"));
  tensor.sequence_parallel = true;
  CHECK(check_megatron_layout(m, tensor, 64).ok());
}

TEST_CASE("moe: the plan file's arguments carry the experts and ep, and read back", "[megatron][moe]") {
  GptModel m = small_moe(8, 2);
  m.grouped_gemm = true;
  const MegatronLayout l = with_experts(megatron_layout(1, 2, 8, 1, 16), 4);
  const nlohmann::json arguments = megatron_arguments(m, l);
  CHECK(arguments.at("num_experts") == 8);
  CHECK(arguments.at("moe_router_topk") == 2);
  CHECK(arguments.at("moe_ffn_hidden_size") == 1408);
  CHECK(arguments.at("moe_grouped_gemm") == true);
  CHECK(arguments.at("expert_model_parallel_size") == 4);
  auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  INFO((back.ok() ? std::string() : back.error().message));
  REQUIRE(back.ok());
  CHECK(back->model.experts == 8);
  CHECK(back->model.router_topk == 2);
  CHECK(back->model.expert_ffn() == 1408);
  CHECK(back->model.grouped_gemm);
  CHECK(back->layout.expert_parallel == 4);
  CHECK(gpt_parameters(back->model, 1) == gpt_parameters(m, 1));
  // The experts' width left at the MLP's: read back as the default.
  GptModel plain_width = m;
  plain_width.moe_ffn_hidden = 0;
  auto defaulted = megatron_from_arguments(megatron_arguments(plain_width, l), "plan.json: megatron");
  REQUIRE(defaulted.ok());
  CHECK(defaulted->model.moe_ffn_hidden == 0);
  CHECK(defaulted->model.expert_ffn() == 5632);
  // ep 1 is not written; a dense model has no experts' keys.
  const nlohmann::json one = megatron_arguments(m, with_experts(l, 1));
  CHECK_FALSE(one.contains("expert_model_parallel_size"));
  auto read_one = megatron_from_arguments(one, "plan.json: megatron");
  REQUIRE(read_one.ok());
  CHECK(read_one->layout.expert_parallel == 1);
  GptModel dense = m;
  dense.experts = 0;
  dense.grouped_gemm = false;
  dense.moe_ffn_hidden = 0;
  const nlohmann::json plain = megatron_arguments(dense, with_experts(l, 1));
  for (const char* key : {"num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_grouped_gemm"})
    CHECK_FALSE(plain.contains(key));
  auto read_dense = megatron_from_arguments(plain, "plan.json: megatron");
  REQUIRE(read_dense.ok());
  CHECK_FALSE(read_dense->model.moe());
  // Counts below 1 are refused.
  for (const char* key : {"num_experts", "moe_router_topk", "moe_ffn_hidden_size", "expert_model_parallel_size"}) {
    nlohmann::json zero = arguments;
    zero[key] = 0;
    CAPTURE(key);
    CHECK_FALSE(megatron_from_arguments(zero, "plan.json: megatron").ok());
  }
}

}  // namespace
}  // namespace baton
