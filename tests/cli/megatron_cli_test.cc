// `baton simulate` with Megatron-LM's flags: the JSON figures, the text's
// account of the time, traces with the model's layers, and bad layouts
// refused with exit 2, the flag named and nothing written.
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

const std::string kModel =
    "simulate --topology topologies/a100_vtrain.json --num-layers 48 --hidden-size 8192 --num-attention-heads 64 "
    "--seq-length 2048 --global-batch-size 1536 --recompute-granularity full ";

TEST_CASE("simulate with Megatron flags prints the figures as JSON", "[cli][megatron]") {
  const CliRun run = run_baton(kModel +
                                   "--micro-batch-size 2 --tensor-model-parallel-size 4 "
                                   "--pipeline-model-parallel-size 4 --data-parallel-size 32 --json",
                               "megatron-json");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(run.out);
  const double iteration = j["iteration_time_s"].get<double>();
  CHECK(iteration > 0.0);
  CHECK(j["throughput_samples_per_s"].get<double>() == Approx(1536 / iteration));
  // Megatron's formula: 96 B s L h^2 (1 + s / 6h + V / 16 L h) over the time and the 512 GPUs.
  const double s = 2048, L = 48, h = 8192, V = 50688;
  const double flops = 96.0 * 1536 * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  CHECK(j["model_tflops_per_gpu"].get<double>() == Approx(flops / iteration / 512 / 1e12));
  CHECK(j["layout"]["tensor_model_parallel_size"] == 4);
  CHECK(j["layout"]["recompute_granularity"] == "full");
  CHECK(j["memory"].size() == 4);
  CHECK(j["memory"][0]["inflight_microbatches"] == 4);
  CHECK(j["fits"] == true);
  double parts = 0.0;
  for (const char* key : {"compute", "tensor_parallel_comm", "recompute", "host_dispatch", "pipeline_bubble",
                          "data_parallel_allreduce", "optimizer"})
    parts += j["breakdown_s"][key].get<double>();
  CHECK(parts == Approx(iteration).epsilon(1e-9));
}

TEST_CASE("simulate --tp-comm-overlap and --overlap-param-gather: what they hide, and what they need",
          "[cli][megatron]") {
  const std::string layout =
      kModel +
      "--micro-batch-size 2 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
      "--data-parallel-size 16 --sequence-parallel --bf16 --use-distributed-optimizer --overlap-grad-reduce --json ";
  const CliRun plain = run_baton(layout, "megatron-overlaps");
  const CliRun overlapped = run_baton(layout + "--tp-comm-overlap --overlap-param-gather", "megatron-overlaps");
  INFO(plain.err << overlapped.err);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(overlapped.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(overlapped.out);
  CHECK(a["layout"]["tp_comm_overlap"] == false);
  CHECK(b["layout"]["tp_comm_overlap"] == true);
  CHECK(b["layout"]["overlap_param_gather"] == true);
  // The work is the same; the exposed collectives are shorter.
  CHECK(b["breakdown_s"]["compute"].get<double>() == Approx(a["breakdown_s"]["compute"].get<double>()));
  CHECK(b["breakdown_s"]["tensor_parallel_comm"].get<double>() <
        a["breakdown_s"]["tensor_parallel_comm"].get<double>() / 2);
  CHECK(b["breakdown_s"]["data_parallel_allreduce"].get<double>() <
        a["breakdown_s"]["data_parallel_allreduce"].get<double>());
  CHECK(b["iteration_time_s"].get<double>() < a["iteration_time_s"].get<double>());

  const std::string base = kModel +
                           "--micro-batch-size 2 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
                           "--data-parallel-size 16 ";
  const struct {
    const char* flags;
    const char* message;
  } refused[] = {
      {"--tp-comm-overlap", "--tp-comm-overlap needs --sequence-parallel"},
      {"--overlap-param-gather --overlap-grad-reduce", "--overlap-param-gather needs --use-distributed-optimizer"},
      {"--overlap-param-gather --use-distributed-optimizer", "--overlap-param-gather needs --overlap-grad-reduce"},
  };
  for (const auto& r : refused) {
    const CliRun bad = run_baton(base + r.flags, "megatron-overlaps-bad");
    INFO(r.flags << ": " << bad.err);
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find(r.message) != std::string::npos);
    CHECK(bad.out.empty());
  }
}

