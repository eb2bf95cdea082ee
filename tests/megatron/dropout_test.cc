// --attention-dropout and --hidden-dropout (Megatron's defaults 0.1): at 0
// PyTorch's dropout returns its input, so no mask is kept. Korthikanti et
// al.'s activations per layer (MLSys 2023, arXiv 2205.05198, section 4.1)
// count the two hidden-state masks as s b h (1 byte each) and the
// attention's 5 a s / h as the softmax's output (2), the dropout mask (1)
// and its output (2): without attention dropout only the softmax's output
// stays, 2 a s / h.
#include <string>

#include "tests/catch_compat.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

// The 22B model of Korthikanti et al., Table 3.
const GptModel k22B{48, 6144, 64, 2048, 51200};

GptModel with_dropout(double attention, double hidden) {
  GptModel m = k22B;
  m.attention_dropout = attention;
  m.hidden_dropout = hidden;
  return m;
}

MegatronLayout at(int t, Recompute recompute, bool sequence_parallel) {
  MegatronLayout l = megatron_layout(t, 1, 1, 4, 4);
  l.recompute = recompute;
  l.sequence_parallel = sequence_parallel;
  return l;
}

TEST_CASE("dropout: without it the masks are not kept, Korthikanti's terms less theirs", "[megatron][memory]") {
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8;
  const double sbh = s * b * h;
  // Eq. 2 (t 8, no sequence parallelism): s b h (10 + 24 / t + 5 a s / (h t)).
  const MegatronLayout plain = at(8, Recompute::kNone, false);
  CHECK(megatron_layer_activation_bytes(with_dropout(0.1, 0.1), plain) ==
        Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))));
  // No hidden dropout: the two masks (1 byte each, kept whole) go.
  CHECK(megatron_layer_activation_bytes(with_dropout(0.1, 0.0), plain) ==
        Approx(sbh * (8 + 24 / t + 5 * a * s / (h * t))));
  // No attention dropout: the scores keep the softmax's output alone.
  CHECK(megatron_layer_activation_bytes(with_dropout(0.0, 0.1), plain) ==
        Approx(sbh * (10 + 24 / t + 2 * a * s / (h * t))));
  // Eq. 4's form with sequence parallelism: s b h / t (32 + 2 a s / h) without either.
  CHECK(megatron_layer_activation_bytes(with_dropout(0.0, 0.0), at(8, Recompute::kNone, true)) ==
        Approx(sbh / t * (32 + 2 * a * s / h)));
  // Selective recomputation recomputes the scores anyway: only the hidden masks differ.
  CHECK(megatron_layer_activation_bytes(with_dropout(0.0, 0.0), at(8, Recompute::kSelective, true)) ==
        Approx(32 * sbh / t));
  // Any probability above 0 keeps them: 0.05 is 0.1.
  CHECK(megatron_layer_activation_bytes(with_dropout(0.05, 0.05), plain) ==
        megatron_layer_activation_bytes(with_dropout(0.1, 0.1), plain));
}

TEST_CASE("dropout: FlashAttention keeps no scores either way", "[megatron][memory]") {
  GptModel flash = with_dropout(0.1, 0.1), flash_none = with_dropout(0.0, 0.1);
  flash.flash_attention = flash_none.flash_attention = true;
  const MegatronLayout l = at(8, Recompute::kNone, true);
  CHECK(megatron_layer_activation_bytes(flash, l) == megatron_layer_activation_bytes(flash_none, l));
}

TEST_CASE("dropout: refused below 0 and from 1 on, carried in the plan file when not Megatron's 0.1",
          "[megatron][bad-input]") {
  const MegatronLayout l = at(8, Recompute::kNone, true);
  const auto refusal = [&](double attention, double hidden) {
    const Status status = check_megatron_layout(with_dropout(attention, hidden), l, 8);
    return status.ok() ? std::string("(accepted)") : status.error().message;
  };
  CHECK(refusal(0.0, 0.0) == "(accepted)");
  CHECK(refusal(1.0, 0.1) == "--attention-dropout must be at least 0 and below 1, got 1");
  CHECK(refusal(0.1, -0.5) == "--hidden-dropout must be at least 0 and below 1, got -0.5");
  const nlohmann::json written = megatron_arguments(with_dropout(0.0, 0.0), l);
  CHECK(written.at("attention_dropout") == 0.0);
  CHECK(written.at("hidden_dropout") == 0.0);
  const auto back = megatron_from_arguments(written, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->model.attention_dropout == 0.0);
  CHECK(back->model.hidden_dropout == 0.0);
  CHECK_FALSE(megatron_arguments(k22B, l).contains("attention_dropout"));
  nlohmann::json bad = written;
  bad["hidden_dropout"] = 1.5;
  const auto refused = megatron_from_arguments(bad, "plan.megatron");
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("hidden_dropout"));
}

}  // namespace
}  // namespace baton
