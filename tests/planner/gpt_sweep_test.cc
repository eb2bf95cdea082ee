// GPT layout sweeps (planner/gpt_sweep.h): axis names and values, each point
// the simulator's or the planner's figure for its layout, shards that merge
// into the unsharded table, and the TP x PP heatmap's choice per cell.
#include <cmath>
#include <string>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "planner/gpt_sweep.h"
#include "planner/sweep_chart.h"

namespace baton {
namespace {

const GptModel kModel{16, 2048, 16, 1024, 50257};

GptSweepSpec spec_of(std::vector<GptSweepAxis> axes) {
  GptSweepSpec spec;
  spec.model = kModel;
  spec.layout.global_batch = 64;
  spec.layout.data = 0;  // each point's GPUs / (t p)
  spec.axes = std::move(axes);
  spec.threads = 2;
  return spec;
}

SweepTable run(const GptSweepSpec& spec, const Topology& topology) {
  auto table = run_gpt_sweep(spec, topology, [](size_t, size_t) {});
  REQUIRE(table.ok());
  return *table;
}

const std::string& at(const SweepTable& table, size_t row, const char* column) {
  REQUIRE(table.column(column) >= 0);
  return table.rows[row][table.column(column)];
}

TEST_CASE("gpt sweep: short axis names become Megatron's, values are spelled one way", "[planner][sweep]") {
  GptSweepAxis tp{"tp", {"1", "02", "4"}};
  REQUIRE(check_gpt_axis(tp, {}).ok());
  CHECK(tp.name == "tensor-model-parallel-size");
  CHECK(tp.values == std::vector<std::string>{"1", "2", "4"});
  GptSweepAxis sp{"sequence-parallel", {"1", "off", "yes"}};
  REQUIRE(check_gpt_axis(sp, {}).ok());
  CHECK(sp.values == std::vector<std::string>{"yes", "no", "yes"});
  const struct {
    GptSweepAxis axis;
    const char* said;
  } refused[] = {{{"tpp", {"1"}}, "unknown axis \"tpp\""},
                 {{"microbatches", {"8"}}, "vary micro-batch-size or global-batch-size instead"},
                 {{"tp", {"0"}}, "\"0\" is not a whole number >= 1"},
                 {{"recompute-granularity", {"some"}}, "none, selective or full"},
                 {{"servers", {"two"}}, "\"two\" is not a number"},
                 {{"topology", {"x.json"}}, "\"x.json\" was not loaded"},
                 {{"pp", {}}, "no values given"}};
  for (const auto& r : refused) {
    GptSweepAxis axis = r.axis;
    const auto ok = check_gpt_axis(axis, {});
    INFO(r.axis.name);
    REQUIRE_FALSE(ok.ok());
    CHECK(ok.error().message.find(r.said) != std::string::npos);
  }
}

TEST_CASE("gpt sweep: every point is the simulator's figure for its layout, d = GPUs / (t p)", "[planner][sweep]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");  // 32 GPUs
  const GptSweepSpec spec = spec_of({{"tp", {"1", "2", "4", "32"}}, {"pp", {"1", "2", "3"}}});
  const SweepTable table = run(spec, topology);
  REQUIRE(table.rows.size() == 12);
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const int t = std::stoi(at(table, i, "tensor-model-parallel-size"));
    const int p = std::stoi(at(table, i, "pipeline-model-parallel-size"));
    INFO("t " << t << " p " << p << ": " << at(table, i, "error"));
    CHECK(at(table, i, "point") == std::to_string(i));
    CHECK(at(table, i, "grid_points") == "12");
    const MegatronLayout layout = testing::megatron_layout(t, p, 32 / (t * p), 1, 64);
    const auto expected = predict_megatron(kModel, layout, topology, false);
    if (!expected) {
      // p 3 does not divide 16 layers; t 32 crosses servers and 16 heads.
      CHECK_FALSE(at(table, i, "error").empty());
      CHECK(at(table, i, "iteration_time_s").empty());
      continue;
    }
    REQUIRE(at(table, i, "error").empty());
    CHECK(std::stod(at(table, i, "iteration_time_s")) == Approx(expected->iteration_time.value).epsilon(1e-8));
    CHECK(std::stod(at(table, i, "throughput_samples_per_s")) ==
          Approx(64 / expected->iteration_time.value).epsilon(1e-6));
    CHECK(at(table, i, "data_parallel_size") == std::to_string(32 / (t * p)));
    CHECK(at(table, i, "fits") == (expected->memory.fits() ? "yes" : "no"));
  }
}