TEST_CASE("simulate with Megatron flags says where the time goes and writes the traces", "[cli][megatron]") {
  const fs::path dir = scratch_dir("megatron-trace");
  // A small batch, so that the chart draws every block (no compact form).
  const CliRun run = run_baton(
      "simulate --topology topologies/a100_vtrain.json --num-layers 48 --hidden-size 8192 "
      "--num-attention-heads 64 --seq-length 2048 --global-batch-size 16 "
      "--recompute-granularity full "
      "--micro-batch-size 1 --tensor-model-parallel-size 8 "
      "--pipeline-model-parallel-size 4 --data-parallel-size 2 "
      "--num-layers-per-virtual-pipeline-stage 3 --gantt '" +
          (dir / "g.svg").string() + "' --trace '" + (dir / "t.json").string() + "'",
      "megatron-text");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  for (const char* part :
       {"interleaved 1F1B with 4 chunks of 3 layers", "tensor-parallel collectives", "pipeline bubble",
        "gradient all-reduces (data-parallel, tied embedding)", "pipeline rank   3"})
    CHECK(run.out.find(part) != std::string::npos);
  CHECK(fs::file_size(dir / "g.svg") > 1000);
  // The tensor-parallel collectives on a track of their own, and as strips in the chart.
  const std::string trace = slurp(dir / "t.json");
  CHECK(trace.find("\"tensor-parallel collectives\"") != std::string::npos);
  CHECK(trace.find("\"name\":\"TP F") != std::string::npos);
  CHECK(slurp(dir / "g.svg").find("tensor-parallel collectives of") != std::string::npos);
}

TEST_CASE("simulate --zero-bubble-heuristic: the authors' greedy ZB-1p / ZB-2p, only with --enable-zero-bubble",
          "[cli][megatron]") {
  const std::string zb =
      "simulate --topology topologies/a100_4x8.json --num-layers 22 --hidden-size 2304 --num-attention-heads 24 "
      "--seq-length 1024 --micro-batch-size 6 --global-batch-size 144 --pipeline-model-parallel-size 8 "
      "--data-parallel-size 1 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split ";
  const CliRun text =
      run_baton(zb + "--enable-zero-bubble --zero-bubble-max-pending-backward 16 --zero-bubble-heuristic",
                "megatron-zb-heuristic");
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("ZB-2p (zero bubble, the authors' greedy scheduler)") != std::string::npos);
  const CliRun json = run_baton(zb + "--enable-zero-bubble --zero-bubble-heuristic --json", "megatron-zb-heuristic");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.out);
  CHECK(j["layout"]["zero_bubble_heuristic"] == true);
  CHECK(j["layout"]["zero_bubble_max_pending_backward"] == 8);
  const CliRun alone = run_baton(zb + "--zero-bubble-heuristic", "megatron-zb-heuristic");
  CHECK(alone.exit_code == 2);
  CHECK(alone.err.find("--zero-bubble-heuristic goes with --enable-zero-bubble") != std::string::npos);
}

