// Token dropping (sim/megatron.h's GptModel::capacity_factor and
// pad_to_capacity; Megatron-core's --moe-expert-capacity-factor C and
// --moe-pad-expert-input-to-capacity, moe_utils.py's get_capacity: each
// expert takes at most ceil(C k T / E) of a rank's tokens' k copies): under
// balanced routing the experts process k copies of each token dropless or
// with C >= 1, k C padded to capacity, k C with C < 1; the expert GEMMs, the
// all-to-alls and the kept activations follow, the model FLOPs do not.
#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_block.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

GptModel with_capacity(double factor, bool pad) {
  GptModel m = testing::small_moe(4, 8, 2);  // 8 experts of width 1408, top 2, h 2048, s 2048
  m.capacity_factor = factor;
  m.pad_to_capacity = pad;
  return m;
}

TEST_CASE("capacity: the copies of a token the experts process", "[megatron][moe][capacity]") {
  CHECK(with_capacity(0.0, false).expert_copies() == 2.0);   // dropless
  CHECK(with_capacity(1.25, false).expert_copies() == 2.0);  // balanced: no expert over its capacity
  CHECK(with_capacity(1.25, true).expert_copies() == 2.0 * 1.25);
  CHECK(with_capacity(0.5, false).expert_copies() == 2.0 * 0.5);  // half of each expert's tokens dropped
  CHECK(with_capacity(0.5, true).expert_copies() == 2.0 * 0.5);
  GptModel dense = with_capacity(0.0, false).dense_blocks();
  CHECK(dense.expert_copies() == 1.0);
}

TEST_CASE("capacity: padded experts run C k T ep / E tokens each, and the all-to-alls move C k copies",
          "[megatron][moe][capacity]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  MegatronLayout l = megatron_layout(1, 1, 8, 1, 16);
  l.expert_parallel = 4;
  l.moe_dispatcher = MoeDispatcher::kAllToAll;
  const double T = 2048, k = 2, E = 8, ep = 4, C = 1.5;
  CHECK(megatron_detail::shape_of(with_capacity(C, true), l).mlp_m == Approx(T * C * k * ep / E).epsilon(1e-15));
  CHECK(megatron_detail::shape_of(with_capacity(0.0, false), l).mlp_m == Approx(T * k * ep / E).epsilon(1e-15));
  // A linear exchange (1 GB/s, no latency): the dispatch and the combine of
  // T k h values (bf16) each, C times as many padded.
  const CollectiveTime linear = [](double bytes) { return Seconds(bytes / 1e9); };
  const CollectiveTime free = [](double) { return Seconds(0.0); };
  auto all_to_alls = [&](const GptModel& m) {
    return make_megatron_profile(m, l, gpu, free, {}, {}, linear).times[1].expert_forward.value;
  };
  CHECK(all_to_alls(with_capacity(0.0, false)) == Approx(2 * T * k * 2048 * 2 / 1e9).epsilon(1e-12));
  CHECK(all_to_alls(with_capacity(C, true)) == Approx(C * all_to_alls(with_capacity(0.0, false))).epsilon(1e-12));
  // Megatron's FLOPs count the k routed copies either way.
  CHECK(megatron_model_flops(with_capacity(C, true), l) == megatron_model_flops(with_capacity(0.0, false), l));
}

TEST_CASE("capacity: a block keeps the C k copies' activations", "[megatron][moe][capacity][memory]") {
  const MegatronLayout l = megatron_layout(1, 1, 1, 1, 8);
  const double s = 2048, b = 1, h = 2048, F = 1408, k = 2, C = 1.5;
  // Per copy of a token: SwiGLU's 6 F / h and the dispatched copy's 2 (t = 1).
  const double extra = s * b * h * (C - 1) * k * (6 * F / h + 2);
  CHECK(megatron_layer_activation_bytes(with_capacity(C, true), l) -
            megatron_layer_activation_bytes(with_capacity(0.0, false), l) ==
        Approx(extra).epsilon(1e-12));
}

TEST_CASE("capacity: the flags Megatron would refuse are refused, naming them",
          "[megatron][moe][capacity][bad-input]") {
  const MegatronLayout l = megatron_layout(1, 1, 1, 1, 8);
  auto error = [&](const GptModel& m) {
    const Status status = check_megatron_layout(m, l, 8);
    REQUIRE_FALSE(status.ok());
    return status.error().message;
  };
  CHECK(error(with_capacity(0.0, true)) ==
        "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor, as Megatron does");
  CHECK(error(with_capacity(2000.0, false)) ==
        "--moe-expert-capacity-factor must be greater than 0 and at most 1024, got 2000");
  GptModel dense = with_capacity(1.0, false);
  dense.experts = 0;
  dense.moe_ffn_hidden = 0;
  CHECK(error(dense) == "--moe-expert-capacity-factor needs --num-experts");
}

TEST_CASE("capacity: the plan file carries the factor and the padding, null reading as dropless",
          "[megatron][moe][capacity]") {
  const MegatronLayout l = megatron_layout(1, 1, 1, 1, 8);
  const nlohmann::json arguments = megatron_arguments(with_capacity(1.25, true), l);
  CHECK(arguments.at("moe_expert_capacity_factor") == 1.25);
  CHECK(arguments.at("moe_pad_expert_input_to_capacity") == true);
  const auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  INFO((back.ok() ? std::string() : back.error().message));
  REQUIRE(back.ok());
  CHECK(back->model.capacity_factor == 1.25);
  CHECK(back->model.pad_to_capacity);
  // Dropless: not written; Megatron's null reads as dropless.
  nlohmann::json dropless = megatron_arguments(with_capacity(0.0, false), l);
  CHECK_FALSE(dropless.contains("moe_expert_capacity_factor"));
  dropless["moe_expert_capacity_factor"] = nullptr;
  const auto read = megatron_from_arguments(dropless, "plan.json: megatron");
  REQUIRE(read.ok());
  CHECK(read->model.capacity_factor == 0.0);
  dropless["moe_expert_capacity_factor"] = -1;
  const auto negative = megatron_from_arguments(dropless, "plan.json: megatron");
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.error().message.find("moe_expert_capacity_factor must be a number greater than 0") !=
        std::string::npos);
}

}  // namespace
}  // namespace baton
