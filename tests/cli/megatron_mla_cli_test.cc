// `baton simulate` and `plan` with DeepSeek's multi-latent attention
// (--multi-latent-attention and its sizes) and multi-token prediction
// (--mtp-num-layers): DeepSeek-V3's parameters in the report and its JSON,
// the plan's launch line carrying the flags and simulating back to the
// planned time, and the refusals.
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"
#include "tests/cli/megatron_cli_support.h"

using namespace baton::testing;

namespace {

// DeepSeek-V3 in Megatron-core's flags (DeepSeek-V3 technical report, arXiv
// 2412.19437, section 4.2, and its config.json): 61 layers of h 7168, 128
// heads, query latent 1536, key-value latent 512, heads 128 + 64 / 128, 256
// experts of width 2048 with one shared, top 8, the first 3 blocks dense.
const std::string kDeepSeekV3 =
    "--num-layers 61 --hidden-size 7168 --num-attention-heads 128 --ffn-hidden-size 18432 --swiglu "
    "--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
    "--normalization RMSNorm --use-flash-attn --vocab-size 129280 --seq-length 4096 --multi-latent-attention "
    "--q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 "
    "--qk-layernorm --num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 "
    "--moe-shared-expert-intermediate-size 2048 --moe-layer-freq '([0]*3+[1]*58)' --moe-grouped-gemm --bf16 ";

// DeepSeek-V2-Lite (DeepSeek-V2 paper, arXiv 2405.04434, appendix B): 27
// layers of h 2048, 16 heads, no query latent, 64 experts of width 1408 with
// two shared, top 6, the first block dense.
const std::string kDeepSeekV2Lite =
    "--num-layers 27 --hidden-size 2048 --num-attention-heads 16 --ffn-hidden-size 10944 --swiglu "
    "--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
    "--normalization RMSNorm --use-flash-attn --vocab-size 102400 --seq-length 4096 --multi-latent-attention "
    "--kv-lora-rank 512 --qk-layernorm --num-experts 64 --moe-router-topk 6 --moe-ffn-hidden-size 1408 "
    "--moe-shared-expert-intermediate-size 2816 --moe-layer-freq '([0]*1+[1]*26)' --moe-grouped-gemm --bf16 "
    "--global-batch-size 256 ";

// A small GPT for the refusals.
const std::string kSmallGpt =
    "simulate --topology topologies/h100_32x8.json --num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
    "--seq-length 1024 --global-batch-size 8 --micro-batch-size 1 --data-parallel-size 1 ";

TEST_CASE("mla: simulate DeepSeek-V3 on 256 H100s: 671B parameters, 37.55B active", "[cli][megatron][mla]") {
  const std::string layout =
      "--global-batch-size 1024 --micro-batch-size 1 --pipeline-model-parallel-size 16 "
      "--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 2 --expert-model-parallel-size 16 "
      "--use-distributed-optimizer --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 ";
  const CliRun text = run_baton("simulate --topology topologies/h100_32x8.json " + kDeepSeekV3 + layout, "mla-v3");
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  // tests/megatron/latent_attention_test.cc derives both counts.
  CHECK(text.out.find("671.03B parameters (37.55B active per token)") != std::string::npos);
  CHECK(text.out.find("--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512") != std::string::npos);
  const CliRun json =
      run_baton("simulate --topology topologies/h100_32x8.json " + kDeepSeekV3 + layout + "--json", "mla-v3-json");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json out = nlohmann::json::parse(json.out);
  CHECK(out["model"]["multi_latent_attention"] == true);
  CHECK(out["model"]["q_lora_rank"] == 1536);
  CHECK(out["model"]["parameters"].get<double>() == 671026404352.0);
  CHECK(out["fits"] == true);
}

TEST_CASE("mla: plan DeepSeek-V2-Lite on 16 GPUs, and its launch line simulates to the planned time",
          "[cli][megatron][mla]") {
  const std::string line = plan_simulates_back("plan --topology topologies/h100_32x8.json " + kDeepSeekV2Lite +
                                                   "--gpus 16 --tensor-model-parallel-size 1 --micro-batch-size 2",
                                               "mla-plan");
  CHECK(line.find(" --multi-latent-attention --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 "
                  "--v-head-dim 128") != std::string::npos);
  CHECK(line.find("--q-lora-rank") == std::string::npos);  // V2-Lite has no query latent
}

TEST_CASE("mla: simulate refuses latent sizes without --multi-latent-attention, and grouped queries with it",
          "[cli][megatron][mla][bad-input]") {
  const CliRun lonely = run_baton(kSmallGpt + "--kv-lora-rank 512", "mla-lonely");
  CHECK(lonely.exit_code == 2);
  CHECK(lonely.err.find("--kv-lora-rank needs --multi-latent-attention") != std::string::npos);
  CHECK(lonely.out.empty());
  const CliRun grouped =
      run_baton(kSmallGpt + "--multi-latent-attention --group-query-attention --num-query-groups 4", "mla-grouped");
  CHECK(grouped.exit_code == 2);
  CHECK(grouped.err.find("--num-query-groups 4 is refused") != std::string::npos);
}

TEST_CASE("mtp: DeepSeek-V3 with one prediction depth: its parameters, and the last stage's work and memory",
          "[cli][megatron][mtp]") {
  const std::string layout =
      "--global-batch-size 1024 --micro-batch-size 1 --pipeline-model-parallel-size 16 "
      "--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 2 --expert-model-parallel-size 16 "
      "--use-distributed-optimizer --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 ";
  const std::string simulate = "simulate --topology topologies/h100_32x8.json " + kDeepSeekV3 + layout;
  const CliRun text = run_baton(simulate + "--mtp-num-layers 1", "mtp-v3-text");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("682.64B parameters (38.24B active per token), 11.61B of them in 1 multi-token prediction "
                      "depth") != std::string::npos);
  const CliRun without = run_baton(simulate + "--json", "mtp-v3-without");
  const CliRun with = run_baton(simulate + "--json --mtp-num-layers 1", "mtp-v3-with");
  INFO(with.err);
  REQUIRE(without.exit_code == 0);
  REQUIRE(with.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(without.out), b = nlohmann::json::parse(with.out);
  CHECK(b["model"]["mtp_num_layers"] == 1);
  CHECK_FALSE(a["model"].contains("mtp_num_layers"));
  // tests/megatron/mtp_test.cc derives a depth's 11.61B (a MoE block,
  // eh_proj, three norms).
  CHECK((b["model"]["parameters"].get<double>() - a["model"]["parameters"].get<double>()) / 1e9 ==
        Approx(11.61).epsilon(0.001));
  // The depth (a MoE block and an output layer more) and the word
  // embedding's copy sit on the last pipeline rank alone.
  const nlohmann::json& last_a = a["memory"].back();
  const nlohmann::json& last_b = b["memory"].back();
  CHECK(last_b["weights_gradients_optimizer_bytes"].get<double>() >
        last_a["weights_gradients_optimizer_bytes"].get<double>());
  CHECK(last_b["activation_bytes"].get<double>() > last_a["activation_bytes"].get<double>());
  CHECK(b["memory"][0] == a["memory"][0]);
  CHECK(b["iteration_time_s"].get<double>() > a["iteration_time_s"].get<double>());
}

TEST_CASE("mtp: plan DeepSeek-V2-Lite with a prediction depth, and its launch line simulates to the planned time",
          "[cli][megatron][mtp]") {
  const std::string line =
      plan_simulates_back("plan --topology topologies/h100_32x8.json " + kDeepSeekV2Lite +
                              "--mtp-num-layers 1 --gpus 16 --tensor-model-parallel-size 1 --micro-batch-size 2",
                          "mtp-plan");
  CHECK(line.find(" --mtp-num-layers 1") != std::string::npos);
}

TEST_CASE("mtp: simulate refuses no depths and a recomputation Megatron-core asserts against",
          "[cli][megatron][mtp][bad-input]") {
  const CliRun zero = run_baton(kSmallGpt + "--mtp-num-layers 0", "mtp-zero");
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("--mtp-num-layers") != std::string::npos);
  CHECK(zero.out.empty());
  const CliRun grouped = run_baton(
      kSmallGpt + "--mtp-num-layers 1 --recompute-granularity full --recompute-method uniform --recompute-num-layers 2",
      "mtp-recompute");
  CHECK(grouped.exit_code == 2);
  CHECK(grouped.err.find("asserts --recompute-num-layers 1") != std::string::npos);
  CHECK(grouped.out.empty());
}