TEST_CASE("simulate --zero-bubble-v-schedule and --dualpipev: two chunks per GPU in a V", "[cli][megatron]") {
  const std::string v = kModel +
                        "--micro-batch-size 1 --tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 "
                        "--data-parallel-size 32 ";
  const CliRun zbv = run_baton(v + "--zero-bubble-v-schedule --json", "megatron-v");
  INFO(zbv.err);
  REQUIRE(zbv.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(zbv.out);
  CHECK(j["schedule"] == "zbv");
  CHECK(j["layout"]["zero_bubble_v_schedule"] == true);
  CHECK(j["memory"].size() == 4);
  const CliRun text = run_baton(v + "--dualpipev", "megatron-v");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("DualPipeV (2 chunks of 6 blocks per GPU in a V)") != std::string::npos);
  // The fork's --enable-zero-bubble goes with its V schedule; other schedule flags do not.
  CHECK(run_baton(v + "--zero-bubble-v-schedule --enable-zero-bubble", "megatron-v").exit_code == 0);
  const struct {
    const char* flags;
    const char* message;
  } refused[] = {
      {"--zero-bubble-v-schedule --dualpipev", "give one of --zero-bubble-v-schedule and --dualpipev"},
      {"--dualpipev --num-layers-per-virtual-pipeline-stage 3", "--dualpipev runs two chunks per GPU of its own"},
      {"--zero-bubble-v-schedule --zero-bubble-max-pending-backward 8", "--zero-bubble-v-schedule is a schedule of"},
      {"--dualpipev --global-batch-size 64", "the V needs at least 2 x --pipeline-model-parallel-size = 8"},
  };
  for (const auto& r : refused) {
    // A flag given twice is CLI11's to refuse: the batch size replaces kModel's.
    std::string command = v + r.flags;
    if (std::string(r.flags).find("--global-batch-size") != std::string::npos)
      command.replace(command.find("--global-batch-size 1536"), 24, "");
    const CliRun bad = run_baton(command, "megatron-v-bad");
    INFO(r.flags << ": " << bad.err);
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find(r.message) != std::string::npos);
    CHECK(bad.out.empty());
  }
}

TEST_CASE("a V on Megatron flags is the V that --profile --stages runs on profile analytic's profile",
          "[cli][megatron]") {
  // t 1, d 1: the Megatron path's devices are the GPUs themselves, so the same
  // profile on the same stages under the same generator must give the same time.
  const fs::path dir = scratch_dir("megatron-v-agree");
  const std::string model =
      "--topology topologies/a100_vtrain.json --num-layers 24 --hidden-size 2048 --num-attention-heads 16 "
      "--seq-length 2048 --global-batch-size 16 --micro-batch-size 1 --pipeline-model-parallel-size 4 "
      "--data-parallel-size 1 ";
  for (const auto& [flag, schedule] :
       {std::pair{"--zero-bubble-v-schedule", "zbv"}, std::pair{"--dualpipev", "dualpipev"}}) {
    const std::string profile = (dir / (std::string(schedule) + ".json")).string();
    const CliRun megatron = run_baton("simulate " + model + flag + " --json", "megatron-v-agree");
    const CliRun made =
        run_baton("profile analytic --arch gpt " + model + flag + " -o '" + profile + "'", "megatron-v-agree");
    // 8 chunks of 3 blocks; the embedding (layer 0) and the head (layer 25) on the first and last.
    const CliRun staged = run_baton("simulate --profile '" + profile +
                                        "' --topology topologies/a100_vtrain.json --stages "
                                        "0-4,4-7,7-10,10-13,13-16,16-19,19-22,22-26 --microbatches 16 --json "
                                        "--schedule " +
                                        schedule,
                                    "megatron-v-agree");
    INFO(schedule << ": " << megatron.err << made.err << staged.err);
    REQUIRE(megatron.exit_code == 0);
    REQUIRE(made.exit_code == 0);
    REQUIRE(staged.exit_code == 0);
    const double by_flags = nlohmann::json::parse(megatron.out)["iteration_time_s"].get<double>();
    const double by_stages = nlohmann::json::parse(staged.out)["iteration_time_s"].get<double>();
    CHECK(by_flags == Approx(by_stages).epsilon(1e-12));
  }
}

