// Megatron-core's fused kernels turned off, and what the PyTorch ops that
// replace them cost:
// - rotary positions (--no-rope-fusion; sim/megatron_rope.h): the unfused ops
//   of rope_utils.py move 24 bytes a value of the queries and of the keys
//   forward in six kernels, plus six kernels over the s x d tables, and 20
//   bytes in five kernels backward, where the fused kernel reads and writes
//   each value once (4 bytes) each way, twice backward;
// - a SwiGLU MLP's activation (--no-bias-swiglu-fusion;
//   sim/megatron_activation.h): SiLU and the product move 10 bytes an output
//   value forward in two kernels where the fused kernel moves 6 in one, 26
//   backward in four where the fused backward is taken as 12, and keep SiLU's
//   output (f values a token) for the product's backward;
// - the bias-dropout-add after the attention and the MLP
//   (--no-bias-dropout-fusion): the bias's addition, the dropout and the
//   residual's addition as separate kernels forward.
#include <functional>
#include <string>

#include "tests/catch_compat.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_profile.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

const CollectiveTime kFreeLink = [](double) { return Seconds(0.0); };

// The first block's time (the profile's layers: the embedding, then blocks).
MegatronLayerTime block_of(const GptModel& model, const MegatronLayout& layout, const GpuModel& gpu) {
  return make_megatron_profile(model, layout, gpu, kFreeLink).times.at(1);
}

// A fusion flag (`fused`, Megatron's argument `key`) turned off on a
// Llama-style model: written into Megatron's arguments as false, read back,
// absent while on; and read as on once `drop` (what it needs) is taken out
// of the arguments, as Megatron turns it off there with nothing to fuse.
void check_kept(bool GptModel::*fused, const char* key, const std::function<void(nlohmann::json&)>& drop) {
  GptModel llama = llama_style(2, 2048, 16, 4, 5632, 32000, 2048);
  const MegatronLayout layout = megatron_layout(1, 1, 1, 4, 4);
  CHECK_FALSE(megatron_arguments(llama, layout).contains(key));
  llama.*fused = false;
  CHECK(llama.beyond_gpt());
  const nlohmann::json written = megatron_arguments(llama, layout);
  CHECK(written.at(key) == false);
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK_FALSE(back->model.*fused);
  nlohmann::json without = written;
  drop(without);
  const auto read = megatron_from_arguments(without, "plan.megatron");
  REQUIRE(read.ok());
  CHECK(read->model.*fused);
}

TEST_CASE("rope fusion: unfused rotary positions cost their bytes and the tables' kernels", "[megatron]") {
  // Llama-style, a head per group (keys as wide as the queries, h), large
  // enough that every kernel over the queries or keys is above the floor:
  // b 8 x s 4096 tokens of h 4096, 134M values, at least 268 MB a kernel.
  GptModel model = llama_style(2, 4096, 32, 32, 11008, 32000, 4096);
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const double bandwidth = gpu.hbm_gbytes_per_s * 1e9 * gpu.memory_efficiency;
  const MegatronLayout layout = megatron_layout(1, 1, 1, 8, 8);
  const double values = 2.0 * 8.0 * 4096.0 * 4096.0;  // the queries' and the keys'
  REQUIRE(2.0 * values / 2.0 / bandwidth > gpu.kernel_floor.value);
  // The tables: 4096 x 128 fp32 values, 4 MB a kernel, under the floor.
  REQUIRE(8.0 * 4096.0 * 128.0 / bandwidth < gpu.kernel_floor.value);
  const MegatronLayerTime fused = block_of(model, layout, gpu);
  model.rope_fusion = false;
  const MegatronLayerTime unfused = block_of(model, layout, gpu);
  // Forward: 24 - 4 bytes a value, and two tensors' six table kernels at the floor.
  CHECK((unfused.forward_compute - fused.forward_compute).value ==
        Approx((24.0 - 4.0) * values / bandwidth + 12.0 * gpu.kernel_floor.value).epsilon(1e-9));
  // Backward: 20 bytes a value against the fused kernel's 4, twice.
  CHECK((unfused.backward_compute - fused.backward_compute).value ==
        Approx((20.0 - 8.0) * values / bandwidth).epsilon(1e-9));
  CHECK(unfused.weight_gradient == fused.weight_gradient);
  CHECK(unfused.parameters == fused.parameters);
}

TEST_CASE("rope fusion: no effect without rotary positions, and kept in Megatron's arguments", "[megatron]") {
  GptModel gpt{2, 2048, 16, 2048, 50257};
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const MegatronLayout layout = megatron_layout(1, 1, 1, 4, 4);
  const MegatronLayerTime plain = block_of(gpt, layout, gpu);
  gpt.rope_fusion = false;  // learned positions: nothing to fuse
  CHECK(block_of(gpt, layout, gpu).forward_compute == plain.forward_compute);
  CHECK(block_of(gpt, layout, gpu).backward_compute == plain.backward_compute);

  // Without rotary positions Megatron turns the fusion off, and baton reads it as nothing to fuse.
  check_kept(&GptModel::rope_fusion, "apply_rope_fusion",
             [](nlohmann::json& arguments) { arguments["position_embedding_type"] = "learned_absolute"; });
}

