// `baton simulate` and `plan` with group-limited routing
// (--moe-router-num-groups, --moe-router-group-topk; Megatron-core's, the
// node-limited routing of DeepSeek-V3, arXiv 2412.19437 section 2.1.2):
// DeepEP's flex dispatch shrinks with it, the other dispatchers do not move,
// the plan's launch line carries both flags and simulates back, and the
// flags Megatron would refuse exit 2.
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

using namespace baton::testing;

namespace {

// A DeepSeek-like model small enough to simulate in a blink: 4 blocks of h
// 2048, 64 experts of width 1024, top 8.
const std::string kModel =
    "--num-layers 4 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 --vocab-size 32000 "
    "--ffn-hidden-size 8192 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights "
    "--position-embedding-type rope --normalization RMSNorm --use-flash-attn --num-experts 64 --moe-router-topk 8 "
    "--moe-ffn-hidden-size 1024 --moe-grouped-gemm --bf16 --global-batch-size 256 ";
// Its experts over 32 GPUs, four servers of h100_32x8.
const std::string kLayout =
    "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --data-parallel-size 32 "
    "--expert-model-parallel-size 32 --micro-batch-size 1 --use-distributed-optimizer ";
const std::string kSimulate = "simulate --topology topologies/h100_32x8.json " + kModel + kLayout;
// Node-limited: a group a server, a token's experts on 2 of the 4.
const std::string kNodeLimited = "--moe-router-num-groups 4 --moe-router-group-topk 2 ";

nlohmann::json simulated(const std::string& flags, const std::string& name) {
  const CliRun run = run_baton(flags + " --json", name);
  INFO(flags << ": " << run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

TEST_CASE("moe routing: node-limited routing shrinks flex's dispatch, not alltoall's", "[cli][megatron][moe]") {
  const std::string flex = kSimulate + "--moe-token-dispatcher-type flex ";
  const nlohmann::json free = simulated(flex, "routing-free"), limited = simulated(flex + kNodeLimited, "routing-nl");
  CHECK(limited["model"]["moe_router_num_groups"] == 4);
  CHECK(limited["model"]["moe_router_group_topk"] == 2);
  CHECK_FALSE(free["model"].contains("moe_router_num_groups"));
  // A server (16 experts, one group) is reached by 1 - C(56, 8) / C(64, 8)
  // of the tokens without groups, 1/2 (1 - C(16, 8) / C(32, 8)) with them:
  // fewer bytes on the rails, the same compute.
  const double exposed = free["breakdown_s"]["expert_parallel_comm"].get<double>();
  CHECK(limited["breakdown_s"]["expert_parallel_comm"].get<double>() < exposed * 0.75);
  CHECK(limited["breakdown_s"]["compute"] == free["breakdown_s"]["compute"]);
  CHECK(limited["iteration_time_s"].get<double>() < free["iteration_time_s"].get<double>());
  const std::string alltoall = kSimulate + "--moe-token-dispatcher-type alltoall ";
  CHECK(simulated(alltoall + kNodeLimited, "routing-a2a-nl")["iteration_time_s"] ==
        simulated(alltoall, "routing-a2a")["iteration_time_s"]);
}

TEST_CASE("moe routing: plan emits the routing groups, and the line simulates to the planned time",
          "[cli][megatron][moe]") {
  const std::string model = "--topology topologies/h100_32x8.json --gpus 32 " + kModel + kNodeLimited +
                            "--tensor-model-parallel-size 1 --moe-token-dispatcher-type flex";
  const nlohmann::json planned = simulated("plan " + model, "routing-plan-json");
  CHECK(planned["model"]["moe_router_num_groups"] == 4);
  const CliRun flags = run_baton("plan " + model + " --emit megatron", "routing-plan-emit");
  INFO(flags.err);
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  CHECK(line.find(" --moe-router-num-groups 4 --moe-router-group-topk 2") != std::string::npos);
  // Megatron's line leaves the data-parallel size to the launcher's 32 GPUs.
  const nlohmann::json back = simulated(
      "simulate --topology topologies/h100_32x8.json " + line + " --data-parallel-size 32", "routing-plan-run");
  CHECK(back["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(back["model"] == planned["model"]);
}

TEST_CASE("moe routing: simulate refuses the routing flags Megatron would not run", "[cli][megatron][moe][bad-input]") {
  const struct {
    std::string flags, message;
  } cases[] = {
      {kSimulate + "--moe-router-group-topk 2", "--moe-router-group-topk needs --moe-router-num-groups"},
      {kSimulate + "--moe-router-num-groups 3 --moe-router-group-topk 2",
       "--num-experts 64 is not divisible by --moe-router-num-groups 3"},
      {kSimulate + "--moe-router-num-groups 4 --moe-router-group-topk 5",
       "--moe-router-group-topk 5 must be at most --moe-router-num-groups 4"},
      {kSimulate + "--moe-router-num-groups 0", "--moe-router-num-groups: must be at least 1, got 0"},
      {"simulate --topology topologies/h100_32x8.json --num-layers 4 --hidden-size 2048 --num-attention-heads 16 "
       "--seq-length 2048 --global-batch-size 64 --moe-router-num-groups 4",
       "--moe-router-num-groups needs --num-experts"}};
  for (const auto& c : cases) {
    const CliRun run = run_baton(c.flags, "routing-refused");
    INFO(c.flags << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(c.message) != std::string::npos);
    CHECK(run.out.empty());
  }
}

}  // namespace
