// Megatron's training flags that change nothing in an iteration's time or
// memory (tools/megatron_training_flags.h): a launch line with them runs in
// simulate, plan, sweep and profile analytic as it is, they are named as not
// modelled, plan's launch line keeps them, and any other flag Megatron has
// is still refused. Megatron's --profile switch is told from baton's
// --profile PATH.
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

const std::string kModel =
    "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --global-batch-size 64 ";
const std::string kSimulate = "simulate --topology topologies/h100_32x8.json " + kModel + "--data-parallel-size 8 ";
// A training run's flags as a Megatron launch script gives them.
const std::string kTraining =
    "--lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 2000 --weight-decay 0.1 --clip-grad 1.0 "
    "--adam-beta1 0.9 --adam-beta2 0.95 --seed 1234 --train-iters 500000 --data-path 0.7 /data/web 0.3 /data/code "
    "--tokenizer-type GPT2BPETokenizer --save /ckpt --save-interval 1000 --eval-interval 1000 --eval-iters 10 "
    "--log-interval 10 --log-throughput --no-load-optim ";

TEST_CASE("training flags: simulate runs a launch line with them, the same iteration, and names them",
          "[cli][megatron]") {
  const CliRun plain = run_baton(kSimulate + "--json", "training-plain");
  const CliRun full = run_baton(kSimulate + kTraining + "--json", "training-full");
  INFO(plain.err << full.err);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(full.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(full.out);
  CHECK(b["iteration_time_s"] == a["iteration_time_s"]);
  CHECK(b["memory"] == a["memory"]);
  CHECK(a["not_modelled_flags"] == nlohmann::json::array());
  const nlohmann::json named = {"--adam-beta1",
                                "--adam-beta2",
                                "--clip-grad",
                                "--data-path",
                                "--eval-interval",
                                "--eval-iters",
                                "--log-interval",
                                "--log-throughput",
                                "--lr",
                                "--lr-decay-style",
                                "--lr-warmup-iters",
                                "--min-lr",
                                "--no-load-optim",
                                "--save",
                                "--save-interval",
                                "--seed",
                                "--tokenizer-type",
                                "--train-iters",
                                "--weight-decay"};
  CHECK(b["not_modelled_flags"] == named);
  CHECK(full.err.find("baton: note: simulate: --adam-beta1 --adam-beta2 --clip-grad --data-path") != std::string::npos);
  CHECK(full.err.find("accepted, not modelled (no effect on a training iteration's time or memory") !=
        std::string::npos);
}

TEST_CASE("training flags: plan's launch line keeps them as given, and simulates back", "[cli][megatron]") {
  const std::string plan = "plan --topology topologies/h100_32x8.json --gpus 8 " + kModel +
                           "--lr 3e-4 --data-path 1.0 \"/data/my corpus\" --tokenizer-model \"it's.model\" ";
  const CliRun planned = run_baton(plan + "--json", "training-plan");
  const CliRun emitted = run_baton(plan + "--emit megatron", "training-emit");
  INFO(planned.err << emitted.err);
  REQUIRE(planned.exit_code == 0);
  REQUIRE(emitted.exit_code == 0);
  const std::string line = emitted.out.substr(0, emitted.out.find('\n'));
  // Quoted for a shell where a value needs it ('\'' for the quote inside).
  CHECK(line.find(" --lr 3e-4 --data-path 1.0 '/data/my corpus' --tokenizer-model 'it'\\''s.model'") !=
        std::string::npos);
  CHECK(emitted.err.find("baton: note: plan: --data-path --lr --tokenizer-model accepted, not modelled") !=
        std::string::npos);
  const CliRun back = run_baton(
      "simulate --topology topologies/h100_32x8.json " + line + " --data-parallel-size 8 --json", "training-back");
  INFO(back.err);
  REQUIRE(back.exit_code == 0);
  CHECK(nlohmann::json::parse(back.out)["iteration_time_s"].get<double>() ==
        Approx(nlohmann::json::parse(planned.out)["iteration_time_s"].get<double>()));
}

TEST_CASE("training flags: refused without a Megatron model, and the flags that would change the run still refused",
          "[cli][megatron][bad-input]") {
  const CliRun with_profile = run_baton(
      "simulate --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json --stages "
      "0-31x15,31-39x1 --lr 1e-4",
      "training-profile");
  CHECK(with_profile.exit_code == 2);
  CHECK(with_profile.err.find("--lr goes with a GPT model given by Megatron's flags") != std::string::npos);
  CHECK(with_profile.out.empty());
  // A flag that would change the run, which baton does not model: refused.
  const CliRun fusion = run_baton(kSimulate + "--apply-query-key-layer-scaling", "training-unmodelled");
  CHECK(fusion.exit_code != 0);
  CHECK(fusion.err.find("--apply-query-key-layer-scaling") != std::string::npos);
  CHECK(fusion.out.empty());
  // sweep and profile analytic take them too.
  const CliRun sweep = run_baton("sweep --topology topologies/h100_32x8.json " + kModel +
                                     "--data-parallel-size 8 --vary micro-batch-size=1,2 --lr 3e-4",
                                 "training-sweep");
  INFO(sweep.err);
  CHECK(sweep.exit_code == 0);
  CHECK(sweep.err.find("baton: note: sweep: --lr accepted, not modelled") != std::string::npos);
  const std::string analytic = "profile analytic --arch gpt --topology topologies/h100_32x8.json " + kModel;
  const CliRun profile = run_baton(analytic + "--seed 7", "training-analytic");
  const CliRun bare = run_baton(analytic, "training-analytic-bare");
  INFO(profile.err);
  REQUIRE(profile.exit_code == 0);
  CHECK(profile.out == bare.out);
  CHECK(profile.err.find("baton: note: profile analytic: --seed accepted, not modelled") != std::string::npos);
}

TEST_CASE("training flags: Megatron's --profile switch beside baton's --profile PATH", "[cli][megatron]") {
  // Megatron-LM's --profile takes no value (its profiler, between
  // --profile-step-start and --profile-step-end); baton's names a layer
  // profile. With a GPT model in Megatron's flags the switch is Megatron's,
  // wherever it stands on the line.
  const CliRun plain = run_baton(kSimulate + "--json", "profile-switch-plain");
  REQUIRE(plain.exit_code == 0);
  for (const std::string& flags : {std::string("--profile --profile-step-start 10 --profile-step-end 12 "),
                                   std::string("--profile-step-start 10 --profile-step-end 12 --profile ")}) {
    const CliRun run = run_baton(kSimulate + flags + "--json", "profile-switch");
    INFO(flags << ": " << run.err);
    REQUIRE(run.exit_code == 0);
    const nlohmann::json out = nlohmann::json::parse(run.out);
    CHECK(out["iteration_time_s"] == nlohmann::json::parse(plain.out)["iteration_time_s"]);
    CHECK(out["not_modelled_flags"] == nlohmann::json({"--profile", "--profile-step-end", "--profile-step-start"}));
  }
  // plan's launch line keeps it.
  const CliRun emitted = run_baton(
      "plan --topology topologies/h100_32x8.json --gpus 8 " + kModel + "--profile --emit megatron", "profile-emit");
  INFO(emitted.err);
  REQUIRE(emitted.exit_code == 0);
  CHECK(emitted.out.substr(0, emitted.out.find('\n')).find(" --profile") != std::string::npos);
  // With a path it is baton's, which a GPT model replaces.
  const CliRun path = run_baton(kSimulate + "--profile traces/vgg16_v100_mb32.json", "profile-switch-path");
  CHECK(path.exit_code == 2);
  CHECK(path.err.find("a GPT model given by Megatron's flags replaces --profile") != std::string::npos);
  // Alone without a GPT model: baton's --profile missing its path.
  const CliRun lone = run_baton("simulate --topology topologies/pipedream_a.json --stages 0-31x15,31-39x1 --profile",
                                "profile-switch-lone");
  CHECK(lone.exit_code == 2);
  CHECK(lone.err.find("simulate: --profile needs a layer profile's path") != std::string::npos);
  CHECK(lone.out.empty());
}

}  // namespace
