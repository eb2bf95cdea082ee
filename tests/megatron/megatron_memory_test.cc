// Memory of a Megatron layout (sim/megatron_sim.h): Korthikanti et al.'s
// activation memory per layer, the bytes per parameter, and the microbatches
// in flight counted from the schedule's Program.
// Korthikanti, Casper, Lym, McAfee, Andersch, Shoeybi, Catanzaro, "Reducing
// Activation Recomputation in Large Transformer Models", MLSys 2023
// (arXiv 2205.05198), section 4, equations 1-6 and Table 2.
#include "tests/catch_compat.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"

namespace baton {
namespace {

// The 22B model of Korthikanti et al., Table 3.
const GptModel k22B{48, 6144, 64, 2048, 51200};

MegatronLayout at(int t, Recompute recompute, bool sequence_parallel, int b = 4) {
  MegatronLayout l = megatron_layout(t, 1, 1, b, b);
  l.recompute = recompute;
  l.sequence_parallel = sequence_parallel;
  return l;
}

TEST_CASE("megatron memory: activations per layer as Korthikanti et al. equations 1-6", "[megatron][memory]") {
  const double s = 2048, b = 4, h = 6144, a = 64;
  const double sbh = s * b * h;
  // Eq. 1: no parallelism, s b h (34 + 5 a s / h).
  CHECK(megatron_layer_activation_bytes(k22B, at(1, Recompute::kNone, false)) == Approx(sbh * (34 + 5 * a * s / h)));
  // Eq. 2: tensor parallelism, s b h (10 + 24 / t + 5 a s / (h t)).
  CHECK(megatron_layer_activation_bytes(k22B, at(8, Recompute::kNone, false)) ==
        Approx(sbh * (10 + 24.0 / 8 + 5 * a * s / (h * 8))));
  // Eq. 4: with sequence parallelism, s b h / t (34 + 5 a s / h).
  CHECK(megatron_layer_activation_bytes(k22B, at(8, Recompute::kNone, true)) == Approx(sbh / 8 * (34 + 5 * a * s / h)));
  // Eq. 6: selective recomputation with sequence parallelism, 34 s b h / t.
  CHECK(megatron_layer_activation_bytes(k22B, at(8, Recompute::kSelective, true)) == Approx(34 * sbh / 8));
  // Selective without sequence parallelism: s b h (10 + 24 / t).
  CHECK(megatron_layer_activation_bytes(k22B, at(8, Recompute::kSelective, false)) == Approx(sbh * (10 + 24.0 / 8)));
  // Full recomputation keeps the layer's input, 2 s b h (split by t with sequence parallelism).
  CHECK(megatron_layer_activation_bytes(k22B, at(8, Recompute::kFull, false)) == Approx(2 * sbh));
  CHECK(megatron_layer_activation_bytes(k22B, at(8, Recompute::kFull, true)) == Approx(2 * sbh / 8));
}

MegatronMemory memory_of(const GptModel& model, const MegatronLayout& layout) {
  const GpuModel gpu = *gpu_model("a100");
  const MegatronProfile profile = make_megatron_profile(model, layout, gpu, [](double) { return Seconds(0.0); });
  return megatron_memory(model, layout, megatron_plan(model, layout), profile, Bytes::from_gib(80));
}

TEST_CASE("megatron memory: 1F1B holds p - r microbatches on rank r", "[megatron][memory]") {
  MegatronLayout l = at(8, Recompute::kSelective, true, 1);
  l.pipeline = 4;
  l.global_batch = 16;
  const MegatronMemory memory = memory_of(k22B, l);
  REQUIRE(memory.ranks.size() == 4);
  const double per_layer = megatron_layer_activation_bytes(k22B, l);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(memory.ranks[r].inflight_microbatches == 4 - r);
    // 12 blocks per rank; the last rank adds one microbatch's fp32 logits twice.
    const double logits = r == 3 ? 2048.0 * 1 * 51200 / 8 * 4 * 2 : 0.0;
    CHECK(double(memory.ranks[r].activations.value) == Approx(12 * per_layer * (4 - r) + logits).epsilon(1e-9));
  }
}

// The 22B model with full recomputation on 4 pipeline stages of 12 blocks, t
// 8, micro-batch 1, 16 microbatches, in bytes: s b h, one block's activations
// without recomputation, s b h (10 + 24 / t + 5 a s / (h t)) (Korthikanti et
// al., eq. 2), and the last rank's fp32 logits twice (s b V / t x 4 x 2).
struct FullOnFourStages {
  double sbh = 2048.0 * 1 * 6144;
  double none = sbh * (10 + 24.0 / 8 + 5.0 * 64 * 2048 / (6144.0 * 8));
  double logits = 2048.0 * 1 * 51200 / 8 * 4 * 2;
  MegatronLayout layout = [] {
    MegatronLayout l = at(8, Recompute::kFull, false, 1);
    l.pipeline = 4;
    l.global_batch = 16;
    return l;
  }();
};

TEST_CASE("megatron memory: full recomputation in groups of N blocks keeps each group's input and recomputes N at once",
          "[megatron][memory]") {
  // Megatron-core's --recompute-method uniform --recompute-num-layers N: per
  // microbatch 2 s b h for every N blocks; during a backward the group's N
  // blocks' activations without recomputation each.
  const FullOnFourStages x;
  const double sbh = x.sbh, none = x.none, logits = x.logits;
  for (const int n : {1, 3, 4}) {
    CAPTURE(n);
    MegatronLayout l = x.layout;
    l.recompute_layers = n;
    REQUIRE(check_megatron_layout(k22B, l, 32).ok());
    const MegatronMemory memory = memory_of(k22B, l);
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r);
      // 12 blocks a rank, 4 - r microbatches in flight on rank r.
      CHECK(double(memory.ranks[r].activations.value) ==
            Approx(12.0 / n * 2 * sbh * (4 - r) + n * none + (r == 3 ? logits : 0.0)).epsilon(1e-9));
    }
  }
  MegatronLayout l = x.layout;
  l.recompute_layers = 5;  // 12 blocks a stage
  const Status uneven = check_megatron_layout(k22B, l, 32);
  REQUIRE_FALSE(uneven.ok());
  CHECK(uneven.error().message.find("--recompute-num-layers 5 does not divide the 12 blocks") != std::string::npos);
  l.recompute_layers = 2;
  l.recompute = Recompute::kSelective;
  const Status selective = check_megatron_layout(k22B, l, 32);
  REQUIRE_FALSE(selective.ok());
  CHECK(selective.error().message == "--recompute-num-layers goes with --recompute-granularity full");
  // The plan file's arguments carry N > 1 and read it back.
  l.recompute = Recompute::kFull;
  const nlohmann::json arguments = megatron_arguments(k22B, l);
  CHECK(arguments["recompute_method"] == "uniform");
  CHECK(arguments["recompute_num_layers"] == 2);
  const auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.recompute_layers == 2);
  l.recompute_layers = 1;
  CHECK_FALSE(megatron_arguments(k22B, l).contains("recompute_num_layers"));
}

