// The flex dispatcher (MoeDispatcher::kFlex: DeepEP's kernels behind
// Megatron-core's MoEFlexTokenDispatcher): each token goes once to each GPU
// of the etp x ep group that holds one of its experts, once to each other
// server that holds one (sim/megatron_sim.h's flex_dispatch_time), and no
// expert-tensor collective besides; refused where Megatron refuses it.
#include <algorithm>
#include <string>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/network.h"

namespace baton {
namespace {

using testing::flex_layout;
using testing::kNvlink;
using testing::kNvlinkLatency;
using testing::kRail;
using testing::kRailLatency;
using testing::none_of;

TEST_CASE("flex: one server, each expert on its own GPU: the all-to-all's bytes, one latency", "[megatron][moe]") {
  // E 8, k 2, ep 8: a GPU holds one expert; a token reaches 7 (1 - C(7, 2) /
  // C(8, 2)) = 1.75 other GPUs, the k (ep - 1) / ep copies alltoall sends.
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(4, 8, 2);
  const CollectiveTime flex = flex_dispatch_time(topology, m, flex_layout(1, 8, 8, 1));
  REQUIRE(flex);
  const double bytes = 64e6;
  CHECK(flex(bytes).value == Approx(7 * (1.0 - 21.0 / 28) * bytes / kNvlink + kNvlinkLatency).epsilon(1e-12));
  // Per byte as alltoall's all-to-all of the k copies (its latencies apart).
  MegatronLayout a2a = flex_layout(1, 8, 8, 1);
  a2a.moe_dispatcher = MoeDispatcher::kAllToAll;
  const CollectiveTime sent = expert_dispatch_time(topology, m, a2a);
  const double flex_slope = (flex(2 * bytes) - flex(bytes)).value,
               a2a_slope = (sent(4 * bytes) - sent(2 * bytes)).value;
  CHECK(flex_slope == Approx(a2a_slope).epsilon(1e-9));
  // One GPU: nothing to send.
  CHECK_FALSE(flex_dispatch_time(topology, m, flex_layout(1, 8, 1, 1)));
}

TEST_CASE("flex: across two servers a token crosses once per server, not once per expert", "[megatron][moe]") {
  // DeepSeek-V3's routing, 256 experts, top 8, over ep 16 (etp 1) on two
  // servers: a GPU holds 16 experts, a server 128. NVLink: 15 (1 - C(240, 8)
  // / C(256, 8)) copies a token; the rails: 1 - C(128, 8) / C(256, 8), on the
  // GPU's own rail. The rails are the slower; one latency of each level.
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(4, 256, 8);
  const CollectiveTime flex = flex_dispatch_time(topology, m, flex_layout(1, 16, 16, 1));
  REQUIRE(flex);
  const double bytes = 64e6;
  const double nvlink = 15 * (1.0 - none_of(256, 8, 16)) / kNvlink, rails = (1.0 - none_of(256, 8, 128)) / kRail;
  CHECK(rails > nvlink);
  CHECK(flex(bytes).value == Approx(std::max(nvlink, rails) * bytes + kNvlinkLatency + kRailLatency).epsilon(1e-12));
  // alltoall sends the k copies, half of them across: 8 x 8 / 2 of a GPU's
  // token bytes leave each server, against about 8 x 1 for flex.
  MegatronLayout a2a = flex_layout(1, 16, 16, 1);
  a2a.moe_dispatcher = MoeDispatcher::kAllToAll;
  const CollectiveTime sent = expert_dispatch_time(topology, m, a2a);
  const double ratio = (sent(8 * 2 * bytes) - sent(8 * bytes)).value / (flex(2 * bytes) - flex(bytes)).value;
  CHECK(ratio == Approx(4.0 / (1.0 - none_of(256, 8, 128))).epsilon(1e-9));
  // Dropped copies are not sent: capacity factor 0.5 halves the bytes.
  GptModel dropping = m;
  dropping.capacity_factor = 0.5;
  const CollectiveTime fewer = flex_dispatch_time(topology, dropping, flex_layout(1, 16, 16, 1));
  CHECK((fewer(2 * bytes) - fewer(bytes)).value == Approx(0.5 * (flex(2 * bytes) - flex(bytes)).value).epsilon(1e-9));
}

TEST_CASE("flex: an expert's etp shards are each a destination, the expert-tensor collective gone", "[megatron][moe]") {
  // E 8, k 2, t 2 with etp 2, ep 4: G = 8 GPUs of one server, a GPU holding
  // 2 experts' halves: a token reaches 7 (1 - C(6, 2) / C(8, 2)) = 3.25 other
  // GPUs.
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(4, 8, 2);
  const MegatronLayout l = flex_layout(2, 8, 4, 0);
  const CollectiveTime flex = flex_dispatch_time(topology, m, l);
  REQUIRE(flex);
  CHECK(flex(64e6).value == Approx(7 * (1.0 - 15.0 / 28) * 64e6 / kNvlink + kNvlinkLatency).epsilon(1e-12));
  // In the block: the dispatch and the combine each take flex of one copy of
  // the shard's tokens (T / t h values, 2 bytes), forward and backward, and
  // no expert-tensor collective: on a free tensor link the forward
  // communication is nothing, where alltoall's gathers the experts' tokens.
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const CollectiveTime free_link = [](double) { return Seconds(0.0); };
  const CollectiveTime linear = [](double bytes) { return Seconds(bytes / 1e9); };
  const MegatronLayerTime dispatched =
      make_megatron_profile(m, l, gpu, free_link, {}, {}, linear, 1.0, linear).times[1];
  const double T = 2048, h = 2048;  // b 1, s 2048
  CHECK(dispatched.expert_forward.value == Approx(2 * (T / 2 * h * 2) / 1e9).epsilon(1e-12));
  CHECK(dispatched.expert_backward.value == Approx(dispatched.expert_forward.value).epsilon(1e-12));
  CHECK(dispatched.forward_comm.value == 0.0);
  MegatronLayout a2a = l;
  a2a.moe_dispatcher = MoeDispatcher::kAllToAll;
  const MegatronLayerTime sent = make_megatron_profile(m, a2a, gpu, free_link, {}, {}, linear, 1.0, linear).times[1];
  CHECK(sent.forward_comm.value > 0.0);
  // The same rows reach the same experts: the GEMMs are alltoall's.
  CHECK(dispatched.weight_gradient == sent.weight_gradient);
}

TEST_CASE("flex: refused where Megatron refuses it, and the overlaps take it", "[megatron][moe][bad-input]") {
  const GptModel m = testing::small_moe(4, 8, 2);
  const auto refusal = [&](const GptModel& model, const MegatronLayout& l) {
    const Status status = check_megatron_layout(model, l, 64);
    return status.ok() ? std::string("(accepted)") : status.error().message;
  };
  CHECK(refusal(m, flex_layout(1, 8, 1, 1)) ==
        "--moe-token-dispatcher-type flex needs --expert-model-parallel-size x --expert-tensor-parallel-size of at "
        "least 2, as Megatron's DeepEP dispatcher does");
  GptModel padded = m;
  padded.capacity_factor = 1.0;
  padded.pad_to_capacity = true;
  CHECK(refusal(padded, flex_layout(1, 8, 8, 1)) ==
        "--moe-token-dispatcher-type flex does not go with --moe-pad-expert-input-to-capacity, as in Megatron "
        "(DeepEP)");
  CHECK(refusal(m, flex_layout(1, 8, 8, 1)) == "(accepted)");
  // Both all-to-all overlaps take alltoall or flex, as Megatron does.
  GptModel shared = m;
  shared.shared_expert_ffn = 2048;
  MegatronLayout beside = flex_layout(1, 8, 8, 1);
  beside.moe_shared_expert_overlap = true;
  CHECK(refusal(shared, beside) == "(accepted)");
  MegatronLayout paired = flex_layout(1, 8, 8, 1);
  paired.global_batch = 64;
  paired.overlap_moe_ep_comm = true;
  CHECK(refusal(m, paired) == "(accepted)");
  paired.moe_dispatcher = MoeDispatcher::kAllGather;
  CHECK(refusal(m, paired) ==
        "--overlap-moe-expert-parallel-comm needs --moe-token-dispatcher-type alltoall or flex, as Megatron does");
}

TEST_CASE("flex: DeepSeek-like routing across servers is faster than alltoall, and the plan file names it",
          "[megatron][moe]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = testing::small_moe(4, 256, 8);
  MegatronLayout l = flex_layout(1, 16, 16, 1);
  l.global_batch = 64;
  const auto flex = predict_megatron(m, l, topology, false);
  l.moe_dispatcher = MoeDispatcher::kAllToAll;
  const auto sent = predict_megatron(m, l, topology, false);
  REQUIRE(flex.ok());
  REQUIRE(sent.ok());
  CHECK(flex->breakdown.compute == sent->breakdown.compute);
  CHECK(flex->breakdown.expert_comm < sent->breakdown.expert_comm);
  CHECK(flex->iteration_time < sent->iteration_time);
  l.moe_dispatcher = MoeDispatcher::kFlex;
  const nlohmann::json arguments = megatron_arguments(m, l);
  CHECK(arguments["moe_token_dispatcher_type"] == "flex");
  const auto back = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.moe_dispatcher == MoeDispatcher::kFlex);
}

}  // namespace
}  // namespace baton
