// The executor through the `baton` binary: the gloo backend (ranks are
// separate processes started by `baton run`, meeting on a free loopback
// port), plan refusal before any rank starts, and `baton compare`.
#include "tests/exec/exec_test_support.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/profile.h"
#include "sim/schedules.h"
#include "sim/trace_reader.h"
#include "tests/cli/cli_runner.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;

std::string write_plan(const fs::path& dir, const std::string& name, const Plan& plan) {
  const fs::path path = dir / (name + ".plan.json");
  std::ofstream(path) << plan_to_json(plan).dump(2);
  return path.string();
}

// `baton run` with the options of train_options(model, steps).
std::string run_arguments(const std::string& plan_path, const exec::TrainOptions& options) {
  return fmt::format("run --plan '{}' --model {} --steps {} --lr {} --seed {} --timeout 60", plan_path, options.model,
                     options.steps, options.learning_rate, options.seed);
}

// What every refusal shares: exit code 2, the expected message, and no rank started.
void check_refused(const CliRun& run, const std::string& message) {
  INFO(run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find(message) != std::string::npos);
  CHECK(run.err.find("rank") == std::string::npos);
}

}  // namespace

TEST_CASE("gloo ranks reach the weights of the single-process references", "[exec][gloo][cli]") {
  struct Case {
    const char* name;
    const char* stages;
    Schedule schedule;
    int microbatches;
  };
  const Case cases[] = {{"gloo-1f1b", "0-3,3-6", Schedule::kOneFOneB, 4},
                        {"gloo-gpipe", "0-2,2-4,4-6", Schedule::kGPipe, 4},
                        {"gloo-1f1b-4", "0-1,1-3,3-5,5-6", Schedule::kOneFOneB, 4},
                        {"gloo-dp", "0-6x2", Schedule::kDataParallel, 4},
                        {"gloo-zb-h1", "0-2,2-4,4-6", Schedule::kZbH1, 6},
                        {"gloo-zb-h2", "0-3x2,3-6", Schedule::kZbH2, 4},
                        {"gloo-interleaved", "0-2x2,2-3x2,3-5x2,5-6x2", Schedule::kInterleaved1F1B, 8},
                        {"gloo-zbv", "0-1,1-2,2-3,3-4,4-5,5-6", Schedule::kZbV, 6},
                        {"gloo-dualpipev", "0-2,2-3,3-5,5-6", Schedule::kDualPipeV, 4},
                        {"gloo-pipedream", "0-3x2,3-6", Schedule::kPipeDream, 8}};
  const exec::TrainOptions options = train_options("mlp", 2);
  for (const Case& c : cases) {
    INFO(c.name);
    const fs::path dir = scratch_dir(c.name);
    Plan plan = exec_plan(c.stages, c.schedule, c.microbatches);
    if (runs_chunks(c.schedule)) plan.virtual_stages = 2;  // two chunks per rank
    const std::string weights_path = (dir / "weights.json").string();
    const std::string trace_path = (dir / "trace.json").string();
    const CliRun run = run_baton(fmt::format("{} --backend gloo --nproc {} --save-weights '{}' --trace '{}'",
                                             run_arguments(write_plan(dir, c.name, plan), options), plan.num_workers(),
                                             weights_path, trace_path),
                                 c.name);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("backend gloo") != std::string::npos);
    auto weights = exec::weights_from_json(nlohmann::json::parse(slurp(weights_path)), weights_path);
    REQUIRE(weights.ok());
    auto reference = exec::train_reference(plan, options);
    REQUIRE(reference.ok());
    CHECK(exec::max_relative_error(*weights, reference->weights) <= kWeightTolerance);
    auto trace = parse_chrome_trace(slurp(trace_path), trace_path);
    REQUIRE(trace.ok());
    CHECK(static_cast<int64_t>(trace->spans.size()) == build_program(plan).num_actions());
  }
}