TEST_CASE("megatron memory: the block method recomputes the first N blocks of each chunk and keeps the rest whole",
          "[megatron][memory]") {
  // Megatron-core's --recompute-method block --recompute-num-layers N: per
  // microbatch a chunk's first N blocks keep their input, 2 s b h, and its
  // other blocks every activation; one block's activations are the
  // backward's working set.
  const FullOnFourStages x;
  const double sbh = x.sbh, none = x.none, logits = x.logits;
  MegatronLayout l = x.layout;
  l.recompute_block = true;
  l.recompute_layers = 5;
  REQUIRE(check_megatron_layout(k22B, l, 32).ok());
  const MegatronMemory memory = memory_of(k22B, l);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(double(memory.ranks[r].activations.value) ==
          Approx((5 * 2 * sbh + 7 * none) * (4 - r) + none + (r == 3 ? logits : 0.0)).epsilon(1e-9));
  }
  // The first 5 blocks of each stage of 12 recompute their forward; the others do not.
  const GpuModel gpu = *gpu_model("a100");
  const MegatronProfile profile = make_megatron_profile(k22B, l, gpu, [](double) { return Seconds(0.0); });
  for (int block = 0; block < 48; ++block) {
    CAPTURE(block);
    CHECK((profile.times[static_cast<size_t>(block) + 1].recompute.value > 0.0) == (block % 12 < 5));
  }
  // N = the stage's 12 blocks is every block recomputed: full recomputation's memory.
  l.recompute_layers = 12;
  MegatronLayout every = l;
  every.recompute_block = false;
  every.recompute_layers = 1;
  CHECK(memory_of(k22B, l).ranks[0].activations.value == Approx(memory_of(k22B, every).ranks[0].activations.value));
  l.recompute_layers = 13;
  const Status over = check_megatron_layout(k22B, l, 32);
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().message.find("must be at most the 12 layers of a pipeline rank") != std::string::npos);
  l.recompute_layers = 2;
  l.zero_bubble = 1;
  CHECK_FALSE(check_megatron_layout(k22B, l, 32).ok());
}

