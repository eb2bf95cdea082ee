// `baton plan -o` with Megatron's flags: the plan file names its model, layout,
// schedule and topology; `simulate --plan` runs it to the planned time on that
// topology and refuses it on another; `run --plan` refuses it with the way to
// launch it; `--emit torchrun` prints the launch line.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

const std::string kModel =
    "--num-layers 16 --hidden-size 2048 --num-attention-heads 16 --seq-length 1024 --global-batch-size 64 ";

}  // namespace

TEST_CASE("a Megatron plan file names its model, layout and topology and simulates to its planned time",
          "[cli][megatron]") {
  const fs::path dir = scratch_dir("megatron-plan-file");
  const fs::path plan = dir / "plan.json";
  const CliRun planned =
      run_baton("plan --topology topologies/a100_4x8.json " + kModel + "-o " + quoted(plan), "megatron-plan-o");
  INFO(planned.err);
  REQUIRE(planned.exit_code == 0);
  const nlohmann::json file = nlohmann::json::parse(slurp(plan));
  CHECK(file["format"] == "baton.plan.v1");
  CHECK(file["topology"] == nlohmann::json{{"name", "a100-4x8"}, {"devices", 32}, {"device", "A100-SXM4-80GB"}});
  const nlohmann::json& m = file["megatron"];
  CHECK(m["num_layers"] == 16);
  CHECK(m["hidden_size"] == 2048);
  const int t = m["tensor_model_parallel_size"], p = m["pipeline_model_parallel_size"], d = m["data_parallel_size"];
  CHECK(t * p * d == 32);
  CHECK(file["schedule"] == (m["num_layers_per_virtual_pipeline_stage"] == 0 ? "1f1b" : "interleaved-1f1b"));
  CHECK(file["microbatch_size"] == m["micro_batch_size"]);

  const CliRun simulated =
      run_baton("simulate --topology topologies/a100_4x8.json --json --plan " + quoted(plan), "megatron-plan-simulate");
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  const nlohmann::json figures = nlohmann::json::parse(simulated.out);
  CHECK(figures["iteration_time_s"].get<double>() ==
        Approx(file["prediction"]["iteration_time_s"].get<double>()).epsilon(1e-12));
  CHECK(figures["layout"]["tensor_model_parallel_size"] == t);

  const CliRun elsewhere =
      run_baton("simulate --topology topologies/h100_32x8.json --plan " + quoted(plan), "megatron-plan-elsewhere");
  CHECK(elsewhere.exit_code == 2);
  CHECK(elsewhere.err.find("was made for topology \"a100-4x8\" (32 x A100-SXM4-80GB), not \"h100-32x8\"") !=
        std::string::npos);

  // The file holds the layout: a layout flag beside it is refused, not ignored.
  const CliRun relaid =
      run_baton("simulate --topology topologies/a100_4x8.json --tensor-model-parallel-size 8 --plan " + quoted(plan),
                "megatron-plan-relaid");
  CHECK(relaid.exit_code == 2);
  CHECK(relaid.err.find("--tensor-model-parallel-size goes with Megatron's flags, not with " + plan.string() +
                        ": the plan file holds its model and layout") != std::string::npos);

  const CliRun run = run_baton("run --plan " + quoted(plan), "megatron-plan-run");
  CHECK(run.exit_code == 2);
  if (run.err.find("built without LibTorch") == std::string::npos) {  // the executor is there: it says why
    CHECK(run.err.find("a GPT layout for Megatron-LM") != std::string::npos);
    CHECK(run.err.find("--emit torchrun") != std::string::npos);
  }
}

