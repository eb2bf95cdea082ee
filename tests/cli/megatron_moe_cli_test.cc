// `baton simulate`, `plan` and `sweep` with Megatron-core's mixture of
// experts (--num-experts, --moe-router-topk, --moe-ffn-hidden-size,
// --moe-grouped-gemm, --expert-model-parallel-size): the active parameters,
// the all-to-alls in where the time goes, the refusals, the emitted launch
// line simulating to the planned time, the sweep's ep column, Mixtral 8x7B
// against Megatron-core's published throughput, and padding to capacity.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch_compat.h"

#include "tests/cli/cli_runner.h"

#include "planner/sweep_table.h"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

// Mixtral 8x7B in Megatron-core's flags (Jiang et al. 2024, "Mixtral of
// Experts", arXiv 2401.04088: 32 layers of h 4096, 32 heads, 8 key-value
// groups, 8 SwiGLU experts of width 14,336, top 2, vocabulary 32,000).
const std::string kMistral =
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --vocab-size 32000 "
    "--ffn-hidden-size 14336 --swiglu --group-query-attention --num-query-groups 8 --disable-bias-linear "
    "--untie-embeddings-and-output-weights --position-embedding-type rope --normalization RMSNorm --use-flash-attn ";
const std::string kMixtral = kMistral + "--num-experts 8 --moe-router-topk 2 ";

// Megatron-core's Mixtral 8x7B layout (below): t 1, p 4 with 8 chunks a GPU,
// d 16 with the experts over 8 of them, on 64 GPUs, the all-to-all dispatcher.
const std::string kLayout =
    "--bf16 --moe-grouped-gemm --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
    "--num-layers-per-virtual-pipeline-stage 1 --data-parallel-size 16 --micro-batch-size 1 --global-batch-size 256 "
    "--use-distributed-optimizer --moe-token-dispatcher-type alltoall ";

const std::string kTopology = "simulate --topology topologies/h100_32x8.json ";
const std::string kSimulate = kTopology + kMixtral + kLayout;

// A small Mixtral-like model for plan and sweep: 8 layers of h 2048, 8
// experts of width 4096.
const std::string kSmall =
    "--num-layers 8 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --vocab-size 32000 "
    "--ffn-hidden-size 4096 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights "
    "--position-embedding-type rope --normalization RMSNorm --use-flash-attn --num-experts 8 --moe-router-topk 2 "
    "--bf16 --global-batch-size 64 ";