TEST_CASE(
    "megatron memory: 16 bytes per parameter in fp16, 18 in bf16 (16 reduced in bf16), 4 + 12 / d with the "
    "distributed optimizer",
    "[megatron][memory]") {
  MegatronLayout l = at(8, Recompute::kFull, false, 1);
  l.pipeline = 2;
  l.data = 4;
  l.global_batch = 8;
  const GpuModel gpu = *gpu_model("a100");
  const MegatronProfile profile = make_megatron_profile(k22B, l, gpu, [](double) { return Seconds(0.0); });
  // Rank 1: 24 blocks, the head's final LayerNorm and its copy of the word
  // embedding (V / t x h: with p > 1 the last stage holds one), for one of 8
  // tensor-parallel ranks.
  const double h = 6144;
  const double parameters = 24 * (12 * h * h + 13 * h) / 8 + 2 * h + 51200.0 / 8 * h;
  CHECK(double(memory_of(k22B, l).ranks[1].weights_and_optimizer.value) == Approx(16 * parameters));
  l.bf16 = true;
  CHECK(double(memory_of(k22B, l).ranks[1].weights_and_optimizer.value) == Approx(18 * parameters));
  // --grad-reduce-in-bf16: the gradient buffers in bf16, 2 bytes, as in fp16.
  l.grad_reduce_in_bf16 = true;
  CHECK(double(memory_of(k22B, l).ranks[1].weights_and_optimizer.value) == Approx(16 * parameters));
  l.grad_reduce_in_bf16 = false;
  l.bf16 = false;
  l.distributed_optimizer = true;
  CHECK(double(memory_of(k22B, l).ranks[1].weights_and_optimizer.value) == Approx((4 + 12.0 / 4) * parameters));
}

TEST_CASE("megatron memory: interleaving holds more microbatches of smaller chunks", "[megatron][memory]") {
  MegatronLayout l = at(8, Recompute::kSelective, true, 1);
  l.pipeline = 4;
  l.global_batch = 16;
  const MegatronMemory plain = memory_of(k22B, l);
  l.layers_per_virtual_stage = 3;  // 4 chunks of 3 blocks per rank
  const MegatronMemory interleaved = memory_of(k22B, l);
  // Megatron's interleaved schedule warms up with (p - r - 1) x 2 + (v - 1) x p chunks before
  // its first backward (Narayanan et al. 2021): rank 0 holds 2 (p - 1) + (v - 1) p + 1 = 19.
  CHECK(interleaved.ranks[0].inflight_microbatches == 2 * 3 + 3 * 4 + 1);
  CHECK(interleaved.ranks[0].activations > plain.ranks[0].activations);
}

}  // namespace
}  // namespace baton