TEST_CASE("pipeline layout: DeepSeek-V3 with Megatron-LM's documented layout, and as the even flags' split",
          "[cli][megatron][pipeline-layout]") {
  const std::string simulate =
      "simulate --topology topologies/h100_32x8.json " + kDeepSeekV3 +
      "--global-batch-size 1024 --micro-batch-size 1 --tensor-model-parallel-size 4 "
      "--pipeline-model-parallel-size 16 --expert-model-parallel-size 16 --expert-tensor-parallel-size 1 "
      "--sequence-parallel --use-distributed-optimizer --mtp-num-layers 1 ";
  // Megatron-LM's documentation, "Custom Pipeline Model Parallel Layout".
  const CliRun documented =
      run_baton(simulate + "--pipeline-model-parallel-layout 'Et*3|(tt|)*29,m|L' --json", "layout-v3-documented");
  INFO(documented.err);
  REQUIRE(documented.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(documented.out);
  CHECK(a["layout"]["pipeline_model_parallel_layout"] == "Et*3|(tt|)*29,m|L");
  CHECK(a["schedule"] == "interleaved-1f1b");
  // One block on the last stage, with the depth and the loss: the same
  // split as --decoder-last-pipeline-num-layers 1, the same prediction.
  const CliRun spelled =
      run_baton(simulate + "--pipeline-model-parallel-layout 'Et*4|(t*4|)*14,tmL' --json", "layout-v3-spelled");
  const CliRun flags = run_baton(simulate + "--decoder-last-pipeline-num-layers 1 --json", "layout-v3-flags");
  REQUIRE(spelled.exit_code == 0);
  REQUIRE(flags.exit_code == 0);
  CHECK(nlohmann::json::parse(spelled.out)["iteration_time_s"] == nlohmann::json::parse(flags.out)["iteration_time_s"]);
  // The text report names the chunks.
  const CliRun text = run_baton(simulate + "--pipeline-model-parallel-layout 'Et*4|(t*4|)*14,tmL'", "layout-v3-text");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("1F1B (--pipeline-model-parallel-layout: Etttt|tttt|") != std::string::npos);
}