TEST_CASE("plan --emit torchrun prints the launch line of the chosen layout", "[cli][megatron]") {
  const CliRun gpt = run_baton("plan --topology topologies/a100_4x8.json " + kModel +
                                   "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 --emit torchrun",
                               "megatron-emit-torchrun");
  INFO(gpt.err);
  REQUIRE(gpt.exit_code == 0);
  // t 8 x p 2 x d 2 = 32 GPUs: all 4 servers of 8.
  CHECK(gpt.out.rfind("torchrun --nnodes=4 --nproc-per-node=8 --node-rank=$NODE_RANK", 0) == 0);
  CHECK(gpt.out.find(" pretrain_gpt.py --num-layers 16 ") != std::string::npos);
  CHECK(gpt.out.find("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2") != std::string::npos);

  // 12 GPUs on servers of 8 (t 1 x p 3 x d 4, or any layout of 12): node 0
  // runs 8 processes and node 1 the other 4, a world of 8 + 4 = 12.
  const CliRun partial = run_baton("plan --topology topologies/a100_4x8.json " + kModel + "--gpus 12 --emit torchrun",
                                   "megatron-emit-torchrun-partial");
  INFO(partial.err);
  REQUIRE(partial.exit_code == 0);
  CHECK(partial.out.rfind("torchrun --nnodes=2 --nproc-per-node=$((NODE_RANK < 1 ? 8 : 4)) --node-rank=$NODE_RANK",
                          0) == 0);

  const fs::path dir = scratch_dir("profile-emit-torchrun");
  // A model of the executor's zoo (measured on an H200, data/measured): the line runs it.
  const CliRun profile = run_baton(
      "plan --profile data/measured/h200/second-call/profiles/mlp.json --topology tests/data/tiny_topology.json "
      "--schedule 1f1b --microbatches 8 -o " +
          quoted(dir / "plan.json") + " --emit torchrun",
      "profile-emit-torchrun");
  INFO(profile.err);
  REQUIRE(profile.exit_code == 0);
  CHECK(profile.out.rfind("torchrun --nnodes=", 0) == 0);
  CHECK(profile.out.find("--no-python baton run --plan " + (dir / "plan.json").string() + " --backend gloo") !=
        std::string::npos);
  const CliRun without_file =
      run_baton("plan --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json --emit torchrun",
                "profile-emit-torchrun-bad");
  CHECK(without_file.exit_code == 2);
  CHECK(without_file.err.find("--emit torchrun needs -o") != std::string::npos);
  // A model the executor has no code for: its line would only fail in `baton run`.
  const fs::path unknown = dir / "tiny-plan.json";
  const CliRun not_zoo = run_baton(
      "plan --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json "
      "-o " +
          quoted(unknown) + " --emit torchrun",
      "profile-emit-torchrun-not-zoo");
  CHECK(not_zoo.exit_code == 2);
  CHECK(
      not_zoo.err.find("(mlp, vgg-mini, gpt-mini); tests/data/tiny_profile.json holds \"tiny\", which it cannot run") !=
      std::string::npos);
  CHECK_FALSE(fs::exists(unknown));
}

TEST_CASE("plan pins the zero-bubble schedule either way and emits the fork's flags", "[cli][megatron]") {
  const CliRun zb = run_baton("plan --topology topologies/a100_4x8.json " + kModel +
                                  "--pipeline-model-parallel-size 4 --enable-zero-bubble "
                                  "--zero-bubble-max-pending-backward 8 --emit megatron",
                              "megatron-zb-emit");
  INFO(zb.err);
  REQUIRE(zb.exit_code == 0);
  CHECK(zb.out.find("--pipeline-model-parallel-size 4") != std::string::npos);
  CHECK(zb.out.find(" --enable-zero-bubble --zero-bubble-max-pending-backward 8") != std::string::npos);
  // The line needs the Zero Bubble authors' fork, and says so on stderr.
  CHECK(zb.err.find("flags of the Zero Bubble authors' fork of Megatron-LM") != std::string::npos);

  const CliRun off =
      run_baton("plan --topology topologies/a100_4x8.json " + kModel + "--enable-zero-bubble=false --json --keep 20",
                "megatron-zb-off");
  INFO(off.err);
  REQUIRE(off.exit_code == 0);
  const nlohmann::json document = nlohmann::json::parse(off.out);
  CHECK(document["layout"]["enable_zero_bubble"] == false);
  for (const nlohmann::json& candidate : document["candidates"])
    CHECK(candidate["layout"].get<std::string>().find("zb-h") == std::string::npos);

  const CliRun unpinned = run_baton("plan --topology topologies/a100_4x8.json " + kModel +
                                        "--enable-zero-bubble --zero-bubble-max-pending-backward 8",
                                    "megatron-zb-unpinned");
  CHECK(unpinned.exit_code == 2);
  CHECK(unpinned.err.find("--zero-bubble-max-pending-backward") != std::string::npos);
}

