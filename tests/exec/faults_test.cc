// Faults and recovery through the `baton` binary: a gloo rank that crashes or
// hangs ends the whole run within a bound that follows from --timeout, with
// messages naming it; a run killed after a checkpoint and resumed from it
// ends with exactly the weights of an uninterrupted run, on both backends.
// Faults come from BATON_INJECT_FAULT (exec/fault.h), which the ranks inherit.
#include "tests/exec/exec_test_support.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exec/fault.h"
#include "exec/launcher.h"
#include "tests/cli/cli_runner.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;

// Sets BATON_INJECT_FAULT for the commands run while it lives.
class FaultInEnvironment {
 public:
  explicit FaultInEnvironment(const std::string& fault) { ::setenv(exec::kFaultVariable, fault.c_str(), 1); }
  ~FaultInEnvironment() { ::unsetenv(exec::kFaultVariable); }
  FaultInEnvironment(const FaultInEnvironment&) = delete;
  FaultInEnvironment& operator=(const FaultInEnvironment&) = delete;
};

std::string write_plan(const fs::path& dir, const Plan& plan) {
  const fs::path path = dir / "plan.json";
  std::ofstream(path) << plan_to_json(plan).dump(2);
  return path.string();
}

struct TimedRun {
  CliRun run;
  double seconds = 0.0;
};

