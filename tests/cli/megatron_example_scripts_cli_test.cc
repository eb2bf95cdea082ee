// Megatron-LM's own example launch scripts, their flags as the scripts give
// them (the paths filled in), run through `baton simulate` unchanged:
// examples/gpt3/train_gpt3_175b_distributed.sh,
// examples/mixtral/train_mixtral_8x7b_distributed.sh and
// examples/llama/train_llama3_8b_h100_fp8.sh of NVIDIA/Megatron-LM.
// What baton models is modelled (the layout, --max-position-embeddings,
// dropout 0, --no-masked-softmax-fusion), the training flags are named as
// not modelled, and Megatron's own adjustment (--sequence-parallel off at t
// 1) is made and said.
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

const std::string kGpt3 =
    "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048 "
    "--attention-backend auto --micro-batch-size 1 --global-batch-size 1536 "
    "--step-batch-size-schedule \"0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536\" --train-iters 500000 "
    "--weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --init-method-std 0.006 --clip-grad 1.0 --fp16 "
    "--lr 6.0e-5 --lr-decay-style cosine --min-lr 6.0e-6 --lr-warmup-fraction .001 --lr-decay-iters 430000 "
    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --data-path /data/gpt3_text_document "
    "--vocab-file /data/gpt2-vocab.json --merge-file /data/gpt2-merges.txt --split 949,50,1 --log-interval 100 "
    "--save-interval 10000 --eval-interval 1000 --save /ckpt --load /ckpt --eval-iters 10 --tensorboard-dir /tb ";

const std::string kMixtral =
    "--use-mcore-models --disable-bias-linear --seq-length 4096 --max-position-embeddings 32768 --num-layers 32 "
    "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --init-method-std 0.01 "
    "--attention-dropout 0.0 --hidden-dropout 0.0 --normalization RMSNorm --position-embedding-type rope --swiglu "
    "--untie-embeddings-and-output-weights --group-query-attention --num-query-groups 8 --no-masked-softmax-fusion "
    "--no-position-embedding --rotary-base 1000000 --num-experts 8 --moe-router-topk 2 "
    "--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2 --moe-grouped-gemm "
    "--moe-token-dispatcher-type alltoall --overlap-param-gather --overlap-grad-reduce --tokenizer-type "
    "Llama2Tokenizer --tokenizer-model /data/tokenizer.model --data-path /data/mixtral_text_document --split "
    "99990,8,2 --micro-batch-size 1 --global-batch-size 256 --lr 1e-4 --train-iters 500000 --lr-decay-iters 320000 "
    "--lr-decay-style cosine --min-lr 1.0e-5 --weight-decay 0.1 --lr-warmup-iters 500 --clip-grad 1.0 --bf16 "
    "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --expert-model-parallel-size 8 "
    "--use-distributed-optimizer --sequence-parallel --log-interval 1 --save-interval 10000 --eval-interval 1000 "
    "--eval-iters 10 --save /ckpt --load /ckpt --tensorboard-dir /ckpt/tensorboard ";

const std::string kSimulate = "simulate --topology topologies/h100_32x8.json ";

TEST_CASE("example scripts: Megatron-LM's GPT-3 175B launch flags simulate as they are", "[cli][megatron]") {
  const CliRun run = run_baton(kSimulate + kGpt3 + "--json", "example-gpt3");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json out = nlohmann::json::parse(run.out);
  CHECK(out["layout"]["tensor_model_parallel_size"] == 8);
  CHECK(out["layout"]["pipeline_model_parallel_size"] == 16);
  CHECK(out["layout"]["data_parallel_size"] == 2);  // the topology's 256 GPUs / (t p)
  // --max-position-embeddings 2048 is the sequence: the model is GPT-3's as without it.
  const CliRun bare = run_baton(kSimulate +
                                    "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
                                    "--attention-backend auto --micro-batch-size 1 --global-batch-size 1536 --fp16 "
                                    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --json",
                                "example-gpt3-bare");
  REQUIRE(bare.exit_code == 0);
  const nlohmann::json plain = nlohmann::json::parse(bare.out);
  CHECK(out["iteration_time_s"] == plain["iteration_time_s"]);
  CHECK(out["model"]["parameters"] == plain["model"]["parameters"]);
  CHECK(out["not_modelled_flags"].size() == 23);
  CHECK(run.err.find("--step-batch-size-schedule") != std::string::npos);
}

