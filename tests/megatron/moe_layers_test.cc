// Mixture of experts beyond Mixtral's: a shared expert beside the routed ones
// (Megatron-core's --moe-shared-expert-intermediate-size S, Qwen's and
// DeepSeek's) and dense blocks among the MoE ones (--moe-layer-freq, an
// integer or Megatron's list expression): the parameter counts of two
// published models, Megatron's FLOPs, each block's time by its kind, the
// memory of mixed blocks, the flag's reader and the plan file's arguments.
#include <cmath>
#include <string>
#include <vector>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

// A Qwen-MoE-style model: untied, SwiGLU, RMSNorm, rotary, no biases; E
// experts of width F, top k, and a shared expert of width S.
GptModel qwen_moe(int64_t layers, int64_t hidden, int64_t heads, int64_t groups, int64_t experts, int64_t topk,
                  int64_t expert_ffn, int64_t shared) {
  GptModel m = testing::llama(layers, hidden, heads, groups, 4 * hidden, 151936);
  m.experts = experts;
  m.router_topk = topk;
  m.moe_ffn_hidden = expert_ffn;
  m.shared_expert_ffn = shared;
  return m;
}

const CollectiveTime kFree = [](double) { return Seconds(0.0); };

TEST_CASE("moe layers: Qwen's MoE models count their published parameters, a shared expert in every block",
          "[megatron][moe]") {
  // Qwen2-57B-A14B (Qwen Team, "Qwen2 Technical Report", 2024, Table 1: 57B
  // parameters, 14B activated; its configuration: 28 layers of h 3584, 28
  // heads, 4 key-value groups, 64 experts of width 2560, top 8, a shared
  // expert of width 20,480, vocabulary 151,936). Qwen's query, key and
  // value biases and its shared expert's gate (a few million parameters)
  // are not baton's: the count is within them.
  const GptModel qwen2 = qwen_moe(28, 3584, 28, 4, 64, 8, 2560, 20480);
  const double h = 3584, kv = 3584.0 / 28 * 4, L = 28, E = 64, k = 8, F = 2560, S = 20480, V = 151936;
  const double attention = h * (h + 2 * kv) + h * h;
  const double total = L * (attention + E * 3 * h * F + 3 * h * S + h * E + 2 * h) + 2 * V * h + h;
  const double active = L * (attention + k * 3 * h * F + 3 * h * S + h * E + 2 * h) + 2 * V * h + h;
  CHECK(gpt_parameters(qwen2, 1) == total);
  CHECK(gpt_active_parameters(qwen2, 1) == active);
  CHECK(std::round(total / 1e9) == 57);
  CHECK(std::round(active / 1e9) == 14);
  // Qwen1.5-MoE-A2.7B (Qwen Team, "Qwen1.5-MoE: Matching 7B Model
  // Performance with 1/3 Activated Parameters", 2024: 14.3B parameters, 2.7B
  // activated; 24 layers of h 2048, 16 heads, 60 experts of width 1408, top
  // 4, a shared expert of width 5632).
  const GptModel qwen15 = qwen_moe(24, 2048, 16, 16, 60, 4, 1408, 5632);
  CHECK(std::round(gpt_parameters(qwen15, 1) / 1e8) == 143);
  CHECK(std::round(gpt_active_parameters(qwen15, 1) / 1e8) == 27);
}

