// `baton simulate` and `plan` with Megatron-core's flags beyond GPT-3's: a
// Llama-style model's architecture flags (its figures, refusals and the
// emitted launch line) and full recomputation's method and layers.
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

// The 39.1B GPT of vTrain's rows with full recomputation (Megatron-core asks it
// for a method and layers), and a small GPT for the planner.
const std::string kModel =
    "simulate --topology topologies/a100_vtrain.json --num-layers 48 --hidden-size 8192 --num-attention-heads 64 "
    "--seq-length 2048 --global-batch-size 1536 --recompute-granularity full ";
const std::string kSmallGpt =
    "--topology topologies/a100_4x8.json --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
    "--seq-length 1024 --global-batch-size 64";

// Llama 2 7B in Megatron-core's flags (Touvron et al. 2023, Table 1 and
// section 2.2): 6,738,415,616 parameters as released.
const std::string kLlama7B =
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --vocab-size 32000 "
    "--ffn-hidden-size 11008 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights "
    "--position-embedding-type rope --normalization RMSNorm --global-batch-size 64 ";

TEST_CASE("simulate a Llama-style model in Megatron-core's architecture flags", "[cli][megatron][architecture]") {
  const std::string layout =
      "--micro-batch-size 1 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --data-parallel-size 8 "
      "--bf16 --use-flash-attn --recompute-granularity selective";
  const CliRun run =
      run_baton("simulate --topology topologies/a100_vtrain.json " + kLlama7B + layout + " --json", "llama-json");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(run.out);
  CHECK(j["model"]["parameters"].get<double>() == 6738415616.0);
  CHECK(j["model"]["swiglu"] == true);
  CHECK(j["model"]["use_flash_attn"] == true);
  CHECK(j["model"]["normalization"] == "RMSNorm");
  // Megatron-core's count: 12 B s L h^2 ((1 + G / a + s / h) + 3/2 f / h + V / (2 L h)), G = a.
  const double B = 64, s = 4096, L = 32, h = 4096, f = 11008, V = 32000;
  const double flops = 12 * B * s * L * h * h * ((2 + s / h) + 1.5 * f / h + V / (2 * L * h));
  CHECK(j["model_tflops_per_gpu"].get<double>() ==
        Approx(flops / j["iteration_time_s"].get<double>() / 32 / 1e12).epsilon(1e-9));
  // Megatron-core's --attention-backend flash (or fused, auto) is --use-flash-attn.
  std::string backend = layout;
  backend.replace(backend.find("--use-flash-attn"), 16, "--attention-backend fused");
  const CliRun fused =
      run_baton("simulate --topology topologies/a100_vtrain.json " + kLlama7B + backend + " --json", "llama-backend");
  REQUIRE(fused.exit_code == 0);
  CHECK(nlohmann::json::parse(fused.out) == j);
  const CliRun text = run_baton("simulate --topology topologies/a100_vtrain.json " + kLlama7B + layout, "llama-text");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("6.74B parameters\narchitecture beyond GPT-3's: --ffn-hidden-size 11008 --swiglu "
                      "--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
                      "--normalization RMSNorm --use-flash-attn\n") != std::string::npos);
}

TEST_CASE("the architecture flags refuse what Megatron would not run", "[cli][megatron][architecture][bad-input]") {
  const std::string base = "simulate --topology topologies/a100_vtrain.json " + kLlama7B;
  const struct {
    std::string flags, message;
  } cases[] = {
      {"--num-query-groups 8", "--num-query-groups goes with --group-query-attention"},
      {"--group-query-attention --num-query-groups 3", "--num-query-groups 3 does not divide --num-attention-heads 32"},
      {"--group-query-attention --tensor-model-parallel-size 2",  // Megatron's default: one group
       "--num-query-groups 1 is not divisible by --tensor-model-parallel-size 2"},
      {"--normalization BatchNorm", "--normalization"},
      {"--use-flash-attn --attention-backend unfused", "--use-flash-attn and --attention-backend unfused disagree"},
      {"--ffn-hidden-size 0", "--ffn-hidden-size"}};
  for (const auto& c : cases) {
    const CliRun run = run_baton(base + c.flags, "llama-refused");
    INFO(c.flags << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(c.message) != std::string::npos);
  }
}