TEST_CASE("example scripts: Megatron-LM's Mixtral 8x7B launch flags simulate as they are", "[cli][megatron][moe]") {
  const CliRun run = run_baton(kSimulate + kMixtral + "--json", "example-mixtral");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json out = nlohmann::json::parse(run.out);
  CHECK(out["layout"]["sequence_parallel"] == false);
  CHECK(run.err.find("--sequence-parallel with --tensor-model-parallel-size 1 is off, as Megatron turns it off") !=
        std::string::npos);
  CHECK(out["model"]["attention_dropout"] == 0.0);
  CHECK(out["model"]["max_position_embeddings"] == 32768);  // carried, no table with rotary positions
  CHECK(out["model"]["masked_softmax_fusion"] == false);
  CHECK(out["layout"]["expert_model_parallel_size"] == 8);
  // Megatron refuses --no-position-embedding with learned positions, and so does baton.
  const CliRun learned = run_baton(kSimulate +
                                       "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
                                       "--seq-length 2048 --global-batch-size 256 --no-position-embedding",
                                   "example-no-position");
  CHECK(learned.exit_code == 2);
  CHECK(learned.err.find("--no-position-embedding goes with --position-embedding-type rope") != std::string::npos);
  CHECK(learned.out.empty());
}

// examples/llama/train_llama3_8b_h100_fp8.sh, its arrays as the script
// passes them (the mock-data branch, the paths filled in).
const std::string kLlama3Fp8 =
    "--use-mcore-models --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
    "--group-query-attention --num-query-groups 8 --kv-channels 128 --seq-length 8192 --max-position-embeddings 8192 "
    "--position-embedding-type rope --rotary-base 1000000 --rotary-percent 1.0 --attention-dropout 0.0 "
    "--hidden-dropout 0.0 --swiglu --normalization RMSNorm --init-method-std 0.0134 --attention-backend fused "
    "--apply-layernorm-1p --untie-embeddings-and-output-weights --disable-bias-linear --micro-batch-size 1 "
    "--global-batch-size 128 --train-samples 1953125000 --lr-decay-samples 1949218748 --lr-warmup-samples 3906252 "
    "--lr 0.00015 --min-lr 0.00001 --decoupled-lr 5.0e-4 --decoupled-min-lr 4.5e-5 --lr-decay-style cosine "
    "--clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --grad-reduce-in-bf16 "
    "--cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc --empty-unused-memory-level 1 "
    "--exit-duration-in-mins 235 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
    "--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max --fp8-param-gather "
    "--tensor-model-parallel-size 1 --context-parallel-size 1 --sequence-parallel --mock-data "
    "--tokenizer-type NullTokenizer --vocab-size 128256 --data-cache-path /cache --tiktoken-pattern v2 "
    "--split '99,1,0' --no-create-attention-mask-in-dataloader --no-mmap-bin-files --num-workers 1 "
    "--log-interval 1 --eval-iters 32 --eval-interval 100 --save-interval 1000 --log-throughput --profile "
    "--profile-step-start 4 --profile-step-end 6 --ckpt-format torch_dist --distributed-timeout-minutes 60 "
    "--save /ckpt --load /ckpt --tensorboard-dir /tb ";

TEST_CASE("example scripts: Megatron-LM's Llama 3 8B FP8 launch flags simulate as they are", "[cli][megatron]") {
  const CliRun run = run_baton(kSimulate + kLlama3Fp8 + "--data-parallel-size 8 --json", "example-llama3-fp8");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json out = nlohmann::json::parse(run.out);
  // What the script asks for that baton models, modelled.
  CHECK(out["model"]["fp8"] == "hybrid");
  CHECK(out["model"]["fp8_param_gather"] == true);
  CHECK(out["model"]["cross_entropy_loss_fusion"] == true);
  CHECK(out["layout"]["grad_reduce_in_bf16"] == true);
  CHECK(out["layout"]["sequence_parallel"] == false);  // t 1: Megatron turns it off
  // The same model and layout without the flags that change nothing: the
  // same iteration, to the bit.
  const CliRun bare = run_baton(
      kSimulate +
          "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
          "--group-query-attention --num-query-groups 8 --seq-length 8192 --position-embedding-type rope "
          "--attention-dropout 0.0 --hidden-dropout 0.0 --swiglu --normalization RMSNorm --attention-backend fused "
          "--untie-embeddings-and-output-weights --disable-bias-linear --micro-batch-size 1 --global-batch-size 128 "
          "--bf16 --grad-reduce-in-bf16 --cross-entropy-loss-fusion --use-distributed-optimizer --overlap-grad-reduce "
          "--overlap-param-gather --fp8-format hybrid --fp8-param-gather --max-position-embeddings 8192 "
          "--vocab-size 128256 --data-parallel-size 8 --json",
      "example-llama3-fp8-bare");
  INFO(bare.err);
  REQUIRE(bare.exit_code == 0);
  const nlohmann::json plain = nlohmann::json::parse(bare.out);
  CHECK(out["iteration_time_s"] == plain["iteration_time_s"]);
  CHECK(out["memory"] == plain["memory"]);
  // Named as accepted and not modelled, among them Megatron's --profile
  // switch and the allocator's --empty-unused-memory-level.
  const nlohmann::json& named = out["not_modelled_flags"];
  for (const char* flag : {"--profile", "--empty-unused-memory-level", "--fp8-amax-history-len",
                           "--fp8-amax-compute-algo", "--tiktoken-pattern", "--no-mmap-bin-files",
                           "--no-create-attention-mask-in-dataloader", "--rotary-percent", "--apply-layernorm-1p"})
    CHECK(std::find(named.begin(), named.end(), flag) != named.end());
}

