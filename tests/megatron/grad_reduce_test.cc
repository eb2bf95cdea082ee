// --grad-reduce-in-bf16 (Megatron's mixed-precision flag): with bf16 the
// gradients are accumulated and reduced in bf16, 2 bytes, where Megatron
// otherwise keeps and reduces them in fp32 (its validate_args sets
// accumulate_allreduce_grads_in_fp32 for bf16 unless the flag is given);
// with fp16 they are 2 bytes either way. Memory: tests/megatron/
// megatron_memory_test.cc (18 bytes per parameter become 16).
#include "tests/catch_compat.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_profile.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

const GptModel kModel{8, 2048, 16, 2048, 32000};

MegatronProfile profile_of(bool bf16, bool in_bf16) {
  MegatronLayout l = megatron_layout(2, 1, 4, 1, 16);
  l.bf16 = bf16;
  l.grad_reduce_in_bf16 = in_bf16;
  l.sequence_parallel = true;
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  return make_megatron_profile(kModel, l, gpu, [](double) { return Seconds(0.0); });
}

TEST_CASE("grad reduce in bf16: the data-parallel reduction moves 2 bytes a gradient, not 4", "[megatron]") {
  const MegatronProfile fp32 = profile_of(true, false), bf16 = profile_of(true, true);
  const MegatronProfile fp16 = profile_of(false, false), fp16_flag = profile_of(false, true);
  for (size_t i = 0; i < fp32.times.size(); ++i) {
    INFO("layer " << i);
    REQUIRE(fp32.times[i].reduced_bytes > 0.0);
    CHECK(bf16.times[i].reduced_bytes == Approx(fp32.times[i].reduced_bytes / 2).epsilon(1e-12));
    CHECK(fp16.times[i].reduced_bytes == bf16.times[i].reduced_bytes);
    CHECK(fp16_flag.times[i].reduced_bytes == fp16.times[i].reduced_bytes);  // no effect in fp16
  }
}

TEST_CASE("grad reduce in bf16: a shorter iteration on a slow data-parallel link, the plan file keeps it",
          "[megatron]") {
  const Topology topology = [] {
    Topology t = make_flat_topology(8, 100.0, Seconds::from_us(10.0));
    t.device.name = "H100-SXM5-80GB";
    return t;
  }();
  MegatronLayout l = megatron_layout(2, 1, 4, 1, 16);
  l.bf16 = true;
  l.sequence_parallel = true;
  const auto fp32 = predict_megatron(kModel, l, topology, false);
  l.grad_reduce_in_bf16 = true;
  const auto bf16 = predict_megatron(kModel, l, topology, false);
  REQUIRE(fp32.ok());
  REQUIRE(bf16.ok());
  CHECK(bf16->breakdown.data_allreduce < fp32->breakdown.data_allreduce);
  CHECK(bf16->iteration_time < fp32->iteration_time);
  CHECK(bf16->breakdown.compute == fp32->breakdown.compute);
  const nlohmann::json arguments = megatron_arguments(kModel, l);
  CHECK(arguments.at("grad_reduce_in_bf16") == true);
  const auto back = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.grad_reduce_in_bf16);
  l.grad_reduce_in_bf16 = false;
  CHECK_FALSE(megatron_arguments(kModel, l).contains("grad_reduce_in_bf16"));
}

}  // namespace
}  // namespace baton