// `command` simulated with and without `flag`, an overlap of the all-to-alls:
// the JSON layout says so under `key`, less of the all-to-alls is exposed,
// and the iteration is shorter.
void check_overlap_hides(const std::string& command, const std::string& flag, const char* key) {
  const CliRun plain = run_baton(command + "--json", "moe-overlap-plain");
  const CliRun overlapped = run_baton(command + flag + " --json", "moe-overlap");
  INFO(plain.err << overlapped.err);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(overlapped.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(overlapped.out);
  CHECK(a["layout"][key] == false);
  CHECK(b["layout"][key] == true);
  CHECK(b["breakdown_s"]["expert_parallel_comm"].get<double>() <
        a["breakdown_s"]["expert_parallel_comm"].get<double>());
  CHECK(b["iteration_time_s"].get<double>() < a["iteration_time_s"].get<double>());
}

TEST_CASE("moe: simulate Mixtral 8x7B, its experts over 8 of the 16 data-parallel ranks", "[cli][megatron][moe]") {
  const CliRun eight = run_baton(kSimulate + "--expert-model-parallel-size 8 --json", "moe-ep8");
  const CliRun one = run_baton(kSimulate + "--json", "moe-ep1");
  INFO(eight.err << one.err);
  REQUIRE(eight.exit_code == 0);
  REQUIRE(one.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(eight.out), b = nlohmann::json::parse(one.out);
  CHECK(a["gpus"] == 64);
  CHECK(a["layout"]["expert_model_parallel_size"] == 8);
  CHECK(b["layout"]["expert_model_parallel_size"] == 1);
  CHECK(a["breakdown_s"]["expert_parallel_comm"].get<double>() > 0.0);
  CHECK_FALSE(b["breakdown_s"].contains("expert_parallel_comm"));
  // L (attention + k 3 h F + h E + 2 h) + 2 V h + h: the k experts of 8 a
  // token passes through, the router, the norms, the embedding and the
  // untied output layer.
  const double L = 32, h = 4096, kv = 1024, F = 14336, E = 8, k = 2, V = 32000;
  const double attention = h * (h + 2 * kv) + h * h;
  CHECK(a["model"]["active_parameters"].get<double>() ==
        L * (attention + k * 3 * h * F + h * E + 2 * h) + 2 * V * h + h);
  CHECK(a["model"]["parameters"].get<double>() == L * (attention + E * 3 * h * F + h * E + 2 * h) + 2 * V * h + h);
  CHECK(a["model"]["num_experts"] == 8);
  CHECK(a["model"]["moe_router_topk"] == 2);
  CHECK(a["model"]["moe_ffn_hidden_size"] == 14336);
  CHECK(a["model"]["moe_grouped_gemm"] == true);
  // Each rank holds an eighth of the experts: less memory for the weights.
  for (int rank = 0; rank < 4; ++rank)
    CHECK(a["memory"][rank]["weights_gradients_optimizer_bytes"].get<double>() <
          b["memory"][rank]["weights_gradients_optimizer_bytes"].get<double>());
  // The same model FLOPs: the layout moves the experts, not their work.
  CHECK(a["model_tflops_per_gpu"].get<double>() * a["iteration_time_s"].get<double>() ==
        Approx(b["model_tflops_per_gpu"].get<double>() * b["iteration_time_s"].get<double>()).epsilon(1e-9));
  const CliRun text = run_baton(kSimulate + "--expert-model-parallel-size 8", "moe-text");
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("46.70B parameters (12.88B active per token)") != std::string::npos);
  CHECK(text.out.find("t 1 x p 4 x d 16 (expert parallel 8, alltoall dispatcher) = 64 GPUs") != std::string::npos);
  CHECK(text.out.find("expert-parallel all-to-alls (dispatch, combine)") != std::string::npos);
  CHECK(text.out.find("--num-experts 8 --moe-router-topk 2 --moe-grouped-gemm") != std::string::npos);
  const CliRun plain = run_baton(kSimulate, "moe-text-ep1");
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out.find("expert-parallel all-to-alls") == std::string::npos);
}

TEST_CASE("moe: Mixtral 8x7B near Megatron-core's published 468 TFLOP/s per H100", "[cli][megatron][moe]") {
  // Megatron-core's MoE README (megatron/core/transformer/moe/README.md,
  // releases core_v0.10 to core_v0.14) says Mixtral 8x7B bf16 training
  // reaches 468 TFLOPS (per GPU, on H100) as of MCore v0.9, and lists, in a
  // table of its own, the mapping TP1 EP8 PP4 VP8 with micro-batch 1, global
  // batch 256 and sequence 4096 on 64 GPUs: the README gives the figure and
  // the mapping separately, not as one measured run.
  const CliRun run = run_baton(kSimulate + "--expert-model-parallel-size 8 --json", "moe-published");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(run.out);
  CHECK(j["gpus"] == 64);
  CHECK(j["fits"] == true);
  CHECK(j["model_tflops_per_gpu"].get<double>() == Approx(468).epsilon(0.15));
}

TEST_CASE("moe: simulate refuses the experts' flags Megatron would not run", "[cli][megatron][moe][bad-input]") {
  const std::string dense =
      "simulate --topology topologies/h100_32x8.json --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
      "--seq-length 4096 --global-batch-size 256 --data-parallel-size 16 ";
  const struct {
    std::string flags, message;
  } cases[] = {
      {kSimulate + "--expert-model-parallel-size 3",
       "--num-experts 8 is not divisible by --expert-model-parallel-size 3"},
      {kTopology + kMistral + "--num-experts 8 --moe-router-topk 9 " + kLayout,
       "--moe-router-topk 9 must be between 1 and --num-experts 8"},
      {dense + "--expert-model-parallel-size 2", "--expert-model-parallel-size 2 needs --num-experts"},
      {dense + "--moe-grouped-gemm", "--moe-grouped-gemm needs --num-experts"},
      {dense + "--moe-ffn-hidden-size 1024", "--moe-ffn-hidden-size needs --num-experts"},
      {"simulate --topology topologies/h100_32x8.json " + kMixtral +
           "--bf16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --data-parallel-size 8 "
           "--global-batch-size 256",
       "needs --sequence-parallel"},
      {"simulate --topology topologies/h100_32x8.json " + kMixtral +
           "--bf16 --pipeline-model-parallel-size 4 --data-parallel-size 4 --global-batch-size 256 "
           "--expert-model-parallel-size 8",
       "--expert-model-parallel-size 8 does not divide the 4 ranks"},
      {kSimulate + "--expert-model-parallel-size 0", "--expert-model-parallel-size: must be at least 1, got 0"},
      {kTopology + kMistral + "--num-experts 0 " + kLayout, "--num-experts: must be at least 1, got 0"}};
  for (const auto& c : cases) {
    const CliRun run = run_baton(c.flags, "moe-refused");
    INFO(c.flags << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find(c.message) != std::string::npos);
    CHECK(run.out.empty());
  }
}