TEST_CASE("plan pins a V either way: --dualpipev searches only DualPipeV, --zero-bubble-v-schedule=false none",
          "[cli][megatron]") {
  const CliRun dualpipev = run_baton(
      "plan --topology topologies/a100_4x8.json " + kModel + "--dualpipev --json --keep 20", "megatron-v-pin");
  INFO(dualpipev.err);
  REQUIRE(dualpipev.exit_code == 0);
  const nlohmann::json pinned = nlohmann::json::parse(dualpipev.out);
  CHECK(pinned["layout"]["dualpipev"] == true);
  REQUIRE_FALSE(pinned["candidates"].empty());
  for (const nlohmann::json& candidate : pinned["candidates"])
    CHECK(candidate["layout"].get<std::string>().find(" dualpipev ") != std::string::npos);
  const CliRun emitted =
      run_baton("plan --topology topologies/a100_4x8.json " + kModel + "--dualpipev --emit megatron", "megatron-v-pin");
  REQUIRE(emitted.exit_code == 0);
  CHECK(emitted.out.find(" --dualpipev") != std::string::npos);
  CHECK(emitted.err.find("--dualpipev is baton's own flag: no Megatron-LM runs DualPipeV") != std::string::npos);
  // Megatron-LM's own schedules need no note of their flags; the model
  // without FlashAttention gets one of its attention, which the line pins.
  const CliRun stock = run_baton("plan --topology topologies/a100_4x8.json " + kModel +
                                     "--enable-zero-bubble=false --zero-bubble-v-schedule=false --emit megatron",
                                 "megatron-v-pin");
  REQUIRE(stock.exit_code == 0);
  CHECK(stock.err.find("Zero Bubble") == std::string::npos);
  CHECK(stock.err.find("--dualpipev") == std::string::npos);
  CHECK(stock.err.find("note: the plan times Megatron's unfused attention core") != std::string::npos);
  CHECK(stock.out.find(" --attention-backend unfused") != std::string::npos);
  // With FlashAttention nothing to say of the attention, nothing to pin (the
  // overlaps not asked for may still be named).
  const CliRun flash = run_baton("plan --topology topologies/a100_4x8.json " + kModel +
                                     "--use-flash-attn --enable-zero-bubble=false --zero-bubble-v-schedule=false "
                                     "--emit megatron",
                                 "megatron-v-pin");
  REQUIRE(flash.exit_code == 0);
  CHECK(flash.err.find("attention") == std::string::npos);
  CHECK(flash.out.find("--attention-backend") == std::string::npos);
  CHECK(flash.out.find(" --use-flash-attn") != std::string::npos);
  // The Zero Bubble fork predates the flag: the note says so, the line leaves it out.
  const CliRun fork = run_baton("plan --topology topologies/a100_4x8.json " + kModel +
                                    "--pipeline-model-parallel-size 4 --enable-zero-bubble --emit megatron",
                                "megatron-v-pin");
  REQUIRE(fork.exit_code == 0);
  CHECK(fork.err.find("the Zero Bubble fork predates --attention-backend") != std::string::npos);
  CHECK(fork.out.find("--attention-backend") == std::string::npos);
  const CliRun off = run_baton(
      "plan --topology topologies/a100_4x8.json " + kModel + "--zero-bubble-v-schedule=false --json --keep 20",
      "megatron-v-pin");
  REQUIRE(off.exit_code == 0);
  const nlohmann::json unpinned = nlohmann::json::parse(off.out);  // kept: the loop reads into it
  for (const nlohmann::json& candidate : unpinned["candidates"]) {
    CHECK(candidate["layout"].get<std::string>().find("zbv") == std::string::npos);
    CHECK(candidate["layout"].get<std::string>().find("dualpipev") == std::string::npos);
  }
}

