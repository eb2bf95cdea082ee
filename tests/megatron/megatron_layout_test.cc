// Megatron's model and layout (sim/megatron.h): the padded vocabulary, the
// parameter and FLOP counts, and bad layouts refused with the flag named.
#include "tests/catch_compat.h"

#include <fmt/format.h>

#include "tests/megatron/megatron_test_support.h"

#include "sim/megatron.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/plan.h"

namespace baton {
namespace {

const GptModel kGpt3{96, 12288, 96, 2048, 50257};  // GPT-3 175B (Brown et al. 2020, Table 2.1)

MegatronLayout layout(int t, int p, int d, int b, int global) { return testing::megatron_layout(t, p, d, b, global); }

TEST_CASE("megatron: the vocabulary is padded to a multiple of 128 t", "[megatron]") {
  CHECK(padded_vocab(kGpt3, 1) == 50304);  // 393 x 128
  CHECK(padded_vocab(kGpt3, 8) == 51200);  // 50 x 1024
  CHECK(padded_vocab(GptModel{1, 128, 1, 1, 1024}, 8) == 1024);
}

TEST_CASE("megatron: parameters L (12 h^2 + 13 h) + V h + s h + 2 h, about 175B for GPT-3", "[megatron]") {
  const double h = 12288;
  const double expected = 96 * (12 * h * h + 13 * h) + 50304 * h + 2048 * h + 2 * h;
  CHECK(gpt_parameters(kGpt3, 1) == expected);
  CHECK(std::abs(gpt_parameters(kGpt3, 1) / 1e9 - 174.6) < 0.1);
}

// Narayanan et al. 2021, eq. 3: 96 B s L h^2 (1 + s / 6h + V / 16 L h) with
// full recomputation. Without it the layers count 3 passes, not 4, but the
// logit layer (never recomputed) keeps its 96 B s L h^2 V / (16 L h) = 6 B s h V.
TEST_CASE("megatron: model FLOPs 24 k B s L h^2 (1 + s / 6h) + 6 B s h V, k 4 with full recomputation, 3 without",
          "[megatron]") {
  MegatronLayout l = layout(8, 16, 8, 1, 1536);
  const double s = 2048, L = 96, h = 12288, V = 51200, B = 1536;
  const double layers = 24 * B * s * L * h * h * (1 + s / (6 * h));
  const double logits = 6 * B * s * h * V;
  CHECK(std::abs(megatron_model_flops(kGpt3, l) / (3 * layers + logits) - 1) < 1e-12);
  l.recompute = Recompute::kFull;
  const double published = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  CHECK(std::abs(megatron_model_flops(kGpt3, l) / published - 1) < 1e-12);
}

TEST_CASE("megatron: microbatches B / (b d) and chunks L / (p x layers per virtual stage)", "[megatron]") {
  MegatronLayout l = layout(8, 16, 8, 1, 1536);
  CHECK(l.microbatches() == 192);
  CHECK(l.gpus() == 1024);
  CHECK(l.virtual_stages(kGpt3) == 1);
  l.layers_per_virtual_stage = 3;
  CHECK(l.virtual_stages(kGpt3) == 2);
  CHECK(check_megatron_layout(kGpt3, l, 1024).ok());
}

void refused(const MegatronLayout& l, int devices, const std::vector<std::string>& parts, GptModel model = kGpt3) {
  const Status status = check_megatron_layout(model, l, devices);
  REQUIRE_FALSE(status.ok());
  for (const std::string& part : parts) {
    INFO(status.error().message);
    CHECK(status.error().message.find(part) != std::string::npos);
  }
}

TEST_CASE("megatron: bad layouts are refused naming the flag", "[megatron]") {
  refused(layout(5, 1, 1, 1, 8), 8, {"--num-attention-heads 96", "--tensor-model-parallel-size 5"});
  refused(layout(8, 7, 1, 1, 8), 1024, {"--num-layers 96", "--pipeline-model-parallel-size 7"});
  MegatronLayout v = layout(8, 16, 8, 1, 1536);
  v.layers_per_virtual_stage = 4;  // 6 layers per stage
  refused(v, 1024, {"--num-layers-per-virtual-pipeline-stage 4", "6 layers"});
  v.layers_per_virtual_stage = 6;  // one chunk: not interleaving
  refused(v, 1024, {"--num-layers-per-virtual-pipeline-stage 6", "at least two chunks"});
  refused(layout(8, 16, 8, 5, 1536), 1024, {"--micro-batch-size 5", "--global-batch-size 1536"});
  refused(layout(8, 16, 8, 1, 1537), 1024, {"--data-parallel-size 8", "--global-batch-size 1537"});
  refused(layout(8, 16, 16, 1, 1536), 1024, {"2048 GPUs", "has 1024"});
  MegatronLayout sp = layout(1, 16, 8, 1, 1536);
  sp.sequence_parallel = true;
  refused(sp, 1024, {"--sequence-parallel", "--tensor-model-parallel-size"});
  MegatronLayout interleaved = layout(8, 16, 8, 1, 1544);  // 193 microbatches, not a multiple of 16
  interleaved.layers_per_virtual_stage = 3;
  refused(interleaved, 1024, {"193 microbatches", "--pipeline-model-parallel-size 16"});
  refused(layout(1, 1, 1, 1, 8), 8, {"--hidden-size 100", "--num-attention-heads 3"}, GptModel{2, 100, 3, 16, 10});
}

TEST_CASE("megatron: dimensions beyond the bounds are refused, naming the flag and its bound", "[megatron]") {
  // Each bound, then one more: 2^16 layers, hidden 2^18, 2^20 tokens, a
  // vocabulary of 2^24, micro-batch 2^20 (sim/megatron.h).
  const GptModel largest{kMaxGptLayers, kMaxGptHidden, 64, kMaxGptSequence, kMaxGptVocab};
  MegatronLayout one = layout(1, 1, 1, 1, 1);
  CHECK(check_megatron_layout(largest, one, 1).ok());
  GptModel over = largest;
  over.layers += 1;
  refused(one, 1, {"--num-layers must be at most 65536, got 65537"}, over);
  over = largest;
  over.hidden *= 2;
  refused(one, 1, {"--hidden-size must be at most 262144, got 524288"}, over);
  over = largest;
  over.sequence += 1;
  refused(one, 1, {"--seq-length must be at most 1048576"}, over);
  over = largest;
  over.vocab += 1;
  refused(one, 1, {"--vocab-size must be at most 16777216"}, over);
  const int micro = static_cast<int>(kMaxGptMicroBatch) * 2;
  refused(layout(1, 1, 1, micro, micro), 1, {"--micro-batch-size must be at most 1048576"});
}

TEST_CASE("megatron: the largest model's memory counts in bytes without overflowing, and does not fit", "[megatron]") {
  // Its weights, gradients and optimizer state (16 bytes a parameter, about
  // 16 x 12 L h^2 = 8.6e17 bytes) count exactly; its activations without
  // recomputation (attention's scores alone a s^2 b = 2^18 x 2^40 bytes)
  // are held to Bytes::kMaxCounted. A cast of the double would be undefined.
  const GptModel largest{kMaxGptLayers, kMaxGptHidden, kMaxGptHidden, kMaxGptSequence, kMaxGptVocab};
  MegatronLayout l = layout(1, 1, 1, 1, 1);
  l.recompute = Recompute::kNone;
  auto p = predict_megatron(largest, l, testing::shipped_topology("a100_vtrain.json"), false);
  REQUIRE(p.ok());
  REQUIRE(p->memory.ranks.size() == 1);
  const MegatronRankMemory& rank = p->memory.ranks[0];
  const double parameters = gpt_parameters(largest, 1);
  CHECK(rank.weights_and_optimizer.value > 0);
  CHECK(static_cast<double>(rank.weights_and_optimizer.value) >= 16.0 * parameters * 0.99);
  CHECK(rank.activations.value == Bytes::kMaxCounted);
  CHECK(rank.peak == rank.weights_and_optimizer + rank.activations);
  CHECK_FALSE(p->memory.fits());
}

TEST_CASE("megatron: microbatches x pipeline chunks beyond kMaxMicrobatchStages are refused, naming the batch",
          "[megatron]") {
  // p 8, d 4, micro-batch 1: B / 4 microbatches per rank through 8 chunks.
  const int at_limit = static_cast<int>(kMaxMicrobatchStages / 8 * 4);
  CHECK(check_megatron_layout(kGpt3, layout(8, 8, 4, 1, at_limit), 256).ok());
  refused(layout(8, 8, 4, 1, at_limit + 4), 256,
          {fmt::format("--global-batch-size {}", at_limit + 4), "8 pipeline chunks"});
  MegatronLayout chunked = layout(8, 8, 4, 1, at_limit);  // 2 chunks per rank: twice the pairs
  chunked.layers_per_virtual_stage = 6;
  refused(chunked, 256, {"16 pipeline chunks"});
}

}  // namespace
}  // namespace baton

