// Megatron layouts on the V-shaped schedules (MegatronLayout::v_schedule):
// ZB-V and DualPipeV place 2p chunks down the ranks and back, keep one copy of
// the word embedding (the first and the last chunk share rank 0), and are
// refused where they cannot run, naming the flag.
#include <string>
#include <vector>

#include "tests/catch_compat.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/simulator.h"
#include "tests/megatron/megatron_test_support.h"

namespace baton {
namespace {

using testing::megatron_layout;
using testing::shipped_topology;

const GptModel kModel{24, 2048, 16, 2048, 50257};

MegatronPrediction predicted(const MegatronLayout& layout) {
  auto prediction = predict_megatron(kModel, layout, shipped_topology("a100_vtrain.json"), false);
  REQUIRE(prediction.ok());
  return std::move(*prediction);
}

TEST_CASE("V schedules: chunk c of 2p on rank c, then back up: rank 2p - 1 - c", "[megatron][v-schedule]") {
  for (VSchedule v : {VSchedule::kZbV, VSchedule::kDualPipeV}) {
    MegatronLayout layout = megatron_layout(1, 4, 2, 1, 32);
    layout.v_schedule = v;
    const Plan plan = megatron_plan(kModel, layout);
    INFO(v_schedule_name(v));
    CHECK(plan.schedule == (v == VSchedule::kZbV ? Schedule::kZbV : Schedule::kDualPipeV));
    CHECK(plan.virtual_stages == 2);
    REQUIRE(plan.num_stages() == 8);
    const int expected_rank[] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int s = 0; s < 8; ++s) {
      CHECK(plan.rank_of(s) == expected_rank[s]);
      CHECK(plan.stages[s].replicas == 2);
      // L / (2p) = 3 blocks each; the embedding (layer 0) before the first,
      // the head (layer L + 1) after the last.
      CHECK(plan.stages[s].layers.size() == 3 + (s == 0 ? 1 : 0) + (s == 7 ? 1 : 0));
    }
    CHECK(plan.stages.front().layers.begin == 0);
    CHECK(plan.stages.back().layers.end == kModel.layers + 2);
  }
}

TEST_CASE("V schedules: one copy of the word embedding, on rank 0, and no tied all-reduce", "[megatron][v-schedule]") {
  // t 1, fp16, no distributed optimizer: 16 bytes per parameter (weights 2,
  // gradients 2, Adam and master weights 12). A block has 12 h^2 + 13 h
  // parameters; the embedding V h + s h, the final LayerNorm 2 h.
  MegatronLayout layout = megatron_layout(1, 4, 1, 1, 16);
  const double h = static_cast<double>(kModel.hidden);
  const double block = 12.0 * h * h + 13.0 * h;
  const double embedding = static_cast<double>(padded_vocab(kModel, 1)) * h + static_cast<double>(kModel.sequence) * h;
  const double per_rank_blocks = static_cast<double>(kModel.layers) / layout.pipeline * block;
  const MegatronPrediction plain = predicted(layout);
  layout.v_schedule = VSchedule::kZbV;
  const MegatronPrediction zbv = predicted(layout);
  for (int rank = 1; rank < 4; ++rank)
    CHECK(static_cast<double>(zbv.memory.ranks[rank].weights_and_optimizer.value) ==
          Approx(16.0 * per_rank_blocks).epsilon(1e-9));
  CHECK(static_cast<double>(zbv.memory.ranks[0].weights_and_optimizer.value) ==
        Approx(16.0 * (per_rank_blocks + embedding + 2.0 * h)).epsilon(1e-9));
  // 1F1B keeps a copy of the word embedding on the last rank and all-reduces
  // the two copies' gradients; the V has none to keep equal.
  CHECK(static_cast<double>(plain.memory.ranks[3].weights_and_optimizer.value) >
        16.0 * (per_rank_blocks + static_cast<double>(padded_vocab(kModel, 1)) * h) * (1.0 - 1e-9));
  CHECK(plain.profile.times.front().embedding_allreduce.value > 0.0);
  CHECK(zbv.profile.times.front().embedding_allreduce.value == 0.0);
  CHECK(zbv.profile.times.back().embedding_allreduce.value == 0.0);
}

TEST_CASE("V schedules: ZB-V fills 1F1B's bubble with the same work, every rank holding 2p chunk passes at most",
          "[megatron][v-schedule]") {
  MegatronLayout layout = megatron_layout(2, 4, 1, 1, 16);
  layout.recompute = Recompute::kSelective;
  const MegatronPrediction plain = predicted(layout);
  layout.v_schedule = VSchedule::kZbV;
  const MegatronPrediction zbv = predicted(layout);
  layout.v_schedule = VSchedule::kDualPipeV;
  const MegatronPrediction dualpipev = predicted(layout);
  CHECK(zbv.iteration_time < plain.iteration_time);
  CHECK(dualpipev.iteration_time < plain.iteration_time);
  CHECK(zbv.breakdown.bubble < plain.breakdown.bubble);
  // The same work, placed otherwise: rank 0 of the V runs the embedding and
  // the head, which 1F1B's first and last ranks share.
  const auto total_compute = [](const MegatronPrediction& p) {
    double sum = 0.0;
    for (int rank = 0; rank < p.plan.num_ranks(); ++rank)
      sum += megatron_rank_work(p.profile, p.plan, rank).compute.value;
    return sum;
  };
  CHECK(total_compute(zbv) == Approx(total_compute(plain)).epsilon(1e-12));
  CHECK(megatron_rank_work(zbv.profile, zbv.plan, 0).compute.value ==
        Approx((megatron_rank_work(plain.profile, plain.plan, 0).compute +
                megatron_rank_work(plain.profile, plain.plan, 3).compute -
                megatron_rank_work(plain.profile, plain.plan, 1).compute)
                   .value)
            .epsilon(1e-12));
  // Qi et al., section 6: ZB-V's peak activation memory is 1F1B's, p
  // microbatches of a whole stage: 2p passes of half-stage chunks in flight.
  for (const MegatronRankMemory& rank : zbv.memory.ranks) CHECK(rank.inflight_microbatches <= 2 * layout.pipeline);
  CHECK(zbv.memory.ranks[0].inflight_microbatches == 2 * layout.pipeline);
  // Where the time goes still adds up to the iteration.
  for (const MegatronPrediction* p : {&zbv, &dualpipev}) {
    const MegatronBreakdown& b = p->breakdown;
    const double busy = (b.compute + b.tensor_comm + b.recompute + b.host + b.data_allreduce + b.optimizer).value;
    CHECK(busy + b.bubble.value == Approx(p->iteration_time.value).epsilon(1e-12));
  }
}

TEST_CASE("V schedules: refused where a V cannot run, naming the flag", "[megatron][v-schedule][bad-input]") {
  const auto refused = [](const MegatronLayout& layout, const GptModel& model = kModel) {
    const auto checked = check_megatron_layout(model, layout, 64);
    REQUIRE_FALSE(checked.ok());
    return checked.error().message;
  };
  MegatronLayout layout = megatron_layout(1, 1, 1, 1, 16);
  layout.v_schedule = VSchedule::kZbV;
  CHECK(refused(layout).find("--zero-bubble-v-schedule needs --pipeline-model-parallel-size of at least 2") !=
        std::string::npos);
  layout = megatron_layout(1, 4, 1, 1, 16);
  layout.v_schedule = VSchedule::kDualPipeV;
  layout.layers_per_virtual_stage = 3;
  CHECK(refused(layout).find("--dualpipev runs two chunks per GPU of its own") != std::string::npos);
  layout.layers_per_virtual_stage = 0;
  layout.zero_bubble = 1;
  CHECK(refused(layout).find("--dualpipev is a schedule of its own") != std::string::npos);
  layout.zero_bubble = 0;
  // 20 layers are 5 per stage of p = 4, but not 2p = 8 chunks.
  CHECK(refused(layout, GptModel{20, 2048, 16, 2048, 50257})
            .find("--dualpipev: --num-layers 20 is not divisible by 2 x --pipeline-model-parallel-size 4 = 8") !=
        std::string::npos);
  // 4 microbatches cannot fill a V of 8 chunks.
  layout.global_batch = 4;
  CHECK(refused(layout).find("gives 4 microbatches per data-parallel rank; the V needs at least 2 x "
                             "--pipeline-model-parallel-size = 8") != std::string::npos);
}

TEST_CASE("V schedules: a plan file's Megatron arguments keep the schedule", "[megatron][v-schedule]") {
  for (VSchedule v : {VSchedule::kNone, VSchedule::kZbV, VSchedule::kDualPipeV}) {
    MegatronLayout layout = megatron_layout(2, 4, 1, 1, 16);
    layout.v_schedule = v;
    const nlohmann::json arguments = megatron_arguments(kModel, layout);
    CHECK(arguments["zero_bubble_v_schedule"] == (v == VSchedule::kZbV));
    CHECK(arguments["dualpipev"] == (v == VSchedule::kDualPipeV));
    const auto back = megatron_from_arguments(arguments, "plan.json: megatron");
    REQUIRE(back.ok());
    CHECK(back->layout.v_schedule == v);
  }
  nlohmann::json both = megatron_arguments(kModel, megatron_layout(2, 4, 1, 1, 16));
  both["zero_bubble_v_schedule"] = true;
  both["dualpipev"] = true;
  const auto refused = megatron_from_arguments(both, "plan.json: megatron");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("dualpipev") != std::string::npos);
  // Plans written before the V schedules leave both keys out: 1F1B.
  nlohmann::json older = megatron_arguments(kModel, megatron_layout(2, 4, 1, 1, 16));
  older.erase("zero_bubble_v_schedule");
  older.erase("dualpipev");
  const auto read = megatron_from_arguments(older, "plan.json: megatron");
  REQUIRE(read.ok());
  CHECK(read->layout.v_schedule == VSchedule::kNone);
}

}  // namespace
}  // namespace baton
