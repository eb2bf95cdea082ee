// `baton check`: a case whose plan moved fails with a readable diff; an
// unchanged one passes.
#include <filesystem>
#include <fstream>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

void write_case(const fs::path& dir, const std::string& expected) {
  std::ofstream(dir / "case.json") << R"({"format": "baton.check.v1", "name": "tiny",
    "profile": "tests/data/tiny_profile.json", "topology": "tests/data/tiny_topology.json",
    "options": {"cost_model": "pipedream", "straight": true},
    "expected": )" << expected << R"(, "tolerance": {"time_relative": 1e-9}})";
}

}  // namespace

TEST_CASE("check passes an unchanged case and fails a moved one with a diff", "[cli][check]") {
  const fs::path dir = scratch_dir("check-cases");
  write_case(dir, R"({"time_per_minibatch_s": 1.0, "stages": "0-6x1"})");
  const CliRun update = run_baton("check --update '" + dir.string() + "'", "check-update");
  REQUIRE(update.exit_code == 0);
  const CliRun same = run_baton("check '" + dir.string() + "'", "check-same");
  CHECK(same.exit_code == 0);
  CHECK(same.out.find("1 passed, 0 failed") != std::string::npos);

  // Expectations that no longer hold (another time, another split): both differences are reported.
  write_case(dir, R"({"time_per_minibatch_s": 0.1, "stages": "0-3x1,3-6x1"})");
  const CliRun moved = run_baton("check '" + dir.string() + "'", "check-moved");
  CHECK(moved.exit_code == 1);
  CHECK(moved.out.find("FAIL tiny") != std::string::npos);
  CHECK(moved.out.find("time      expected 0.1 s") != std::string::npos);
  CHECK(moved.out.find("stages    expected 0-3x1,3-6x1") != std::string::npos);
  CHECK(moved.out.find("0 passed, 1 failed") != std::string::npos);
}

TEST_CASE("check refuses a folder without cases", "[cli][check][bad-input]") {
  const fs::path dir = scratch_dir("check-empty");
  const CliRun run = run_baton("check '" + dir.string() + "'", "check-empty");
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("holds no *.json check cases") != std::string::npos);
}

TEST_CASE("check takes case files and folders together, each case once per naming", "[cli][check]") {
  const fs::path dir = scratch_dir("check-files");
  write_case(dir, R"({"time_per_minibatch_s": 1.0, "stages": "0-6x1"})");
  REQUIRE(run_baton("check --update '" + dir.string() + "'", "check-files-update").exit_code == 0);
  const std::string file = (dir / "case.json").string();
  const CliRun one = run_baton("check '" + file + "'", "check-one-file");
  CHECK(one.exit_code == 0);
  CHECK(one.out.find("ok   tiny") != std::string::npos);
  CHECK(one.out.find("1 passed, 0 failed") != std::string::npos);
  // The folder (one case) and the file again: two cases checked.
  const CliRun both = run_baton("check '" + dir.string() + "' '" + file + "'", "check-file-and-folder");
  CHECK(both.exit_code == 0);
  CHECK(both.out.find("2 passed, 0 failed") != std::string::npos);
}

TEST_CASE("check refuses a path that is neither a case nor a folder, naming it", "[cli][check][bad-input]") {
  const fs::path missing = scratch_dir("check-missing") / "no-such-case.json";
  const CliRun run = run_baton("check '" + missing.string() + "'", "check-missing");
  CHECK(run.exit_code == 2);
  CHECK(run.err == "baton: " + missing.string() + ": neither a check case file nor a folder of them\n");
  CHECK(run.out.empty());
}

TEST_CASE("check refuses a case with an unknown key, naming it", "[cli][check][bad-input]") {
  const fs::path dir = scratch_dir("check-unknown-key");
  std::ofstream(dir / "case.json") << R"({"format": "baton.check.v1", "name": "tiny",
    "profile": "tests/data/tiny_profile.json", "topology": "tests/data/tiny_topology.json",
    "options": {"cost_model": "pipedream", "straigth": true},
    "expected": {"time_per_minibatch_s": 1.0, "stages": "0-6x1"}})";
  const CliRun run = run_baton("check '" + dir.string() + "'", "check-unknown-key");
  CHECK(run.exit_code == 2);
  CHECK(run.err == "baton: " + (dir / "case.json").string() +
                       ": options has an unknown key \"straigth\" (did you mean \"straight\"?)\n");
  CHECK(run.out.empty());
}