TEST_CASE("a plan that does not fit the model or the ranks is refused before any rank starts", "[exec][gloo][cli]") {
  const fs::path dir = scratch_dir("exec-refused");
  const exec::TrainOptions options = train_options("mlp", 1);
  SECTION("stage ranges that stop short of the model's layers") {
    const CliRun run =
        run_baton(run_arguments(write_plan(dir, "short", exec_plan("0-3,3-5", Schedule::kOneFOneB, 4)), options) +
                      " --backend gloo --nproc 2",
                  "exec-refused");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("the stages cover layers [0, 5) but model 'mlp' has 6 layers") != std::string::npos);
    CHECK(run.err.find("rank") == std::string::npos);
  }
  SECTION("stage ranges past the model's end") {
    const CliRun run =
        run_baton(run_arguments(write_plan(dir, "long", exec_plan("0-3,3-8", Schedule::kGPipe, 4)), options) +
                      " --backend threads",
                  "exec-refused");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("stages[1].layers = [3, 8) goes past the end of model 'mlp', which has 6 layers") !=
          std::string::npos);
  }
  SECTION("a schedule that runs chunks, with a stage count its chunks cannot place") {
    Plan plan = exec_plan("0-2,2-3,3-6", Schedule::kInterleaved1F1B, 4);
    plan.virtual_stages = 2;
    const CliRun run =
        run_baton(run_arguments(write_plan(dir, "chunks", plan), options) + " --backend threads", "exec-refused");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("hold 3 stages, which interleaved-1f1b with 2 chunks per device cannot place") !=
          std::string::npos);
  }
  SECTION("a GPU asked of the gloo backend, or of a build or machine without one") {
    const std::string plan = write_plan(dir, "gpu", exec_plan("0-3,3-6", Schedule::kOneFOneB, 4));
    const CliRun gloo = run_baton(run_arguments(plan, options) + " --backend gloo --device cuda", "exec-refused");
    CHECK(gloo.exit_code == 2);
    CHECK(gloo.err.find("--device cuda: the gloo backend computes on the CPU") != std::string::npos);
    const CliRun name = run_baton(run_arguments(plan, options) + " --device gpu", "exec-refused");
    CHECK(name.exit_code == 2);
    CHECK(name.err.find("'gpu' is not a device: cpu, cuda or cuda:N") != std::string::npos);
    const CliRun nccl_device =
        run_baton(run_arguments(plan, options) + " --backend nccl --device cuda:1", "exec-refused");
    CHECK(nccl_device.exit_code == 2);
    CHECK(nccl_device.err.find("with --backend nccl rank r runs on GPU LOCAL_RANK") != std::string::npos);
    if (exec::cuda_device_count() == 0) {
      const CliRun threads = run_baton(run_arguments(plan, options) + " --device cuda:0", "exec-refused");
      CHECK(threads.exit_code == 1);
      CHECK(threads.err.find("device cuda:0: ") != std::string::npos);
      // Each rank finds no GPU and says so; the launcher reports the first.
      const CliRun nccl = run_baton(run_arguments(plan, options) + " --backend nccl --nproc 2", "exec-refused");
      CHECK(nccl.exit_code == 1);
      CHECK(nccl.err.find("device cuda:") != std::string::npos);
    }
  }
  SECTION("more ranks than workers") {
    const CliRun run =
        run_baton(run_arguments(write_plan(dir, "ranks", exec_plan("0-3,3-6", Schedule::kOneFOneB, 4)), options) +
                      " --backend gloo --nproc 3",
                  "exec-refused");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("--nproc 3 but the plan has 2 workers") != std::string::npos);
  }
  SECTION("a rank started with the wrong WORLD_SIZE") {
    const std::string command =
        fmt::format("cd '{}' && RANK=0 WORLD_SIZE=3 MASTER_PORT=1 '{}/baton' {} --backend gloo 2>'{}'",
                    BATON_SOURCE_DIR, BATON_BINARY_DIR,
                    run_arguments(write_plan(dir, "world", exec_plan("0-3,3-6", Schedule::kOneFOneB, 4)), options),
                    (dir / "stderr.txt").string());
    const int status = std::system(command.c_str());
    CliRun run;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.err = slurp(dir / "stderr.txt");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("WORLD_SIZE is 3 but the plan has 2 workers") != std::string::npos);
  }
}