TimedRun run_timed(const std::string& arguments, const std::string& scratch) {
  const auto start = std::chrono::steady_clock::now();
  CliRun run = run_baton(arguments, scratch);
  return {std::move(run), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

exec::Weights load_weights(const fs::path& path) {
  auto weights = exec::weights_from_json(nlohmann::json::parse(slurp(path)), path.string());
  REQUIRE(weights.ok());
  return *weights;
}

// --timeout of the fault tests, and how long a faulty run may take in all:
// starting the ranks (loading LibTorch on a busy machine), one timeout for a
// rank to notice a silent peer, the launcher's grace of 5 s, and slack.
constexpr double kTimeoutS = 5.0;
constexpr double kStartupS = 15.0;
constexpr double kGraceS = 5.0;
constexpr double kFaultyRunBoundS = kStartupS + kTimeoutS + kGraceS + kTimeoutS;

}  // namespace

TEST_CASE("BATON_INJECT_FAULT names a rank, a step and a kind", "[exec][faults]") {
  auto crash = exec::parse_fault("rank=1,step=3,kind=crash");
  REQUIRE(crash.ok());
  CHECK(crash->rank == 1);
  CHECK(crash->step == 3);
  CHECK(crash->kind == exec::FaultKind::kCrash);
  auto hang = exec::parse_fault("kind=hang,step=0,rank=2");
  REQUIRE(hang.ok());
  CHECK(hang->kind == exec::FaultKind::kHang);
  CHECK(hang->rank == 2);
  const std::string expected = " (expected rank=R,step=S,kind=crash|exit|hang)";
  CHECK(exec::parse_fault("rank=1,step=3").error().message ==
        "BATON_INJECT_FAULT='rank=1,step=3': 'kind' is missing" + expected);
  CHECK(exec::parse_fault("rank=1,step=x,kind=exit").error().message ==
        "BATON_INJECT_FAULT='rank=1,step=x,kind=exit': step = 'x' is not a number >= 0" + expected);
  CHECK(exec::parse_fault("rank=1,step=1,kind=boom").error().message ==
        "BATON_INJECT_FAULT='rank=1,step=1,kind=boom': kind = 'boom' is not one of crash, exit, hang" + expected);
  CHECK(exec::parse_fault("rank=1,rank=2,step=1,kind=exit").error().message ==
        "BATON_INJECT_FAULT='rank=1,rank=2,step=1,kind=exit': 'rank' is given twice" + expected);
  CHECK(exec::parse_fault("rank=1,step=1,kind=exit,when=now").error().message ==
        "BATON_INJECT_FAULT='rank=1,step=1,kind=exit,when=now': unknown key 'when'" + expected);
}

TEST_CASE("the launcher's message names the rank that failed first and how every rank ended", "[exec][faults]") {
  exec::LaunchSpec spec;
  spec.timeout = Seconds(40);
  spec.grace = Seconds(5);
  const exec::LaunchOutcome crashed{0, {1, 128 + SIGKILL}, 1};
  CHECK(exec::describe_failure(crashed, spec) ==
        "rank 1 failed first: killed by signal 9 (Killed); rank 0: exit code 1");
  const exec::LaunchOutcome hung{0, {1, -1, 0}, 0};
  CHECK(exec::describe_failure(hung, spec) ==
        "rank 0 failed first: exit code 1; rank 1: killed by the launcher, still running 5 s after the first failure");
  const exec::LaunchOutcome stuck{0, {-1, -1}, -1};
  CHECK(exec::describe_failure(stuck, spec) ==
        "no rank failed before the run's deadline of 40 s; rank 0: killed by the launcher at the deadline; "
        "rank 1: killed by the launcher at the deadline");
}

TEST_CASE("a gloo rank that crashes or hangs ends the run within a bound set by --timeout", "[exec][gloo][faults]") {
  const fs::path dir = scratch_dir("exec-faults");
  const std::string command =
      fmt::format("run --plan '{}' --model mlp --steps 3 --backend gloo --nproc 2 --timeout {:g}",
                  write_plan(dir, exec_plan("0-3,3-6", Schedule::kOneFOneB, 4)), kTimeoutS);
  SECTION("crash: rank 0 sees the connection close, the launcher names rank 1 and its signal") {
    const FaultInEnvironment fault("rank=1,step=1,kind=crash");
    const TimedRun timed = run_timed(command, "exec-faults");
    INFO(timed.run.err);
    CHECK(timed.run.exit_code == 1);
    CHECK(timed.seconds < kFaultyRunBoundS);
    CHECK(timed.run.err.find("rank 1 failed first: killed by signal 9") != std::string::npos);
    CHECK(timed.run.err.find("run: rank 0: worker 0, ") != std::string::npos);
    CHECK(timed.run.err.find("step 1: ") != std::string::npos);
    CHECK(timed.run.err.find("connection closed by rank 1") != std::string::npos);
  }
  SECTION("hang: rank 0 times out waiting for rank 1, the launcher kills rank 1") {
    const FaultInEnvironment fault("rank=1,step=1,kind=hang");
    const TimedRun timed = run_timed(command, "exec-faults");
    INFO(timed.run.err);
    CHECK(timed.run.exit_code == 1);
    CHECK(timed.seconds < kFaultyRunBoundS);
    CHECK(timed.run.err.find("receive from rank 1 timed out after 5 s: rank 1 is not responding") != std::string::npos);
    CHECK(timed.run.err.find("rank 0 failed first: exit code 1; rank 1: killed by the launcher, still running 5 s "
                             "after the first failure") != std::string::npos);
  }
}

TEST_CASE("the threads backend refuses a hang it could not stop", "[exec][threads][faults]") {
  const fs::path dir = scratch_dir("exec-faults-threads");
  const FaultInEnvironment fault("rank=1,step=0,kind=hang");
  const CliRun run = run_baton(fmt::format("run --plan '{}' --model mlp --steps 1",
                                           write_plan(dir, exec_plan("0-3,3-6", Schedule::kOneFOneB, 4))),
                               "exec-faults-threads");
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("BATON_INJECT_FAULT: kind=hang needs the gloo backend") != std::string::npos);
}