namespace baton {
namespace {

TEST_CASE("megatron layout: an uneven split gives the first and last stage their blocks, the rest an equal share",
          "[megatron]") {
  const GptModel model{94, 2048, 16, 2048, 50257};
  MegatronLayout l;
  l.pipeline = 8;
  l.global_batch = 8;
  CHECK_FALSE(check_megatron_layout(model, l, 64).ok());  // 94 = 8 x 11.75
  l.first_stage_layers = 11;
  l.last_stage_layers = 11;
  REQUIRE(check_megatron_layout(model, l, 64).ok());
  // 94 - 22 = 72 blocks over the 6 middle stages: 12 each.
  CHECK(l.stage_layers(model) == std::vector<int>{11, 12, 12, 12, 12, 12, 12, 11});
  const Plan plan = megatron_plan(model, l);
  REQUIRE(plan.num_stages() == 8);
  // Profile layer 0 is the embedding, 1..94 the blocks, 95 the output layer.
  CHECK(plan.stages.front().layers.begin == 0);
  CHECK(plan.stages.front().layers.end == 1 + 11);
  CHECK(plan.stages[1].layers.begin == 12);
  CHECK(plan.stages.back().layers.begin == 1 + 94 - 11);
  CHECK(plan.stages.back().layers.end == 96);
  l.first_stage_layers = 0;  // only the last given: 94 - 10 = 84 over 7 stages
  l.last_stage_layers = 10;
  REQUIRE(check_megatron_layout(model, l, 64).ok());
  CHECK(l.stage_layers(model) == std::vector<int>{12, 12, 12, 12, 12, 12, 12, 10});
  l.last_stage_layers = 11;  // 83 over 7: refused, naming both flags
  const auto refused = check_megatron_layout(model, l, 64);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("leave 83 of the 94 layers to the other 7 pipeline stages") != std::string::npos);
  l.last_stage_layers = 10;
  // A plan file keeps the split in Megatron-core's argument names.
  const auto back = megatron_from_arguments(megatron_arguments(model, l), "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.first_stage_layers == 0);
  CHECK(back->layout.last_stage_layers == 10);
  CHECK(megatron_arguments(model, l)["decoder_last_pipeline_num_layers"] == 10);
  l.layers_per_virtual_stage = 2;
  CHECK_FALSE(check_megatron_layout(model, l, 64).ok());
}

TEST_CASE("megatron layout: the account flags count the embedding and the loss as layers of the split", "[megatron]") {
  // Qi et al., ICLR 2024, Table 3: the 1.5B model, 22 layers on p = 8, "the
  // first and last stage hold one transformer layer fewer" = (22 + 2) / 8 = 3
  // counted layers per stage.
  const GptModel model{22, 2304, 24, 1024, 50257};
  MegatronLayout l;
  l.pipeline = 8;
  l.micro_batch = 6;
  l.global_batch = 6 * 24;
  CHECK_FALSE(check_megatron_layout(model, l, 8).ok());  // 22 = 8 x 2.75
  l.embedding_in_split = true;
  const auto one = check_megatron_layout(model, l, 8);  // 23 counted: still not divisible
  REQUIRE_FALSE(one.ok());
  CHECK(one.error().message.find("--account-for-embedding-in-pipeline-split counts 23 layers") != std::string::npos);
  l.loss_in_split = true;
  REQUIRE(check_megatron_layout(model, l, 8).ok());
  CHECK(l.split_layers(model) == 24);
  CHECK(l.stage_layers(model) == std::vector<int>{2, 3, 3, 3, 3, 3, 3, 2});
  // Interleaved with one counted layer per chunk: 24 chunks, v = 3; the first
  // chunk is the embedding alone and the last the output layer alone.
  l.layers_per_virtual_stage = 1;
  REQUIRE(check_megatron_layout(model, l, 8).ok());
  CHECK(l.virtual_stages(model) == 3);
  std::vector<int> chunks(24, 1);
  chunks.front() = chunks.back() = 0;
  CHECK(l.stage_layers(model) == chunks);
  const Plan plan = megatron_plan(model, l);
  REQUIRE(plan.num_stages() == 24);
  CHECK(plan.stages.front().layers.begin == 0);  // profile layer 0: the embedding
  CHECK(plan.stages.front().layers.end == 1);
  CHECK(plan.stages[1].layers.begin == 1);
  CHECK(plan.stages[1].layers.end == 2);
  CHECK(plan.stages.back().layers.begin == 23);  // 23: the output layer
  CHECK(plan.stages.back().layers.end == 24);
  // A plan file keeps the flags; one written without them reads as false.
  nlohmann::json arguments = megatron_arguments(model, l);
  CHECK(arguments["account_for_embedding_in_pipeline_split"] == true);
  const auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.embedding_in_split);
  CHECK(back->layout.loss_in_split);
  arguments.erase("account_for_embedding_in_pipeline_split");
  arguments.erase("account_for_loss_in_pipeline_split");
  const auto older = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(older.ok());
  CHECK_FALSE(older->layout.embedding_in_split);
  CHECK_FALSE(older->layout.loss_in_split);
  // Not with the decoder-first/last counts, which set the same blocks.
  l.layers_per_virtual_stage = 0;
  l.first_stage_layers = 2;
  const auto both = check_megatron_layout(model, l, 8);
  REQUIRE_FALSE(both.ok());
  CHECK(both.error().message.find("give one of them") != std::string::npos);
}

}  // namespace
}  // namespace baton