TEST_CASE("moe layers: FLOPs count the shared expert, and each block as what it is", "[megatron][moe]") {
  MegatronLayout l = megatron_layout(1, 1, 8, 1, 64);
  GptModel shared = testing::small_moe(4, 8, 2);
  shared.shared_expert_ffn = 2816;
  // Every block: a dense model of width k F + S.
  GptModel dense = shared.dense_blocks();
  dense.ffn_hidden = 2 * 1408 + 2816;
  CHECK(megatron_model_flops(shared, l) == Approx(megatron_model_flops(dense, l)).epsilon(1e-15));
  // Every other block MoE (--moe-layer-freq 2): blocks 0 and 2 as above,
  // blocks 1 and 3 dense of the model's own width f.
  GptModel alternate = shared;
  alternate.moe_layer_freq = 2;
  CHECK(alternate.moe_blocks() == 2);
  CHECK(alternate.moe_block(0));
  CHECK_FALSE(alternate.moe_block(1));
  const double B = 64, s = 2048, h = 2048, V = 32000, kv = 512;
  const double attention = h * (h + 2 * kv) + h * h;
  const double linear = 2 * (attention + 3 * h * (2 * 1408 + 2816)) + 2 * (attention + 3 * h * 5632);
  CHECK(megatron_model_flops(alternate, l) ==
        Approx(3 * B * s * (2 * linear + 4 * 4 * s * h) + 6 * B * s * h * V).epsilon(1e-12));
  // Parameters likewise: two MoE blocks, two dense ones.
  CHECK(gpt_parameters(alternate, 1) ==
        gpt_parameters(shared, 1) - 2 * (gpt_block_parameters(shared) - gpt_block_parameters(shared.dense_blocks())));
}

TEST_CASE("moe layers: a shared expert runs as a dense MLP of its width beside the experts", "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const GptModel routed = testing::small_moe(4, 8, 2);
  GptModel shared = routed;
  shared.shared_expert_ffn = 2816;
  for (const int t : {1, 2}) {
    CAPTURE(t);
    MegatronLayout l = megatron_layout(t, 1, 1, 2, 8);
    l.sequence_parallel = t > 1;
    const double T = 2 * 2048, h = 2048, S = 2816.0 / t;
    // A slow tensor-parallel link: the shared expert's collectives show.
    const CollectiveTime slow = [](double bytes) { return Seconds(bytes / 1e9); };
    const MegatronLayerTime a = make_megatron_profile(shared, l, gpu, slow).times[1];
    const MegatronLayerTime b = make_megatron_profile(routed, l, gpu, slow).times[1];
    const Seconds activation = gpu.memory_bound(3 * T * S * 2);
    const Seconds up_w = gpu.gemm(2 * S, h, T);
    const Seconds weight = up_w + gpu.gemm(h, S, T);
    CHECK((a.forward_compute - b.forward_compute).value ==
          Approx((gpu.gemm(T, 2 * S, h) + gpu.gemm(T, h, S) + activation).value).epsilon(1e-9));
    CHECK((a.weight_gradient - b.weight_gradient).value == Approx(weight.value).epsilon(1e-9));
    CHECK((a.backward_compute - b.backward_compute).value ==
          Approx((gpu.gemm(T, S, h) + gpu.gemm(T, h, 2 * S) + activation * 2.0 + weight).value).epsilon(1e-9));
    // The dense MLP's collectives of T h values: the backward's overlaps the
    // up projection's weight gradient.
    const Seconds allreduce = t > 1 ? slow(T * h * 2) : Seconds(0.0);
    CHECK((a.forward_comm - b.forward_comm).value == Approx(allreduce.value).epsilon(1e-9));
    CHECK((a.backward_comm - b.backward_comm).value ==
          Approx(max(Seconds(0.0), allreduce - up_w).value).epsilon(1e-9).margin(1e-15));
    // Its weights are dense: split over t, not over ep.
    CHECK(a.parameters - b.parameters == Approx(3 * 2048.0 * 2816 / t));
    CHECK(a.expert_parameters == b.expert_parameters);
  }
}

