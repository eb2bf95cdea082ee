// FP8 training (sim/megatron_fp8.h; Megatron-core's --fp8-format and
// --fp8-recipe through Transformer Engine): the FP8 GEMM rate, the linears
// on it, the quantization of their activation operands, the all-gathers in
// FP8, the activations kept in FP8, the cached FP8 weights, the plan file's
// keys and the refusals. No measured FP8 run is here: the tests check
// baton's stated model, term by term.
#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/json_fields.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_block.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

using megatron_detail::attention_linears;
using megatron_detail::fp8_casts;
using megatron_detail::fp8_quantize;
using megatron_detail::shape_of;
using megatron_detail::tp_exchange;

GpuModel h100() {
  auto gpu = gpu_model("H100-SXM5-80GB");
  REQUIRE(gpu.ok());
  return *gpu;
}

GptModel with_fp8(GptModel model, Fp8Recipe recipe = Fp8Recipe::kDelayed) {
  model.fp8 = Fp8Format::kHybrid;
  model.fp8_recipe = recipe;
  return model;
}

// GPT-3 2.7B's shape: 32 layers of h 2560, 32 heads, sequence 2048.
const GptModel kGpt{32, 2560, 32, 2048, 51200};

TEST_CASE("fp8: an FP8 GEMM runs at the FP8 peak, 1979 against 989 TFLOP/s on an H100", "[megatron][fp8]") {
  const GpuModel gpu = h100();
  CHECK(gpu.fp8_tflops == 1979.0);  // NVIDIA H100 SXM5 datasheet, dense
  // A large compute-bound GEMM: the same waves at twice the rate.
  const double n = 16384;
  CHECK(gpu.gemm(n, n, n, 1, 1).value / gpu.gemm(n, n, n, 1, 2).value == Approx(989.0 / 1979.0).epsilon(1e-12));
  // The A100 and V100 have no FP8 tensor cores.
  for (const char* name : {"A100-SXM4-80GB", "V100-SXM2-32GB"}) {
    auto other = gpu_model(name);
    REQUIRE(other.ok());
    CHECK(other->fp8_tflops == 0.0);
    const Status refused = check_fp8_gpu(with_fp8(kGpt), *other);
    REQUIRE(!refused.ok());
    CHECK(refused.error().message.find("--fp8-format hybrid") != std::string::npos);
    CHECK(refused.error().message.find(name) != std::string::npos);
  }
  CHECK(check_fp8_gpu(with_fp8(kGpt), gpu).ok());
  CHECK(check_fp8_gpu(kGpt, *gpu_model("A100-SXM4-80GB")).ok());  // no FP8 asked
}

TEST_CASE("fp8: the attention's linears run on FP8 operands, the core does not", "[megatron][fp8]") {
  const GpuModel gpu = h100();
  MegatronLayout l = megatron_layout(4, 1, 1, 2, 2);
  l.sequence_parallel = true;
  const auto x = shape_of(with_fp8(kGpt), l);
  CHECK(x.linear_bytes == 1);
  CHECK(shape_of(kGpt, l).linear_bytes == 2);
  const double T = 2 * 2048, h = 2560, t = 4;
  const auto linears = attention_linears(gpu, x);
  // QKV [T x h] x [h x 3h / t] and the projection [T x h / t] x [h / t x h].
  CHECK(linears.forward.value ==
        Approx((gpu.gemm(T, 3 * h / t, h, 1, 1) + gpu.gemm(T, h, h / t, 1, 1)).value).epsilon(1e-12));
  CHECK(linears.weight.value ==
        Approx((gpu.gemm(3 * h / t, h, T, 1, 1) + gpu.gemm(h, h / t, T, 1, 1)).value).epsilon(1e-12));
}