TEST_CASE("simulate with Megatron flags says when the fused softmax does not apply", "[cli][megatron]") {
  // 16 heads on t 8: 2 heads per rank; Megatron's fused softmax needs
  // micro-batch x 2 to be a multiple of 4.
  const std::string small =
      "simulate --topology topologies/a100_vtrain.json --num-layers 24 --hidden-size 1024 --num-attention-heads 16 "
      "--seq-length 1024 --global-batch-size 48 --recompute-granularity full --tensor-model-parallel-size 8 "
      "--data-parallel-size 1 ";
  const CliRun one = run_baton(small + "--micro-batch-size 1", "megatron-softmax");
  INFO(one.err);
  REQUIRE(one.exit_code == 0);
  CHECK(one.out.find("micro-batch 1 x 2 heads per rank = 2") != std::string::npos);
  CHECK(one.out.find("runs unfused in fp32") != std::string::npos);
  const CliRun two = run_baton(small + "--micro-batch-size 2", "megatron-softmax");
  REQUIRE(two.exit_code == 0);
  CHECK(two.out.find("fused softmax does not take") == std::string::npos);
  for (const auto& [b, fused] : {std::pair{1, false}, std::pair{2, true}, std::pair{3, false}, std::pair{4, true}}) {
    const CliRun json = run_baton(small + "--json --micro-batch-size " + std::to_string(b), "megatron-softmax");
    REQUIRE(json.exit_code == 0);
    CHECK(nlohmann::json::parse(json.out)["fused_softmax"] == fused);
  }
}

void refused(const std::string& flags, const std::vector<std::string>& parts) {
  const fs::path dir = scratch_dir("megatron-bad");
  const fs::path trace = dir / "trace.json";
  const CliRun run = run_baton(kModel + flags + " --trace '" + trace.string() + "'", "megatron-bad");
  INFO("stderr: " << run.err);
  CHECK(run.exit_code == 2);
  for (const std::string& part : parts) CHECK(run.err.find(part) != std::string::npos);
  CHECK_FALSE(fs::exists(trace));
  CHECK(run.out.empty());
}

TEST_CASE("simulate refuses a bad Megatron layout naming the flag", "[cli][megatron][bad-input]") {
  refused("--tensor-model-parallel-size 3", {"--num-attention-heads 64", "--tensor-model-parallel-size 3"});
  refused("--pipeline-model-parallel-size 5", {"--num-layers 48", "--pipeline-model-parallel-size 5"});
  refused("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 5",
          {"--num-layers-per-virtual-pipeline-stage 5"});
  refused("--micro-batch-size 7 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 8",
          {"--micro-batch-size 7", "--global-batch-size 1536"});
  refused("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --data-parallel-size 16",
          {"needs 1024 GPUs", "has 512"});
  refused("--tensor-model-parallel-size 8 --profile traces/gpt-13b_a100_mb1.json", {"replaces --profile"});
  // 48 + 1 counted layers on 5 stages; and both ways of setting the end stages' blocks.
  refused("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 5 --account-for-embedding-in-pipeline-split",
          {"--account-for-embedding-in-pipeline-split counts 49 layers", "--pipeline-model-parallel-size 5"});
  refused(
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 --account-for-loss-in-pipeline-split "
      "--decoder-last-pipeline-num-layers 23",
      {"give one of them"});
}

TEST_CASE("simulate refuses the flags of one form given with the other, naming them", "[cli][megatron][bad-input]") {
  // A GPT model has no profile's optimizer choice, weight-version rule or noise model.
  refused("--optimizer sgd", {"simulate: --optimizer goes with --profile"});
  refused("--vertical-sync --noise-samples 3", {"simulate: --vertical-sync, --noise-samples go with --profile"});
  // A profile's simulation would ignore Megatron's layout flags (the model
  // flags themselves choose the Megatron form and refuse --profile).
  const fs::path dir = scratch_dir("profile-with-megatron-flags");
  const fs::path trace = dir / "trace.json";
  const CliRun run = run_baton(
      "simulate --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json --stages 0-39x16 "
      "--micro-batch-size 4 --bf16 --dualpipev --trace " +
          quoted(trace),
      "profile-with-megatron-flags");
  INFO(run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("simulate: --micro-batch-size, --bf16, --dualpipev go with a GPT model given by Megatron's "
                     "flags (--num-layers, --hidden-size, --num-attention-heads, --seq-length), not with --profile "
                     "(here the samples per microbatch are --microbatch-size)") != std::string::npos);
  CHECK_FALSE(fs::exists(trace));
  CHECK(run.out.empty());
}