TEST_CASE("moe layers: --moe-layer-freq makes the other blocks dense, in time and parameters", "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  GptModel m = testing::small_moe(4, 8, 2);
  REQUIRE(parse_moe_layer_freq("[0]*1+[1]*3", m).ok());
  const MegatronLayout l = megatron_layout(1, 1, 8, 2, 16);
  REQUIRE(check_megatron_layout(m, l, 8).ok());
  const MegatronProfile mixed = make_megatron_profile(m, l, gpu, kFree);
  const MegatronProfile all = make_megatron_profile(testing::small_moe(4, 8, 2), l, gpu, kFree);
  const MegatronProfile dense = make_megatron_profile(m.dense_blocks(), l, gpu, kFree);
  // Profile layer 1 + i is block i: block 0 dense, blocks 1-3 MoE.
  CHECK(mixed.times[1].forward_compute == dense.times[1].forward_compute);
  CHECK(mixed.times[1].backward_compute == dense.times[1].backward_compute);
  CHECK(mixed.times[1].parameters == dense.times[1].parameters);
  CHECK(mixed.times[1].expert_parameters == 0.0);
  for (int i = 2; i <= 4; ++i) {
    CAPTURE(i);
    CHECK(mixed.times[i].forward_compute == all.times[i].forward_compute);
    CHECK(mixed.times[i].parameters == all.times[i].parameters);
  }
  CHECK(mixed.profile.layers[1].description.find("experts") == std::string::npos);
  CHECK(mixed.profile.layers[2].description.find("8 experts") != std::string::npos);
  CHECK(gpt_parameters(m, 1) == gpt_parameters(testing::small_moe(4, 8, 2), 1) -
                                    gpt_block_parameters(testing::small_moe(4, 8, 2)) +
                                    gpt_block_parameters(m.dense_blocks()));
}

TEST_CASE("moe layers: memory counts each block's activations by its kind", "[megatron][moe]") {
  GptModel m = testing::small_moe(4, 8, 2);
  m.moe_layer_freq = 2;  // blocks 0 and 2 MoE, 1 and 3 dense
  m.shared_expert_ffn = 2816;
  const MegatronLayout l = megatron_layout(1, 1, 8, 1, 16);  // p 1: one microbatch in flight
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const auto p = predict_megatron(m, l, topology, false);
  REQUIRE(p.ok());
  const double moe = megatron_layer_activation_bytes(m, l),
               dense = megatron_layer_activation_bytes(m.dense_blocks(), l);
  CHECK(moe > dense);
  // The last rank's fp32 logits, twice: s b V x 4 x 2.
  const double logits = 2048.0 * 1 * 32000 * 4 * 2;
  REQUIRE(p->memory.ranks.size() == 1);
  CHECK(p->memory.ranks[0].activations.value == Approx(2 * moe + 2 * dense + logits).epsilon(1e-9));
  // Without the dense blocks: four MoE blocks' worth.
  GptModel every = m;
  every.moe_layer_freq = 1;
  const auto q = predict_megatron(every, l, topology, false);
  REQUIRE(q.ok());
  CHECK(q->memory.ranks[0].activations.value == Approx(4 * moe + logits).epsilon(1e-9));
}

