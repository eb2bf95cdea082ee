// Values the command line refuses before any work: a number out of its
// range names the flag and the value, an explicit 0 is never taken for "the
// default", and a misspelled command names itself and the commands there are.
#include <string>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

void expect_refused(const std::string& arguments, const std::string& message) {
  const CliRun run = run_baton(arguments, "flag-checks");
  INFO(arguments << "\nstderr: " << run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find(message) != std::string::npos);
  CHECK(run.out.empty());
}

const std::string kGpt =
    "--topology topologies/a100_4x8.json --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
    "--seq-length 1024 --global-batch-size 64";

}  // namespace

TEST_CASE("a flag that must be positive says so, naming itself and the value", "[cli][bad-input]") {
  const std::string plan = "plan --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json ";
  expect_refused(plan + "--activation-compression 0", "--activation-compression: must be at least 1, got 0");
  expect_refused(plan + "--memory-limit-gib -1", "--memory-limit-gib: must be in (0, 1048576], got -1");
  expect_refused(plan + "--keep 0", "--keep: must be at least 1, got 0");
  expect_refused("plan " + kGpt + " --gpus 0", "--gpus: must be at least 1, got 0");
  expect_refused("sweep --profile tests/data/tiny_profile.json --topology tests/data/tiny_topology.json --threads 0",
                 "--threads: must be in [1, 1024], got 0");
  expect_refused("profile analytic --arch vgg16 --microbatch-size 0", "--microbatch-size: must be at least 1, got 0");
  expect_refused("profile analytic --arch vgg16 --microbatch-size two",
                 "--microbatch-size: must be a number at least 1, got \"two\"");
  // CLI11's own wording is gone.
  const CliRun run = run_baton(plan + "--keep 0", "flag-checks");
  CHECK(run.err.find("not in range") == std::string::npos);
}

TEST_CASE("a number flag refuses infinity and NaN, which no range holds", "[cli][bad-input]") {
  const std::string plan = "plan --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json ";
  // --memory-limit-gib inf planned against "-8589934592.00 GiB per device" (the GiB overflowed int64 bytes).
  expect_refused(plan + "--memory-limit-gib inf", "--memory-limit-gib: must be a number in (0, 1048576], got \"inf\"");
  expect_refused("run --model mlp --lr nan", "--lr: must be a number more than 0, got \"nan\"");
  expect_refused("run --model mlp --timeout inf", "--timeout: must be a number more than 0, got \"inf\"");
  // validate --gap-us nan ran, and predicted at a slice's speed measured with NaN microseconds of sleep.
  expect_refused("validate --model mlp --gap-us nan", "--gap-us: must be a number at most 1000000, got \"nan\"");
  expect_refused("validate --model mlp --gap-us 2e6", "--gap-us: must be at most 1000000, got 2e6");
  expect_refused("profile measure --model mlp --microbatch-size 2 --gap-us 2e6",
                 "--gap-us: must be in [0, 1000000], got 2e6");
}

TEST_CASE("a microbatch size no profile holds is refused where a profile is written", "[cli][bad-input]") {
  // profile analytic --microbatch-size 2147483647 wrote a profile that every
  // command then refused to load ("microbatch_size is too large").
  expect_refused("profile analytic --arch gpt-175b --microbatch-size 2147483647",
                 "--microbatch-size: must be at most 16777216, got 2147483647");
  expect_refused("profile measure --model mlp --microbatch-size 16777217",
                 "--microbatch-size: must be at most 16777216, got 16777217");
  expect_refused("import pipedream x.txt --microbatch-size 16777217",
                 "--microbatch-size: must be at most 16777216, got 16777217");
  expect_refused("validate --model mlp --microbatch-size 16777217",
                 "--microbatch-size: must be at most 16777216, got 16777217");
  expect_refused("run --model mlp --microbatch-size 16777217",
                 "--microbatch-size: must be at most 16777216, got 16777217");
  // Megatron's dimensions (sim/megatron.h): --hidden-size 1e9 printed -8589934592 GiB of weights that fit.
  expect_refused(
      "simulate --topology topologies/a100_4x8.json --num-layers 16 --hidden-size 1000000000 "
      "--num-attention-heads 16 --seq-length 1024 --global-batch-size 64",
      "--hidden-size must be at most 262144, got 1000000000");
}

TEST_CASE("a device's memory from a flag is held to a topology file's 1 PiB", "[cli][bad-input]") {
  const std::string plan = "plan --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json ";
  expect_refused(plan + "--memory-limit-gib 1e300", "--memory-limit-gib: must be in (0, 1048576], got 1e300");
  expect_refused("calibrate --memory-gib 2e6", "--memory-gib: must be in (0, 1048576], got 2e6");
}

