// `baton simulate`, `plan` and `sweep` with Megatron-core's
// --expert-tensor-parallel-size: at t 8 the experts whole on each GPU (etp 1)
// keep the all-to-alls inside the tensor-parallel group and drop the
// experts' all-gathers, plan chooses it and emits the flag, the launch line
// simulates back, the sweep's etp column, and the refusals.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

#include "planner/sweep_table.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

// Mixtral 8x7B in Megatron-core's flags (Jiang et al. 2024, "Mixtral of
// Experts", arXiv 2401.04088: 32 layers of h 4096, 32 heads, 8 key-value
// groups, 8 SwiGLU experts of width 14,336, top 2, vocabulary 32,000), at
// t 8, p 4, d 2 on 64 H100s with sequence parallelism and the all-to-all
// dispatcher.
const std::string kMixtralT8 =
    "--topology topologies/h100_32x8.json --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
    "--seq-length 4096 --vocab-size 32000 --ffn-hidden-size 14336 --swiglu --group-query-attention "
    "--num-query-groups 8 --disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
    "--normalization RMSNorm --use-flash-attn --num-experts 8 --moe-router-topk 2 --moe-grouped-gemm --bf16 "
    "--global-batch-size 256 --use-distributed-optimizer --sequence-parallel --tensor-model-parallel-size 8 "
    "--pipeline-model-parallel-size 4 --moe-token-dispatcher-type alltoall ";

nlohmann::json simulated(const std::string& flags, const std::string& name) {
  const CliRun run = run_baton("simulate " + kMixtralT8 + flags + " --data-parallel-size 2 --json", name);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

TEST_CASE("etp: at t 8, whole experts a GPU (etp 1, ep 8) beat experts split over t (ep 2)",
          "[cli][megatron][moe][etp]") {
  const nlohmann::json split = simulated("--micro-batch-size 1 --expert-model-parallel-size 2", "etp-split");
  const nlohmann::json whole =
      simulated("--micro-batch-size 1 --expert-model-parallel-size 8 --expert-tensor-parallel-size 1", "etp-whole");
  CHECK(whole["layout"]["expert_tensor_parallel_size"] == 1);
  CHECK(split["layout"]["expert_tensor_parallel_size"] == 8);
  // No all-gather of the experts' tokens over 8 GPUs; the all-to-all among
  // the 8 GPUs of one server, where ep 2 x t 8 crosses two.
  CHECK(whole["breakdown_s"]["tensor_parallel_comm"].get<double>() <
        split["breakdown_s"]["tensor_parallel_comm"].get<double>() / 2);
  CHECK(whole["breakdown_s"]["expert_parallel_comm"].get<double>() <
        split["breakdown_s"]["expert_parallel_comm"].get<double>());
  CHECK(whole["iteration_time_s"].get<double>() < split["iteration_time_s"].get<double>());
  // The same model FLOPs either way.
  CHECK(whole["model_tflops_per_gpu"].get<double>() * whole["iteration_time_s"].get<double>() ==
        Approx(split["model_tflops_per_gpu"].get<double>() * split["iteration_time_s"].get<double>()).epsilon(1e-9));
}

TEST_CASE("etp: plan at t 8 chooses etp 1, and its launch line simulates to the planned time",
          "[cli][megatron][moe][etp]") {
  const std::string plan = "plan " + kMixtralT8 + "--gpus 64 --micro-batch-size 8 --zero-bubble-v-schedule";
  const CliRun json = run_baton(plan + " --json", "etp-plan-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  CHECK(planned["layout"]["expert_tensor_parallel_size"] == 1);
  const CliRun flags = run_baton(plan + " --emit megatron", "etp-plan-emit");
  INFO(flags.err);
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  CHECK(line.find(" --expert-tensor-parallel-size 1") != std::string::npos);
  // 64 of the topology's 256 GPUs: d 2 (Megatron takes d from the world size).
  const CliRun run = run_baton(
      "simulate --topology topologies/h100_32x8.json " + line + " --data-parallel-size 2 --json", "etp-plan-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json back = nlohmann::json::parse(run.out);
  CHECK(back["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(back["layout"] == planned["layout"]);
}

TEST_CASE("etp: simulate refuses a grid Megatron would not build, naming the flag",
          "[cli][megatron][moe][etp][bad-input]") {
  const CliRun grid = run_baton("simulate " + kMixtralT8 +
                                    "--data-parallel-size 1 --micro-batch-size 1 --expert-model-parallel-size 8 "
                                    "--expert-tensor-parallel-size 2",
                                "etp-bad-grid");
  CHECK(grid.exit_code == 2);
  CHECK(grid.err.find("--expert-tensor-parallel-size 2 x --expert-model-parallel-size 8 does not divide the 8 GPUs") !=
        std::string::npos);
  CHECK(grid.out.empty());
  // Experts 1000 wide: 1000 / 16 is not whole.
  const CliRun width = run_baton("simulate " + kMixtralT8 +
                                     "--data-parallel-size 2 --micro-batch-size 1 --moe-ffn-hidden-size 1000 "
                                     "--expert-tensor-parallel-size 16",
                                 "etp-bad-width");
  CHECK(width.exit_code == 2);
  CHECK(width.err.find("--moe-ffn-hidden-size 1000 is not divisible by --expert-tensor-parallel-size 16") !=
        std::string::npos);
  const CliRun dense = run_baton(
      "simulate --topology topologies/h100_32x8.json --num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
      "--seq-length 1024 --global-batch-size 8 --micro-batch-size 1 --tensor-model-parallel-size 2 "
      "--sequence-parallel --expert-tensor-parallel-size 1",
      "etp-dense");
  CHECK(dense.exit_code == 2);
  CHECK(dense.err.find("--expert-tensor-parallel-size 1 needs --num-experts") != std::string::npos);
}

TEST_CASE("etp: sweep --vary etp writes the expert_tensor_parallel_size column", "[cli][megatron][moe][etp][sweep]") {
  const fs::path dir = scratch_dir("etp-sweep");
  const CliRun run = run_baton("sweep " + kMixtralT8 +
                                   "--data-parallel-size 2 --micro-batch-size 1 --expert-model-parallel-size 2 "
                                   "--vary etp=1,8 --quiet --csv " +
                                   quoted(dir / "etp.csv"),
                               "etp-sweep");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto table = baton::parse_sweep_csv(slurp(dir / "etp.csv"), "etp.csv");
  INFO((table.ok() ? std::string() : table.error().message));
  REQUIRE(table.ok());
  REQUIRE(table->rows.size() == 2);
  const int column = table->column("expert_tensor_parallel_size");
  const int axis = table->column("expert-tensor-parallel-size");
  const int error = table->column("error");
  REQUIRE(column >= 0);
  REQUIRE(axis >= 0);
  REQUIRE(error >= 0);
  for (size_t i = 0; i < 2; ++i) {
    const std::string etp = i == 0 ? "1" : "8";
    CHECK(table->rows[i][static_cast<size_t>(axis)] == etp);
    CHECK(table->rows[i][static_cast<size_t>(column)] == etp);
    CHECK(table->rows[i][static_cast<size_t>(error)].empty());
  }
}

}  // namespace