TEST_CASE("plan, sweep and profile analytic refuse Megatron's layout flags with a profile",
          "[cli][megatron][bad-input]") {
  const std::string vgg = "--profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json ";
  const CliRun plan = run_baton("plan " + vgg + "--tensor-model-parallel-size 4", "plan-with-megatron-flags");
  CHECK(plan.exit_code == 2);
  CHECK(plan.err.find("plan: --tensor-model-parallel-size goes with a GPT model given by Megatron's flags") !=
        std::string::npos);
  const CliRun sweep = run_baton("sweep " + vgg + "--split balanced --vary servers=1,2 --enable-zero-bubble",
                                 "sweep-with-megatron-flags");
  CHECK(sweep.exit_code == 2);
  CHECK(sweep.err.find("sweep: --enable-zero-bubble goes with a GPT model") != std::string::npos);
  const CliRun analytic =
      run_baton("profile analytic --arch vgg16 --micro-batch-size 2", "analytic-with-megatron-flags");
  CHECK(analytic.exit_code == 2);
  CHECK(analytic.err.find("profile analytic: --micro-batch-size goes with a GPT model given by Megatron's flags") !=
        std::string::npos);
  CHECK(analytic.err.find("not with --arch vgg16") != std::string::npos);
  // And --arch gpt refuses the other architectures' flags.
  const CliRun gpt = run_baton(
      "profile analytic --arch gpt --topology topologies/a100_4x8.json --num-layers 4 --hidden-size 1024 "
      "--num-attention-heads 16 --seq-length 1024 --device h100 --efficiency 0.5",
      "analytic-gpt-with-profile-flags");
  CHECK(gpt.exit_code == 2);
  CHECK(gpt.err.find("profile analytic --arch gpt: --device, --efficiency go with the other architectures") !=
        std::string::npos);
  CHECK(gpt.out.empty());
}

TEST_CASE("simulate counts the embedding and the loss as layers of the split when told", "[cli][megatron]") {
  // The Zero Bubble paper's 1.5B model (Qi et al., ICLR 2024, Table 3): 22
  // blocks + 2 counted layers = 3 per stage on p = 8; interleaved with one
  // counted layer per chunk, v = 24 / 8 = 3 chunks per GPU.
  const std::string zb =
      "simulate --topology topologies/a100_4x8.json --num-layers 22 --hidden-size 2304 --num-attention-heads 24 "
      "--seq-length 1024 --global-batch-size 144 --micro-batch-size 6 --pipeline-model-parallel-size 8 "
      "--data-parallel-size 1 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split";
  const CliRun text = run_baton(zb, "megatron-account-text");
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("blocks per stage 2/3/3/3/3/3/3/2") != std::string::npos);
  const CliRun chunks = run_baton(zb + " --num-layers-per-virtual-pipeline-stage 1 --json", "megatron-account-json");
  INFO(chunks.err);
  REQUIRE(chunks.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(chunks.out);
  CHECK(j["layout"]["account_for_embedding_in_pipeline_split"] == true);
  CHECK(j["layout"]["account_for_loss_in_pipeline_split"] == true);
  CHECK(j["schedule"] == "interleaved-1f1b");
  CHECK(j["memory"].size() == 8);
  const CliRun plan = run_baton(
      "plan --topology topologies/a100_4x8.json --num-layers 22 --hidden-size 2304 --num-attention-heads 24 "
      "--seq-length 1024 --global-batch-size 144 --account-for-loss-in-pipeline-split",
      "megatron-account-plan");
  CHECK(plan.exit_code == 2);
  CHECK(plan.err.find("are for simulate") != std::string::npos);
}

}  // namespace