TEST_CASE("run's learning rate must be more than 0", "[cli][bad-input]") {
  expect_refused("run --model mlp --lr -0.1", "--lr: must be more than 0, got -0.1");
  expect_refused("run --model mlp --lr 0", "--lr: must be more than 0, got 0");
}

TEST_CASE("calibrate's loaded exchange computes LO to HI ms, 0 < LO <= HI <= 1000", "[cli][bad-input]") {
  expect_refused("calibrate --loaded-forward-ms 0,1", "--loaded-forward-ms: must be in (0, 1000], got 0");
  expect_refused("calibrate --loaded-forward-ms 1,2000", "--loaded-forward-ms: must be in (0, 1000], got 2000");
  expect_refused("calibrate --loaded-forward-ms 1", "--loaded-forward-ms: At least 2 required but received 1");
  expect_refused("calibrate --loaded-forward-ms 2,1", "--loaded-forward-ms 2,1: LO must not exceed HI");
}

TEST_CASE("commands that start ranks here start 2 to 256 of them", "[cli][bad-input]") {
  // calibrate --nproc 100000 began starting a hundred thousand processes.
  expect_refused("calibrate --nproc 100000", "--nproc: must be in [2, 256], got 100000");
  expect_refused("calibrate --nproc 1", "--nproc: must be in [2, 256], got 1");
  expect_refused("validate --model mlp --nproc 257", "--nproc: must be in [2, 256], got 257");
}

TEST_CASE("profile analytic --efficiency must be more than 0 and at most 1", "[cli][bad-input]") {
  expect_refused("profile analytic --arch vgg16 --efficiency 0", "--efficiency: must be in (0, 1], got 0");
  expect_refused("profile analytic --arch vgg16 --efficiency 1.5", "--efficiency: must be in (0, 1], got 1.5");
  const CliRun one = run_baton("profile analytic --arch vgg16 --efficiency 1", "flag-checks-efficiency");
  INFO(one.err);
  CHECK(one.exit_code == 0);
}

TEST_CASE("an explicit 0 for a Megatron flag whose default is unset is refused, not taken as the default",
          "[cli][bad-input][megatron]") {
  for (const std::string command : {"simulate ", "plan ", "sweep "}) {
    for (const std::string flag : {"--data-parallel-size", "--decoder-first-pipeline-num-layers",
                                   "--decoder-last-pipeline-num-layers", "--num-layers-per-virtual-pipeline-stage"})
      expect_refused(command + kGpt + " " + flag + " 0", flag + ": must be at least 1, got 0");
    expect_refused(command + kGpt + " --enable-zero-bubble --zero-bubble-max-pending-backward 0",
                   "--zero-bubble-max-pending-backward: must be at least 1, got 0");
  }
}

TEST_CASE("a misspelled command names itself and lists the commands", "[cli][usage]") {
  expect_refused("plna --topology topologies/pipedream_a.json",
                 "baton: unknown command 'plna'; the commands are: plan, ");
  const CliRun run = run_baton("plna", "flag-checks-command");
  for (const char* command : {"plan", "simulate", "sweep", "profile", "kernels"})
    CHECK(run.err.find(command) != std::string::npos);
  CHECK(run.err.find("A subcommand is required") == std::string::npos);
  expect_refused("profile analytc --arch vgg16",
                 "baton: unknown command 'analytc'; the commands of profile are: analytic, measure");
  // A known command still reaches its own parser.
  CHECK(run_baton("plan --help", "flag-checks-help").exit_code == 0);
}

TEST_CASE("a value its flag's type cannot hold names the flag, the value and what it takes", "[cli][bad-input]") {
  // Once CLI11's "Could not convert: --global-batch-size = 2147483648".
  expect_refused("simulate " + kGpt + " --micro-batch-size 2147483648",
                 "baton: --micro-batch-size: expected a whole number of at most 2147483647, got \"2147483648\"");
  expect_refused("simulate " + kGpt + " --data-parallel-size 1.5",
                 "baton: --data-parallel-size: expected a whole number of at most 2147483647, got \"1.5\"");
  expect_refused("plan --profile traces/vgg16_v100_mb32.json --topology topologies/pipedream_a.json --microbatches 1e3",
                 "--microbatches");
  expect_refused("profile analytic --arch vgg16 --efficiency half",
                 "--efficiency: must be a number in (0, 1], got \"half\"");
}
