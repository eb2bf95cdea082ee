// Expert tensor parallelism (sim/megatron.h's MegatronLayout::expert_tensor;
// Megatron-core's --expert-tensor-parallel-size etp, default t): each
// expert's weights split over etp GPUs, the experts' grid etp x ep x expert
// data parallel laid over the t c d GPUs of a pipeline rank in Megatron-core's
// expert order tp-ep-dp-pp (parallel_state.py, core_v0.10: etp consecutive
// GPUs, ep ranks etp apart, expert-data-parallel ranks etp ep apart); the
// alltoall dispatcher's all-to-all among the ep ranks, then an all-gather
// over the etp GPUs (token_dispatcher.py: "permute -> A2A(EP) -> AG(TP)").
#include <vector>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/network.h"

namespace baton {
namespace {

// The small Mixtral-like model of the MoE tests: 8 experts of width 1408, top 2.
GptModel small_moe() { return testing::small_moe(4, 8, 2); }

MegatronLayout with_grid(int t, int d, int ep, int etp) {
  MegatronLayout l = megatron_layout(t, 1, d, 1, 2 * d);
  l.sequence_parallel = t > 1;
  l.bf16 = true;
  l.expert_parallel = ep;
  l.expert_tensor = etp;
  l.moe_dispatcher = MoeDispatcher::kAllToAll;  // the allgather dispatcher: moe_dispatcher_test.cc
  return l;
}

const CollectiveTime kFree = [](double) { return Seconds(0.0); };

TEST_CASE("etp: defaults to t, and t c d / (etp ep) ranks hold the same experts", "[megatron][moe][etp]") {
  MegatronLayout l = with_grid(4, 4, 2, 0);
  CHECK(l.expert_tensor_parallel() == 4);
  CHECK(l.expert_replicas() == 4 / 2);  // d c / ep with etp = t
  l.expert_tensor = 1;
  CHECK(l.expert_replicas() == 4 * 4 / (1 * 2));
  l.expert_tensor = 2;
  CHECK(l.expert_replicas() == 4 * 4 / (2 * 2));
}

TEST_CASE("etp: a rank holds 1 / t of the dense weights and 1 / (etp ep) of the experts", "[megatron][moe][etp]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const GptModel m = small_moe();
  const double block = gpt_block_parameters(m), experts = gpt_block_expert_parameters(m);
  for (const int t : {2, 4})
    for (const int etp : {1, 2, 4})
      for (const int ep : {1, 2, 8}) {
        CAPTURE(t, etp, ep);
        const MegatronLayout l = with_grid(t, 8, ep, etp);
        if (!check_megatron_layout(m, l, 64).ok()) continue;  // t 2 x d 8 = 16 GPUs: etp 4 x ep 8 does not divide
        const MegatronLayerTime time = make_megatron_profile(m, l, gpu, kFree).times[1];
        CHECK(time.expert_parameters == Approx(experts / (etp * ep)).epsilon(1e-15));
        CHECK(time.parameters == Approx((block - experts) / t + experts / (etp * ep)).epsilon(1e-15));
      }
}

TEST_CASE("etp: the experts' all-gather and reduce-scatter move k T etp / t h values over etp GPUs, none at etp 1",
          "[megatron][moe][etp]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const double k = 2, T = 2048, h = 2048;
  // The dense tensor-parallel group's collective on a slow link (1 GB/s), the
  // expert group's on a slower one (0.5 GB/s): each is charged where it runs.
  const CollectiveTime tensor = [](double bytes) { return Seconds(bytes / 1e9); };
  const CollectiveTime expert_tensor = [](double bytes) { return Seconds(bytes / 0.5e9); };
  const double attention = T * h * 2 / 1e9;  // the attention's all-gather and reduce-scatter: T h bf16 values
  for (const int etp : {1, 2, 4}) {
    CAPTURE(etp);
    const MegatronLayout l = with_grid(4, 2, 2, etp);
    REQUIRE(check_megatron_layout(small_moe(), l, 8).ok());
    const MegatronLayerTime block =
        make_megatron_profile(small_moe(), l, gpu, tensor, {}, {}, {}, 1.0, expert_tensor).times[1];
    const double experts = etp > 1 ? k * T * etp / 4.0 * h * 2 / 0.5e9 : 0.0;
    CHECK(block.forward_comm.value == Approx(attention + experts).epsilon(1e-12));
  }
  // etp = t with no collective of its own given: the tensor-parallel group's,
  // k T h values (the MoE tests' figure).
  const MegatronLayerTime same = make_megatron_profile(small_moe(), with_grid(4, 2, 2, 0), gpu, tensor).times[1];
  CHECK(same.forward_comm.value == Approx(attention + k * T * h * 2 / 1e9).epsilon(1e-12));
}

TEST_CASE("etp: the experts' GEMMs run on T k ep etp / (t E) tokens each, F / etp wide", "[megatron][moe][etp]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const GptModel m = small_moe();  // SwiGLU: the up projection 2 F wide; no --moe-grouped-gemm
  const double T = 2048, k = 2, h = 2048, F = 1408, E = 8, ep = 2, t = 4;
  const MegatronLayerTime at_t = make_megatron_profile(m, with_grid(4, 2, 2, 0), gpu, kFree).times[1];
  const MegatronLayerTime at_1 = make_megatron_profile(m, with_grid(4, 2, 2, 1), gpu, kFree).times[1];
  // E / ep local experts, one GEMM each for the up and the down projection.
  auto experts = [&](double etp) {
    const double tokens = T * k * ep * etp / (t * E);
    return (gpu.gemm(tokens, 2 * F / etp, h) + gpu.gemm(tokens, h, F / etp)) * (E / ep);
  };
  CHECK((at_1.forward_compute - at_t.forward_compute).value == Approx((experts(1) - experts(t)).value).margin(1e-12));
  // Everything else in the forward is the same: with a GEMM model that ran
  // both at one rate, the two would be equal.
  CHECK(at_1.forward_compute.value - experts(1).value ==
        Approx(at_t.forward_compute.value - experts(t).value).epsilon(1e-9));
}

TEST_CASE("etp: the all-to-all runs among ep ranks etp apart", "[megatron][moe][etp]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const double bytes = 64e6;
  const Network network(topology);
  auto half_allreduce = [&](const std::vector<int>& group) {
    return network.allreduce_time(group, Bytes::counted(bytes)).value * 0.5;
  };
  // t 8, etp 1, ep 8: the eight GPUs of the tensor-parallel group, one server.
  const CollectiveTime inside = expert_all_to_all_time(topology, with_grid(8, 2, 8, 1));
  REQUIRE(inside);
  CHECK(inside(bytes).value == Approx(half_allreduce({0, 1, 2, 3, 4, 5, 6, 7})).epsilon(1e-12));
  // t 8, etp 2, ep 4: GPUs 0, 2, 4, 6.
  const CollectiveTime pairs = expert_all_to_all_time(topology, with_grid(8, 2, 4, 2));
  REQUIRE(pairs);
  CHECK(pairs(bytes).value == Approx(half_allreduce({0, 2, 4, 6})).epsilon(1e-12));
  // etp = t = 8, ep 2: GPU 0 of two tensor-parallel groups, two servers: slower.
  const CollectiveTime across = expert_all_to_all_time(topology, with_grid(8, 2, 2, 0));
  REQUIRE(across);
  CHECK(across(bytes).value == Approx(half_allreduce({0, 8})).epsilon(1e-12));
  CHECK(across(bytes) > inside(bytes));
}

TEST_CASE("etp: the experts' gradients cost per byte of a GPU what their expert-data-parallel ring costs",
          "[megatron][moe][etp]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  // t 2, d 4 (8 GPUs, one server), etp 1, ep 4: the experts reduce over 2
  // GPUs 4 apart (0 and 4), the dense weights over the 4 tensor-parallel
  // groups. On one server's links, a ring of n moves 2 (n - 1) / n of the
  // bytes through each GPU's link: 1 for the experts' ring of 2 against 3 / 2
  // for the dense ring of 4, per byte of a GPU.
  CHECK(expert_gradient_weight(topology, with_grid(2, 4, 4, 1)) == Approx((2.0 * 1 / 2) / (2.0 * 3 / 4)).epsilon(1e-3));
  // t 8, d 2 (two servers), etp 1, ep 8: the experts over GPUs 0 and 8, the
  // dense weights over the two tensor-parallel groups, each GPU on its own
  // rail either way: the same cost per byte of a GPU.
  CHECK(expert_gradient_weight(topology, with_grid(8, 2, 8, 1)) == Approx(1.0).epsilon(1e-3));
  // etp 1, ep = t c d: every GPU holds experts no other holds.
  CHECK(expert_gradient_weight(topology, with_grid(8, 2, 16, 1)) == 0.0);
}

TEST_CASE("etp: the experts' optimizer states shard over t c d / (etp ep) ranks", "[megatron][moe][etp][memory]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = small_moe();
  const double experts = m.layers * gpt_block_expert_parameters(m);
  const double t = 4, d = 2, ep = 2, g = 4;  // bf16: fp32 gradients
  auto weights_and_optimizer = [&](int etp) {
    MegatronLayout l = with_grid(4, 2, 2, etp);
    l.distributed_optimizer = true;
    const auto p = predict_megatron(m, l, topology, false);
    REQUIRE(p.ok());
    return static_cast<double>(p->memory.ranks[0].weights_and_optimizer.value);
  };
  // Weights (2), gradients (g) and the distributed optimizer's 12 bytes over
  // the ranks that hold the same experts: with etp = t, 1 / (t ep) of them
  // over d / ep = 1 rank; with etp 1, 1 / ep of them over t d / ep = 4.
  const double at_t = experts / (t * ep) * (2 + g + 12 / (d / ep));
  const double at_1 = experts / ep * (2 + g + 12 / (t * d / ep));
  CHECK(weights_and_optimizer(1) - weights_and_optimizer(0) == Approx(at_1 - at_t).epsilon(1e-9));
}

TEST_CASE("etp: a block keeps the experts' input gathered over etp, k etp / t of s b h twice",
          "[megatron][moe][etp][memory]") {
  const GptModel m = small_moe();
  const double s = 2048, b = 1, h = 2048, k = 2, t = 4;
  const double at_t = megatron_layer_activation_bytes(m, with_grid(4, 1, 1, 0));
  for (const int etp : {1, 2}) {
    CAPTURE(etp);
    const double at_etp = megatron_layer_activation_bytes(m, with_grid(4, 1, 1, etp));
    CHECK(at_t - at_etp == Approx(s * b * h * 2 * k * (1 - etp / t)).epsilon(1e-12));
  }
}

TEST_CASE("etp: bad grids are refused, naming the flag", "[megatron][moe][etp][bad-input]") {
  const GptModel m = small_moe();
  const auto error = [&](const MegatronLayout& l) {
    const Status status = check_megatron_layout(m, l, 64);
    REQUIRE_FALSE(status.ok());
    return status.error().message;
  };
  // t 2 x d 2 = 4 GPUs a pipeline rank: etp 1 x ep 8 does not divide them.
  CHECK(error(with_grid(2, 2, 8, 1)) ==
        "--expert-tensor-parallel-size 1 x --expert-model-parallel-size 8 does not divide the 4 GPUs of a pipeline "
        "rank (t c d): the experts' grid is laid over them");
  // 1408 / 3 is not whole.
  CHECK(error(with_grid(2, 6, 2, 3)) ==
        "--moe-ffn-hidden-size 1408 is not divisible by --expert-tensor-parallel-size 3");
  GptModel dense = m;
  dense.experts = 0;
  dense.moe_ffn_hidden = 0;
  const Status no_experts = check_megatron_layout(dense, with_grid(2, 2, 1, 1), 64);
  REQUIRE_FALSE(no_experts.ok());
  CHECK(no_experts.error().message == "--expert-tensor-parallel-size 1 needs --num-experts");
  // etp = t is the default spelled out: taken without experts too.
  CHECK(check_megatron_layout(dense, with_grid(2, 2, 1, 2), 64).ok());
}

TEST_CASE("etp: the plan file keeps an etp other than t, and reads it back", "[megatron][moe][etp]") {
  const GptModel m = small_moe();
  const MegatronLayout l = with_grid(4, 2, 2, 1);
  const nlohmann::json arguments = megatron_arguments(m, l);
  REQUIRE(arguments.contains("expert_tensor_parallel_size"));
  CHECK(arguments["expert_tensor_parallel_size"] == 1);
  const auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.expert_tensor_parallel() == 1);
  // etp = t: not written; Megatron's own JSON (etp = t, or null) reads as t.
  CHECK_FALSE(megatron_arguments(m, with_grid(4, 2, 2, 0)).contains("expert_tensor_parallel_size"));
  nlohmann::json megatron = megatron_arguments(m, with_grid(4, 2, 2, 0));
  megatron["expert_tensor_parallel_size"] = nullptr;
  const auto null_etp = megatron_from_arguments(megatron, "plan.json: megatron");
  REQUIRE(null_etp.ok());
  CHECK(null_etp->layout.expert_tensor_parallel() == 4);
}

}  // namespace
}  // namespace baton
