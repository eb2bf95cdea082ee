// The embedding's and the softmax's flags of Megatron-LM's launch scripts:
// --max-position-embeddings P (the learned position table's P rows, P >= s
// as Megatron requires; none with rotary positions),
// --make-vocab-size-divisible-by D (the vocabulary padded to a multiple of D
// t) and --no-masked-softmax-fusion (the softmax unfused whatever the
// scores' shape).
#include <cmath>
#include <string>

#include "tests/catch_compat.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_profile.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

// GPT-3 175B (Brown et al. 2020, Table 2.1): 96 layers of h 12288, 96 heads, s 2048.
const GptModel kGpt3{96, 12288, 96, 2048, 50257};

TEST_CASE("embedding flags: P position rows and the vocabulary padded to D t", "[megatron]") {
  const double h = 12288;
  GptModel longer = kGpt3;
  longer.max_positions = 8192;
  // 6144 rows more than s of h weights each.
  CHECK(gpt_parameters(longer, 1) - gpt_parameters(kGpt3, 1) == Approx(6144 * h).epsilon(1e-12));
  GptModel rotary = longer;
  rotary.rope = true;
  GptModel rotary_s = kGpt3;
  rotary_s.rope = true;
  CHECK(gpt_parameters(rotary, 1) == gpt_parameters(rotary_s, 1));  // no table either way
  // 50257 padded to a multiple of 128 x 8 = 51200; of 64 x 8, 50688.
  CHECK(padded_vocab(kGpt3, 8) == 51200);
  GptModel by64 = kGpt3;
  by64.vocab_divisor = 64;
  CHECK(padded_vocab(by64, 8) == 50688);
  CHECK(gpt_parameters(kGpt3, 8) - gpt_parameters(by64, 8) == Approx((51200 - 50688) * h).epsilon(1e-12));
}

TEST_CASE("embedding flags: the last stage holds the longer table's weights", "[megatron][memory]") {
  const Topology topology = [] {
    Topology t = make_flat_topology(8, 2400.0, Seconds::from_us(3.0));
    t.device.name = "H100-SXM5-80GB";
    return t;
  }();
  GptModel small{4, 1024, 16, 2048, 32000};
  GptModel longer = small;
  longer.max_positions = 4096;
  MegatronLayout l = megatron_layout(1, 2, 4, 1, 16);
  const auto a = predict_megatron(small, l, topology, false), b = predict_megatron(longer, l, topology, false);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  // The first stage (the embedding) holds 2048 rows more of h weights, 16 bytes each in fp16
  // with Adam and no distributed optimizer (2 + 2 + 12).
  const double more = static_cast<double>(b->memory.ranks.at(0).weights_and_optimizer.value -
                                          a->memory.ranks.at(0).weights_and_optimizer.value);
  CHECK(more == Approx(2048.0 * 1024 * 16).margin(1024 * 16));
}

TEST_CASE("embedding flags: --no-masked-softmax-fusion runs the softmax unfused where the fused kernel would",
          "[megatron]") {
  GptModel m{4, 2048, 16, 2048, 32000};
  const MegatronLayout l = megatron_layout(1, 1, 1, 4, 4);
  REQUIRE(fused_softmax_available(4, 16, 2048));
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const CollectiveTime free_link = [](double) { return Seconds(0.0); };
  const MegatronLayerTime fused = make_megatron_profile(m, l, gpu, free_link).times[1];
  m.softmax_fusion = false;
  const MegatronLayerTime unfused = make_megatron_profile(m, l, gpu, free_link).times[1];
  CHECK(unfused.forward_compute > fused.forward_compute);
  CHECK(unfused.backward_compute > fused.backward_compute);
  // FlashAttention has the softmax in its kernel: the flag changes nothing.
  m.flash_attention = true;
  GptModel flash = m;
  flash.softmax_fusion = true;
  CHECK(make_megatron_profile(m, l, gpu, free_link).times[1].forward_compute ==
        make_megatron_profile(flash, l, gpu, free_link).times[1].forward_compute);
}

TEST_CASE("embedding flags: refused as Megatron refuses them, carried in the plan file", "[megatron][bad-input]") {
  const MegatronLayout l = megatron_layout(8, 1, 1, 1, 1);
  const auto refusal = [&](const GptModel& model) {
    const Status status = check_megatron_layout(model, l, 8);
    return status.ok() ? std::string("(accepted)") : status.error().message;
  };
  GptModel shorter = kGpt3;
  shorter.max_positions = 1024;
  CHECK(refusal(shorter) == "--max-position-embeddings 1024 must be at least --seq-length 2048, as Megatron requires");
  GptModel no_divisor = kGpt3;
  no_divisor.vocab_divisor = 0;
  CHECK(refusal(no_divisor) == "--make-vocab-size-divisible-by must be between 1 and 16777216, got 0");
  GptModel all = kGpt3;
  all.max_positions = 4096;
  all.vocab_divisor = 64;
  all.softmax_fusion = false;
  CHECK(refusal(all) == "(accepted)");
  const nlohmann::json written = megatron_arguments(all, l);
  CHECK(written.at("max_position_embeddings") == 4096);
  CHECK(written.at("make_vocab_size_divisible_by") == 64);
  CHECK(written.at("masked_softmax_fusion") == false);
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->model.max_positions == 4096);
  CHECK(back->model.vocab_divisor == 64);
  CHECK_FALSE(back->model.softmax_fusion);
  const nlohmann::json plain = megatron_arguments(kGpt3, l);
  CHECK_FALSE(plain.contains("max_position_embeddings"));
  CHECK_FALSE(plain.contains("masked_softmax_fusion"));
}

}  // namespace
}  // namespace baton