TEST_CASE("gpt sweep: a cluster axis changes the GPUs, and so d", "[planner][sweep]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  GptSweepSpec spec = spec_of({{"servers", {"1", "2"}}});
  spec.layout.tensor = 8;
  const SweepTable table = run(spec, topology);
  REQUIRE(table.rows.size() == 2);
  CHECK(at(table, 0, "gpus") == "8");
  CHECK(at(table, 0, "data_parallel_size") == "1");
  CHECK(at(table, 1, "gpus") == "16");
  CHECK(at(table, 1, "data_parallel_size") == "2");
}

TEST_CASE("gpt sweep: context parallelism splits each sequence, d = GPUs / (t p c)", "[planner][sweep][context]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");  // 32 GPUs
  GptSweepSpec spec = spec_of({{"cp", {"1", "2", "4"}}});
  spec.model.sequence = 8192;
  spec.model.flash_attention = true;  // context parallelism's ring runs FlashAttention's steps
  spec.layout.tensor = 4;
  const SweepTable table = run(spec, topology);
  REQUIRE(table.rows.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const int c = 1 << i;
    INFO("c " << c << ": " << at(table, i, "error"));
    REQUIRE(at(table, i, "error").empty());
    CHECK(at(table, i, "context-parallel-size") == std::to_string(c));
    CHECK(at(table, i, "context_parallel_size") == std::to_string(c));
    CHECK(at(table, i, "data_parallel_size") == std::to_string(32 / (4 * c)));
    MegatronLayout layout = testing::megatron_layout(4, 1, 32 / (4 * c), 1, 64);
    layout.context = c;
    const auto expected = predict_megatron(spec.model, layout, topology, false);
    REQUIRE(expected.ok());
    CHECK(std::stod(at(table, i, "iteration_time_s")) == Approx(expected->iteration_time.value).epsilon(1e-8));
  }
}