TEST_CASE("fp8: each linear's activation operand is quantized once a pass, 4 bytes a value", "[megatron][fp8]") {
  const GpuModel gpu = h100();
  MegatronLayout l = megatron_layout(4, 1, 1, 2, 2);
  l.sequence_parallel = true;
  const double T = 2 * 2048, own = T / 4, h = 2560, t = 4, f = 4 * h;
  const auto delayed = shape_of(with_fp8(kGpt), l);
  auto cast = [&](double values) { return gpu.memory_bound(4 * values); };
  const auto casts = fp8_casts(gpu, delayed);
  // Forward: the projection's and the second MLP GEMM's inputs (the norms
  // before the QKV and the first MLP GEMM write FP8 themselves).
  CHECK(casts.forward.value == Approx((cast(T * h / t) + cast(T * f / t)).value).epsilon(1e-12));
  // Backward: the output gradients of the QKV (3h / t wide), the projection
  // and the second MLP GEMM (the own tokens, before their all-gather), and of
  // the first MLP GEMM (f / t).
  CHECK(casts.backward.value ==
        Approx((cast(T * 3 * h / t) + cast(own * h) * 2 + cast(T * f / t)).value).epsilon(1e-12));
  CHECK(casts.forward_kernels == 2);
  CHECK(casts.backward_kernels == 4);
  // Tensorwise scaling reads each tensor once more for its maximum: two
  // kernels each, and the norms' outputs quantized on their own (the own
  // tokens, before the all-gather).
  const auto current = shape_of(with_fp8(kGpt, Fp8Recipe::kTensorwise), l);
  auto current_cast = [&](double values) { return cast(values) + gpu.memory_bound(2 * values); };
  CHECK(fp8_quantize(gpu, current, T * h).value == Approx(current_cast(T * h).value));
  const auto current_casts = fp8_casts(gpu, current);
  CHECK(current_casts.forward.value ==
        Approx((current_cast(T * h / t) + current_cast(T * f / t) + current_cast(own * h) * 2).value).epsilon(1e-12));
  CHECK(current_casts.forward_kernels == 8);
  CHECK(current_casts.backward_kernels == 8);
  // Multi-latent attention with a query latent (dense MLP): the kv and q
  // down projections' inputs, the projection's, the kv and q up projections'
  // unless --qk-layernorm's norms write them in FP8 (delayed scaling), and
  // the second MLP GEMM's; backward the five linears' and the MLP's two.
  GptModel mla = with_fp8(kGpt);
  mla.mla = true;
  mla.q_lora_rank = 512;
  mla.kv_lora_rank = 256;
  CHECK(fp8_casts(gpu, shape_of(mla, l)).forward_kernels == 6);
  CHECK(fp8_casts(gpu, shape_of(mla, l)).backward_kernels == 7);
  mla.qk_layernorm = true;
  CHECK(fp8_casts(gpu, shape_of(mla, l)).forward_kernels == 4);
  mla.fp8_recipe = Fp8Recipe::kTensorwise;  // every input quantized on its own, two kernels each: 7 inputs
  CHECK(fp8_casts(gpu, shape_of(mla, l)).forward_kernels == 14);
  // Nothing without FP8.
  const auto plain = fp8_casts(gpu, shape_of(kGpt, l));
  CHECK(plain.forward.value == 0.0);
  CHECK(plain.backward_kernels == 0);
}

TEST_CASE("fp8: with sequence parallelism the all-gathers move FP8 values, the reduce-scatters bf16",
          "[megatron][fp8]") {
  const CollectiveTime allreduce = [](double bytes) { return Seconds(1e-5 + bytes * 1e-11); };
  MegatronLayout l = megatron_layout(4, 1, 1, 2, 2);
  const double values = 2 * 2048 * 2560;
  // Without sequence parallelism the all-reduce of the bf16 outputs, FP8 or not.
  CHECK(tp_exchange(shape_of(with_fp8(kGpt), l), allreduce, values).value == allreduce(values * 2).value);
  l.sequence_parallel = true;
  CHECK(tp_exchange(shape_of(kGpt, l), allreduce, values).value == allreduce(values * 2).value);
  CHECK(tp_exchange(shape_of(with_fp8(kGpt), l), allreduce, values).value ==
        Approx(((allreduce(values * 2) + allreduce(values)) * 0.5).value).epsilon(1e-12));
}