TEST_CASE("rope fusion: refused with multi-latent attention, whose rotary part baton keeps fused",
          "[megatron][bad-input]") {
  GptModel model = llama_style(2, 2048, 16, 16, 5632, 32000, 2048);
  model.mla = true;
  const MegatronLayout layout = megatron_layout(1, 1, 1, 4, 4);
  REQUIRE(check_megatron_layout(model, layout, 1).ok());
  model.rope_fusion = false;
  const Status refused = check_megatron_layout(model, layout, 1);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("--no-rope-fusion with --multi-latent-attention") != std::string::npos);
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

TEST_CASE("activation fusion: GeLU with biases adds the bias's own kernel, and the flag is kept", "[megatron]") {
  // GPT's MLP (h 2048, f 8192, biases): b 4 x s 2048 tokens, 67M values of
  // the activation, 268 MB a pass, far above the kernel floor.
  GptModel gpt{2, 2048, 16, 2048, 50257};
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const double bandwidth = gpu.hbm_gbytes_per_s * 1e9 * gpu.memory_efficiency;
  const MegatronLayout layout = megatron_layout(1, 1, 1, 4, 4);
  const double values = 4.0 * 2048.0 * 8192.0;
  const MegatronLayerTime plain = block_of(gpt, layout, gpu);
  const double plain_bytes = megatron_layer_activation_bytes(gpt, layout);
  gpt.activation_fusion = false;  // --no-bias-gelu-fusion
  const MegatronLayerTime unfused = block_of(gpt, layout, gpu);
  // mlp.py: intermediate + bias (read 2, write 2 bytes a value), then F.gelu
  // (the fused kernel's 4); the backward and the kept input as fused.
  CHECK((unfused.forward_compute - plain.forward_compute).value == Approx(4.0 * values / bandwidth).epsilon(1e-9));
  CHECK(unfused.backward_compute == plain.backward_compute);
  CHECK(megatron_layer_activation_bytes(gpt, layout) == plain_bytes);
  const nlohmann::json written = megatron_arguments(gpt, layout);
  CHECK(written.at("bias_activation_fusion") == false);
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK_FALSE(back->model.activation_fusion);
  // Without biases one GeLU kernel runs either way: the same figure.
  GptModel bare = gpt;
  bare.linear_bias = false;
  GptModel fused = bare;
  fused.activation_fusion = true;
  CHECK(block_of(bare, layout, gpu).forward_compute == block_of(fused, layout, gpu).forward_compute);

  check_kept(&GptModel::activation_fusion, "bias_activation_fusion",
             [](nlohmann::json& arguments) { arguments.erase("swiglu"); });
}

TEST_CASE("bias-dropout-add fusion: the unfused ops cost their bytes forward", "[megatron]") {
  // GPT's block with its biases and dropout 0.1: b 8 x s 2048 tokens of h
  // 4096, 67M values on each of the two additions, every kernel above the floor.
  GptModel model{2, 4096, 32, 2048, 50257};
  const GpuModel gpu = *gpu_model("A100-SXM4-80GB");
  const double bandwidth = gpu.hbm_gbytes_per_s * 1e9 * gpu.memory_efficiency;
  const MegatronLayout layout = megatron_layout(1, 1, 1, 8, 8);
  const double values = 8.0 * 2048.0 * 4096.0;
  REQUIRE(4.0 * values / bandwidth > gpu.kernel_floor.value);
  const MegatronLayerTime fused = block_of(model, layout, gpu);
  model.bias_dropout_fusion = false;
  const MegatronLayerTime unfused = block_of(model, layout, gpu);
  // Twice a block: bias 4 + dropout 5 + residual 6 bytes a value against the fused kernel's 6.
  CHECK((unfused.forward_compute - fused.forward_compute).value ==
        Approx(2.0 * (4.0 + 5.0 + 6.0 - 6.0) * values / bandwidth).epsilon(1e-9));
  CHECK(unfused.backward_compute == fused.backward_compute);
  // Without biases and dropout only the residual's addition runs: as fused.
  model.linear_bias = false;
  model.hidden_dropout = 0.0;
  const MegatronLayerTime bare = block_of(model, layout, gpu);
  model.bias_dropout_fusion = true;
  CHECK(bare.forward_compute == block_of(model, layout, gpu).forward_compute);
  // Kept in Megatron's arguments and read back.
  model.bias_dropout_fusion = false;
  const nlohmann::json written = megatron_arguments(model, layout);
  CHECK(written.at("bias_dropout_fusion") == false);
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK_FALSE(back->model.bias_dropout_fusion);
}

}  // namespace
}  // namespace baton