TEST_CASE("check refuses a case's microbatches that plan would refuse, naming the case and the bound",
          "[cli][check][bad-input]") {
  // 10^12 was cast to int and wrapped to a negative count (the case passed as
  // if none were given); 4,194,304 for a 6-layer model planned for 36 s.
  const fs::path dir = scratch_dir("check-microbatches");
  const auto with_microbatches = [&](const std::string& count) {
    std::ofstream(dir / "case.json") << R"({"format": "baton.check.v1", "name": "tiny",
      "profile": "tests/data/tiny_profile.json", "topology": "tests/data/tiny_topology.json",
      "options": {"microbatches": )" << count
                                     << R"(}, "expected": {"time_per_minibatch_s": 1.0, "stages": "0-6x1"}})";
    return run_baton("check '" + dir.string() + "'", "check-microbatches");
  };
  const std::string file = (dir / "case.json").string();
  const CliRun wrapped = with_microbatches("1000000000000");
  CHECK(wrapped.exit_code == 2);
  CHECK(wrapped.err == "baton: " + file + ": options.microbatches must be at most 4194304, got 1000000000000\n");
  // 6 layers: at most 2^22 / 6 = 699050 microbatches.
  const CliRun too_many = with_microbatches("699051");
  CHECK(too_many.exit_code == 2);
  CHECK(too_many.err.find("baton: " + file + ": options.microbatches 699051: at most 699050 for") == 0);
  CHECK(too_many.out.empty());
}

TEST_CASE("check --update rewrites no case when one is refused", "[cli][check][bad-input]") {
  // a.json is good and comes first; b.json has a misspelled top-level key.
  // Every case is read before any is planned, so a.json is left as it was.
  const fs::path dir = scratch_dir("check-update-refused");
  const std::string good = R"({"format": "baton.check.v1", "name": "a",
    "profile": "tests/data/tiny_profile.json", "topology": "tests/data/tiny_topology.json",
    "expected": {"time_per_minibatch_s": 1.0, "stages": "0-6x1"}})";
  std::ofstream(dir / "a.json") << good;
  std::ofstream(dir / "b.json") << R"({"format": "baton.check.v1", "name": "b",
    "profile": "tests/data/tiny_profile.json", "topology": "tests/data/tiny_topology.json",
    "tolerence": {"time_relative": 1e-6}})";
  const CliRun run = run_baton("check --update '" + dir.string() + "'", "check-update-refused");
  CHECK(run.exit_code == 2);
  CHECK(run.err == "baton: " + (dir / "b.json").string() +
                       ": document has an unknown key \"tolerence\" (did you mean \"tolerance\"?)\n");
  CHECK(run.out.empty());
  CHECK(slurp(dir / "a.json") == good);
}

TEST_CASE("check --update needs no expected, check does", "[cli][check][bad-input]") {
  const fs::path dir = scratch_dir("check-no-expected");
  std::ofstream(dir / "case.json") << R"({"format": "baton.check.v1",
    "profile": "tests/data/tiny_profile.json", "topology": "tests/data/tiny_topology.json"})";
  const CliRun check = run_baton("check '" + dir.string() + "'", "check-no-expected");
  CHECK(check.exit_code == 2);
  CHECK(check.err ==
        "baton: " + (dir / "case.json").string() + ": expected is missing (`baton check --update` writes it)\n");
  const CliRun update = run_baton("check --update '" + dir.string() + "'", "check-no-expected-update");
  CHECK(update.exit_code == 0);
  CHECK(update.out == "updated case\n1 passed, 0 failed\n");
  CHECK(run_baton("check '" + dir.string() + "'", "check-no-expected-again").exit_code == 0);
}