TEST_CASE("plan refuses a GPT model that fits no layout, saying what memory would, and writes nothing",
          "[cli][megatron][bad-input]") {
  const fs::path dir = scratch_dir("megatron-plan-nofit");
  // GPT-3 175B on 32 A100s at batch 32.
  const CliRun run = run_baton(
      "plan --topology topologies/a100_4x8.json --num-layers 96 --hidden-size 12288 --num-attention-heads 96 "
      "--seq-length 2048 --global-batch-size 32 -o " +
          quoted(dir / "plan.json"),
      "megatron-plan-nofit");
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("no layout of the") != std::string::npos);
  CHECK(run.err.find("fits the 80 GiB of one A100-SXM4-80GB: the least peak of any is") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "plan.json"));
  const CliRun batch = run_baton(
      "plan --topology topologies/a100_4x8.json " + kModel + "--micro-batch-size 3 -o " + quoted(dir / "plan.json"),
      "megatron-plan-batch");
  CHECK(batch.exit_code == 2);
  CHECK(batch.err.find("--micro-batch-size 3") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "plan.json"));
}

TEST_CASE("plan puts the overlaps asked for on the layouts they apply to, into the flags and the plan file",
          "[cli][megatron]") {
  const fs::path dir = scratch_dir("megatron-plan-overlaps");
  const fs::path plan = dir / "plan.json";
  // Pinned to t 4 with sequence parallelism and the distributed optimizer, so
  // that every overlap applies to the chosen layout.
  const std::string layout = "plan --topology topologies/a100_4x8.json " + kModel +
                             "--tensor-model-parallel-size 4 --sequence-parallel --use-distributed-optimizer --bf16 ";
  const std::string overlaps = "--overlap-grad-reduce --overlap-param-gather --tp-comm-overlap ";
  const CliRun planned = run_baton(layout + overlaps + "--emit megatron -o " + quoted(plan), "megatron-plan-overlaps");
  INFO(planned.err);
  REQUIRE(planned.exit_code == 0);
  for (const char* flag : {" --overlap-grad-reduce", " --overlap-param-gather", " --tp-comm-overlap"})
    CHECK(planned.out.find(flag) != std::string::npos);
  const nlohmann::json file = nlohmann::json::parse(slurp(plan));
  CHECK(file["megatron"]["overlap_grad_reduce"] == true);
  CHECK(file["megatron"]["overlap_param_gather"] == true);
  CHECK(file["megatron"]["tp_comm_overlap"] == true);
  const CliRun simulated =
      run_baton("simulate --topology topologies/a100_4x8.json --json --plan " + quoted(plan), "megatron-plan-overlaps");
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  const nlohmann::json figures = nlohmann::json::parse(simulated.out);
  CHECK(figures["iteration_time_s"].get<double>() ==
        Approx(file["prediction"]["iteration_time_s"].get<double>()).epsilon(1e-12));
  CHECK(figures["layout"]["tp_comm_overlap"] == true);

  // The same search without them: no overlap on its layout, and (each
  // layout's exposed communication only shrinking with them) no faster.
  const CliRun plain = run_baton(layout + "--json", "megatron-plan-overlaps");
  const CliRun with = run_baton(layout + overlaps + "--json", "megatron-plan-overlaps");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(with.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(with.out);
  CHECK(a["layout"]["tp_comm_overlap"] == false);
  CHECK(a["layout"]["overlap_grad_reduce"] == false);
  CHECK(b["layout"]["tp_comm_overlap"] == true);
  CHECK(b["iteration_time_s"].get<double>() < a["iteration_time_s"].get<double>());

  const CliRun alone = run_baton(layout + "--overlap-param-gather", "megatron-plan-overlaps-bad");
  CHECK(alone.exit_code == 2);
  CHECK(alone.err.find("--overlap-param-gather needs --overlap-grad-reduce") != std::string::npos);
}