TEST_CASE("a threads run resumed from its checkpoint continues exactly where it stopped",
          "[exec][threads][checkpoint]") {
  struct Case {
    const char* stages;
    Schedule schedule;
    int microbatches;
    bool vertical_sync;
  };
  // The chunked schedules run two chunks per worker: a checkpoint holds a file
  // per chunk (stage), written by the worker that runs it.
  const Case cases[] = {
      {"0-3,3-6", Schedule::kGPipe, 4, false},       {"0-6x2", Schedule::kDataParallel, 4, false},
      {"0-3x2,3-6", Schedule::kPipeDream, 8, false}, {"0-3x2,3-6", Schedule::kPipeDream, 8, true},
      {"0-2,2-4,4-6", Schedule::kZbH2, 6, false},    {"0-2x2,2-3x2,3-5x2,5-6x2", Schedule::kInterleaved1F1B, 8, false},
      {"0-2,2-3,3-5,5-6", Schedule::kZbV, 4, false}, {"0-2,2-3,3-5,5-6", Schedule::kDualPipeV, 4, false}};
  for (const Case& c : cases) {
    INFO(schedule_name(c.schedule) << " " << c.stages << (c.vertical_sync ? " vertical sync" : ""));
    const fs::path dir = scratch_dir("exec-resume-api");
    Plan plan = exec_plan(c.stages, c.schedule, c.microbatches);
    plan.vertical_sync = c.vertical_sync;
    if (runs_chunks(c.schedule)) plan.virtual_stages = 2;
    const auto [uninterrupted, resumed] = run_and_resume_at_two(plan, train_options("mlp", 4), dir.string());
    CHECK(resumed.steps[1].mean_loss == uninterrupted.steps[3].mean_loss);
    CHECK(exec::max_relative_error(resumed.weights, uninterrupted.weights) == 0.0);
    for (int s = 0; s < plan.num_stages(); ++s) CHECK(fs::exists(dir / "step-000002" / fmt::format("stage-{}.bin", s)));
  }
}

