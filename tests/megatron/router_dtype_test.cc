// The router in fp32 (Megatron-core's --moe-router-dtype fp32; GptModel's
// fp32_router): router_gating_linear computes the logits from the bf16 input
// and weight into fp32, the softmax and top-k run on fp32 logits, and the
// backward casts the input and the weight to fp32, takes the two gradient
// GEMMs on fp32 operands (Transformer Engine's cuBLASLt GEMM computes them
// as TF32) and casts the gradients back to bf16. The GPU model's fp32 rate,
// the router's time term by term, the kernels, the checks and the plan
// file's arguments.
#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_block.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

using megatron_detail::moe_time;
using megatron_detail::shape_of;

const CollectiveTime kFreeLink = [](double) { return Seconds(0.0); };

// Qwen3-30B-A3B's MoE blocks (h 2048, 128 experts of 768, top 8, 32 heads of
// 128 in 4 key-value groups) at sequence 4096.
GptModel qwen3_moe(bool fp32_router) {
  GptModel m = llama_style(4, 2048, 32, 4, 6144, 151936, 4096);
  m.kv_channels = 128;
  m.experts = 128;
  m.router_topk = 8;
  m.moe_ffn_hidden = 768;
  m.grouped_gemm = true;
  m.flash_attention = true;
  m.fp32_router = fp32_router;
  return m;
}

TEST_CASE("router dtype: a GEMM on fp32 operands runs at the TF32 peak, the V100's at its fp32 peak",
          "[megatron][moe]") {
  // The datasheets' dense peaks: A100 312 bf16 and 156 TF32, H100 SXM5 989
  // and 495, V100 125 fp16 tensor-core and 15.7 fp32 (no TF32). A GEMM large
  // enough to be compute-bound takes the ratio of the peaks longer.
  const double n = 16384;
  const struct {
    const char* name;
    double half, fp32;
  } gpus[] = {{"A100-SXM4-80GB", 312.0, 156.0}, {"H100-SXM5-80GB", 989.0, 495.0}, {"V100-SXM2-32GB", 125.0, 15.7}};
  for (const auto& g : gpus) {
    CAPTURE(g.name);
    const GpuModel gpu = *gpu_model(g.name);
    CHECK(gpu.fp32_tflops == g.fp32);
    CHECK(gpu.gemm(n, n, n, 1, 4).value / gpu.gemm(n, n, n, 1, 2).value == Approx(g.half / g.fp32).epsilon(1e-12));
  }
}

TEST_CASE("router dtype: fp32 adds the logits' bytes, the fp32 gradient GEMMs and four casts", "[megatron][moe]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  MegatronLayout layout = megatron_layout(2, 1, 4, 2, 512);
  layout.sequence_parallel = true;
  layout.expert_parallel = 4;
  layout.expert_tensor = 2;
  const auto half = moe_time(gpu, shape_of(qwen3_moe(false), layout), kFreeLink, kFreeLink, kFreeLink);
  const auto fp32 = moe_time(gpu, shape_of(qwen3_moe(true), layout), kFreeLink, kFreeLink, kFreeLink);
  // The rank's shard: T / t = 2 x 4096 / 2 tokens, h 2048, E 128.
  const double local = 4096, h = 2048, E = 128;
  // The softmax and the top-k read and write the logits: 4 bytes a value, not 2.
  const Seconds routing = gpu.memory_bound(2 * local * E * 4) * 2.0 - gpu.memory_bound(2 * local * E * 2) * 2.0;
  CHECK(fp32.forward_compute.value == Approx((half.forward_compute + routing).value).epsilon(1e-12));
  CHECK(fp32.forward_kernels == half.forward_kernels);
  // The weight's gradient [h x T / t] x [T / t x E] on fp32 operands.
  CHECK(fp32.weight_gradient.value == gpu.gemm(h, E, local, 1, 4).value);
  CHECK(half.weight_gradient.value == gpu.gemm(h, E, local, 1, 2).value);
  // The input's gradient likewise, and the casts: input and weight to fp32,
  // their gradients back, each 6 bytes a value.
  const Seconds gemms =
      gpu.gemm(local, h, E, 1, 4) - gpu.gemm(local, h, E, 1, 2) + fp32.weight_gradient - half.weight_gradient;
  const Seconds casts = (gpu.memory_bound(6 * local * h) + gpu.memory_bound(6 * h * E)) * 2.0;
  CHECK(fp32.backward_compute.value == Approx((half.backward_compute + routing + gemms + casts).value).epsilon(1e-12));
  CHECK(fp32.backward_kernels == half.backward_kernels + 4);
  // The whole prediction is slower, the memory the same (the input is kept
  // in bf16: router_gating_linear saves no fp32 copy).
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const auto slow = predict_megatron(qwen3_moe(true), layout, topology, false);
  const auto fast = predict_megatron(qwen3_moe(false), layout, topology, false);
  INFO((slow.ok() ? std::string() : slow.error().message));
  REQUIRE(slow.ok());
  REQUIRE(fast.ok());
  CHECK(slow->iteration_time.value > fast->iteration_time.value);
  CHECK(slow->memory.peak().value == fast->memory.peak().value);
}

TEST_CASE("router dtype: needs experts, and the plan file keeps it", "[megatron][moe][bad-input]") {
  GptModel dense = llama_style(2, 2048, 16, 4, 5632, 32000, 2048);
  dense.fp32_router = true;
  const MegatronLayout layout = megatron_layout(1, 1, 8, 1, 64);
  const Status refused = check_megatron_layout(dense, layout, 8);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message == "--moe-router-dtype needs --num-experts");

  MegatronLayout moe_layout = layout;
  moe_layout.expert_parallel = 8;
  const nlohmann::json written = megatron_arguments(qwen3_moe(true), moe_layout);
  CHECK(written.at("moe_router_dtype") == "fp32");
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->model.fp32_router);
  CHECK_FALSE(megatron_arguments(qwen3_moe(false), moe_layout).contains("moe_router_dtype"));
  nlohmann::json fp64 = written;
  fp64["moe_router_dtype"] = "fp64";
  const auto wide = megatron_from_arguments(fp64, "plan.megatron");
  REQUIRE_FALSE(wide.ok());
  CHECK(wide.error().message.find("moe_router_dtype") != std::string::npos);
  CHECK(wide.error().message.find("fp64 is not modelled") != std::string::npos);
  fp64["moe_router_dtype"] = nullptr;  // Megatron's None: the input's dtype
  const auto none = megatron_from_arguments(fp64, "plan.megatron");
  REQUIRE(none.ok());
  CHECK_FALSE(none->model.fp32_router);
}

}  // namespace
}  // namespace baton