TEST_CASE("a plan for another model is refused before any rank starts", "[exec][gloo][cli]") {
  const fs::path dir = scratch_dir("exec-other-model");
  const exec::TrainOptions options = train_options("mlp", 1);
  SECTION("a vgg-mini plan run as mlp, although both models have 6 layers") {
    const std::string plan = write_plan(dir, "vgg", exec_plan("0-3,3-6", Schedule::kOneFOneB, 4, 4, "vgg-mini"));
    check_refused(run_baton(run_arguments(plan, options) + " --backend gloo --nproc 2", "exec-other-model"),
                  plan + ": the plan is for model 'vgg-mini' but --model is 'mlp'");
  }
  SECTION("layer ranges past the end of the model the plan names") {
    const std::string plan = write_plan(dir, "long", exec_plan("0-4,4-7", Schedule::kGPipe, 4, 4, "vgg-mini"));
    check_refused(run_baton(fmt::format("run --plan '{}' --backend gloo --nproc 2", plan), "exec-other-model"),
                  plan + ": stages[1].layers = [4, 7) goes past the end of model 'vgg-mini', which has 6 layers");
  }
}

TEST_CASE("a profile of other layers is refused before any rank starts", "[exec][gloo][cli]") {
  const fs::path dir = scratch_dir("exec-other-profile");
  const std::string common =
      "--topology topologies/cpu_2core.json --stages 0-3,3-6 --schedule 1f1b --model mlp "
      "--steps 1 --backend gloo --nproc 2";
  SECTION("as many layers, named as vgg-mini's") {
    const std::string profile = write_profile(dir, "mlp", "vgg-mini", 6);
    check_refused(run_baton(fmt::format("run --profile '{}' {}", profile, common), "exec-other-profile"),
                  profile + ": layers[0].name is 'conv1' but layer 0 of model 'mlp' is 'fc1'");
  }
  SECTION("more layers than the model, the first ones named as its own") {
    const std::string profile = write_profile(dir, "mlp", "mlp", 7);
    check_refused(run_baton(fmt::format("run --profile '{}' {}", profile, common), "exec-other-profile"),
                  profile + ": the profile has 7 layers but model 'mlp' has 6");
  }
  SECTION("a shipped profile of another model") {
    check_refused(run_baton("run --profile traces/uniform_16.json " + common, "exec-other-profile"),
                  "traces/uniform_16.json: the profile has 16 layers but model 'mlp' has 6");
  }
  SECTION("without --model, a profile of a model outside the zoo") {
    check_refused(run_baton("run --profile traces/vgg16_v100_mb32.json --topology topologies/cpu_2core.json "
                            "--stages 0-3,3-6 --backend gloo --nproc 2",
                            "exec-other-profile"),
                  "traces/vgg16_v100_mb32.json: unknown model 'vgg16' (known: mlp, vgg-mini, gpt-mini)");
  }
}

TEST_CASE("a plan needing more devices than the topology has is refused before any rank starts", "[exec][gloo][cli]") {
  const fs::path dir = scratch_dir("exec-small-topology");
  const std::string topology = "topologies/cpu_2core.json";
  SECTION("--stages with three stages on two devices") {
    const std::string profile = write_profile(dir, "mlp", "mlp", 6);
    check_refused(run_baton(fmt::format("run --profile '{}' --topology {} --stages 0-2,2-4,4-6 --schedule gpipe "
                                        "--model mlp --backend gloo --nproc 3",
                                        profile, topology),
                            "exec-small-topology"),
                  topology +
                      ": topology 'cpu-2core' has 2 devices but --stages needs 3 (stages 0-2x1,2-4x1,4-6x1, "
                      "one device per worker)");
  }
  const exec::TrainOptions options = train_options("mlp", 1);
  SECTION("--plan with three workers and --topology with two devices") {
    const std::string plan = write_plan(dir, "three", exec_plan("0-2,2-4,4-6", Schedule::kGPipe, 4));
    check_refused(
        run_baton(fmt::format("{} --topology {} --backend gloo --nproc 3", run_arguments(plan, options), topology),
                  "exec-small-topology"),
        topology + ": topology 'cpu-2core' has 2 devices but " + plan +
            " needs 3 (stages 0-2x1,2-4x1,4-6x1, one device per worker)");
  }
  SECTION("--plan that puts a stage on a device the topology lacks") {
    Plan placed = exec_plan("0-3,3-6", Schedule::kOneFOneB, 4);
    placed.stages[0].devices = {0};
    placed.stages[1].devices = {5};
    const std::string plan = write_plan(dir, "device5", placed);
    check_refused(
        run_baton(fmt::format("{} --topology {} --backend gloo --nproc 2", run_arguments(plan, options), topology),
                  "exec-small-topology"),
        topology + ": topology 'cpu-2core' has devices [0, 2) but " + plan + " puts stages[1] on device 5");
  }
  SECTION("--plan that fits the topology runs") {
    const std::string plan = write_plan(dir, "two", exec_plan("0-3,3-6", Schedule::kOneFOneB, 4));
    const CliRun run =
        run_baton(fmt::format("{} --topology {} --backend threads", run_arguments(plan, options), topology),
                  "exec-small-topology");
    INFO(run.err);
    CHECK(run.exit_code == 0);
  }
}