TEST_CASE("fp8: a GPT block keeps 8 + 19 / t of s b h, its linears' inputs in FP8", "[megatron][fp8]") {
  // Korthikanti et al. 2022's 10 + 24 / t (eq. 2): the QKV's and MLP's
  // inputs (2 each of the 10) and the projection's (2) and the second MLP
  // GEMM's (8) inputs of the 24 go to one byte a value.
  const double s = 2048, b = 2, h = 2560, a = 32, t = 4, sbh = s * b * h;
  MegatronLayout l = megatron_layout(4, 1, 1, 2, 2);
  const GptModel fp8 = with_fp8(kGpt);
  CHECK(megatron_layer_activation_bytes(kGpt, l) == Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))));
  CHECK(megatron_layer_activation_bytes(fp8, l) == Approx(sbh * (8 + 19 / t + 5 * a * s / (h * t))));
  l.sequence_parallel = true;
  CHECK(megatron_layer_activation_bytes(fp8, l) == Approx(sbh * (27 / t + 5 * a * s / (h * t))));
  l.recompute = Recompute::kSelective;
  CHECK(megatron_layer_activation_bytes(fp8, l) == Approx(sbh * 27 / t));
  // Full recomputation keeps the block's bf16 input alone.
  l.recompute = Recompute::kFull;
  CHECK(megatron_layer_activation_bytes(fp8, l) == megatron_layer_activation_bytes(kGpt, l));
}

TEST_CASE("fp8: what a block keeps from I to W is all FP8 operands: half the bytes", "[megatron][fp8]") {
  MegatronLayout l = megatron_layout(4, 4, 1, 2, 8);
  l.sequence_parallel = true;
  l.zero_bubble = 1;
  const GptModel fp8 = with_fp8(kGpt);
  // weight_pass_share = kept for W / the block's activations.
  const double bf16_kept = weight_pass_share(kGpt, l) * megatron_layer_activation_bytes(kGpt, l);
  const double fp8_kept = weight_pass_share(fp8, l) * megatron_layer_activation_bytes(fp8, l);
  CHECK(fp8_kept == Approx(bf16_kept / 2).epsilon(1e-12));
}

TEST_CASE("fp8: the blocks' weights are cached in FP8 (2 bytes more each) and quantized once an iteration",
          "[megatron][fp8]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  MegatronLayout l = megatron_layout(2, 4, 1, 4, 32);
  l.sequence_parallel = true;
  l.bf16 = true;
  auto plain = predict_megatron(kGpt, l, topology, false);
  auto fp8 = predict_megatron(with_fp8(kGpt), l, topology, false);
  REQUIRE(plain.ok());
  REQUIRE(fp8.ok());
  // Each rank holds 8 blocks of (12 h^2 + 13 h) / t parameters.
  const double h = 2560, block = (12 * h * h + 13 * h) / 2;
  for (int rank = 0; rank < 4; ++rank) {
    INFO("pipeline rank " << rank);
    CHECK((fp8->memory.ranks[rank].weights_and_optimizer - plain->memory.ranks[rank].weights_and_optimizer).value ==
          Approx(8 * block * 2).epsilon(1e-9));
  }
  // The block's profile layer charges the quantization with its optimizer step.
  const GpuModel gpu = h100();
  const Layer& fp8_block = fp8->profile.profile.layers[1];
  const Layer& plain_block = plain->profile.profile.layers[1];
  CHECK((fp8_block.optimizer - plain_block.optimizer).value == Approx(gpu.memory_bound(block * 4).value));
  // And the iteration is faster: at t 2 and micro-batch 4 the GEMMs dominate
  // the blocks (docs/TRANSFORMERS.md has a case where the casts' kernels do not pay).
  CHECK(fp8->iteration_time.value < plain->iteration_time.value);
}