// examples/llama/train_llama3_8b_h100_fp8.sh gives --kv-channels 128, h / a:
// Megatron's default, the same prediction to the bit. Another head width is
// modelled (the queries a d wide): wider heads take longer, and the width
// goes into the architecture line and the plan's launch flags.
TEST_CASE("example scripts: --kv-channels at h / a is the default, another width is modelled", "[cli][megatron]") {
  const std::string model = kSimulate +
                            "--num-layers 4 --hidden-size 4096 --num-attention-heads 32 --seq-length 2048 "
                            "--global-batch-size 256 --use-flash-attn ";
  const CliRun same = run_baton(model + "--kv-channels 128 --json", "example-kv-same");
  const CliRun bare = run_baton(model + "--json", "example-kv-bare");
  INFO(same.err);
  REQUIRE(same.exit_code == 0);
  REQUIRE(bare.exit_code == 0);
  const double plain = nlohmann::json::parse(bare.out)["iteration_time_s"].get<double>();
  CHECK(nlohmann::json::parse(same.out)["iteration_time_s"].get<double>() == plain);
  CHECK(bare.out.find("kv_channels") == std::string::npos);
  const CliRun wide = run_baton(model + "--kv-channels 256 --json", "example-kv-wide");
  const CliRun narrow = run_baton(model + "--kv-channels 64", "example-kv-narrow");
  INFO(wide.err << narrow.err);
  REQUIRE(wide.exit_code == 0);
  REQUIRE(narrow.exit_code == 0);
  CHECK(nlohmann::json::parse(wide.out)["iteration_time_s"].get<double>() > plain);
  CHECK(narrow.out.find("--kv-channels 64") != std::string::npos);
  const CliRun plan = run_baton(
      "plan --topology topologies/h100_32x8.json --gpus 8 --num-layers 4 --hidden-size 4096 "
      "--num-attention-heads 32 --kv-channels 64 --seq-length 2048 --global-batch-size 256 --use-flash-attn "
      "--emit megatron",
      "example-kv-plan");
  INFO(plan.err);
  REQUIRE(plan.exit_code == 0);
  CHECK(plan.out.find(" --kv-channels 64 ") != std::string::npos);
  // Multi-latent attention has head widths of its own; Megatron ignores
  // --kv-channels there, and so does baton.
  const std::string mla = kSimulate +
                          "--num-layers 2 --hidden-size 1024 --num-attention-heads 16 --multi-latent-attention "
                          "--kv-lora-rank 256 --seq-length 1024 --global-batch-size 256 --use-flash-attn "
                          "--position-embedding-type rope --json";
  const CliRun latent = run_baton(mla, "example-kv-mla");
  const CliRun latent_kv = run_baton(mla + " --kv-channels 32", "example-kv-mla-32");
  REQUIRE(latent.exit_code == 0);
  REQUIRE(latent_kv.exit_code == 0);
  CHECK(nlohmann::json::parse(latent_kv.out)["iteration_time_s"] ==
        nlohmann::json::parse(latent.out)["iteration_time_s"]);
}

}  // namespace

namespace {

// examples/llama/train_llama3_8b_h100_fp8.sh reduces gradients in bf16
// (--grad-reduce-in-bf16): plan keeps it on its layout and in its launch line.
TEST_CASE("example scripts: --grad-reduce-in-bf16 goes on the plan and its launch line, and simulates back",
          "[cli][megatron]") {
  const std::string plan =
      "plan --topology topologies/h100_32x8.json --gpus 16 --num-layers 8 --hidden-size 2048 "
      "--num-attention-heads 16 --seq-length 2048 --global-batch-size 128 --bf16 "
      "--use-flash-attn --grad-reduce-in-bf16 ";
  const CliRun planned = run_baton(plan + "--json", "example-grad-plan");
  const CliRun emitted = run_baton(plan + "--emit megatron", "example-grad-emit");
  INFO(planned.err << emitted.err);
  REQUIRE(planned.exit_code == 0);
  REQUIRE(emitted.exit_code == 0);
  CHECK(nlohmann::json::parse(planned.out)["layout"]["grad_reduce_in_bf16"] == true);
  const std::string line = emitted.out.substr(0, emitted.out.find('\n'));
  CHECK(line.find(" --grad-reduce-in-bf16") != std::string::npos);
  const CliRun back = run_baton(
      kSimulate + line + " --data-parallel-size " +
          std::to_string(nlohmann::json::parse(planned.out)["layout"]["data_parallel_size"].get<int>()) + " --json",
      "example-grad-back");
  INFO(back.err);
  REQUIRE(back.exit_code == 0);
  CHECK(nlohmann::json::parse(back.out)["iteration_time_s"].get<double>() ==
        Approx(nlohmann::json::parse(planned.out)["iteration_time_s"].get<double>()));
}

}  // namespace
