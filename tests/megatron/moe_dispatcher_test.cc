// The MoE token dispatchers (MegatronLayout::moe_dispatcher, Megatron-core's
// --moe-token-dispatcher-type): allgather, Megatron-core's default, gathers
// the tokens of the etp ep GPUs of an expert group onto each and
// reduce-scatters the experts' outputs back (sim/megatron_block.h has the
// terms); alltoall's terms are tests/megatron/moe_test.cc's.
#include <vector>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/network.h"

namespace baton {
namespace {

const CollectiveTime kFree = [](double) { return Seconds(0.0); };
// A linear link, 1 GB/s and no latency: a collective's time is its bytes.
const CollectiveTime kLinear = [](double bytes) { return Seconds(bytes / 1e9); };

MegatronLayout with_dispatcher(MegatronLayout l, int ep, int etp, MoeDispatcher dispatcher) {
  l.expert_parallel = ep;
  l.expert_tensor = etp;
  l.moe_dispatcher = dispatcher;
  l.sequence_parallel = l.tensor > 1;
  l.bf16 = true;
  return l;
}

TEST_CASE("dispatcher: allgather is Megatron-core's default, and the names read back", "[megatron][moe]") {
  CHECK(MegatronLayout{}.moe_dispatcher == MoeDispatcher::kAllGather);
  for (const MoeDispatcher d : {MoeDispatcher::kAllGather, MoeDispatcher::kAllToAll, MoeDispatcher::kFlex})
    CHECK(parse_moe_dispatcher(moe_dispatcher_name(d)) == d);
  CHECK(std::string(moe_dispatcher_name(MoeDispatcher::kAllGather)) == "allgather");
  CHECK(std::string(moe_dispatcher_name(MoeDispatcher::kAllToAll)) == "alltoall");
  CHECK(std::string(moe_dispatcher_name(MoeDispatcher::kFlex)) == "flex");
  CHECK_FALSE(parse_moe_dispatcher("deepep"));
  CHECK_FALSE(parse_moe_dispatcher("all_gather"));
}

TEST_CASE("dispatcher: allgather's collective is an all-reduce among the etp ep consecutive GPUs", "[megatron][moe]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel moe = testing::small_moe(8, 8, 2);
  const double bytes = 64e6;
  auto all_reduce = [&](int group) {
    std::vector<int> gpus;
    for (int j = 0; j < group; ++j) gpus.push_back(j);
    return Network(topology).allreduce_time(gpus, Bytes::counted(bytes)).value;
  };
  const MegatronLayout base = megatron_layout(2, 1, 8, 1, 16);
  // t 2 with etp = t and ep 4: GPUs 0-7, one server.
  const CollectiveTime inside =
      expert_dispatch_time(topology, moe, with_dispatcher(base, 4, 0, MoeDispatcher::kAllGather));
  REQUIRE(inside);
  CHECK(inside(bytes).value == Approx(all_reduce(8)).epsilon(1e-12));
  // ep 8 at etp 2: 16 GPUs over two servers, slower than inside one.
  const CollectiveTime across =
      expert_dispatch_time(topology, moe, with_dispatcher(base, 8, 2, MoeDispatcher::kAllGather));
  REQUIRE(across);
  CHECK(across(bytes).value == Approx(all_reduce(16)).epsilon(1e-12));
  CHECK(across(bytes) > inside(bytes));
  // etp 1 and ep 1: one GPU, nothing to gather.
  CHECK_FALSE(expert_dispatch_time(topology, moe, with_dispatcher(base, 1, 1, MoeDispatcher::kAllGather)));
  // alltoall: expert parallelism's all-to-all, whatever etp.
  const MegatronLayout a2a = with_dispatcher(base, 4, 0, MoeDispatcher::kAllToAll);
  CHECK(expert_dispatch_time(topology, moe, a2a)(bytes) == expert_all_to_all_time(topology, a2a)(bytes));
  CHECK_FALSE(expert_dispatch_time(topology, moe, with_dispatcher(base, 1, 0, MoeDispatcher::kAllToAll)));
}

TEST_CASE("dispatcher: allgather moves G T / t tokens each way and no expert-tensor collective besides",
          "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const GptModel m = testing::small_moe(4, 8, 2);
  const double T = 2048, h = 2048, E = 8, k = 2;  // b 1, s 2048
  for (const int t : {1, 2})
    for (const int ep : {1, 2, 4}) {
      CAPTURE(t, ep);
      const MegatronLayout l = with_dispatcher(megatron_layout(t, 1, 8, 1, 8), ep, 0, MoeDispatcher::kAllGather);
      const MegatronLayerTime gathered = make_megatron_profile(m, l, gpu, kFree, {}, {}, kLinear).times[1];
      // G = t ep GPUs (etp = t): the tokens' all-gather and the outputs'
      // reduce-scatter, an all-reduce of G T / t h values, and half an
      // all-reduce each of the routing map (1 byte) and the probabilities
      // (2 bytes) of every gathered token and expert.
      const double G = t * ep, tokens = G * T / t;
      const double expected = G > 1 ? (tokens * h * 2 + 0.5 * tokens * E + 0.5 * tokens * E * 2) / 1e9 : 0.0;
      CHECK(gathered.expert_forward.value == Approx(expected).epsilon(1e-12));
      CHECK(gathered.expert_backward.value == Approx(expected).epsilon(1e-12));
      // With no link costs the experts' tensor-parallel collectives would
      // show in forward_comm; on a slow tensor-parallel link the allgather
      // layout's forward_comm is the attention's alone.
      const MegatronLayerTime slow = make_megatron_profile(m, l, gpu, kLinear, {}, {}, kFree).times[1];
      const double attention = t > 1 ? T * h * 2 / 1e9 : 0.0;
      CHECK(slow.forward_comm.value == Approx(attention).epsilon(1e-12));
      // The experts' GEMMs are alltoall's: the same rows reach the same experts.
      const MegatronLayout a2a = with_dispatcher(l, ep, 0, MoeDispatcher::kAllToAll);
      const MegatronLayerTime sent = make_megatron_profile(m, a2a, gpu, kFree, {}, {}, kFree).times[1];
      const MegatronLayerTime kept = make_megatron_profile(m, l, gpu, kFree, {}, {}, kFree).times[1];
      // The permutation: the rows routed to the rank's experts (T k etp / t =
      // T k) read and written, and the unpermuted outputs written at the
      // gathered size beyond the shard's own, against alltoall's T / t k
      // copies read and written: the same at G = 1.
      const Seconds allgather_permutation = gpu.memory_bound(2 * T * k * h * 2) * 2.0 +
                                            (G > 1 ? gpu.memory_bound((tokens - T / t) * h * 2) : Seconds(0.0));
      if (G == 1) CHECK(kept.forward_compute == sent.forward_compute);
      const Seconds alltoall_permutation = gpu.memory_bound(2 * T / t * k * h * 2) * 2.0;
      CHECK((kept.forward_compute - sent.forward_compute).value ==
            Approx((allgather_permutation - alltoall_permutation).value).epsilon(1e-9));
      CHECK(kept.weight_gradient == sent.weight_gradient);
    }
}

TEST_CASE("dispatcher: at ep 8 on one server allgather gathers ep T h values where alltoall sends T k h",
          "[megatron][moe]") {
  // t 1, etp 1: the expert group is the 8 ep ranks, GPUs 0-7. allgather: a
  // ring all-reduce of the 8 T h gathered values (the all-gather and the
  // reduce-scatter), half of one of the routing map's 8 T E bytes and half
  // of one of the probabilities' 8 T E 2; alltoall: two all-to-alls of the T
  // k h copies, each half an all-reduce of them.
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(4, 8, 2);
  const double T = 2048, h = 2048, E = 8, k = 2, ep = 8;
  const MegatronLayout l = with_dispatcher(megatron_layout(1, 1, 8, 1, 8), 8, 1, MoeDispatcher::kAllGather);
  const auto gathered = megatron_profile_on(m, l, topology);
  const auto sent = megatron_profile_on(m, with_dispatcher(l, 8, 1, MoeDispatcher::kAllToAll), topology);
  REQUIRE(gathered.ok());
  REQUIRE(sent.ok());
  const Network network(topology);
  const std::vector<int> group = {0, 1, 2, 3, 4, 5, 6, 7};
  auto all_reduce = [&](double bytes) { return network.allreduce_time(group, Bytes::counted(bytes)).value; };
  const double allgather = all_reduce(ep * T * h * 2) + 0.5 * all_reduce(ep * T * E) + 0.5 * all_reduce(ep * T * E * 2);
  const double alltoall = 2 * 0.5 * all_reduce(T * k * h * 2);
  CHECK(gathered->times[1].expert_forward.value == Approx(allgather).epsilon(1e-12));
  CHECK(sent->times[1].expert_forward.value == Approx(alltoall).epsilon(1e-12));
  // (ep - 1) T h against k (ep - 1) / ep T h a GPU: 4 times the bytes; at
  // these sizes each collective's fixed latency counts, so between 3 and 4
  // times the time.
  CHECK(allgather > 3 * alltoall);
  CHECK(allgather < 4 * alltoall);
}

TEST_CASE("dispatcher: allgather holds the gathered tokens in Megatron's global buffer, and the combine's fp32 copy",
          "[megatron][moe][memory]") {
  // Megatron-core's MoEAllGatherTokenDispatcher gathers the G = etp ep
  // GPUs' tokens into its global memory buffer (kept allocated: G s b / t
  // rows of h, 2 bytes) and reduce-scatters the unpermuted outputs from an
  // fp32 copy (2 + 4 bytes of those rows in the layer). t 2, ep 4, etp 2: G
  // 8, s 2048, b 1, h 2048; p 2, so rank 0 has no logits, and rank 1's
  // fp32 logits (s b V / t 4 bytes, twice: 2048 x 32000 / 2 x 8) outweigh
  // the combine's copies.
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(4, 8, 2);
  const auto rank_activations = [&](MoeDispatcher d, int rank) {
    const auto p = predict_megatron(m, with_dispatcher(megatron_layout(2, 2, 8, 1, 64), 4, 0, d), topology, false);
    REQUIRE(p.ok());
    return static_cast<double>(p->memory.ranks.at(static_cast<size_t>(rank)).activations.value);
  };
  const double rows = 8 * 2048.0 / 2, h = 2048;
  CHECK(rank_activations(MoeDispatcher::kAllGather, 0) - rank_activations(MoeDispatcher::kAllToAll, 0) ==
        Approx(rows * h * (2 + 6)).epsilon(1e-9));
  CHECK(rows * h * 6 < 2048 * 32000 / 2 * 8.0);
  CHECK(rank_activations(MoeDispatcher::kAllGather, 1) - rank_activations(MoeDispatcher::kAllToAll, 1) ==
        Approx(rows * h * 2).epsilon(1e-9));
  // flex sends to the experts' GPUs: nothing gathered, as alltoall.
  CHECK(rank_activations(MoeDispatcher::kFlex, 0) == rank_activations(MoeDispatcher::kAllToAll, 0));
}

TEST_CASE("dispatcher: the plan file carries the dispatcher with experts, and reads back", "[megatron][moe]") {
  const GptModel m = testing::small_moe(4, 8, 2);
  for (const MoeDispatcher d : {MoeDispatcher::kAllGather, MoeDispatcher::kAllToAll}) {
    const MegatronLayout l = with_dispatcher(megatron_layout(1, 1, 8, 1, 16), 4, 0, d);
    const nlohmann::json arguments = megatron_arguments(m, l);
    CHECK(arguments["moe_token_dispatcher_type"] == moe_dispatcher_name(d));
    const auto back = megatron_from_arguments(arguments, "plan.megatron");
    REQUIRE(back.ok());
    CHECK(back->layout.moe_dispatcher == d);
  }
  // Absent: Megatron-core's default; a dense model writes none.
  nlohmann::json arguments =
      megatron_arguments(m, with_dispatcher(megatron_layout(1, 1, 8, 1, 16), 4, 0, MoeDispatcher::kAllToAll));
  arguments.erase("moe_token_dispatcher_type");
  const auto absent = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE(absent.ok());
  CHECK(absent->layout.moe_dispatcher == MoeDispatcher::kAllGather);
  GptModel dense = m;
  dense.experts = 0;
  dense.moe_ffn_hidden = 0;
  CHECK_FALSE(megatron_arguments(dense, megatron_layout(1, 1, 8, 1, 16)).contains("moe_token_dispatcher_type"));
  // flex reads back; any other name is refused, the key named.
  arguments["moe_token_dispatcher_type"] = "flex";
  const auto flex = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE(flex.ok());
  CHECK(flex->layout.moe_dispatcher == MoeDispatcher::kFlex);
  arguments["moe_token_dispatcher_type"] = "deepep";
  const auto other = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE_FALSE(other.ok());
  CHECK_THAT(other.error().message, Catch::Contains("moe_token_dispatcher_type"));
}

}  // namespace
}  // namespace baton