TEST_CASE("fp8: the checks name the flag", "[megatron][fp8]") {
  const MegatronLayout l = megatron_layout(4, 1, 1, 1, 1);
  auto refused = [&](const GptModel& model, const MegatronLayout& layout, const std::string& part) {
    const Status status = check_megatron_layout(model, layout, 8);
    REQUIRE(!status.ok());
    INFO(status.error().message);
    CHECK(status.error().message.find(part) != std::string::npos);
  };
  CHECK(check_megatron_layout(with_fp8(kGpt), l, 8).ok());
  GptModel recipe_alone = kGpt;
  recipe_alone.fp8_recipe = Fp8Recipe::kTensorwise;
  refused(recipe_alone, l, "--fp8-recipe tensorwise needs --fp8-format");
  refused(with_fp8(kGpt, Fp8Recipe::kMxfp8), l, "Blackwell");
  refused(with_fp8(kGpt, Fp8Recipe::kBlockwise), l, "--fp8-recipe blockwise is not modelled");
  CHECK(check_megatron_layout(with_fp8(kGpt, Fp8Recipe::kTensorwise), l, 8).ok());
  // Transformer Engine's shapes: rows a multiple of 8, widths of 16.
  GptModel odd = with_fp8(kGpt);
  odd.sequence = 2044;  // 2044 tokens, 511 a rank with sequence parallelism
  refused(odd, l, "b s / c");
  MegatronLayout sp = l;
  sp.sequence_parallel = true;
  odd.sequence = 2056;  // 2056 tokens, 514 a rank
  CHECK(check_megatron_layout(odd, l, 8).ok());
  refused(odd, sp, "is 514, not a multiple of 8");
  GptModel narrow = with_fp8(kGpt);
  narrow.ffn_hidden = 10000;  // 2500 a rank
  refused(narrow, l, "--ffn-hidden-size / t is 2500, not a multiple of 16");
}

TEST_CASE(
    "fp8: --first-last-layers-bf16 keeps the first and last blocks in bf16, --fp8-param-gather the weights "
    "in FP8",
    "[megatron][fp8]") {
  GptModel model = with_fp8(kGpt, Fp8Recipe::kTensorwise);
  model.bf16_first_blocks = 1;
  model.bf16_last_blocks = 2;
  CHECK_FALSE(model.fp8_block(0));
  CHECK(model.fp8_block(1));
  CHECK(model.fp8_block(29));
  CHECK_FALSE(model.fp8_block(30));
  CHECK_FALSE(model.fp8_block(31));
  CHECK_FALSE(kGpt.fp8_block(5));
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  MegatronLayout l = megatron_layout(2, 4, 1, 4, 32);
  l.sequence_parallel = true;
  l.bf16 = true;
  l.distributed_optimizer = true;
  auto mixed = predict_megatron(model, l, topology, false);
  auto all_fp8 = predict_megatron(with_fp8(kGpt, Fp8Recipe::kTensorwise), l, topology, false);
  auto plain = predict_megatron(kGpt, l, topology, false);
  REQUIRE(mixed.ok());
  REQUIRE(all_fp8.ok());
  REQUIRE(plain.ok());
  // Profile layers: the embedding, then block i at i + 1.
  const auto& layers = mixed->profile.profile.layers;
  CHECK(layers[1].forward.value == plain->profile.profile.layers[1].forward.value);
  CHECK(layers[2].forward.value == all_fp8->profile.profile.layers[2].forward.value);
  CHECK(layers[31].backward.value == plain->profile.profile.layers[31].backward.value);
  CHECK(layers[32].backward.value == plain->profile.profile.layers[32].backward.value);
  CHECK(layers[1].description.find("FP8") == std::string::npos);
  CHECK(layers[2].description.find("FP8 linears (hybrid, tensorwise scaling)") != std::string::npos);
  // The FP8 weight cache only for the FP8 blocks: rank 0 holds blocks 0-7,
  // one of them in bf16; rank 3 blocks 24-31, two.
  const double h = 2560, block = (12 * h * h + 13 * h) / 2;
  const auto cache = [&](int rank) {
    return (mixed->memory.ranks[rank].weights_and_optimizer - plain->memory.ranks[rank].weights_and_optimizer).value;
  };
  CHECK(cache(0) == Approx(7 * block * 2).epsilon(1e-9));
  CHECK(cache(3) == Approx(6 * block * 2).epsilon(1e-9));
  // With FP8 parameters the FP8 weights and their transposes take the bf16
  // weights' place: no more than bf16; only the transposes are made each
  // iteration, 2 bytes a weight.
  model.fp8_param_gather = true;
  auto gathered = predict_megatron(model, l, topology, false);
  REQUIRE(gathered.ok());
  for (int rank = 0; rank < 4; ++rank)
    CHECK(gathered->memory.ranks[rank].weights_and_optimizer.value ==
          Approx(plain->memory.ranks[rank].weights_and_optimizer.value).epsilon(1e-12));
  const GpuModel gpu = h100();
  CHECK((gathered->profile.profile.layers[2].optimizer - plain->profile.profile.layers[2].optimizer).value ==
        Approx(gpu.memory_bound(block * 2).value));
  // The checks name the flags.
  auto refused = [&](const GptModel& m, const MegatronLayout& layout, const std::string& part) {
    const Status status = check_megatron_layout(m, layout, 256);
    REQUIRE(!status.ok());
    INFO(status.error().message);
    CHECK(status.error().message.find(part) != std::string::npos);
  };
  MegatronLayout no_distributed = l;
  no_distributed.distributed_optimizer = false;
  refused(model, no_distributed, "--fp8-param-gather needs --use-distributed-optimizer");
  GptModel delayed = model;
  delayed.fp8_recipe = Fp8Recipe::kDelayed;
  refused(delayed, l, "--first-last-layers-bf16 needs --fp8-recipe tensorwise");
  GptModel too_many = model;
  too_many.bf16_last_blocks = 9;  // a stage holds 32 / 4 = 8
  refused(too_many, l, "--num-layers-at-end-in-bf16 9 is more than the 8 layers of a pipeline stage");
  GptModel without = model;
  without.fp8 = Fp8Format::kNone;
  without.fp8_recipe = Fp8Recipe::kDelayed;
  refused(without, l, "--fp8-param-gather needs --fp8-format");
  without.fp8_param_gather = false;
  refused(without, l, "--first-last-layers-bf16 needs --fp8-format");
}

