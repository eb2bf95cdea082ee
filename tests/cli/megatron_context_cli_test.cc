// `baton simulate` and `plan` with Megatron-core's --context-parallel-size: the
// layout's GPUs and replicas, where the time goes, the refusals, and the
// emitted launch line simulating to the planned time.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

// Llama 3 8B in Megatron-core's flags (Llama Team 2024, Table 3) at 32,768
// tokens a sequence.
const std::string kLlama3 =
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 32768 --vocab-size 128256 "
    "--ffn-hidden-size 14336 --swiglu --group-query-attention --num-query-groups 8 --disable-bias-linear "
    "--untie-embeddings-and-output-weights --position-embedding-type rope --normalization RMSNorm --use-flash-attn "
    "--bf16 --global-batch-size 32 ";

TEST_CASE("simulate with context parallelism: c ranks a data-parallel rank, s / c tokens each",
          "[cli][megatron][context]") {
  const std::string base = "simulate --topology topologies/h100_32x8.json " + kLlama3 +
                           "--tensor-model-parallel-size 8 --sequence-parallel --data-parallel-size 4 ";
  const CliRun one = run_baton(base + "--json", "context-1");
  const CliRun four = run_baton(base + "--context-parallel-size 4 --json", "context-4");
  INFO(one.err << four.err);
  REQUIRE(one.exit_code == 0);
  REQUIRE(four.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(one.out), c = nlohmann::json::parse(four.out);
  CHECK(c["layout"]["context_parallel_size"] == 4);
  CHECK(a["layout"]["context_parallel_size"] == 1);
  CHECK(c["gpus"] == 4 * a["gpus"].get<int>());
  CHECK(c["microbatches_per_data_parallel_rank"] == a["microbatches_per_data_parallel_rank"]);
  CHECK(c["breakdown_s"].contains("context_parallel_comm"));
  CHECK_FALSE(a["breakdown_s"].contains("context_parallel_comm"));
  // A quarter of the tokens on each GPU: less time and less activation memory,
  // the same work in Megatron's FLOPs over four times the GPUs.
  CHECK(c["iteration_time_s"].get<double>() < a["iteration_time_s"].get<double>());
  CHECK(c["memory"][0]["activation_bytes"].get<double>() ==
        Approx(a["memory"][0]["activation_bytes"].get<double>() / 4));
  CHECK(c["model_tflops_per_gpu"].get<double>() * c["iteration_time_s"].get<double>() * 4 ==
        Approx(a["model_tflops_per_gpu"].get<double>() * a["iteration_time_s"].get<double>()).epsilon(1e-9));
  const CliRun text = run_baton(base + "--context-parallel-size 4", "context-text");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("t 8 x p 1 x c 4 (p2p) x d 4 = 128 GPUs") != std::string::npos);
  CHECK(text.out.find("context-parallel exchange (exposed)") != std::string::npos);
  CHECK(text.out.find("the 16 replicas run alike") != std::string::npos);
}

TEST_CASE("the trace and the Gantt chart draw the exposed context-parallel exchange", "[cli][megatron][context]") {
  const fs::path dir = scratch_dir("context-trace");
  const CliRun run = run_baton("simulate --topology topologies/h100_32x8.json " + kLlama3 +
                                   "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                                   "--data-parallel-size 1 --context-parallel-size 4 --cp-comm-type all_gather "
                                   "--gantt '" +
                                   (dir / "g.svg").string() + "' --trace '" + (dir / "t.json").string() + "'",
                               "context-trace");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const std::string trace = slurp(dir / "t.json");
  CHECK(trace.find("\"context-parallel exchange\"") != std::string::npos);
  CHECK(trace.find("\"name\":\"CP F") != std::string::npos);
  const std::string chart = slurp(dir / "g.svg");
  CHECK(chart.find("context-parallel exchange of") != std::string::npos);
  CHECK(chart.find("context-parallel exchange (strip: its exposed sum in the block)") != std::string::npos);
}