TEST_CASE("baton compare pairs a prediction with a measurement of the same plan", "[exec][cli][compare]") {
  const fs::path dir = scratch_dir("exec-compare");
  const std::string profile = (dir / "mlp.json").string();
  const CliRun measure =
      run_baton(fmt::format("profile measure --model mlp --microbatch-size 4 --warmup 1 --steps 3 -o '{}'", profile),
                "exec-compare");
  INFO(measure.err);
  REQUIRE(measure.exit_code == 0);
  const std::string common = fmt::format(
      "--profile '{}' --topology topologies/cpu_2core.json --stages 0-3,3-6 --schedule 1f1b --microbatches 4", profile);
  const std::string predicted = (dir / "predicted.json").string();
  const std::string measured = (dir / "measured.json").string();
  REQUIRE(run_baton(fmt::format("simulate {} --trace '{}'", common, predicted), "exec-compare").exit_code == 0);
  const CliRun run =
      run_baton(fmt::format("run {} --model mlp --steps 2 --trace '{}'", common, measured), "exec-compare");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const std::string svg = (dir / "compare.svg").string();
  const CliRun text = run_baton(fmt::format("compare '{}' '{}' --svg '{}'", predicted, measured, svg), "exec-compare");
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  for (const char* part : {"iteration time", "per stage", "s0", "s1", "per action kind", "SEND_ACT"})
    CHECK(text.out.find(part) != std::string::npos);
  const std::string picture = slurp(svg);
  CHECK(picture.find("<svg") != std::string::npos);
  CHECK(picture.find("measured") != std::string::npos);

  const CliRun json = run_baton(fmt::format("compare '{}' '{}' --json", predicted, measured), "exec-compare");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json figures = nlohmann::json::parse(json.out);
  Plan plan = exec_plan("0-3,3-6", Schedule::kOneFOneB, 4);
  CHECK(figures["paired_spans"].get<int64_t>() == build_program(plan).num_actions());
  CHECK(figures["only_predicted"].get<int>() == 0);
  CHECK(figures["only_measured"].get<int>() == 0);
}

TEST_CASE("profile measure writes a profile whose layers are the model's", "[exec][cli][profile]") {
  const fs::path dir = scratch_dir("exec-profile");
  const std::string path = (dir / "gpt.json").string();
  const CliRun run =
      run_baton(fmt::format("profile measure --model gpt-mini --microbatch-size 2 --warmup 1 --steps 3 -o '{}'", path),
                "exec-profile");
  REQUIRE(run.exit_code == 0);
  CHECK(run.err.find("measured step 3/3") != std::string::npos);
  const nlohmann::json profile = nlohmann::json::parse(slurp(path));
  auto info = exec::model_info("gpt-mini");
  REQUIRE(info.ok());
  REQUIRE(profile["layers"].size() == info->layer_names.size());
  for (size_t l = 0; l < info->layer_names.size(); ++l) {
    const nlohmann::json& layer = profile["layers"][l];
    CHECK(layer["name"] == info->layer_names[l]);
    CHECK(layer["forward_ms"].get<double>() > 0.0);
    CHECK(layer["backward_ms"].get<double>() > 0.0);
  }
  // Activations between gpt-mini's layers: [B = 2, T = 16, D = 32] floats.
  CHECK(profile["layers"][1]["output_bytes"].get<int64_t>() == 2 * 16 * 32 * 4);
  // The head: LayerNorm (2 x 32) + Linear 32 -> 32 with bias, in floats.
  CHECK(profile["layers"][5]["param_bytes"].get<int64_t>() == (2 * 32 + 32 * 32 + 32) * 4);
}

