// A SwiGLU MLP's activation with and without Megatron-core's fused kernel
// (--no-bias-swiglu-fusion; sim/megatron_activation.h): the unfused SiLU and
// product move 10 bytes an output value forward in two kernels where the
// fused kernel moves 6 in one, 26 backward in four where the fused backward
// is taken as 12, and keep SiLU's output (f values a token) for the
// product's backward.
#include <string>

#include "tests/catch_compat.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_profile.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

const CollectiveTime kFreeLink = [](double) { return Seconds(0.0); };

MegatronLayerTime block_of(const GptModel& model, const MegatronLayout& layout, const GpuModel& gpu) {
  return make_megatron_profile(model, layout, gpu, kFreeLink).times.at(1);
}

TEST_CASE("activation fusion: the unfused SwiGLU costs its bytes and keeps SiLU's output", "[megatron]") {
  // Llama 2 7B's block (Touvron et al. 2023: h 4096, 32 heads, SwiGLU of
  // width 11008); b 4 x s 4096 tokens, 180M output values a pass on one GPU,
  // every kernel far above the floor.
  GptModel model = llama_style(2, 4096, 32, 32, 11008, 32000, 4096);
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const double bandwidth = gpu.hbm_gbytes_per_s * 1e9 * gpu.memory_efficiency;
  const MegatronLayout layout = megatron_layout(1, 1, 1, 4, 4);
  const double values = 4.0 * 4096.0 * 11008.0;
  REQUIRE(4.0 * values / bandwidth > gpu.kernel_floor.value);
  const MegatronLayerTime fused = block_of(model, layout, gpu);
  const double fused_bytes = megatron_layer_activation_bytes(model, layout);
  model.activation_fusion = false;
  const MegatronLayerTime unfused = block_of(model, layout, gpu);
  CHECK((unfused.forward_compute - fused.forward_compute).value ==
        Approx((10.0 - 6.0) * values / bandwidth).epsilon(1e-9));
  CHECK((unfused.backward_compute - fused.backward_compute).value ==
        Approx((26.0 - 12.0) * values / bandwidth).epsilon(1e-9));
  CHECK(unfused.weight_gradient == fused.weight_gradient);
  // SiLU's output, 2 bytes a value, kept per block and microbatch.
  CHECK(megatron_layer_activation_bytes(model, layout) - fused_bytes == Approx(2.0 * values));
}

TEST_CASE("activation fusion: GeLU keeps its fused figure, and the flag goes into Megatron's arguments", "[megatron]") {
  GptModel gpt{2, 2048, 16, 2048, 50257};
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const MegatronLayout layout = megatron_layout(1, 1, 1, 4, 4);
  const MegatronLayerTime plain = block_of(gpt, layout, gpu);
  gpt.activation_fusion = false;  // no SwiGLU: nothing sim/megatron_activation.h models
  CHECK(block_of(gpt, layout, gpu).forward_compute == plain.forward_compute);

  GptModel llama = llama_style(2, 2048, 16, 4, 5632, 32000, 2048);
  CHECK_FALSE(megatron_arguments(llama, layout).contains("bias_activation_fusion"));
  llama.activation_fusion = false;
  CHECK(llama.beyond_gpt());
  const nlohmann::json written = megatron_arguments(llama, layout);
  CHECK(written.at("bias_activation_fusion") == false);
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK_FALSE(back->model.activation_fusion);
  nlohmann::json gelu = written;
  gelu.erase("swiglu");
  const auto read = megatron_from_arguments(gelu, "plan.megatron");
  REQUIRE(read.ok());
  CHECK(read->model.activation_fusion);
}

}  // namespace
}  // namespace baton
