// `baton simulate` and `plan` with Megatron's loss flags:
// --cross-entropy-loss-fusion (Megatron-core's native fused cross entropy;
// --cross-entropy-fusion-impl native; te with the fusion refused as
// Megatron-LM's training refuses it, te alone taken and unused, as there) and
// --fp16-lm-cross-entropy (with --fp16 only).
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

// Llama-like, small enough to simulate in a blink, with a large vocabulary
// so that the loss weighs: 4 blocks of h 2048, 128K tokens.
const std::string kModel =
    "--num-layers 4 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 --vocab-size 128256 "
    "--ffn-hidden-size 8192 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights "
    "--position-embedding-type rope --normalization RMSNorm --use-flash-attn --global-batch-size 64 ";
const std::string kLayout =
    "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --data-parallel-size 8 --micro-batch-size 1 ";
const std::string kSimulate = "simulate --topology topologies/h100_32x8.json " + kModel + kLayout;

nlohmann::json simulated(const std::string& flags, const std::string& name) {
  const CliRun run = run_baton(flags + " --json", name);
  INFO(flags << ": " << run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

TEST_CASE("loss flags: the fused cross entropy is faster, and the flag is kept", "[cli][megatron]") {
  const nlohmann::json plain = simulated(kSimulate + "--bf16", "loss-plain");
  const nlohmann::json fused = simulated(kSimulate + "--bf16 --cross-entropy-loss-fusion", "loss-fused");
  const nlohmann::json native =
      simulated(kSimulate + "--bf16 --cross-entropy-loss-fusion --cross-entropy-fusion-impl native", "loss-native");
  CHECK(fused["model"]["cross_entropy_loss_fusion"] == true);
  CHECK_FALSE(plain["model"].contains("cross_entropy_loss_fusion"));
  // 16 + 4 bytes a logit fewer over 8 microbatches of 4096 x 128256 logits on
  // each GPU: at the H100's 3.35 TB/s and the fitted share of it, some 20 ms.
  CHECK(fused["iteration_time_s"].get<double>() < plain["iteration_time_s"].get<double>() - 0.01);
  CHECK(native["iteration_time_s"] == fused["iteration_time_s"]);
  // Without --cross-entropy-loss-fusion Megatron never calls the
  // implementation: te alone leaves the unfused loss, to the bit.
  const nlohmann::json te_alone = simulated(kSimulate + "--bf16 --cross-entropy-fusion-impl te", "loss-te-alone");
  CHECK(te_alone["iteration_time_s"] == plain["iteration_time_s"]);
  CHECK(te_alone["model"] == plain["model"]);
  // The memory does not move: the logits' fp32 copy is there either way.
  CHECK(fused["memory"] == plain["memory"]);
}

TEST_CASE("loss flags: the loss in half precision saves its casts", "[cli][megatron]") {
  const nlohmann::json fp32 = simulated(kSimulate + "--fp16", "loss-fp32");
  const nlohmann::json half = simulated(kSimulate + "--fp16 --fp16-lm-cross-entropy", "loss-half");
  CHECK(half["model"]["fp16_lm_cross_entropy"] == true);
  CHECK(half["iteration_time_s"].get<double>() < fp32["iteration_time_s"].get<double>());
  // Its 16 + 4 bytes a logit against the fused loss's 22 + 10.
  const nlohmann::json fused = simulated(kSimulate + "--fp16 --cross-entropy-loss-fusion", "loss-fp16-fused");
  CHECK(half["iteration_time_s"].get<double>() < fused["iteration_time_s"].get<double>());
  CHECK(fused["iteration_time_s"].get<double>() < fp32["iteration_time_s"].get<double>());
}

TEST_CASE("loss flags: plan emits them and the line simulates to the planned time", "[cli][megatron]") {
  const std::string model =
      "--topology topologies/h100_32x8.json --gpus 8 " + kModel + "--bf16 --cross-entropy-loss-fusion";
  const nlohmann::json planned = simulated("plan " + model, "loss-plan-json");
  const CliRun flags = run_baton("plan " + model + " --emit megatron", "loss-plan-emit");
  INFO(flags.err);
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  CHECK(line.find(" --cross-entropy-loss-fusion") != std::string::npos);
  // Megatron's line leaves the data-parallel size to the launcher's GPUs.
  const int data = planned["layout"]["data_parallel_size"].get<int>();
  const nlohmann::json back = simulated(
      "simulate --topology topologies/h100_32x8.json " + line + " --data-parallel-size " + std::to_string(data),
      "loss-plan-run");
  CHECK(back["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(back["model"] == planned["model"]);
}

TEST_CASE("loss flags: simulate refuses what Megatron refuses", "[cli][megatron][bad-input]") {
  const struct {
    std::string flags, message;
  } cases[] = {{kSimulate + "--bf16 --cross-entropy-loss-fusion --cross-entropy-fusion-impl te",
                "--cross-entropy-fusion-impl te with --cross-entropy-loss-fusion: Megatron-LM's training refuses"},
               {kSimulate + "--bf16 --fp16-lm-cross-entropy", "--fp16-lm-cross-entropy needs --fp16"},
               {kSimulate + "--bf16 --cross-entropy-fusion-impl triton", "--cross-entropy-fusion-impl"}};
  for (const auto& c : cases) {
    const CliRun run = run_baton(c.flags, "loss-refused");
    INFO(c.flags << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(c.message) != std::string::npos);
    CHECK(run.out.empty());
  }
}

}  // namespace