TEST_CASE("the loaded profile sleeps once per stage's forward and backward with --gap-at", "[exec][profile]") {
  // Six layers in stages 0-3 and 3-6: forwards of layers 0 and 3, backwards of
  // layers 2 and 5 (each stage's last layer, where its backward begins).
  const std::vector<int> starts{0, 3};
  for (int layer = 0; layer < 6; ++layer) {
    INFO("layer " << layer);
    CHECK(exec::gap_before(starts, 6, layer, true) == (layer == 0 || layer == 3));
    CHECK(exec::gap_before(starts, 6, layer, false) == (layer == 2 || layer == 5));
    // Without a list, before every layer's forward and backward.
    CHECK(exec::gap_before({}, 6, layer, true));
    CHECK(exec::gap_before({}, 6, layer, false));
  }
  // One stage: the forward's first layer and the backward's first (the last layer).
  for (int layer = 0; layer < 6; ++layer) {
    CHECK(exec::gap_before({0}, 6, layer, true) == (layer == 0));
    CHECK(exec::gap_before({0}, 6, layer, false) == (layer == 5));
  }
  const CliRun bad = run_baton("profile measure --model mlp --microbatch-size 2 --steps 1 --gap-at 0,x", "gap-at");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--gap-at") != std::string::npos);
  const CliRun beyond = run_baton("profile measure --model mlp --microbatch-size 2 --steps 1 --gap-at 0,6", "gap-at");
  CHECK(beyond.exit_code == 2);
  CHECK(beyond.err.find("--gap-at 6: model 'mlp' has 6 layers (0 to 5)") != std::string::npos);
  CHECK(beyond.out.empty());
}

TEST_CASE(
    "profile measure: memory LibTorch cannot allocate fails the run (exit 1) in one line, without LibTorch's "
    "backtrace",
    "[exec][cli][profile]") {
  // vgg-mini at the largest microbatch a profile holds (2^24 samples): its
  // input alone is 2^24 x 3 x 16 x 16 floats, 48 GiB, beyond the 8 GiB of
  // address space the shell leaves the command, so its first allocation
  // fails on any machine.
  const std::string baton = (fs::path(BATON_BINARY_DIR) / "baton").string();
  const CliRun run =
      run_baton("-c 'ulimit -v 8388608 && exec \"" + baton +
                    "\" profile measure --model vgg-mini --microbatch-size 16777216 --warmup 0 --steps 1'",
                "profile-no-memory", "/bin/sh");
  INFO(run.err);
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("baton: profiling vgg-mini: ") == 0);
  CHECK(run.err.find("can't allocate memory") != std::string::npos);
  CHECK(run.err.find("frame #") == std::string::npos);
  CHECK(run.out.empty());
}

TEST_CASE("kernels measure: a copy too large for memory fails the run (exit 1) in one line, nothing written",
          "[exec][cli][kernels]") {
  const fs::path dir = scratch_dir("kernels-no-memory");
  const fs::path out = dir / "kernels.json";
  // 1e15 bytes read + written: a source and a destination of 500 TB each.
  const CliRun run = run_baton(fmt::format("kernels measure --dtype fp32 --gemm 64x64x64 --stream-bytes "
                                           "1000000000000000 --repeats 1 -o '{}'",
                                           out.string()),
                               "kernels-no-memory");
  INFO(run.err);
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("baton: kernels on cpu: ") != std::string::npos);
  CHECK(run.err.find("can't allocate memory") != std::string::npos);
  CHECK(run.err.find("frame #") == std::string::npos);
  CHECK_FALSE(fs::exists(out));
}

}  // namespace baton::testing