namespace {

const std::string kSmallGpt =
    "--topology topologies/a100_4x8.json --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
    "--seq-length 1024 --global-batch-size 64";

TEST_CASE("plan with Megatron flags emits a layout that simulate runs to the planned time", "[cli][megatron]") {
  const CliRun json = run_baton("plan " + kSmallGpt + " --json", "megatron-plan-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  CHECK(planned["search"]["simulated"].get<int>() >= 1);
  CHECK(planned["candidates"].size() == 5);
  const CliRun flags = run_baton("plan " + kSmallGpt + " --emit megatron", "megatron-plan-emit");
  REQUIRE(flags.exit_code == 0);
  CHECK(flags.out.find("--tensor-model-parallel-size") != std::string::npos);
  std::string line = flags.out.substr(0, flags.out.find('\n'));
  const CliRun run = run_baton("simulate --topology topologies/a100_4x8.json " + line + " --json", "megatron-plan-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json simulated = nlohmann::json::parse(run.out);
  CHECK(simulated["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(simulated["layout"] == planned["layout"]);
}

TEST_CASE("plan says what the overlaps it was not asked for make of its layout, and each simulates back",
          "[cli][megatron]") {
  const CliRun json = run_baton("plan " + kSmallGpt + " --json", "megatron-plan-overlaps-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  const nlohmann::json& options = planned["overlaps_not_asked"];
  // The small GPT's layout has d 16 and the distributed optimizer, no
  // sequence parallelism: the data-parallel pair alone applies.
  REQUIRE(planned["layout"]["use_distributed_optimizer"] == true);
  REQUIRE(planned["layout"]["sequence_parallel"] == false);
  REQUIRE(options.size() == 1);
  CHECK(options[0]["flags"] == "--overlap-grad-reduce --overlap-param-gather");
  const double base = planned["iteration_time_s"].get<double>();
  const double with = options[0]["iteration_time_s"].get<double>();
  CHECK(options[0]["relative_change"].get<double>() == Approx(with / base - 1.0));
  CHECK(with < base);
  // The emitted line with the option's flags simulates to the option's time.
  const CliRun flags = run_baton("plan " + kSmallGpt + " --emit megatron", "megatron-plan-overlaps-emit");
  REQUIRE(flags.exit_code == 0);
  CHECK(flags.err.find("not asked for, and faster on this layout: --overlap-grad-reduce --overlap-param-gather") !=
        std::string::npos);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  const CliRun run = run_baton(
      "simulate --topology topologies/a100_4x8.json " + line + " " + options[0]["flags"].get<std::string>() + " --json",
      "megatron-plan-overlaps-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(nlohmann::json::parse(run.out)["iteration_time_s"].get<double>() == Approx(with).epsilon(1e-12));
  // The text names them after the flags; asked for, they are not offered.
  const CliRun text = run_baton("plan " + kSmallGpt, "megatron-plan-overlaps-text");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("overlaps not asked for") > text.out.find("as Megatron-LM flags"));
  CHECK(text.out.find("overlaps not asked for") != std::string::npos);
  const CliRun asked = run_baton("plan " + kSmallGpt + " --overlap-grad-reduce --overlap-param-gather --json",
                                 "megatron-plan-overlaps-asked");
  REQUIRE(asked.exit_code == 0);
  const nlohmann::json asked_plan = nlohmann::json::parse(asked.out);
  for (const auto& option : asked_plan["overlaps_not_asked"])
    CHECK(option["flags"].get<std::string>().find("--overlap-grad-reduce") == std::string::npos);
}

TEST_CASE("plan pins a layout flag it is given, and --data-parallel-size and --gpus choose the GPUs",
          "[cli][megatron]") {
  const CliRun pinned = run_baton("plan " + kSmallGpt + " --tensor-model-parallel-size 2 --json", "megatron-plan-pin");
  REQUIRE(pinned.exit_code == 0);
  CHECK(nlohmann::json::parse(pinned.out)["layout"]["tensor_model_parallel_size"] == 2);
  // 48 does not divide among 1,024 GPUs' worth of replicas at t 1 p 1, but other layouts do.
  const CliRun many = run_baton(
      "plan --topology topologies/a100_vtrain.json --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
      "--seq-length 1024 --global-batch-size 48 --json",
      "megatron-plan-many");
  INFO(many.err);
  CHECK(many.exit_code == 0);
  const CliRun bad = run_baton("plan " + kSmallGpt + " --tensor-model-parallel-size 3", "megatron-plan-bad");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--tensor-model-parallel-size 3") != std::string::npos);
  // d pinned: t x p x d up to the topology's 32 GPUs, the first ones.
  const CliRun data = run_baton("plan " + kSmallGpt + " --data-parallel-size 4 --json", "megatron-plan-dp");
  INFO(data.err);
  REQUIRE(data.exit_code == 0);
  const nlohmann::json by_data = nlohmann::json::parse(data.out);
  CHECK(by_data["layout"]["data_parallel_size"] == 4);
  const int tp = by_data["layout"]["tensor_model_parallel_size"].get<int>() *
                 by_data["layout"]["pipeline_model_parallel_size"].get<int>();
  CHECK(tp * 4 <= 32);
  // Each candidate's label ("t 2 p 1 d 16 b 4 ...") names its d.
  for (const auto& candidate : by_data["candidates"])
    CHECK(candidate["layout"].get<std::string>().find(" d 4 ") != std::string::npos);
  // --gpus: t x p x d is that many.
  const CliRun twelve = run_baton("plan " + kSmallGpt + " --gpus 12 --json", "megatron-plan-gpus");
  INFO(twelve.err);
  REQUIRE(twelve.exit_code == 0);
  const nlohmann::json planned12 = nlohmann::json::parse(twelve.out);
  const nlohmann::json& l = planned12["layout"];
  CHECK(l["tensor_model_parallel_size"].get<int>() * l["pipeline_model_parallel_size"].get<int>() *
            l["data_parallel_size"].get<int>() ==
        12);
  const CliRun zero = run_baton("plan " + kSmallGpt + " --data-parallel-size 0", "megatron-plan-dp0");
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("--data-parallel-size") != std::string::npos);
  const CliRun too_many = run_baton("plan " + kSmallGpt + " --gpus 64", "megatron-plan-gpus64");
  CHECK(too_many.exit_code == 2);
  CHECK(too_many.err.find("64 GPUs") != std::string::npos);
  const CliRun profile =
      run_baton("plan --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json --gpus 4",
                "plan-gpus-profile");
  CHECK(profile.exit_code == 2);
  CHECK(profile.err.find("--gpus") != std::string::npos);
}

TEST_CASE("plan with Megatron flags lays out within --memory-limit-gib and refuses the profile search's options",
          "[cli][megatron]") {
  const CliRun free = run_baton("plan " + kSmallGpt + " --json", "megatron-plan-limit");
  INFO(free.err);
  REQUIRE(free.exit_code == 0);
  const nlohmann::json unlimited = nlohmann::json::parse(free.out);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double chosen_gib = unlimited["candidates"][0]["peak_memory_bytes"].get<double>() / gib;
  // Half the unlimited choice's peak (to the MiB below): that layout no
  // longer fits, and every layout reported fits the limit.
  const double limit_gib = std::floor(chosen_gib / 2 * 1024) / 1024;
  const CliRun limited = run_baton("plan " + kSmallGpt + " --memory-limit-gib " + std::to_string(limit_gib) + " --json",
                                   "megatron-plan-limit");
  INFO(limited.err);
  REQUIRE(limited.exit_code == 0);
  const nlohmann::json within = nlohmann::json::parse(limited.out);
  CHECK(within["layout"] != unlimited["layout"]);
  for (const auto& candidate : within["candidates"])
    CHECK(candidate["peak_memory_bytes"].get<double>() <= limit_gib * gib);
  // 0.01 GiB is less than any layout's weights (about 0.9e9 parameters in
  // fp16 over at most 32 GPUs: 0.9e9 x 2 / 32 bytes, about 0.05 GiB).
  const CliRun none = run_baton("plan " + kSmallGpt + " --memory-limit-gib 0.01", "megatron-plan-limit");
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("fits the 0.01 GiB of one A100-SXM4-80GB") != std::string::npos);
  for (const std::string option : {"--cost-model pipedream", "--straight", "--activation-compression 2",
                                   "--schedule 1f1b", "--microbatches 8", "--optimizer sgd", "--virtual-stages 2"}) {
    const CliRun refused = run_baton("plan " + kSmallGpt + " " + option, "megatron-plan-refused");
    INFO(option << ": " << refused.err);
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("plan: " + option.substr(0, option.find(' ')) + " goes with --profile") !=
          std::string::npos);
  }
}

}  // namespace