TEST_CASE("plan emits the architecture flags with the layout, and they simulate to the planned time",
          "[cli][megatron][architecture]") {
  const std::string model =
      "--topology topologies/a100_4x8.json --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
      "--seq-length 2048 --vocab-size 32000 --ffn-hidden-size 5504 --swiglu --group-query-attention "
      "--num-query-groups 4 --disable-bias-linear --position-embedding-type rope --normalization RMSNorm "
      "--use-flash-attn --global-batch-size 64";
  const CliRun json = run_baton("plan " + model + " --json", "llama-plan-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  const CliRun flags = run_baton("plan " + model + " --emit megatron", "llama-plan-emit");
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  CHECK(line.find("--ffn-hidden-size 5504 --swiglu --group-query-attention --num-query-groups 4 "
                  "--disable-bias-linear --position-embedding-type rope --normalization RMSNorm --use-flash-attn") !=
        std::string::npos);
  const CliRun run = run_baton("simulate --topology topologies/a100_4x8.json " + line + " --json", "llama-plan-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json simulated = nlohmann::json::parse(run.out);
  CHECK(simulated["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(simulated["layout"] == planned["layout"]);
}

TEST_CASE("Megatron-core's recompute method and layers: uniform groups and the block method, emitted with full",
          "[cli][megatron]") {
  const std::string layout =
      "--micro-batch-size 2 --tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 --data-parallel-size 32 ";
  const CliRun one = run_baton(kModel + layout + "--json", "recompute-default");
  const CliRun uniform =
      run_baton(kModel + layout + "--recompute-method uniform --recompute-num-layers 1 --json", "recompute-uniform");
  const CliRun grouped =
      run_baton(kModel + layout + "--recompute-method uniform --recompute-num-layers 3 --json", "recompute-grouped");
  INFO(one.err << uniform.err << grouped.err);
  REQUIRE(one.exit_code == 0);
  REQUIRE(uniform.exit_code == 0);
  REQUIRE(grouped.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(one.out), u = nlohmann::json::parse(uniform.out),
                       g = nlohmann::json::parse(grouped.out);
  CHECK(u == a);  // uniform 1 is Megatron-LM's full recomputation
  CHECK(g["layout"]["recompute_num_layers"] == 3);
  CHECK(g["iteration_time_s"] == a["iteration_time_s"]);  // every block recomputed once either way
  CHECK(g["memory"][0]["peak_bytes"] != a["memory"][0]["peak_bytes"]);
  // The block method with the stage's 12 blocks recomputes every block: full recomputation's time and memory;
  // with fewer, less recomputation and more memory.
  const CliRun all =
      run_baton(kModel + layout + "--recompute-method block --recompute-num-layers 12 --json", "recompute-block-all");
  const CliRun some =
      run_baton(kModel + layout + "--recompute-method block --recompute-num-layers 4 --json", "recompute-block-some");
  INFO(all.err << some.err);
  REQUIRE(all.exit_code == 0);
  REQUIRE(some.exit_code == 0);
  const nlohmann::json j12 = nlohmann::json::parse(all.out), j4 = nlohmann::json::parse(some.out);
  CHECK(j12["layout"]["recompute_method"] == "block");
  CHECK(j12["iteration_time_s"].get<double>() == Approx(a["iteration_time_s"].get<double>()).epsilon(1e-12));
  CHECK(j12["memory"][0]["peak_bytes"] == a["memory"][0]["peak_bytes"]);
  CHECK(j4["breakdown_s"]["recompute"].get<double>() ==
        Approx(a["breakdown_s"]["recompute"].get<double>() / 3).epsilon(1e-9));
  CHECK(j4["memory"][0]["peak_bytes"].get<double>() > a["memory"][0]["peak_bytes"].get<double>());
  const CliRun selective = run_baton(
      "simulate --topology topologies/a100_vtrain.json --num-layers 48 --hidden-size 8192 --num-attention-heads 64 "
      "--seq-length 2048 --global-batch-size 1536 --recompute-granularity selective --recompute-method uniform",
      "recompute-selective-method");
  CHECK(selective.exit_code == 2);
  CHECK(selective.err.find("--recompute-method and --recompute-num-layers go with --recompute-granularity full") !=
        std::string::npos);
  const CliRun plan =
      run_baton("plan " + kSmallGpt + " --recompute-granularity full --emit megatron", "recompute-emit");
  INFO(plan.err);
  REQUIRE(plan.exit_code == 0);
  CHECK(plan.out.find("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1") !=
        std::string::npos);
}

}  // namespace