TEST_CASE("check --update keeps no expectation a later check would refuse: a plan of no time", "[cli][check]") {
  // Layers of no time and no bytes: the plan takes 0 s, which "expected"
  // cannot hold (it must be > 0), so the case is failed and left as it was.
  const fs::path dir = scratch_dir("check-zero-time"), profiles = scratch_dir("check-zero-time-profile");
  std::ofstream(profiles / "zero.json") << R"({"format": "baton.profile.v1", "model": "zero", "microbatch_size": 1,
    "layers": [{"name": "a", "forward_ms": 0, "backward_ms": 0, "output_bytes": 0, "param_bytes": 0},
               {"name": "b", "forward_ms": 0, "backward_ms": 0, "output_bytes": 0, "param_bytes": 0}]})";
  const std::string text = R"({"format": "baton.check.v1", "name": "zero", "profile": ")" +
                           (profiles / "zero.json").string() +
                           R"(", "topology": "tests/data/tiny_topology.json", "options": {"schedule": "1f1b"}})";
  std::ofstream(dir / "case.json") << text;
  const CliRun update = run_baton("check --update '" + dir.string() + "'", "check-zero-time");
  INFO(update.err);
  CHECK(update.exit_code == 1);
  CHECK(update.out.find("FAIL zero: the plan (") != std::string::npos);
  CHECK(update.out.find(") has no positive, finite time per iteration (0); nothing written") != std::string::npos);
  CHECK(slurp(dir / "case.json") == text);
}

namespace {

void write_gpt_case(const fs::path& dir, const std::string& pinned, const std::string& expected) {
  std::ofstream(dir / "gpt.json") << R"({"format": "baton.check.v1", "name": "gpt",
    "gpt": {"num_layers": 16, "hidden_size": 2048, "num_attention_heads": 16, "seq_length": 1024,
            "global_batch_size": 64, "pinned": )"
                                  << pinned << R"(},
    "topology": "topologies/a100_4x8.json", "expected": )"
                                  << expected << "}";
}

}  // namespace

TEST_CASE("check re-plans a GPT layout case and reports a moved layout", "[cli][check][megatron]") {
  const fs::path dir = scratch_dir("check-gpt");
  write_gpt_case(dir, R"({"tensor_model_parallel_size": 2, "recompute_granularity": "none"})",
                 R"({"iteration_time_s": 1.0, "layout": "x"})");
  const CliRun update = run_baton("check --update '" + dir.string() + "'", "check-gpt-update");
  INFO(update.err);
  REQUIRE(update.exit_code == 0);
  const CliRun same = run_baton("check '" + dir.string() + "'", "check-gpt-same");
  CHECK(same.exit_code == 0);
  // The pinned axes hold in the layout the search chose.
  CHECK(same.out.find("ok   gpt (") != std::string::npos);
  CHECK(same.out.find(", t 2 p ") != std::string::npos);
  CHECK(same.out.find(" recompute none") != std::string::npos);

  write_gpt_case(dir, R"({"tensor_model_parallel_size": 2, "recompute_granularity": "none"})",
                 R"({"iteration_time_s": 1.0, "layout": "t 8 p 1 d 4 b 1 recompute full"})");
  const CliRun moved = run_baton("check '" + dir.string() + "'", "check-gpt-moved");
  CHECK(moved.exit_code == 1);
  CHECK(moved.out.find("layout    expected t 8 p 1 d 4 b 1 recompute full") != std::string::npos);
  CHECK(moved.out.find("time      expected 1 s") != std::string::npos);

  write_gpt_case(dir, R"({"tensor_model_parallel_size": 2, "recompute_granularity": "some"})",
                 R"({"iteration_time_s": 1.0, "layout": "x"})");
  const CliRun bad = run_baton("check '" + dir.string() + "'", "check-gpt-bad");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("gpt.pinned.recompute_granularity must be none, selective or full") != std::string::npos);

  write_gpt_case(dir, R"({"moe_token_dispatcher_type": "deepep"})", R"({"iteration_time_s": 1.0, "layout": "x"})");
  const CliRun flex = run_baton("check '" + dir.string() + "'", "check-gpt-flex");
  CHECK(flex.exit_code == 2);
  CHECK(flex.err.find("gpt.pinned.moe_token_dispatcher_type must be allgather, alltoall or flex") != std::string::npos);

  write_gpt_case(dir, R"({"tp_comm_overlap": 1})", R"({"iteration_time_s": 1.0, "layout": "x"})");
  const CliRun number = run_baton("check '" + dir.string() + "'", "check-gpt-overlap");
  CHECK(number.exit_code == 2);
  CHECK(number.err.find("gpt.pinned.tp_comm_overlap must be true or false") != std::string::npos);
  write_gpt_case(dir, R"({"overlap_param_gather": true})", R"({"iteration_time_s": 1.0, "layout": "x"})");
  const CliRun alone = run_baton("check '" + dir.string() + "'", "check-gpt-param-gather");
  CHECK(alone.exit_code == 2);
  CHECK(alone.err.find("gpt.pinned.overlap_param_gather needs overlap_grad_reduce true") != std::string::npos);
  write_gpt_case(dir, R"({"delay_wgrad_compute": true})", R"({"iteration_time_s": 1.0, "layout": "x"})");
  const CliRun lone = run_baton("check '" + dir.string() + "'", "check-gpt-delay");
  CHECK(lone.exit_code == 2);
  CHECK(lone.err.find("gpt.pinned.delay_wgrad_compute needs overlap_moe_expert_parallel_comm true") !=
        std::string::npos);
}

