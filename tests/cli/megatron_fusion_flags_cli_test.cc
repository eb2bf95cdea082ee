// `baton simulate` and `plan` with Megatron's fusion and rotary-position
// flags: --no-rope-fusion (Megatron-core's PyTorch ops in place of the fused
// kernel; sim/megatron_rope.h), --no-bias-swiglu-fusion (likewise for SwiGLU;
// sim/megatron_activation.h), --no-bias-dropout-fusion (the bias-dropout-add
// as separate ops), --no-bias-gelu-fusion (taken where Megatron
// turns the fusion off itself), --use-rotary-position-embeddings (Megatron's
// legacy spelling of --position-embedding-type rope) and --use-rope-scaling
// (Llama 3.1's frequencies: accepted, not modelled), as Megatron-LM's
// examples/post_training/modelopt/conf/ model arguments give them.
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

const std::string kSimulate = "simulate --topology topologies/h100_32x8.json --data-parallel-size 8 ";
const std::string kLlama =
    "--num-layers 4 --hidden-size 2048 --num-attention-heads 16 --group-query-attention --num-query-groups 4 "
    "--ffn-hidden-size 5632 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights "
    "--normalization RMSNorm --seq-length 4096 --vocab-size 32000 --global-batch-size 64 --bf16 --use-flash-attn ";

