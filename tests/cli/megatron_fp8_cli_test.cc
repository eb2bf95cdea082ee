// `baton simulate` and `plan` with FP8 (--fp8-format, --fp8-recipe;
// sim/megatron_fp8.h): the report and its JSON carry the flags, FP8 is
// faster where the GEMMs dominate, the plan's launch line carries them and
// simulates back, and the refusals exit 2 naming the flag.
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"
#include "tests/cli/megatron_cli_support.h"

using namespace baton::testing;

namespace {

// Llama 3 8B's shape (Meta's Llama 3 model card): 32 layers of h 4096, 32
// heads in 8 key-value groups, SwiGLU of width 14336, vocabulary 128256;
// sequence 8192.
const std::string kLlama8B =
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
    "--ffn-hidden-size 14336 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights "
    "--position-embedding-type rope --normalization RMSNorm --use-flash-attn --vocab-size 128256 --seq-length 8192 "
    "--bf16 ";
const std::string kLayout =
    "--global-batch-size 64 --micro-batch-size 1 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
    "--sequence-parallel --use-distributed-optimizer --data-parallel-size 4 ";

nlohmann::json simulate_json(const std::string& extra, const std::string& tag) {
  const CliRun run =
      run_baton("simulate --topology topologies/h100_32x8.json " + kLlama8B + kLayout + extra + " --json", tag);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

TEST_CASE("fp8 cli: simulate Llama 3 8B in FP8 on H100s: faster, its flags in the report", "[cli][megatron][fp8]") {
  const CliRun text =
      run_baton("simulate --topology topologies/h100_32x8.json " + kLlama8B + kLayout + "--fp8-format hybrid", "fp8");
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("--fp8-format hybrid --fp8-recipe delayed") != std::string::npos);
  const nlohmann::json bf16 = simulate_json("", "fp8-bf16");
  const nlohmann::json fp8 = simulate_json("--fp8-format hybrid", "fp8-hybrid");
  const nlohmann::json e4m3 = simulate_json("--fp8-format e4m3", "fp8-e4m3");
  const nlohmann::json current = simulate_json("--fp8-format hybrid --fp8-recipe tensorwise", "fp8-current");
  CHECK(fp8["model"]["fp8"] == "hybrid");
  CHECK(fp8["model"]["fp8_recipe"] == "delayed");
  CHECK(!bf16["model"].contains("fp8"));
  // The model FLOPs are the same count: a faster iteration is more TFLOP/s.
  const double t_bf16 = bf16["iteration_time_s"].get<double>(), t_fp8 = fp8["iteration_time_s"].get<double>();
  CHECK(t_fp8 < t_bf16);
  CHECK(fp8["model_tflops_per_gpu"].get<double>() * t_fp8 ==
        Approx(bf16["model_tflops_per_gpu"].get<double>() * t_bf16).epsilon(1e-9));
  // The formats take the same time; tensorwise scaling's extra passes take more.
  CHECK(e4m3["iteration_time_s"] == fp8["iteration_time_s"]);
  CHECK(current["iteration_time_s"].get<double>() > t_fp8);
}

TEST_CASE("fp8 cli: the plan keeps FP8 and its launch line simulates back", "[cli][megatron][fp8]") {
  const std::string line = plan_simulates_back(
      "plan --topology topologies/h100_32x8.json " + kLlama8B +
          "--global-batch-size 64 --fp8-format hybrid --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2",
      "fp8-plan");
  CHECK(line.find("--fp8-format hybrid --fp8-recipe delayed") != std::string::npos);
  // Megatron-Bridge's current-scaling recipe: FP8 parameters, the first and last blocks in bf16.
  const std::string recipe =
      plan_simulates_back("plan --topology topologies/h100_32x8.json " + kLlama8B +
                              "--global-batch-size 64 --fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather "
                              "--first-last-layers-bf16 --use-distributed-optimizer --tensor-model-parallel-size 2 "
                              "--pipeline-model-parallel-size 2",
                          "fp8-plan-recipe");
  CHECK(recipe.find("--fp8-param-gather --first-last-layers-bf16 --num-layers-at-start-in-bf16 1 "
                    "--num-layers-at-end-in-bf16 1") != std::string::npos);
}

TEST_CASE("fp8 cli: refusals name the flag and write nothing", "[cli][megatron][fp8]") {
  std::string narrow = kLlama8B;
  narrow.replace(narrow.find("14336"), 5, "14300");  // 7150 a rank at t 2
  const struct {
    std::string arguments, message;
  } cases[] = {
      {"--topology topologies/a100_vtrain.json " + kLlama8B + kLayout + "--fp8-format hybrid",
       "--fp8-format hybrid: the A100-SXM4-80GB has no FP8 tensor cores"},
      {"--topology topologies/h100_32x8.json " + kLlama8B + kLayout + "--fp8-recipe tensorwise",
       "--fp8-recipe tensorwise needs --fp8-format"},
      {"--topology topologies/h100_32x8.json " + kLlama8B + kLayout + "--fp8-format hybrid --fp8-recipe mxfp8",
       "--fp8-recipe mxfp8 runs on Blackwell GPUs only"},
      {"--topology topologies/h100_32x8.json " + narrow + kLayout + "--fp8-format hybrid",
       "--ffn-hidden-size / t is 7150, not a multiple of 16"},
      {"--topology topologies/h100_32x8.json " + kLlama8B + kLayout + "--fp8-format fp4", "--fp8-format"},
      {"--topology topologies/h100_32x8.json " + kLlama8B + kLayout +
           "--fp8-format hybrid --fp8-recipe tensorwise --num-layers-at-start-in-bf16 2",
       "--num-layers-at-start-in-bf16 and --num-layers-at-end-in-bf16 go with --first-last-layers-bf16"},
      {"--topology topologies/h100_32x8.json " + kLlama8B + kLayout + "--fp8-format hybrid --first-last-layers-bf16",
       "--first-last-layers-bf16 needs --fp8-recipe tensorwise"},
  };
  for (const auto& c : cases) {
    const std::filesystem::path trace = scratch_dir("fp8-refused") / "trace.json";
    const CliRun run = run_baton("simulate " + c.arguments + " --trace " + quoted(trace), "fp8-refused");
    INFO(c.arguments);
    INFO(run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(c.message) != std::string::npos);
    CHECK(!std::filesystem::exists(trace));
  }
}

}  // namespace