TEST_CASE("check refuses a GPT case's counts an int does not hold, naming the field", "[cli][check][bad-input]") {
  // They were cast to int: 4294967298 tensor-parallel ranks read as 2.
  const fs::path dir = scratch_dir("check-gpt-wrapped");
  write_gpt_case(dir, R"({"tensor_model_parallel_size": 4294967298})", R"({"iteration_time_s": 1.0, "layout": "x"})");
  const CliRun run = run_baton("check '" + dir.string() + "'", "check-gpt-wrapped");
  CHECK(run.exit_code == 2);
  CHECK(run.err == "baton: " + (dir / "gpt.json").string() +
                       ": gpt.pinned.tensor_model_parallel_size must be at most 2147483647, got 4294967298\n");
}

TEST_CASE("check finds a case's files beside it or in a folder above it, from any directory", "[cli][check]") {
  const fs::path binary = fs::path(BATON_BINARY_DIR) / "baton";
  const fs::path elsewhere = scratch_dir("check-elsewhere-cwd");  // holds none of the cases' files
  const fs::path tree = scratch_dir("check-tree");
  fs::create_directories(tree / "data");
  fs::create_directories(tree / "cases" / "nested" / "inputs");
  fs::copy_file(fs::path(BATON_SOURCE_DIR) / "tests/data/tiny_profile.json", tree / "data" / "p.json");
  fs::copy_file(fs::path(BATON_SOURCE_DIR) / "tests/data/tiny_topology.json",
                tree / "cases" / "nested" / "inputs" / "t.json");
  // "data/p.json" is two folders above the case (as the shipped cases name
  // "traces/..." from the repository root); "inputs/t.json" is beside it
  // (every *.json in the cases' folder is a case).
  const fs::path cases = tree / "cases" / "nested";
  std::ofstream(cases / "case.json") << R"({"format": "baton.check.v1", "name": "tiny", "profile": "data/p.json",
    "topology": "inputs/t.json", "options": {"cost_model": "pipedream", "straight": true}})";
  const CliRun update = run_baton("check --update " + quoted(cases), "check-tree-update", binary, elsewhere);
  INFO(update.err);
  CHECK(update.exit_code == 0);
  const CliRun same = run_baton("check " + quoted(cases), "check-tree", binary, elsewhere);
  CHECK(same.exit_code == 0);
  CHECK(same.out.find("1 passed, 0 failed") != std::string::npos);

  // A file found nowhere is named with the case file and the field.
  std::ofstream(cases / "case.json") << R"({"format": "baton.check.v1", "name": "tiny", "profile": "data/p.json",
    "topology": "missing/t.json", "options": {}, "expected": {"time_per_minibatch_s": 1.0, "stages": "0-6x1"}})";
  const CliRun missing = run_baton("check " + quoted(cases), "check-missing", binary, elsewhere);
  CHECK(missing.exit_code == 2);
  CHECK(missing.err == "baton: " + (cases / "case.json").string() +
                           ": topology is found neither beside the case file, nor in a folder above it, nor in the "
                           "current directory, got \"missing/t.json\"\n");
}