TEST_CASE("context parallelism refuses what Megatron would not run", "[cli][megatron][context][bad-input]") {
  const std::string base = "simulate --topology topologies/h100_32x8.json --tensor-model-parallel-size 8 ";
  std::string plain = kLlama3;
  plain.replace(plain.find("--use-flash-attn "), 17, "");
  const struct {
    std::string flags, message;
  } cases[] = {
      {plain + "--context-parallel-size 2", "give --use-flash-attn"},
      {kLlama3 + "--context-parallel-size 3", "--seq-length 32768 is not divisible by 2 x --context-parallel-size 3"},
      {kLlama3 + "--context-parallel-size 2 --cp-comm-type a2a+p2p", "--cp-comm-type a2a+p2p: baton models"},
      {kLlama3 + "--context-parallel-size 8 --cp-comm-type a2a",  // 32 / 8 heads a rank over 8 ranks: whole heads
       "--cp-comm-type a2a splits each rank's heads over the c ranks"},
      {kLlama3 + "--context-parallel-size 0", "--context-parallel-size"},
      {kLlama3 + "--context-parallel-size 8 --data-parallel-size 8", "x --context-parallel-size 8) and the topology"}};
  for (const auto& c : cases) {
    const CliRun run = run_baton(base + c.flags, "context-refused");
    INFO(c.flags << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(c.message) != std::string::npos);
    CHECK(run.out.empty());
  }
  // all_gather and a2a run too, each with its own exposed exchange.
  for (const char* type : {"all_gather", "a2a"}) {
    // t 4: two key-value groups a rank, a whole one on each of a2a's c = 2.
    const CliRun typed = run_baton("simulate --topology topologies/h100_32x8.json --tensor-model-parallel-size 4 " +
                                       kLlama3 + "--context-parallel-size 2 --cp-comm-type " + type + " --json",
                                   "context-typed");
    INFO(typed.err);
    REQUIRE(typed.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(typed.out);
    CHECK(j["layout"]["cp_comm_type"] == type);
    CHECK(j["breakdown_s"]["context_parallel_comm"].get<double>() > 0.0);
  }
  // Megatron's help text spells it allgather; Transformer Engine takes all_gather.
  const std::string t4 = "simulate --topology topologies/h100_32x8.json --tensor-model-parallel-size 4 " + kLlama3 +
                         "--context-parallel-size 2 --json --cp-comm-type ";
  const CliRun alias = run_baton(t4 + "allgather", "context-alias");
  const CliRun spelled = run_baton(t4 + "all_gather", "context-alias");
  REQUIRE(alias.exit_code == 0);
  CHECK(alias.out == spelled.out);
  // p2p, Megatron's default, is what runs without the flag.
  const CliRun p2p = run_baton(base + kLlama3 + "--context-parallel-size 2 --cp-comm-type p2p --json", "context-p2p");
  const CliRun implied = run_baton(base + kLlama3 + "--context-parallel-size 2 --json", "context-implied");
  REQUIRE(p2p.exit_code == 0);
  CHECK(p2p.out == implied.out);
}

TEST_CASE("plan emits --context-parallel-size, and the line simulates to the planned time",
          "[cli][megatron][context]") {
  const std::string model =
      "--topology topologies/h100_32x8.json " + kLlama3 + "--context-parallel-size 4 --cp-comm-type all_gather";
  const CliRun json = run_baton("plan " + model + " --json", "context-plan-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  CHECK(planned["layout"]["context_parallel_size"] == 4);
  const CliRun flags = run_baton("plan " + model + " --emit megatron", "context-plan-emit");
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  CHECK(line.find(" --context-parallel-size 4 --cp-comm-type all_gather") != std::string::npos);
  const CliRun run = run_baton("simulate --topology topologies/h100_32x8.json " + line + " --json", "context-plan-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json simulated = nlohmann::json::parse(run.out);
  CHECK(simulated["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(simulated["layout"] == planned["layout"]);
}

}  // namespace