TEST_CASE("pipeline layout: simulate refuses a layout that does not fit the model, plan refuses the flag",
          "[cli][megatron][pipeline-layout][bad-input]") {
  const std::string gpt =
      "--topology topologies/h100_32x8.json --num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
      "--seq-length 1024 --global-batch-size 8 --micro-batch-size 1 --pipeline-model-parallel-size 2 ";
  const CliRun blocks = run_baton("simulate " + gpt + "--pipeline-model-parallel-layout 'Ett|tL'", "layout-blocks");
  CHECK(blocks.exit_code == 2);
  CHECK(blocks.err.find("3 transformer blocks (t) for --num-layers 4") != std::string::npos);
  CHECK(blocks.out.empty());
  const CliRun letter = run_baton("simulate " + gpt + "--pipeline-model-parallel-layout 'Ett|ttX'", "layout-letter");
  CHECK(letter.exit_code == 2);
  CHECK(letter.err.find("'X' is not a layer") != std::string::npos);
  const CliRun plan = run_baton("plan " + gpt + "--pipeline-model-parallel-layout 'Ett|ttL'", "layout-plan");
  CHECK(plan.exit_code == 2);
  CHECK(plan.err.find("--pipeline-model-parallel-layout is for simulate") != std::string::npos);
}

}  // namespace
