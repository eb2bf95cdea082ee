// The vocabulary-parallel cross entropy's kernels on the last stage, unfused
// (Megatron's default, tensor_parallel.vocab_parallel_cross_entropy) and
// with --cross-entropy-loss-fusion (fused_vocab_parallel_cross_entropy):
// bytes per logit of the rank (T x V / t), reads + writes, in
// sim/megatron_ends.cc: 38 forward and 14 backward unfused, 22 and 10 fused,
// 2 and 4 with Transformer Engine's fused implementation
// (--cross-entropy-fusion-impl te; transformer_engine/pytorch/triton/
// cross_entropy.py: the online softmax's one read forward, one read and
// in-place write of the gradient backward).
#include <string>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_profile.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

const CollectiveTime kFreeLink = [](double) { return Seconds(0.0); };

MegatronLayerTime head_of(const GptModel& model, const MegatronLayout& layout, const GpuModel& gpu) {
  return make_megatron_profile(model, layout, gpu, kFreeLink).times.back();
}

TEST_CASE("cross entropy: the fused loss saves 16 bytes per logit forward and 4 backward", "[megatron]") {
  // GPT-3 2.7B's shape (Brown et al. 2020, Table 2.1: 32 layers of h 2560,
  // 32 heads, s 2048); GPT-2's vocabulary padded to 128 t.
  GptModel model{4, 2560, 32, 2048, 50257};
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const double bandwidth = gpu.hbm_gbytes_per_s * 1e9 * gpu.memory_efficiency;  // bytes/s a streaming kernel reaches
  for (const int t : {1, 2}) {
    const MegatronLayout layout = megatron_layout(t, 1, 1, 4, 4);
    // b s tokens by V / t padded logits: 4 x 2048 x 50304 / 1, 4 x 2048 x 50432 / 2.
    const double logits = 4.0 * 2048.0 * static_cast<double>(padded_vocab(model, t)) / t;
    INFO("t " << t << ", " << logits << " logits");
    model.cross_entropy_fusion = false;
    const MegatronLayerTime unfused = head_of(model, layout, gpu);
    model.cross_entropy_fusion = true;
    const MegatronLayerTime fused = head_of(model, layout, gpu);
    // Every kernel moves at least 10 MB here, far above the kernel floor: the
    // difference is bytes over bandwidth alone.
    CHECK((unfused.forward_compute - fused.forward_compute).value ==
          Approx((38.0 - 22.0) * logits / bandwidth).epsilon(1e-9));
    CHECK((unfused.backward_compute - fused.backward_compute).value ==
          Approx((14.0 - 10.0) * logits / bandwidth).epsilon(1e-9));
    // The GEMMs, the norm and the weights do not move.
    CHECK(fused.weight_gradient == unfused.weight_gradient);
    CHECK(fused.parameters == unfused.parameters);
    CHECK(fused.backward_comm == unfused.backward_comm);
  }
}

TEST_CASE("cross entropy: the unfused loss's 38 bytes per logit forward are its six fp32 passes", "[megatron]") {
  // Twice the vocabulary, the same blocks: the head's forward grows by the
  // logits GEMM's and the loss's share of the added logits.
  GptModel small{2, 1024, 16, 1024, 32768};
  GptModel large = small;
  large.vocab = 2 * 32768;
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const MegatronLayout layout = megatron_layout(1, 1, 1, 8, 8);
  REQUIRE(padded_vocab(small, 1) == 32768);
  REQUIRE(padded_vocab(large, 1) == 65536);
  const double tokens = 8.0 * 1024.0;
  const double added = tokens * 32768.0;  // logits
  const double bandwidth = gpu.hbm_gbytes_per_s * 1e9 * gpu.memory_efficiency;
  const Seconds gemms = gpu.gemm(tokens, 65536.0, 1024.0) - gpu.gemm(tokens, 32768.0, 1024.0);
  const Seconds grown = head_of(large, layout, gpu).forward_compute - head_of(small, layout, gpu).forward_compute;
  // cast 2 + 4, max 4, subtract 8, exp 8, sum 4, divide 8.
  CHECK(grown.value == Approx(gemms.value + 38.0 * added / bandwidth).epsilon(1e-9));
}

TEST_CASE("cross entropy: the flag is kept in Megatron's arguments and read back", "[megatron]") {
  GptModel model{4, 2560, 32, 2048, 50257};
  const MegatronLayout layout = megatron_layout(1, 1, 1, 4, 4);
  CHECK_FALSE(megatron_arguments(model, layout).contains("cross_entropy_loss_fusion"));
  model.cross_entropy_fusion = true;
  CHECK(model.beyond_gpt());
  const nlohmann::json written = megatron_arguments(model, layout);
  CHECK(written.at("cross_entropy_loss_fusion") == true);
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->model.cross_entropy_fusion);
}

TEST_CASE("cross entropy: Transformer Engine's fused loss moves 2 bytes per logit forward and 4 backward",
          "[megatron]") {
  GptModel model{4, 2560, 32, 2048, 50257};
  model.cross_entropy_fusion = true;
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const double bandwidth = gpu.hbm_gbytes_per_s * 1e9 * gpu.memory_efficiency;
  const MegatronLayout layout = megatron_layout(2, 1, 1, 4, 4);
  const double logits = 4.0 * 2048.0 * static_cast<double>(padded_vocab(model, 2)) / 2;
  const MegatronLayerTime native = head_of(model, layout, gpu);
  model.te_cross_entropy = true;
  const MegatronLayerTime te = head_of(model, layout, gpu);
  CHECK((native.forward_compute - te.forward_compute).value == Approx((22.0 - 2.0) * logits / bandwidth).epsilon(1e-9));
  CHECK((native.backward_compute - te.backward_compute).value ==
        Approx((10.0 - 4.0) * logits / bandwidth).epsilon(1e-9));
  CHECK(te.weight_gradient == native.weight_gradient);
  // Without the fusion the implementation is not used (Megatron-core's
  // LanguageModule picks it only with cross_entropy_loss_fusion).
  GptModel unfused = model;
  unfused.cross_entropy_fusion = false;
  GptModel plain = unfused;
  plain.te_cross_entropy = false;
  CHECK(head_of(unfused, layout, gpu).forward_compute == head_of(plain, layout, gpu).forward_compute);

  // The last stage keeps the half-precision logits alone (2 bytes a logit)
  // where Megatron's keeps two fp32 copies (8): 6 bytes a logit less.
  const Topology topology = testing::shipped_topology("a100_vtrain.json");
  const MegatronLayout whole = megatron_layout(2, 1, 4, 4, 16);
  model.te_cross_entropy = false;
  const auto kept = predict_megatron(model, whole, topology, false);
  model.te_cross_entropy = true;
  const auto lean = predict_megatron(model, whole, topology, false);
  REQUIRE(kept.ok());
  REQUIRE(lean.ok());
  CHECK(kept->memory.peak().value - lean->memory.peak().value == Approx(6.0 * logits).epsilon(1e-12));

  // Kept in the plan file as Megatron-core's argument; read back.
  const nlohmann::json written = megatron_arguments(model, layout);
  CHECK(written.at("cross_entropy_fusion_impl") == "te");
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->model.te_cross_entropy);
  nlohmann::json other = written;
  other["cross_entropy_fusion_impl"] = "apex";
  const auto refused = megatron_from_arguments(other, "plan.megatron");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("must be native or te") != std::string::npos);
}

}  // namespace
}  // namespace baton