TEST_CASE("a run killed after a checkpoint and resumed ends with exactly the uninterrupted weights",
          "[exec][faults][checkpoint]") {
  struct Case {
    const char* name;
    Schedule schedule;
    bool vertical_sync;
    const char* backend;
  };
  const Case cases[] = {{"gpipe", Schedule::kGPipe, false, "threads"},
                        {"1f1b", Schedule::kOneFOneB, false, "threads"},
                        {"pipedream", Schedule::kPipeDream, false, "threads"},
                        {"pipedream-vsync", Schedule::kPipeDream, true, "threads"},
                        {"gpipe", Schedule::kGPipe, false, "gloo"},
                        {"1f1b", Schedule::kOneFOneB, false, "gloo"},
                        {"pipedream", Schedule::kPipeDream, false, "gloo"},
                        {"interleaved", Schedule::kInterleaved1F1B, false, "gloo"},
                        {"dualpipev", Schedule::kDualPipeV, false, "gloo"}};
  for (const Case& c : cases) {
    const std::string name = fmt::format("exec-resume-{}-{}", c.name, c.backend);
    INFO(name);
    const fs::path dir = scratch_dir(name);
    // Two ranks; the chunked schedules run two chunks of the 4-stage split on each.
    Plan plan = exec_plan(runs_chunks(c.schedule) ? "0-2,2-3,3-5,5-6" : "0-3,3-6", c.schedule, 4);
    plan.vertical_sync = c.vertical_sync;
    if (runs_chunks(c.schedule)) plan.virtual_stages = 2;
    const std::string base = fmt::format(
        "run --plan '{}' --model mlp --steps 4 --lr 0.1 --seed 7 --backend {} "
        "--timeout {:g}",
        write_plan(dir, plan), c.backend, kTimeoutS);
    const std::string checkpoints = fmt::format(" --checkpoint-dir '{}' --checkpoint-every 2", (dir / "ckpt").string());

    const CliRun whole = run_baton(fmt::format("{} --save-weights '{}'", base, (dir / "whole.json").string()), name);
    INFO(whole.err);
    REQUIRE(whole.exit_code == 0);
    {
      // Step 3 (0-based) starts after the checkpoint of 2 completed steps and step 2's work.
      const FaultInEnvironment fault("rank=1,step=3,kind=crash");
      const CliRun killed = run_baton(base + checkpoints, name);
      INFO(killed.err);
      REQUIRE(killed.exit_code != 0);
    }
    CHECK(fs::exists(dir / "ckpt" / "step-000002" / "manifest.json"));
    CHECK(!fs::exists(dir / "ckpt" / "step-000004"));
    const CliRun resumed = run_baton(
        fmt::format("{}{} --resume --save-weights '{}'", base, checkpoints, (dir / "resumed.json").string()), name);
    INFO(resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(exec::max_relative_error(load_weights(dir / "resumed.json"), load_weights(dir / "whole.json")) == 0.0);
    CHECK(fs::exists(dir / "ckpt" / "step-000004" / "manifest.json"));
  }
}

TEST_CASE("a resume with another plan or model, or with nothing to resume, is refused", "[exec][faults][checkpoint]") {
  const fs::path dir = scratch_dir("exec-resume-refused");
  const std::string ckpt = (dir / "ckpt").string();
  Plan without_model = exec_plan("0-3,3-6", Schedule::kOneFOneB, 4);
  without_model.model.clear();  // so that --model may name another zoo model of 6 layers
  const std::string made = write_plan(dir, without_model);
  REQUIRE(run_baton(fmt::format("run --plan '{}' --model mlp --steps 2 --checkpoint-dir '{}' --checkpoint-every 1",
                                made, ckpt),
                    "exec-resume-refused")
              .exit_code == 0);
  const std::string manifest = (fs::path(ckpt) / "step-000002" / "manifest.json").string();
  const fs::path other_dir = dir / "other";
  fs::create_directories(other_dir);
  const std::string other = write_plan(other_dir, exec_plan("0-2,2-6", Schedule::kOneFOneB, 4));
  for (const char* backend : {"threads", "gloo"}) {
    INFO(backend);
    const CliRun plan = run_baton(fmt::format("run --plan '{}' --model mlp --steps 4 --backend {} "
                                              "--checkpoint-dir '{}' --resume",
                                              other, backend, ckpt),
                                  "exec-resume-refused");
    CHECK(plan.exit_code == 1);
    CHECK(plan.err.find(fmt::format("{}: cannot resume: the checkpoint was made with stages = \"0-3x1,3-6x1\" but "
                                    "this run has stages = \"0-2x1,2-6x1\"",
                                    manifest)) != std::string::npos);
    CHECK(plan.err.find("rank") == std::string::npos);  // refused before any rank starts
  }
  const CliRun model =
      run_baton(fmt::format("run --plan '{}' --model vgg-mini --steps 4 --checkpoint-dir '{}' --resume", made, ckpt),
                "exec-resume-refused");
  CHECK(model.exit_code == 1);
  CHECK(model.err.find("cannot resume: the checkpoint was made with model = \"mlp\" but this run has model = "
                       "\"vgg-mini\"") != std::string::npos);
  const CliRun done =
      run_baton(fmt::format("run --plan '{}' --model mlp --steps 2 --checkpoint-dir '{}' --resume", made, ckpt),
                "exec-resume-refused");
  CHECK(done.exit_code == 1);
  CHECK(done.err.find("the checkpoint already holds 2 completed steps and the run has 2: nothing is left to run") !=
        std::string::npos);
  const CliRun empty = run_baton(
      fmt::format("run --plan '{}' --model mlp --steps 2 --checkpoint-dir '{}' --resume", made, other_dir.string()),
      "exec-resume-refused");
  CHECK(empty.exit_code == 1);
  CHECK(empty.err.find(fmt::format("{}: no complete checkpoint to resume from", other_dir.string())) !=
        std::string::npos);
  const CliRun no_dir =
      run_baton(fmt::format("run --plan '{}' --model mlp --steps 2 --resume", made), "exec-resume-refused");
  CHECK(no_dir.exit_code == 2);
  CHECK(no_dir.err.find("--checkpoint-every and --resume need --checkpoint-dir") != std::string::npos);
  // A manifest with a key its format does not have is refused by name, not half read.
  nlohmann::json edited = nlohmann::json::parse(slurp(manifest));
  edited["run"]["sed"] = 7;
  std::ofstream(manifest) << edited.dump(2);
  const CliRun unknown =
      run_baton(fmt::format("run --plan '{}' --model mlp --steps 4 --checkpoint-dir '{}' --resume", made, ckpt),
                "exec-resume-refused");
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find(manifest + ": run has an unknown key \"sed\" (did you mean \"seed\"?)") != std::string::npos);
}

}  // namespace baton::testing
