// --pipeline-model-parallel-layout (sim/megatron.h's parse_pipeline_layout,
// check_pipeline_layout and MegatronLayout::layout_chunks; Megatron-core's
// pipeline_parallel_layer_layout.py, core 0.13 on): the strings as Megatron
// reads them, its rules and baton's refusals, the chunks in the plan, and
// the same prediction as the flags that give the same split.
#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/megatron_sim.h"

namespace baton {
namespace {

std::vector<std::string> chunks_of(std::string_view text) {
  Result<std::vector<std::string>> chunks = parse_pipeline_layout(text);
  INFO(text);
  REQUIRE(chunks.ok());
  return *chunks;
}

std::string parse_error(std::string_view text) {
  Result<std::vector<std::string>> chunks = parse_pipeline_layout(text);
  REQUIRE_FALSE(chunks.ok());
  return chunks.error().message;
}

TEST_CASE("pipeline layout: strings read as Megatron-core reads them", "[megatron][pipeline-layout]") {
  // Megatron-LM's documentation, "Custom Pipeline Model Parallel Layout":
  // DeepSeek-V3's 61 blocks and one depth on p 16 with two chunks each.
  const std::vector<std::string> v3 = chunks_of("Et*3|(tt|)*29,m|L");
  REQUIRE(v3.size() == 32);
  CHECK(v3.front() == "Ettt");
  CHECK(v3[1] == "tt");
  CHECK(v3[29] == "tt");
  CHECK(v3[30] == "m");
  CHECK(v3[31] == "L");
  // Megatron-core's tests/unit_tests/pipeline_parallel/test_pipeline_layout.py.
  CHECK(chunks_of("E|t*3|(t|)*5mL") == std::vector<std::string>{"E", "ttt", "t", "t", "t", "t", "t", "mL"});
  // The examples in parse_str_to_list's comments: a group may open or
  // close a stage.
  CHECK(chunks_of("(|tt)*2,tL") == std::vector<std::string>{"", "tt", "tttL"});
  CHECK(chunks_of("Et(t|tt)*2L") == std::vector<std::string>{"Ett", "ttt", "ttL"});
}

TEST_CASE("pipeline layout: text it cannot read is refused, naming the flag",
          "[megatron][pipeline-layout][bad-input]") {
  CHECK(parse_error("Et|x|L") ==
        "--pipeline-model-parallel-layout \"Et|x|L\": 'x' is not a layer: E (embedding), t (transformer block), m "
        "(multi-token prediction depth), L (loss), | between stages");
  CHECK(parse_error("E(tt|*2L") ==
        "--pipeline-model-parallel-layout \"E(tt|*2L\": a \"(\" without its \")\" (groups do not nest)");
  CHECK(parse_error("E(tt|)L") ==
        "--pipeline-model-parallel-layout \"E(tt|)L\": a group \"(...)\" needs a count, \"(...)*n\"");
  CHECK(parse_error("E*|tL") ==
        "--pipeline-model-parallel-layout \"E*|tL\": \"*\" goes after a letter or a group, with a count");
  CHECK(parse_error("Et*99999999999|L").find("more than 262144 letters") != std::string::npos);
}

// A Llama-style decoder of 8 blocks, h 2048, with D depths.
GptModel eight_blocks(int64_t depths) {
  GptModel m = testing::llama(8, 2048, 16, 4, 5632, 32000);
  m.sequence = 2048;
  m.mtp_layers = depths;
  return m;
}

MegatronLayout with_layout(int p, std::string_view text) {
  MegatronLayout l = megatron_layout(1, p, 1, 1, 8);
  l.pipeline_layout = std::string(text);
  l.layout_chunks = chunks_of(text);
  return l;
}

std::string layout_error(const GptModel& model, const MegatronLayout& layout) {
  const Status status = check_megatron_layout(model, layout, 64);
  REQUIRE_FALSE(status.ok());
  return status.error().message;
}

TEST_CASE("pipeline layout: Megatron-core's rules and baton's refusals", "[megatron][pipeline-layout][bad-input]") {
  const GptModel m = eight_blocks(1);
  CHECK(check_megatron_layout(m, with_layout(2, "Etttt|tttt,mL"), 64).ok());
  CHECK(layout_error(m, with_layout(1, "Etttt|ttttmL")) ==
        "--pipeline-model-parallel-layout \"Etttt|ttttmL\": 2 stages on --pipeline-model-parallel-size 1: "
        "interleaving needs p of at least 2");
  CHECK(layout_error(m, with_layout(2, "Etttt|tttt|mL")) ==
        "--pipeline-model-parallel-layout \"Etttt|tttt|mL\": 3 stages, not a multiple of "
        "--pipeline-model-parallel-size 2");
  CHECK(layout_error(m, with_layout(2, "Ettttttt||tmL|")).find("stage 1 is empty") != std::string::npos);
  CHECK(layout_error(m, with_layout(2, "tEttt|ttttmL")).find("the first layer must be the embedding, E") !=
        std::string::npos);
  CHECK(layout_error(m, with_layout(2, "Etttt|ttLtm")).find("the last layer must be the loss, L") != std::string::npos);
  CHECK(layout_error(m, with_layout(2, "Ettt|ttttmL")).find("7 transformer blocks (t) for --num-layers 8") !=
        std::string::npos);
  CHECK(layout_error(m, with_layout(2, "Etttt|ttttL"))
            .find("0 multi-token prediction depths (m) for --mtp-num-layers 1") != std::string::npos);
  CHECK(layout_error(m, with_layout(2, "Etttt|tttmtL"))
            .find("the transformer blocks (t) go before the multi-token prediction depths (m)") != std::string::npos);
  GptModel two = eight_blocks(2);
  CHECK(layout_error(two, with_layout(3, "Etttt|ttttm|mL")) ==
        "--pipeline-model-parallel-layout \"Etttt|ttttm|mL\": the multi-token prediction depths (m) go in one stage "
        "(Megatron-core's restriction)");
  MegatronLayout both = with_layout(2, "Etttt|ttttmL");
  both.last_stage_layers = 4;
  CHECK(layout_error(m, both) ==
        "--pipeline-model-parallel-layout sets every chunk's layers: drop --decoder-last-pipeline-num-layers");
  MegatronLayout zero_bubble = with_layout(2, "Etttt|ttttmL");
  zero_bubble.zero_bubble = 1;
  CHECK(layout_error(m, zero_bubble).find("not with the zero-bubble or V-shaped schedules") != std::string::npos);
  // Interleaved chunks need the microbatches in multiples of p.
  MegatronLayout few = with_layout(2, "Ett|tt|tt|ttmL");
  few.global_batch = 3;
  CHECK(layout_error(m, few).find("not a multiple of --pipeline-model-parallel-size 2") != std::string::npos);
}

TEST_CASE("pipeline layout: the chunks' layers in the plan, the depths where it puts them",
          "[megatron][pipeline-layout]") {
  // Profile layers: the embedding 0, blocks 1 to 8, mtp.0 9, the head 10.
  const GptModel m = eight_blocks(1);
  const MegatronLayout l = with_layout(2, "Ettt|ttt|tt,m|L");
  REQUIRE(check_megatron_layout(m, l, 64).ok());
  CHECK(l.virtual_stages(m) == 2);
  CHECK(l.stage_layers(m) == std::vector<int>{3, 3, 2, 0});
  CHECK(l.mtp_stage(m) == 2);
  const Plan plan = megatron_plan(m, l);
  REQUIRE(plan.num_stages() == 4);
  CHECK(plan.schedule == Schedule::kInterleaved1F1B);
  const std::pair<int, int> ranges[] = {{0, 4}, {4, 7}, {7, 10}, {10, 11}};
  for (int s = 0; s < 4; ++s) {
    CAPTURE(s);
    CHECK(plan.stages[s].layers.begin == ranges[s].first);
    CHECK(plan.stages[s].layers.end == ranges[s].second);
    CHECK(plan.rank_of(s) == s % 2);
  }
  // The depth on rank 0 beside the embedding: no copy of the word embedding
  // there; the output layer's own weights (untied) on rank 1.
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const CollectiveTime free = [](double) { return Seconds(0.0); };
  const MegatronProfile profile = make_megatron_profile(m, l, gpu, free, free);
  CHECK(profile.profile.layers[9].name == "mtp.0");
  CHECK(profile.times[9].parameters == Approx(gpt_mtp_parameters(m)).epsilon(1e-12));
  // In the last chunk, on rank 1 with the untied output layer: a copy there.
  const MegatronLayout apart = with_layout(2, "Ettt|ttt|tt|m,L");
  REQUIRE(check_megatron_layout(m, apart, 64).ok());
  const MegatronProfile copied = make_megatron_profile(m, apart, gpu, free, free);
  CHECK(copied.times[9].parameters == Approx(gpt_mtp_parameters(m) + 32000.0 * 2048).epsilon(1e-12));
}

TEST_CASE("pipeline layout: the same split as the other flags predicts the same", "[megatron][pipeline-layout]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  auto iteration = [&](const GptModel& m, const MegatronLayout& l) {
    const Result<MegatronPrediction> p = predict_megatron(m, l, topology, false);
    REQUIRE(p.ok());
    return p->iteration_time.value;
  };
  const GptModel m = eight_blocks(0);
  // Interleaved, two blocks a chunk.
  MegatronLayout interleaved = megatron_layout(1, 2, 1, 1, 8);
  interleaved.layers_per_virtual_stage = 2;
  CHECK(iteration(m, with_layout(2, "Ett|tt|tt|ttL")) == iteration(m, interleaved));
  // Uneven: 9 blocks on four stages, 1 on the first and 2 on the last.
  GptModel nine = m;
  nine.layers = 9;
  MegatronLayout uneven = megatron_layout(1, 4, 1, 1, 8);
  uneven.first_stage_layers = 1;
  uneven.last_stage_layers = 2;
  CHECK(iteration(nine, with_layout(4, "Et|ttt|ttt|ttL")) == iteration(nine, uneven));
  // And with a depth on the last stage.
  nine.mtp_layers = 1;
  CHECK(iteration(nine, with_layout(4, "Et|ttt|ttt|ttmL")) == iteration(nine, uneven));
}

}  // namespace
}  // namespace baton