TEST_CASE("moe layers: --moe-layer-freq reads an integer or Megatron's list expression", "[megatron][moe]") {
  GptModel m = testing::small_moe(12, 8, 2);
  REQUIRE(parse_moe_layer_freq("3", m).ok());
  CHECK(m.moe_layer_freq == 3);
  CHECK(m.moe_layer_pattern.empty());
  CHECK(m.moe_blocks() == 4);
  // Megatron's help text's example: ([1]*3+[0]*1)*3.
  REQUIRE(parse_moe_layer_freq("([1]*3+[0]*1)*3", m).ok());
  CHECK(m.moe_layer_pattern == std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0});
  CHECK(m.moe_blocks() == 9);
  REQUIRE(parse_moe_layer_freq("[0]*2 + [1, 0]*5", m).ok());
  CHECK(m.moe_layer_pattern == std::vector<uint8_t>{0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0});
  CHECK(check_megatron_layout(m, megatron_layout(1, 1, 1, 1, 1), 8).ok());
  auto refused = [](const std::string& text) {
    GptModel model = testing::small_moe(12, 8, 2);
    const Status status = parse_moe_layer_freq(text, model);
    REQUIRE_FALSE(status.ok());
    return status.error().message;
  };
  CHECK_THAT(refused("[2]*12"), Catch::Contains("--moe-layer-freq \"[2]*12\": an entry other than 0 or 1"));
  CHECK_THAT(refused("([1]*3"), Catch::Contains("')' expected"));
  CHECK_THAT(refused("one"), Catch::Contains("'[' or '(' expected at character 1"));
  CHECK_THAT(refused("[1]*100000000"), Catch::Contains("more entries than any model has layers"));
  // The checks: a pattern's length, a frequency beyond the layers.
  auto checked = [](GptModel model) {
    const Status status = check_megatron_layout(model, megatron_layout(1, 1, 1, 1, 1), 8);
    REQUIRE_FALSE(status.ok());
    return status.error().message;
  };
  GptModel short_pattern = testing::small_moe(12, 8, 2);
  REQUIRE(parse_moe_layer_freq("[1]*11", short_pattern).ok());
  CHECK_THAT(checked(short_pattern), Catch::Contains("--moe-layer-freq's pattern has 11 entries for --num-layers 12"));
  GptModel no_moe = testing::small_moe(12, 8, 2);
  REQUIRE(parse_moe_layer_freq("[0]*12", no_moe).ok());
  CHECK_THAT(checked(no_moe), Catch::Contains("no MoE block"));
  GptModel sparse = testing::small_moe(12, 8, 2);
  sparse.moe_layer_freq = 13;
  CHECK_THAT(checked(sparse), Catch::Contains("--moe-layer-freq 13 must be between 1 and --num-layers 12"));
  GptModel dense = testing::small_moe(12, 0, 2);
  dense.moe_ffn_hidden = 0;
  dense.moe_layer_freq = 2;
  CHECK_THAT(checked(dense), Catch::Contains("--moe-layer-freq needs --num-experts"));
  dense.moe_layer_freq = 1;
  dense.shared_expert_ffn = 1024;
  CHECK_THAT(checked(dense), Catch::Contains("--moe-shared-expert-intermediate-size needs --num-experts"));
}

TEST_CASE("moe layers: the plan file's arguments carry the shared expert and the layer pattern", "[megatron][moe]") {
  GptModel m = testing::small_moe(4, 8, 2);
  m.shared_expert_ffn = 2816;
  REQUIRE(parse_moe_layer_freq("[0,1,1,1]", m).ok());
  const MegatronLayout l = megatron_layout(1, 1, 8, 1, 16);
  const nlohmann::json arguments = megatron_arguments(m, l);
  CHECK(arguments.at("moe_shared_expert_intermediate_size") == 2816);
  CHECK(arguments.at("moe_layer_freq") == nlohmann::json::array({0, 1, 1, 1}));
  auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  INFO((back.ok() ? std::string() : back.error().message));
  REQUIRE(back.ok());
  CHECK(back->model.shared_expert_ffn == 2816);
  CHECK(back->model.moe_layer_pattern == m.moe_layer_pattern);
  CHECK(gpt_parameters(back->model, 1) == gpt_parameters(m, 1));
  GptModel every_other = testing::small_moe(4, 8, 2);
  every_other.moe_layer_freq = 2;
  const nlohmann::json freq = megatron_arguments(every_other, l);
  CHECK(freq.at("moe_layer_freq") == 2);
  CHECK_FALSE(freq.contains("moe_shared_expert_intermediate_size"));
  auto read = megatron_from_arguments(freq, "plan.json: megatron");
  REQUIRE(read.ok());
  CHECK(read->model.moe_layer_freq == 2);
  CHECK_FALSE(megatron_arguments(testing::small_moe(4, 8, 2), l).contains("moe_layer_freq"));
  nlohmann::json bad = arguments;
  bad["moe_layer_freq"] = nlohmann::json::array({0, 2, 1, 1});
  auto refused = megatron_from_arguments(bad, "plan.json: megatron");
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("moe_layer_freq must be an integer or an array of 0s and 1s"));
}

}  // namespace
}  // namespace baton
