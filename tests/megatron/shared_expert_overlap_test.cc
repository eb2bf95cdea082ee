// --moe-shared-expert-overlap (MegatronLayout::moe_shared_expert_overlap,
// Megatron-core's shared expert on a stream of its own beside the alltoall
// dispatcher's all-to-alls; sim/megatron_block.h has the terms): each
// all-to-all loses what the shared expert's work beside it hides.
#include <algorithm>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

const CollectiveTime kFree = [](double) { return Seconds(0.0); };

// A small Mixtral-like model with a shared expert of width S.
GptModel with_shared(double width) {
  GptModel m = testing::small_moe(4, 8, 2);
  m.shared_expert_ffn = static_cast<int64_t>(width);
  return m;
}

MegatronLayout alltoall(int ep, bool overlap) {
  MegatronLayout l = megatron_layout(1, 1, 8, 1, 16);
  l.bf16 = true;
  l.expert_parallel = ep;
  l.moe_dispatcher = MoeDispatcher::kAllToAll;
  l.moe_shared_expert_overlap = overlap;
  return l;
}

TEST_CASE("shared overlap: each all-to-all is exposed only where it outlasts the shared expert's work beside it",
          "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const double T = 2048, h = 2048, k = 2;  // b 1, s 2048, t 1
  // Two link speeds: one where the all-to-alls outlast the shared expert's
  // work, one where that work hides them whole.
  for (const double gbps : {0.5, 500.0}) {
    CAPTURE(gbps);
    const CollectiveTime link = [gbps](double bytes) { return Seconds(bytes / (gbps * 1e9)); };
    const GptModel m = with_shared(4096);
    const MegatronLayerTime plain = make_megatron_profile(m, alltoall(4, false), gpu, kFree, {}, {}, link).times[1];
    const MegatronLayerTime overlapped = make_megatron_profile(m, alltoall(4, true), gpu, kFree, {}, {}, link).times[1];
    // One all-to-all: each GPU's T k copies of h values.
    const Seconds one = link(T * k * h * 2);
    CHECK(plain.expert_forward.value == Approx(2 * one.value).epsilon(1e-12));
    CHECK(plain.expert_backward.value == Approx(2 * one.value).epsilon(1e-12));
    // The shared expert (SwiGLU, S = 4096): forward its first GEMM and
    // activation beside the dispatch, its second GEMM beside the combine
    // (t 1: no collectives); backward the second GEMM's input and weight
    // gradients beside the combine's, the activation's and the first GEMM's
    // beside the dispatch's.
    const double S = 4096;
    const Seconds activation = gpu.memory_bound(3 * T * S * 2);
    const Seconds dispatch = gpu.gemm(T, 2 * S, h) + activation, combine = gpu.gemm(T, h, S);
    const Seconds dispatch_back = activation * 2.0 + gpu.gemm(T, h, 2 * S) + gpu.gemm(2 * S, h, T);
    const Seconds combine_back = gpu.gemm(T, S, h) + gpu.gemm(h, S, T);
    CHECK(overlapped.expert_forward.value ==
          Approx((one * 2.0 - min(one, dispatch) - min(one, combine)).value).epsilon(1e-12));
    CHECK(overlapped.expert_backward.value ==
          Approx((one * 2.0 - min(one, dispatch_back) - min(one, combine_back)).value).epsilon(1e-12));
    if (gbps > 1) CHECK(overlapped.expert_forward.value == Approx(0.0).margin(1e-15));  // hidden whole
    if (gbps < 1) CHECK(overlapped.expert_forward.value > 0.0);
    // The work itself is the same.
    CHECK(overlapped.forward_compute == plain.forward_compute);
    CHECK(overlapped.backward_compute == plain.backward_compute);
  }
}

TEST_CASE("shared overlap: needs a shared expert and the alltoall dispatcher, and the plan file keeps it",
          "[megatron][moe][bad-input]") {
  const GptModel m = with_shared(4096);
  CHECK(check_megatron_layout(m, alltoall(4, true), 64).ok());
  const Status unshared = check_megatron_layout(with_shared(0), alltoall(4, true), 64);
  REQUIRE_FALSE(unshared.ok());
  CHECK(unshared.error().message ==
        "--moe-shared-expert-overlap needs a shared expert (--moe-shared-expert-intermediate-size)");
  MegatronLayout gathered = alltoall(4, true);
  gathered.moe_dispatcher = MoeDispatcher::kAllGather;
  const Status refused = check_megatron_layout(m, gathered, 64);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("needs --moe-token-dispatcher-type alltoall"));
  // Written when true, read back; absent: false.
  const nlohmann::json arguments = megatron_arguments(m, alltoall(4, true));
  CHECK(arguments["moe_shared_expert_overlap"] == true);
  const auto back = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.moe_shared_expert_overlap);
  CHECK_FALSE(megatron_arguments(m, alltoall(4, false)).contains("moe_shared_expert_overlap"));
}

}  // namespace
}  // namespace baton