nlohmann::json simulated(const std::string& flags, const std::string& name) {
  const CliRun run = run_baton(flags + " --json", name);
  INFO(flags << ": " << run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

TEST_CASE("fusion flags: --no-rope-fusion is slower, kept, and planned with", "[cli][megatron]") {
  const nlohmann::json fused = simulated(kSimulate + kLlama + "--position-embedding-type rope", "rope-fused");
  const nlohmann::json unfused =
      simulated(kSimulate + kLlama + "--position-embedding-type rope --no-rope-fusion", "rope-unfused");
  CHECK(unfused["model"]["apply_rope_fusion"] == false);
  CHECK_FALSE(fused["model"].contains("apply_rope_fusion"));
  CHECK(unfused["iteration_time_s"].get<double>() > fused["iteration_time_s"].get<double>());
  CHECK(unfused["memory"] == fused["memory"]);  // the ops keep only the s x d tables
  // plan's launch line carries it, and simulates back to the planned time.
  const std::string plan = "plan --topology topologies/h100_32x8.json --gpus 8 " + kLlama +
                           "--position-embedding-type rope --no-rope-fusion";
  const nlohmann::json planned = simulated(plan, "rope-plan");
  const CliRun emitted = run_baton(plan + " --emit megatron", "rope-plan-emit");
  INFO(emitted.err);
  REQUIRE(emitted.exit_code == 0);
  const std::string line = emitted.out.substr(0, emitted.out.find('\n'));
  CHECK(line.find(" --no-rope-fusion") != std::string::npos);
  const nlohmann::json back =
      simulated("simulate --topology topologies/h100_32x8.json " + line + " --data-parallel-size " +
                    std::to_string(planned["layout"]["data_parallel_size"].get<int>()),
                "rope-plan-back");
  CHECK(back["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(back["model"] == planned["model"]);
}

TEST_CASE("fusion flags: without rotary positions --no-rope-fusion changes nothing, as in Megatron",
          "[cli][megatron]") {
  const std::string gpt = kSimulate +
                          "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                          "--global-batch-size 64 ";
  const nlohmann::json plain = simulated(gpt, "rope-gpt-plain");
  const nlohmann::json flagged = simulated(gpt + "--no-rope-fusion", "rope-gpt-flagged");
  CHECK(flagged["iteration_time_s"] == plain["iteration_time_s"]);
  CHECK(flagged["model"] == plain["model"]);
}

TEST_CASE("fusion flags: Megatron's legacy --use-rotary-position-embeddings is rope", "[cli][megatron]") {
  const nlohmann::json typed = simulated(kSimulate + kLlama + "--position-embedding-type rope", "rope-typed");
  const nlohmann::json legacy = simulated(kSimulate + kLlama + "--use-rotary-position-embeddings", "rope-legacy");
  CHECK(legacy["model"] == typed["model"]);
  CHECK(legacy["iteration_time_s"] == typed["iteration_time_s"]);
  // Megatron lets it override the type it is given.
  const nlohmann::json both = simulated(
      kSimulate + kLlama + "--position-embedding-type learned_absolute --use-rotary-position-embeddings", "rope-both");
  CHECK(both["model"] == typed["model"]);
}

TEST_CASE("fusion flags: Megatron-LM's Llama 3.1 8B model arguments (modelopt) simulate as they are",
          "[cli][megatron]") {
  // examples/post_training/modelopt/conf/meta-llama/Llama-3.1-8B-Instruct.sh's
  // MODEL_ARGS, with the vocabulary and the batch that the script's caller gives.
  const std::string args =
      "--save-interval 100000 --micro-batch-size 1 --bf16 --no-masked-softmax-fusion --disable-bias-linear "
      "--untie-embeddings-and-output-weights --use-rotary-position-embeddings --rotary-percent 1.0 "
      "--no-rope-fusion --no-position-embedding --normalization RMSNorm --swiglu --num-layers 32 "
      "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
      "--num-query-groups 8 --seq-length 4096 --max-position-embeddings 8192 --tokenizer-type "
      "HuggingFaceTokenizer --make-vocab-size-divisible-by 1 --use-mcore-models --rotary-base 500000 "
      "--use-rope-scaling --vocab-size 128256 --global-batch-size 64 ";
  const CliRun run = run_baton(kSimulate + args + "--json", "rope-llama31");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json out = nlohmann::json::parse(run.out);
  CHECK(out["model"]["position_embedding_type"] == "rope");
  CHECK(out["model"]["apply_rope_fusion"] == false);
  CHECK(out["model"]["masked_softmax_fusion"] == false);
  const nlohmann::json& named = out["not_modelled_flags"];
  CHECK(std::find(named.begin(), named.end(), "--use-rope-scaling") != named.end());
}

TEST_CASE("fusion flags: --no-bias-swiglu-fusion is slower, keeps more, and is kept", "[cli][megatron]") {
  const std::string rope = kSimulate + kLlama + "--position-embedding-type rope ";
  const nlohmann::json fused = simulated(rope, "swiglu-fused");
  const nlohmann::json unfused = simulated(rope + "--no-bias-swiglu-fusion", "swiglu-unfused");
  CHECK(unfused["model"]["bias_activation_fusion"] == false);
  CHECK(unfused["iteration_time_s"].get<double>() > fused["iteration_time_s"].get<double>());
  CHECK(unfused["memory"][0]["activation_bytes"].get<double>() > fused["memory"][0]["activation_bytes"].get<double>());
  // Without SwiGLU it changes nothing, as in Megatron; --no-bias-gelu-fusion
  // without biases neither (Megatron turns it off itself there), and with
  // biases it adds the bias's kernel: slower, kept, and emitted.
  const std::string gpt = kSimulate +
                          "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                          "--global-batch-size 64 ";
  const nlohmann::json plain = simulated(gpt + "--disable-bias-linear", "gelu-plain");
  CHECK(simulated(gpt + "--disable-bias-linear --no-bias-swiglu-fusion", "gelu-swiglu-flag")["model"] ==
        plain["model"]);
  const nlohmann::json gelu = simulated(gpt + "--disable-bias-linear --no-bias-gelu-fusion", "gelu-flag");
  CHECK(gelu["model"] == plain["model"]);
  CHECK(gelu["iteration_time_s"] == plain["iteration_time_s"]);
  const nlohmann::json biased = simulated(gpt + "--no-bias-gelu-fusion", "gelu-biased");
  const nlohmann::json biased_fused = simulated(gpt, "gelu-biased-fused");
  CHECK(biased["model"]["bias_activation_fusion"] == false);
  CHECK(biased["iteration_time_s"].get<double>() > biased_fused["iteration_time_s"].get<double>());
  CHECK(biased["memory"] == biased_fused["memory"]);
  const CliRun emitted = run_baton(
      "plan --topology topologies/h100_32x8.json --gpus 8 --num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
      "--seq-length 2048 --global-batch-size 64 --no-bias-gelu-fusion --emit megatron",
      "gelu-emit");
  INFO(emitted.err);
  REQUIRE(emitted.exit_code == 0);
  CHECK(emitted.out.substr(0, emitted.out.find('\n')).find(" --no-bias-gelu-fusion") != std::string::npos);
}

TEST_CASE("fusion flags: Megatron-LM's Qwen3 8B model arguments (modelopt) simulate as they are", "[cli][megatron]") {
  // examples/post_training/modelopt/conf/Qwen/Qwen3-8B.sh's MODEL_ARGS, with
  // the vocabulary and the batch that the script's caller gives.
  const std::string args =
      "--save-interval 100000 --micro-batch-size 1 --bf16 --no-masked-softmax-fusion --disable-bias-linear "
      "--untie-embeddings-and-output-weights --position-embedding-type rope --no-rope-fusion --normalization RMSNorm "
      "--swiglu --num-layers 36 --hidden-size 4096 --ffn-hidden-size 12288 --num-attention-heads 32 "
      "--group-query-attention --num-query-groups 8 --kv-channels 128 --qk-layernorm --seq-length 4096 "
      "--max-position-embeddings 40960 --tokenizer-type HuggingFaceTokenizer --make-vocab-size-divisible-by 1187 "
      "--use-mcore-models --rotary-percent 1.0 --rotary-base 1000000 --no-bias-swiglu-fusion --vocab-size 151936 "
      "--global-batch-size 64 ";
  const nlohmann::json out = simulated(kSimulate + args, "fusion-qwen3");
  CHECK(out["model"]["apply_rope_fusion"] == false);
  CHECK(out["model"]["bias_activation_fusion"] == false);
  CHECK(out["model"]["qk_layernorm"] == true);
}

// examples/post_training/modelopt/conf/Qwen/Qwen3-30B-A3B.sh's MODEL_ARGS: a
// head width of 128 at h 2048 and 32 heads (--kv-channels), and the router
// in fp32 (--moe-router-dtype), both modelled; with the vocabulary, the batch
// and the expert parallelism the script's caller gives.
TEST_CASE("fusion flags: Megatron-LM's Qwen3 30B-A3B model arguments (modelopt) simulate as they are",
          "[cli][megatron]") {
  const std::string args =
      "--save-interval 100000 --micro-batch-size 1 --bf16 --no-masked-softmax-fusion --disable-bias-linear "
      "--untie-embeddings-and-output-weights --position-embedding-type rope --no-rope-fusion --normalization RMSNorm "
      "--swiglu --num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 "
      "--group-query-attention --num-query-groups 4 --kv-channels 128 --qk-layernorm --num-experts 128 "
      "--moe-ffn-hidden-size 768 --moe-router-topk 8 --moe-router-dtype fp32 --moe-aux-loss-coeff 1e-3 "
      "--moe-token-dispatcher-type alltoall --moe-router-load-balancing-type aux_loss --seq-length 4096 "
      "--max-position-embeddings 40960 --tokenizer-type HuggingFaceTokenizer --make-vocab-size-divisible-by 1187 "
      "--use-mcore-models --rotary-percent 1.0 --rotary-base 1000000 --no-bias-swiglu-fusion --sequence-parallel "
      "--vocab-size 151936 --global-batch-size 64 --expert-model-parallel-size 8 ";
  const nlohmann::json out = simulated(kSimulate + args, "fusion-qwen3-moe");
  CHECK(out["model"]["kv_channels"] == 128);
  CHECK(out["model"]["moe_router_dtype"] == "fp32");
  std::string bf16_router = args;
  bf16_router.erase(bf16_router.find("--moe-router-dtype fp32 "), std::string("--moe-router-dtype fp32 ").size());
  const nlohmann::json bf16 = simulated(kSimulate + bf16_router, "fusion-qwen3-moe-bf16");
  CHECK(out["iteration_time_s"].get<double>() > bf16["iteration_time_s"].get<double>());
  CHECK(out["memory"] == bf16["memory"]);
  const CliRun fp64 = run_baton(kSimulate + bf16_router + "--moe-router-dtype fp64", "fusion-qwen3-moe-fp64");
  CHECK(fp64.exit_code == 2);
  CHECK(fp64.err.find("--moe-router-dtype fp64: the router's GEMMs in fp64 are not modelled") != std::string::npos);
  CHECK(fp64.out.empty());
}

TEST_CASE("fusion flags: --no-bias-dropout-fusion is slower forward, kept, and emitted", "[cli][megatron]") {
  const std::string gpt =
      "--num-layers 4 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
      "--global-batch-size 64 --micro-batch-size 4 ";
  const nlohmann::json fused = simulated(kSimulate + gpt, "bda-fused");
  const nlohmann::json unfused = simulated(kSimulate + gpt + "--no-bias-dropout-fusion", "bda-unfused");
  CHECK(unfused["model"]["bias_dropout_fusion"] == false);
  CHECK(unfused["iteration_time_s"].get<double>() > fused["iteration_time_s"].get<double>());
  CHECK(unfused["memory"] == fused["memory"]);
  const CliRun emitted = run_baton(
      "plan --topology topologies/h100_32x8.json --gpus 8 " + gpt + "--no-bias-dropout-fusion --emit megatron",
      "bda-emit");
  INFO(emitted.err);
  REQUIRE(emitted.exit_code == 0);
  CHECK(emitted.out.substr(0, emitted.out.find('\n')).find(" --no-bias-dropout-fusion") != std::string::npos);
}

}  // namespace