TEST_CASE("moe: plan searches ep, and its launch line simulates to the planned time", "[cli][megatron][moe]") {
  const std::string model = "--topology topologies/a100_4x8.json " + kSmall +
                            "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --micro-batch-size 1 "
                            "--recompute-granularity none";
  const CliRun json = run_baton("plan " + model + " --json", "moe-plan-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  const int ep = planned["layout"]["expert_model_parallel_size"].get<int>();
  CHECK(ep > 1);
  CHECK(planned["model"]["num_experts"] == 8);
  const CliRun flags = run_baton("plan " + model + " --emit megatron", "moe-plan-emit");
  INFO(flags.err);
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  CHECK(line.find(" --num-experts 8 --moe-router-topk 2") != std::string::npos);
  CHECK(line.find(" --expert-model-parallel-size " + std::to_string(ep)) != std::string::npos);
  // The chosen dispatcher is named, so that Megatron runs the one planned.
  const std::string dispatcher = planned["layout"]["moe_token_dispatcher_type"].get<std::string>();
  CHECK((dispatcher == "allgather" || dispatcher == "alltoall"));
  CHECK(line.find(" --moe-token-dispatcher-type " + dispatcher) != std::string::npos);
  const CliRun run = run_baton("simulate --topology topologies/a100_4x8.json " + line + " --json", "moe-plan-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json simulated = nlohmann::json::parse(run.out);
  CHECK(simulated["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(simulated["layout"] == planned["layout"]);
  CHECK(simulated["model"] == planned["model"]);
}

// A pinned flex dispatcher: the search takes ep >= 2 (DeepEP needs etp ep >=
// 2), the emitted line names DeepEP's backend, and it simulates back.
TEST_CASE("moe: plan with --moe-token-dispatcher-type flex emits DeepEP's flags", "[cli][megatron][moe]") {
  const std::string model = "--topology topologies/a100_4x8.json " + kSmall +
                            "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --micro-batch-size 1 "
                            "--moe-token-dispatcher-type flex";
  const CliRun json = run_baton("plan " + model + " --json", "moe-plan-flex-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  CHECK(planned["layout"]["moe_token_dispatcher_type"] == "flex");
  CHECK(planned["layout"]["expert_model_parallel_size"].get<int>() >= 2);
  const CliRun flags = run_baton("plan " + model + " --emit megatron", "moe-plan-flex-emit");
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  CHECK(line.find(" --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep") != std::string::npos);
  const CliRun run = run_baton("simulate --topology topologies/a100_4x8.json " + line + " --json", "moe-plan-flex-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(nlohmann::json::parse(run.out)["iteration_time_s"].get<double>() ==
        Approx(planned["iteration_time_s"].get<double>()));
  // Padding to capacity: refused before the search, as simulate refuses it.
  const CliRun padded =
      run_baton("plan " + model + " --moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity", "moe-plan-pad");
  CHECK(padded.exit_code == 2);
  CHECK(padded.err.find("does not go with --moe-pad-expert-input-to-capacity") != std::string::npos);
}

// The pinned flags are checked on the fewest data-parallel ranks the pinned
// ep divides (tools/megatron_plan.cc), and the search keeps the pin.
TEST_CASE("moe: plan keeps a pinned --expert-model-parallel-size", "[cli][megatron][moe]") {
  const CliRun run = run_baton("plan --topology topologies/a100_4x8.json " + kSmall +
                                   "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 "
                                   "--micro-batch-size 1 --expert-model-parallel-size 2 --emit megatron",
                               "moe-plan-pinned");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find(" --expert-model-parallel-size 2") != std::string::npos);
}

// A shared expert and dense blocks among the MoE ones (DeepSeek's first
// blocks dense): plan emits both flags, the pattern quoted for the shell, and
// the line simulates to the planned time with the model the plan had.
TEST_CASE("moe: plan emits the shared expert and the layer pattern, and they simulate back", "[cli][megatron][moe]") {
  const std::string model = "--topology topologies/a100_4x8.json " + kSmall +
                            "--moe-shared-expert-intermediate-size 2048 --moe-layer-freq '[0]*2+[1]*6' "
                            "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --micro-batch-size 1 "
                            "--recompute-granularity none";
  const CliRun json = run_baton("plan " + model + " --json", "moe-layers-json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json planned = nlohmann::json::parse(json.out);
  CHECK(planned["model"]["moe_shared_expert_intermediate_size"] == 2048);
  CHECK(planned["model"]["moe_layer_freq"] == nlohmann::json::array({0, 0, 1, 1, 1, 1, 1, 1}));
  const CliRun flags = run_baton("plan " + model + " --emit megatron", "moe-layers-emit");
  INFO(flags.err);
  REQUIRE(flags.exit_code == 0);
  const std::string line = flags.out.substr(0, flags.out.find('\n'));
  CHECK(line.find(" --moe-shared-expert-intermediate-size 2048") != std::string::npos);
  CHECK(line.find(" --moe-layer-freq '[0,0,1,1,1,1,1,1]'") != std::string::npos);
  const CliRun run = run_baton("simulate --topology topologies/a100_4x8.json " + line + " --json", "moe-layers-run");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json simulated = nlohmann::json::parse(run.out);
  CHECK(simulated["iteration_time_s"].get<double>() == Approx(planned["iteration_time_s"].get<double>()));
  CHECK(simulated["model"] == planned["model"]);
  // Fewer parameters than every block a MoE block with its shared expert.
  const CliRun all = run_baton(
      "simulate --topology topologies/a100_4x8.json " + kSmall + "--moe-shared-expert-intermediate-size 2048 --json",
      "moe-layers-all");
  REQUIRE(all.exit_code == 0);
  CHECK(simulated["model"]["parameters"].get<double>() <
        nlohmann::json::parse(all.out)["model"]["parameters"].get<double>());
  const CliRun bad = run_baton("simulate --topology topologies/a100_4x8.json " + kSmall + "--moe-layer-freq '[1]*7'",
                               "moe-layers-bad");
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err.find("--moe-layer-freq's pattern has 7 entries for --num-layers 8") != std::string::npos);
}

TEST_CASE("moe: sweep --vary ep writes the expert_model_parallel_size column", "[cli][megatron][moe][sweep]") {
  const fs::path dir = scratch_dir("moe-sweep");
  const CliRun run =
      run_baton("sweep --topology topologies/a100_4x8.json " + kSmall +
                    "--pipeline-model-parallel-size 2 --vary ep=1,2 --quiet --csv " + quoted(dir / "ep.csv"),
                "moe-sweep");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto table = baton::parse_sweep_csv(slurp(dir / "ep.csv"), "ep.csv");
  INFO((table.ok() ? std::string() : table.error().message));
  REQUIRE(table.ok());
  REQUIRE(table->rows.size() == 2);
  const int column = table->column("expert_model_parallel_size");
  const int axis = table->column("expert-model-parallel-size");
  const int error = table->column("error");
  REQUIRE(column >= 0);
  REQUIRE(axis >= 0);
  REQUIRE(error >= 0);
  for (size_t i = 0; i < 2; ++i) {
    const std::string ep = std::to_string(i + 1);
    CHECK(table->rows[i][static_cast<size_t>(axis)] == ep);
    CHECK(table->rows[i][static_cast<size_t>(column)] == ep);
    CHECK(table->rows[i][static_cast<size_t>(error)].empty());
  }
}

TEST_CASE("moe: padding each expert to capacity 1.25 costs time and memory, and the flags simulate back",
          "[cli][megatron][moe][capacity]") {
  const std::string ep8 = "--expert-model-parallel-size 8 --json";
  const CliRun dropless = run_baton(kSimulate + ep8, "moe-dropless");
  const CliRun padded =
      run_baton(kSimulate + "--moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity " + ep8, "moe-pad");
  INFO(padded.err);
  REQUIRE(dropless.exit_code == 0);
  REQUIRE(padded.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(dropless.out), b = nlohmann::json::parse(padded.out);
  CHECK(b["model"]["moe_expert_capacity_factor"] == 1.25);
  CHECK(b["model"]["moe_pad_expert_input_to_capacity"] == true);
  // A quarter more expert work and all-to-all bytes: longer, the same model FLOPs.
  CHECK(b["iteration_time_s"].get<double>() > a["iteration_time_s"].get<double>());
  CHECK(b["breakdown_s"]["expert_parallel_comm"].get<double>() ==
        Approx(1.25 * a["breakdown_s"]["expert_parallel_comm"].get<double>()).epsilon(0.05));
  CHECK(b["model_tflops_per_gpu"].get<double>() * b["iteration_time_s"].get<double>() ==
        Approx(a["model_tflops_per_gpu"].get<double>() * a["iteration_time_s"].get<double>()).epsilon(1e-9));
  // Without a capacity factor the padding has nothing to pad to.
  const CliRun alone = run_baton(kSimulate + "--moe-pad-expert-input-to-capacity", "moe-pad-alone");
  CHECK(alone.exit_code == 2);
  CHECK(alone.err.find("--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor") != std::string::npos);
}

TEST_CASE("moe: the allgather dispatcher is the default, gathers over etp ep GPUs, and flex takes DeepEP's flags",
          "[cli][megatron][moe]") {
  // kLayout pins alltoall; without it Megatron-core's default, allgather.
  const std::string allgather = kTopology + kMixtral +
                                "--bf16 --moe-grouped-gemm --tensor-model-parallel-size 1 "
                                "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 1 "
                                "--data-parallel-size 16 --micro-batch-size 1 --global-batch-size 256 "
                                "--use-distributed-optimizer --expert-model-parallel-size 8 ";
  const CliRun gathered = run_baton(allgather + "--json", "moe-allgather");
  const CliRun named = run_baton(allgather + "--moe-token-dispatcher-type allgather --json", "moe-allgather-named");
  const CliRun a2a = run_baton(kSimulate + "--expert-model-parallel-size 8 --json", "moe-alltoall");
  INFO(gathered.err << named.err << a2a.err);
  REQUIRE(gathered.exit_code == 0);
  REQUIRE(named.exit_code == 0);
  REQUIRE(a2a.exit_code == 0);
  const nlohmann::json g = nlohmann::json::parse(gathered.out), a = nlohmann::json::parse(a2a.out);
  CHECK(g == nlohmann::json::parse(named.out));
  CHECK(g["layout"]["moe_token_dispatcher_type"] == "allgather");
  CHECK(a["layout"]["moe_token_dispatcher_type"] == "alltoall");
  // At ep 8 and top 2 each GPU gathers (ep - 1) T h values where it sends
  // k (ep - 1) / ep T h: the gather's collectives carry 4 times the bytes
  // (and the routing map's and probabilities' 3 E bytes a token besides),
  // all on NVLink inside a server.
  const double ratio =
      g["breakdown_s"]["expert_parallel_comm"].get<double>() / a["breakdown_s"]["expert_parallel_comm"].get<double>();
  CHECK(ratio > 3.5);
  CHECK(ratio < 4.5);
  CHECK(g["iteration_time_s"].get<double>() > a["iteration_time_s"].get<double>());
  CHECK(g["model_tflops_per_gpu"].get<double>() * g["iteration_time_s"].get<double>() ==
        Approx(a["model_tflops_per_gpu"].get<double>() * a["iteration_time_s"].get<double>()).epsilon(1e-9));
  const CliRun text = run_baton(allgather, "moe-allgather-text");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("(expert parallel 8, allgather dispatcher)") != std::string::npos);
  CHECK(text.out.find("expert all-gathers, reduce-scatters (dispatch, combine)") != std::string::npos);
  // DeepEP's flex: its own line; its backend flags only with it, and only DeepEP's.
  const CliRun flex =
      run_baton(allgather + "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep", "moe-flex");
  INFO(flex.err);
  CHECK(flex.exit_code == 0);
  CHECK(flex.out.find("(expert parallel 8, flex dispatcher)") != std::string::npos);
  CHECK(flex.out.find("expert-parallel DeepEP dispatch, combine") != std::string::npos);
  const CliRun deprecated =
      run_baton(allgather + "--moe-token-dispatcher-type flex --moe-enable-deepep --json", "moe-flex-deepep");
  CHECK(deprecated.exit_code == 0);
  const struct {
    std::string flags, message;
  } refused[] = {{"--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep",
                  "--moe-flex-dispatcher-backend hybridep: baton models DeepEP's kernels (deepep), not hybridep"},
                 {"--moe-token-dispatcher-type alltoall --moe-enable-deepep",
                  "--moe-enable-deepep applies to --moe-token-dispatcher-type flex, as in Megatron"},
                 {"--moe-flex-dispatcher-backend deepep",
                  "--moe-flex-dispatcher-backend applies to --moe-token-dispatcher-type flex, as in Megatron"}};
  for (const auto& c : refused) {
    const CliRun run = run_baton(allgather + c.flags, "moe-flex-refused");
    INFO(c.flags << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.out.empty());
    CHECK(run.err.find(c.message) != std::string::npos);
  }
  // plan keeps a pinned dispatcher and emits it.
  const CliRun pinned = run_baton("plan --topology topologies/a100_4x8.json " + kSmall +
                                      "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 "
                                      "--micro-batch-size 1 --moe-token-dispatcher-type alltoall --emit megatron",
                                  "moe-plan-dispatcher");
  INFO(pinned.err);
  REQUIRE(pinned.exit_code == 0);
  CHECK(pinned.out.find(" --moe-token-dispatcher-type alltoall") != std::string::npos);
}

TEST_CASE("moe: --moe-shared-expert-overlap hides the all-to-alls behind the shared expert, with alltoall only",
          "[cli][megatron][moe]") {
  // Mixtral's layout with a shared expert of width 14,336 beside the eight.
  const std::string shared = kSimulate + "--expert-model-parallel-size 8 --moe-shared-expert-intermediate-size 14336 ";
  check_overlap_hides(shared, "--moe-shared-expert-overlap", "moe_shared_expert_overlap");
  // Megatron asks the alltoall dispatcher for it (which kSimulate pins), and
  // a shared expert.
  std::string allgather = shared;
  const std::string pinned = "--moe-token-dispatcher-type alltoall";
  REQUIRE(allgather.find(pinned) != std::string::npos);
  allgather.replace(allgather.find(pinned), pinned.size(), "--moe-token-dispatcher-type allgather");
  const CliRun gathered = run_baton(allgather + "--moe-shared-expert-overlap", "moe-shared-allgather");
  CHECK(gathered.exit_code == 2);
  CHECK(gathered.out.empty());
  CHECK(gathered.err.find("--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall") !=
        std::string::npos);
  const CliRun unshared = run_baton(kSimulate + "--moe-shared-expert-overlap", "moe-shared-none");
  CHECK(unshared.exit_code == 2);
  CHECK(unshared.err.find("--moe-shared-expert-overlap needs a shared expert") != std::string::npos);
  // plan puts it on the alltoall layouts and emits it there.
  const CliRun planned = run_baton("plan --topology topologies/a100_4x8.json " + kSmall +
                                       "--moe-shared-expert-intermediate-size 4096 --tensor-model-parallel-size 1 "
                                       "--pipeline-model-parallel-size 2 --micro-batch-size 1 "
                                       "--moe-token-dispatcher-type alltoall --moe-shared-expert-overlap "
                                       "--emit megatron",
                                   "moe-shared-plan");
  INFO(planned.err);
  REQUIRE(planned.exit_code == 0);
  CHECK(planned.out.find(" --moe-token-dispatcher-type alltoall") != std::string::npos);
  CHECK(planned.out.find(" --moe-shared-expert-overlap") != std::string::npos);
  // Unpinned, the search tries both dispatchers, the overlap on the alltoall
  // ones; a model without a shared expert is refused before any search.
  const CliRun unpinned = run_baton("plan --topology topologies/a100_4x8.json " + kSmall +
                                        "--moe-shared-expert-intermediate-size 4096 --moe-shared-expert-overlap --json",
                                    "moe-shared-plan-unpinned");
  INFO(unpinned.err);
  REQUIRE(unpinned.exit_code == 0);
  const nlohmann::json chosen = nlohmann::json::parse(unpinned.out);
  CHECK(chosen["layout"]["moe_shared_expert_overlap"] == (chosen["layout"]["moe_token_dispatcher_type"] == "alltoall"));
  const CliRun refused = run_baton("plan --topology topologies/a100_4x8.json " + kSmall + "--moe-shared-expert-overlap",
                                   "moe-shared-plan-none");
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--moe-shared-expert-overlap needs a shared expert") != std::string::npos);
}

TEST_CASE("moe: --overlap-moe-expert-parallel-comm pairs the interleaved steady state, --delay-wgrad-compute with it",
          "[cli][megatron][moe]") {
  // kSimulate: Mixtral at p 4 with 8 chunks a GPU, the alltoall dispatcher.
  const std::string ep8 = kSimulate + "--expert-model-parallel-size 8 ";
  check_overlap_hides(ep8, "--overlap-moe-expert-parallel-comm", "overlap_moe_expert_parallel_comm");
  // The delay lets each dispatch backward start before the experts' weight
  // gradients: it exposes no more than the overlap without it.
  const CliRun paired = run_baton(ep8 + "--overlap-moe-expert-parallel-comm --json", "moe-ep-overlap-paired");
  const CliRun delayed =
      run_baton(ep8 + "--overlap-moe-expert-parallel-comm --delay-wgrad-compute --json", "moe-ep-overlap-delay");
  INFO(paired.err << delayed.err);
  REQUIRE(paired.exit_code == 0);
  REQUIRE(delayed.exit_code == 0);
  const nlohmann::json a = nlohmann::json::parse(paired.out), b = nlohmann::json::parse(delayed.out);
  CHECK(a["layout"]["delay_wgrad_compute"] == false);
  CHECK(b["layout"]["delay_wgrad_compute"] == true);
  CHECK(b["breakdown_s"]["expert_parallel_comm"].get<double>() <=
        a["breakdown_s"]["expert_parallel_comm"].get<double>());
  CHECK(b["iteration_time_s"].get<double>() <= a["iteration_time_s"].get<double>());
  const CliRun lone = run_baton(ep8 + "--delay-wgrad-compute", "moe-ep-delay-alone");
  CHECK(lone.exit_code == 2);
  CHECK(lone.out.empty());
  CHECK(lone.err.find("--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm") != std::string::npos);
  const CliRun alone = run_baton(kSimulate + "--overlap-moe-expert-parallel-comm", "moe-ep-overlap-ep1");
  CHECK(alone.exit_code == 2);
  CHECK(alone.err.find("--overlap-moe-expert-parallel-comm needs --expert-model-parallel-size of at least 2") !=
        std::string::npos);
  // plan puts it on the layouts it applies to and emits it there.
  const std::string planned_command = std::string("plan --topology topologies/h100_32x8.json ") + kMixtral +
                                      "--bf16 --moe-grouped-gemm --global-batch-size 256 --gpus 64 "
                                      "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
                                      "--num-layers-per-virtual-pipeline-stage 1 --expert-model-parallel-size 8 "
                                      "--moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm ";
  const CliRun emitted = run_baton(planned_command + "--emit megatron", "moe-ep-overlap-plan");
  INFO(emitted.err);
  REQUIRE(emitted.exit_code == 0);
  CHECK(emitted.out.find(" --overlap-moe-expert-parallel-comm") != std::string::npos);
  CHECK(emitted.out.find(" --delay-wgrad-compute") == std::string::npos);
  const CliRun asked = run_baton(planned_command + "--delay-wgrad-compute --emit megatron", "moe-ep-delay-plan");
  REQUIRE(asked.exit_code == 0);
  CHECK(asked.out.find(" --overlap-moe-expert-parallel-comm --delay-wgrad-compute") != std::string::npos);
  // Not asked for, the delay is among the overlaps that apply, no slower.
  const CliRun json = run_baton(planned_command + "--json", "moe-ep-overlap-plan-json");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json options = nlohmann::json::parse(json.out)["overlaps_not_asked"];
  bool named = false;
  for (const auto& option : options)
    if (option["flags"] == "--delay-wgrad-compute") {
      named = true;
      CHECK(option["relative_change"].get<double>() <= 0.0);
    }
  CHECK(named);
}

}  // namespace