TEST_CASE("fp8: the plan file's fp8 and fp8_recipe round-trip", "[megatron][fp8]") {
  MegatronLayout l = megatron_layout(4, 2, 1, 1, 4);
  const GptModel model = with_fp8(kGpt, Fp8Recipe::kTensorwise);
  const nlohmann::json arguments = megatron_arguments(model, l);
  CHECK(arguments["fp8"] == "hybrid");
  CHECK(arguments["fp8_recipe"] == "tensorwise");
  auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(back->model.fp8 == Fp8Format::kHybrid);
  CHECK(back->model.fp8_recipe == Fp8Recipe::kTensorwise);
  CHECK(!arguments.contains("fp8_param_gather"));
  CHECK(!arguments.contains("first_last_layers_bf16"));
  GptModel recipe = model;
  recipe.fp8_param_gather = true;
  recipe.bf16_first_blocks = 2;
  recipe.bf16_last_blocks = 1;
  const nlohmann::json written = megatron_arguments(recipe, l);
  CHECK(written["fp8_param_gather"] == true);
  CHECK(written["first_last_layers_bf16"] == true);
  CHECK(written["num_layers_at_start_in_bf16"] == 2);
  auto read = megatron_from_arguments(written, "plan.json: megatron");
  REQUIRE(read.ok());
  CHECK(read->model.fp8_param_gather);
  CHECK(read->model.bf16_first_blocks == 2);
  CHECK(read->model.bf16_last_blocks == 1);
  nlohmann::json counts_alone = written;
  counts_alone.erase("first_last_layers_bf16");
  auto alone = megatron_from_arguments(counts_alone, "plan.json: megatron");
  REQUIRE(!alone.ok());
  CHECK(alone.error().message.find("needs first_last_layers_bf16 true") != std::string::npos);
  // Without FP8 neither key is written; a null fp8 reads as none.
  CHECK(!megatron_arguments(kGpt, l).contains("fp8"));
  nlohmann::json none = arguments;
  none["fp8"] = nullptr;
  none.erase("fp8_recipe");
  auto plain = megatron_from_arguments(none, "plan.json: megatron");
  REQUIRE(plain.ok());
  CHECK(plain->model.fp8 == Fp8Format::kNone);
  nlohmann::json bad = arguments;
  bad["fp8"] = "fp4";
  auto refused = megatron_from_arguments(bad, "plan.json: megatron");
  REQUIRE(!refused.ok());
  CHECK(refused.error().message.find("fp8") != std::string::npos);
}

}  // namespace
}  // namespace baton