TEST_CASE("gpt sweep: the fp8-format axis sets the model's --fp8-format, and a GPU without FP8 fails its points",
          "[planner][sweep][fp8]") {
  GptSweepAxis fp8{"fp8-format", {"none", "hybrid", "e4m3"}};
  REQUIRE(check_gpt_axis(fp8, {}).ok());
  GptSweepAxis bad{"fp8-format", {"fp4"}};
  const auto refused = check_gpt_axis(bad, {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("none, e4m3 or hybrid") != std::string::npos);
  GptSweepSpec spec = spec_of({fp8});
  spec.layout.tensor = 2;
  spec.layout.global_batch = 256;  // d = 256 GPUs / t 2 = 128 ranks of 2 microbatches
  const Topology h100 = testing::shipped_topology("h100_32x8.json");
  const SweepTable table = run(spec, h100);
  REQUIRE(table.rows.size() == 3);
  const MegatronLayout layout = testing::megatron_layout(2, 1, 128, 1, 256);
  for (size_t i = 0; i < 3; ++i) {
    GptModel model = kModel;
    model.fp8 = *parse_fp8_format(fp8.values[i]);
    const auto expected = predict_megatron(model, layout, h100, false);
    REQUIRE(expected.ok());
    INFO(fp8.values[i] << ": " << at(table, i, "error"));
    REQUIRE(at(table, i, "error").empty());
    CHECK(std::stod(at(table, i, "iteration_time_s")) == Approx(expected->iteration_time.value).epsilon(1e-8));
  }
  const SweepTable a100 = run(spec, testing::shipped_topology("a100_4x8.json"));
  CHECK(at(a100, 0, "error").empty());
  CHECK(at(a100, 1, "error").find("no FP8 tensor cores") != std::string::npos);
}

TEST_CASE("gpt sweep: with --plan each point is the search's best layout with the varied axes pinned",
          "[planner][sweep]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  GptSweepSpec spec = spec_of({{"tp", {"2", "8"}}});
  spec.plan = true;
  const SweepTable table = run(spec, topology);
  REQUIRE(table.rows.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    MegatronAxes pinned;
    pinned.tensor = i == 0 ? 2 : 8;
    const auto best = search_megatron_layouts(kModel, 64, false, pinned, topology, 1);
    REQUIRE(best.ok());
    const MegatronLayout& l = best->best.front().layout;
    CHECK(at(table, i, "tensor_model_parallel_size") == std::to_string(*pinned.tensor));
    CHECK(at(table, i, "pipeline_model_parallel_size") == std::to_string(l.pipeline));
    CHECK(at(table, i, "micro_batch_size") == std::to_string(l.micro_batch));
    CHECK(at(table, i, "recompute_granularity") == recompute_name(l.recompute));
    CHECK(std::stod(at(table, i, "iteration_time_s")) == Approx(best->best.front().iteration_time.value).epsilon(1e-8));
    CHECK(at(table, i, "fits") == "yes");
  }
}

TEST_CASE("gpt sweep: the overlaps are axes, simulated as simulate runs them and applied by the search",
          "[planner][sweep]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  // Micro-batch 8: the GPU's work, not the host's dispatch, bounds the passes.
  GptSweepSpec spec = spec_of({{"tp-comm-overlap", {"no", "yes"}}});
  spec.layout.tensor = 4;
  spec.layout.micro_batch = 8;
  spec.layout.sequence_parallel = true;
  const SweepTable simulated = run(spec, topology);
  REQUIRE(simulated.rows.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    MegatronLayout layout = testing::megatron_layout(4, 1, 8, 8, 64);
    layout.sequence_parallel = true;
    layout.tp_comm_overlap = i == 1;
    const auto expected = predict_megatron(kModel, layout, topology, false);
    REQUIRE(expected.ok());
    CHECK(std::stod(at(simulated, i, "iteration_time_s")) == Approx(expected->iteration_time.value).epsilon(1e-8));
  }
  CHECK(std::stod(at(simulated, 1, "iteration_time_s")) < std::stod(at(simulated, 0, "iteration_time_s")));

  // With --plan (the base flags pinned, as `baton sweep --plan` pins them):
  // the search's best with the overlap on every layout it applies to.
  spec.plan = true;
  spec.pinned.tensor = 4;
  spec.pinned.micro_batch = 8;
  spec.pinned.sequence_parallel = true;
  const SweepTable planned = run(spec, topology);
  MegatronAxes pinned = spec.pinned;
  pinned.tp_comm_overlap = true;
  const auto best = search_megatron_layouts(kModel, 64, false, pinned, topology, 1);
  REQUIRE(best.ok());
  CHECK(std::stod(at(planned, 1, "iteration_time_s")) == Approx(best->best.front().iteration_time.value).epsilon(1e-8));

  // --overlap-param-gather without --overlap-grad-reduce: the point says so.
  GptSweepSpec alone = spec_of({{"overlap-param-gather", {"yes"}}});
  alone.plan = true;
  const SweepTable refused = run(alone, topology);
  CHECK(at(refused, 0, "error").find("--overlap-param-gather needs --overlap-grad-reduce") != std::string::npos);
}

TEST_CASE("gpt sweep: 4 shards merged are the unsharded table, byte for byte", "[planner][sweep]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  GptSweepSpec spec = spec_of({{"tp", {"1", "2", "4"}}, {"pp", {"1", "2", "4"}}, {"mbs", {"1", "2"}}});
  const std::string whole = sweep_csv(run(spec, topology));
  std::vector<SweepPart> parts;
  for (int k = 3; k >= 0; --k) {  // any order
    spec.shard = Shard{k, 4};
    parts.push_back(SweepPart{"shard " + std::to_string(k), run(spec, topology)});
    CHECK(parts.back().table.rows.size() == shard_range(18, spec.shard).size());
  }
  const auto merged = merge_sweep_tables(parts);
  REQUIRE(merged.ok());
  CHECK(sweep_csv(*merged) == whole);
  const auto reread = parse_sweep_csv(whole, "whole");
  REQUIRE(reread.ok());
  CHECK(*sweep_chart_svg(*merged) == *sweep_chart_svg(*reread));
}

}  // namespace
}  // namespace baton
