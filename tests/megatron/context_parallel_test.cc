// Context parallelism (sim/megatron.h's MegatronLayout::context, Megatron-core's
// --context-parallel-size c and --cp-comm-type): each block on s / c tokens, the
// attention in c ring steps of FlashAttention over s / c x s / c with the
// keys and values passed round the ring (p2p), gathered (all_gather), or the
// sequence split traded for the heads' (a2a), memory on s / c tokens, gradients
// and the distributed optimizer over d c ranks placed tensor, context, data,
// pipeline, and the flag's checks.
#include <algorithm>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/network.h"
#include "sim/trace_reader.h"
#include "sim/trace_writers.h"

namespace baton {
namespace {

// Llama 3 8B (Llama Team, "The Llama 3 Herd of Models", 2024, Table 3) at a
// long sequence: FlashAttention's core, which context parallelism needs.
GptModel llama3_8b(int64_t sequence) {
  GptModel m = testing::llama(32, 4096, 32, 8, 14336, 128256);
  m.sequence = sequence;
  m.flash_attention = true;
  return m;
}

MegatronLayout with_context(MegatronLayout l, int c) {
  l.context = c;
  return l;
}

const CollectiveTime kFree = [](double) { return Seconds(0.0); };

// FlashAttention's forward over q x q tokens of b a / t heads, the causal half
// of the two products' tiles.
Seconds flash_step(const GpuModel& gpu, double q, double b, double a, double d, double t) {
  return (gpu.gemm(q, q, d, b * a / t) + gpu.gemm(q, d, q, b * a / t)) * 0.5;
}

TEST_CASE("context parallel: a block's work is that of s / c tokens, its attention c ring steps",
          "[megatron][context]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const double s = 16384, b = 1, a = 32, d = 128, t = 8;
  MegatronLayout l = megatron_layout(8, 1, 1, 1, 8);
  l.sequence_parallel = true;
  for (const int c : {2, 4}) {
    CAPTURE(c);
    const MegatronLayerTime split =
        make_megatron_profile(llama3_8b(16384), with_context(l, c), gpu, kFree, {}, kFree).times[1];
    const MegatronLayerTime shorter = make_megatron_profile(llama3_8b(16384 / c), l, gpu, kFree).times[1];
    // The same GEMMs and kernels on s / c tokens; the attention runs c steps
    // of s / c x s / c where a sequence of s / c runs one.
    const Seconds step = flash_step(gpu, s / c, b, a, d, t);
    CHECK((split.forward_compute - shorter.forward_compute).value == Approx(step.value * (c - 1)).epsilon(1e-9));
    CHECK((split.backward_compute - shorter.backward_compute).value ==
          Approx(step.value * 2.5 * (c - 1)).epsilon(1e-9));
    CHECK(split.weight_gradient.value == Approx(shorter.weight_gradient.value).epsilon(1e-12));
    CHECK(split.parameters == shorter.parameters);
    // With a free ring nothing of the exchange is exposed.
    CHECK(split.context_forward.value == 0.0);
    CHECK(split.context_backward.value == 0.0);
  }
  // c steps of (s / c)^2 / 2 tiles make s^2 / (2 c): at these shapes the
  // attention of one rank is less than the whole sequence's.
  const MegatronLayerTime whole = make_megatron_profile(llama3_8b(16384), l, gpu, kFree).times[1];
  const MegatronLayerTime half =
      make_megatron_profile(llama3_8b(16384), with_context(l, 2), gpu, kFree, {}, kFree).times[1];
  CHECK(half.forward_compute < whole.forward_compute);
}

TEST_CASE("context parallel: what a ring step's send takes beyond its attention is exposed, each way",
          "[megatron][context]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const double s = 8192, b = 2, a = 32, d = 128, t = 4, kv = 4096.0 * 8 / 32;
  const int c = 4;
  MegatronLayout l = with_context(megatron_layout(4, 1, 1, 2, 8), c);
  l.sequence_parallel = true;
  // A slow link, 1 GB/s: every step's send outlasts its attention.
  const CollectiveTime slow = [](double bytes) { return Seconds(bytes / 1e9); };
  const MegatronLayerTime block = make_megatron_profile(llama3_8b(8192), l, gpu, kFree, {}, slow).times[1];
  const double bytes = 2 * b * (s / c) * kv / t * 2;  // keys and values of the rank's tokens, 2 bytes each
  const Seconds step = flash_step(gpu, s / c, b, a, d, t);
  REQUIRE(bytes / 1e9 > step.value * 2.5);
  CHECK(block.context_forward.value == Approx((c - 1) * (bytes / 1e9 - step.value)).epsilon(1e-9));
  // The backward's c sends (Transformer Engine's AttnFuncWithCPAndKVP2P): the
  // keys and values first, their gradients last, both in between.
  CHECK(block.context_backward.value ==
        Approx(2 * (bytes / 1e9 - 2.5 * step.value) + (c - 2) * (2 * bytes / 1e9 - 2.5 * step.value)).epsilon(1e-9));
  // The profile's layer carries it; recomputation runs the ring again.
  const Profile profile = make_megatron_profile(llama3_8b(8192), l, gpu, kFree, {}, slow).profile;
  CHECK(profile.layers[1].forward.value ==
        Approx((block.forward_compute + block.forward_comm + block.context_forward).value).epsilon(1e-12));
  l.recompute = Recompute::kFull;
  const MegatronLayerTime full = make_megatron_profile(llama3_8b(8192), l, gpu, kFree, {}, slow).times[1];
  CHECK(full.recompute.value ==
        Approx((full.forward_compute + full.forward_comm + full.context_forward).value).epsilon(1e-12));
}

TEST_CASE("context parallel: all_gather gathers the keys and values, a2a trades the sequence for the heads",
          "[megatron][context]") {
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  const double s = 8192, b = 1, a = 32, d = 128, t = 2, h = 4096, kv = 4096.0 * 8 / 32;
  const int c = 4;
  MegatronLayout l = with_context(megatron_layout(2, 1, 1, 1, 8), c);
  l.sequence_parallel = true;
  const CollectiveTime slow = [](double bytes) { return Seconds(bytes / 1e9); };
  const MegatronLayerTime ring = make_megatron_profile(llama3_8b(8192), l, gpu, kFree, {}, slow).times[1];
  // all_gather: each GPU gives its keys and values (2 b s / c kv / t values) to
  // the all-gather before the attention; the backward gathers them again and
  // reduce-scatters their gradients. The attention's products are the ring's.
  l.context_comm = ContextComm::kAllGather;
  const MegatronLayerTime gathered = make_megatron_profile(llama3_8b(8192), l, gpu, kFree, {}, slow).times[1];
  const double keys_values = 2 * b * (s / c) * kv / t * 2;
  CHECK(gathered.context_forward.value == Approx(keys_values / 1e9).epsilon(1e-12));
  CHECK(gathered.context_backward.value == Approx(2 * keys_values / 1e9).epsilon(1e-12));
  CHECK(gathered.forward_compute.value == Approx(ring.forward_compute.value).epsilon(1e-12));
  // a2a: the queries, keys and values to the ranks of their heads and the
  // output back, each way; the attention over the whole s on a / (t c) heads.
  l.context_comm = ContextComm::kAllToAll;
  const MegatronLayerTime swapped = make_megatron_profile(llama3_8b(8192), l, gpu, kFree, {}, slow).times[1];
  const double moved = b * (s / c) * (h + 2 * kv) / t * 2 + b * (s / c) * h / t * 2;
  CHECK(swapped.context_forward.value == Approx(moved / 1e9).epsilon(1e-12));
  CHECK(swapped.context_backward.value == Approx(moved / 1e9).epsilon(1e-12));
  const Seconds whole = (gpu.gemm(s, s, d, b * a / (t * c)) + gpu.gemm(s, d, s, b * a / (t * c))) * 0.5;
  CHECK((swapped.forward_compute - ring.forward_compute).value ==
        Approx((whole - flash_step(gpu, s / c, b, a, d, t) * c).value).epsilon(1e-9));
  CHECK((swapped.backward_compute - ring.backward_compute).value ==
        Approx(2.5 * (whole - flash_step(gpu, s / c, b, a, d, t) * c).value).epsilon(1e-9));
  // Whole heads and whole key-value groups on each rank: 8 groups / t 2 / c 4.
  CHECK(check_megatron_layout(llama3_8b(8192), l, 64).ok());
  CHECK_FALSE(check_megatron_layout(llama3_8b(8192), with_context(l, 8), 64).ok());
}

TEST_CASE("context parallel: all_gather and a2a on the network's ring, among the c ranks t GPUs apart",
          "[megatron][context]") {
  const Topology topology = testing::shipped_topology("a100_vtrain.json");
  const double bytes = 64e6;
  MegatronLayout l = with_context(megatron_layout(4, 1, 1, 1, 1), 4);  // GPUs 0, 4, 8, 12: two servers
  const std::vector<int> group = {0, 4, 8, 12};
  l.context_comm = ContextComm::kAllGather;  // half the all-reduce of the c x bytes gathered
  CHECK(context_comm_time(topology, l)(bytes).value ==
        Approx(Network(topology).allreduce_time(group, Bytes::counted(4 * bytes)).value / 2).epsilon(1e-9));
  // a2a: each GPU's shares for the other server, 2 / 4 of its bytes, leave on
  // its own rail (100 Gb/s): 2 x 2 / 4 x bytes through 2 of the server's 8
  // rails, 12.5 GB/s each, beside 3 / 4 of them over NVLink (150 GB/s); one
  // latency of each level (5 and 6 us).
  l.context_comm = ContextComm::kAllToAll;
  CHECK(context_comm_time(topology, l)(bytes).value ==
        Approx(std::max(2.0 * 2 / 4 * bytes / (2 * 12.5e9), 3.0 / 4 * bytes / 150e9) + 5e-6 + 6e-6).epsilon(1e-9));
  CHECK(context_comm_time(topology, l)(bytes).value ==
        Approx(Network(topology).all_to_all_time(group, Bytes::counted(bytes)).value).epsilon(1e-12));
}

TEST_CASE("context parallel: the ring's step is its slowest hop, across servers on one rail", "[megatron][context]") {
  const Topology topology = testing::shipped_topology("a100_vtrain.json");  // 8 A100s a server
  const double bytes = 64e6;
  // t 4, c 2: both ranks in one server (GPU 0 to GPU 4 and back).
  const CollectiveTime inside = context_comm_time(topology, with_context(megatron_layout(4, 1, 1, 1, 1), 2));
  REQUIRE(inside);
  CHECK(inside(bytes).value ==
        Approx(Network(topology).transfer(0, 4, Bytes::counted(bytes), Seconds(0.0)).delivered.value).epsilon(1e-6));
  // t 8, c 2: GPU 0 and GPU 8 are in two servers.
  const CollectiveTime across = context_comm_time(topology, with_context(megatron_layout(8, 1, 1, 1, 1), 2));
  REQUIRE(across);
  CHECK(across(bytes).value ==
        Approx(Network(topology).transfer(0, 8, Bytes::counted(bytes), Seconds(0.0)).delivered.value).epsilon(1e-6));
  CHECK(across(bytes) > inside(bytes));
  CHECK_FALSE(context_comm_time(topology, megatron_layout(8, 1, 1, 1, 1)));  // c = 1: no ring
}

TEST_CASE("context parallel: activations of s / c tokens, weights reduced and sharded over d c ranks",
          "[megatron][context][memory]") {
  MegatronLayout l = megatron_layout(2, 2, 2, 1, 8);
  l.sequence_parallel = true;
  const MegatronLayout split = with_context(l, 4);
  CHECK(split.gpus() == 2 * 2 * 2 * 4);
  CHECK(split.replicas() == 8);
  CHECK(split.microbatches() == 8 / (1 * 2));  // the c ranks of a data-parallel rank share its microbatches
  CHECK(megatron_layer_activation_bytes(llama3_8b(32768), split) ==
        megatron_layer_activation_bytes(llama3_8b(8192), l));
  // The plan: d c replicas a pipeline rank, placed tensor, context, data, pipeline.
  const Plan plan = megatron_plan(llama3_8b(32768), split);
  REQUIRE(plan.num_stages() == 2);
  CHECK(plan.stages[0].replicas == 8);
  CHECK(plan.stages[1].devices == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(plan.batches == 4 * 8);
  // The distributed optimizer shards its 12 bytes a parameter over d c ranks.
  const GpuModel gpu = *gpu_model("H100-SXM5-80GB");
  MegatronLayout sharded = split;
  sharded.distributed_optimizer = true;
  sharded.bf16 = true;
  const MegatronProfile profile = make_megatron_profile(llama3_8b(32768), sharded, gpu, kFree, {}, kFree);
  const MegatronMemory memory = megatron_memory(llama3_8b(32768), sharded, megatron_plan(llama3_8b(32768), sharded),
                                                profile, Bytes::from_gib(80));
  const double parameters = megatron_rank_work(profile, megatron_plan(llama3_8b(32768), sharded), 0).parameters;
  CHECK(static_cast<double>(memory.ranks[0].weights_and_optimizer.value) ==
        Approx(parameters * (2 + 4 + 12.0 / 8)).epsilon(1e-9));
}

TEST_CASE("context parallel: predicted throughput and model FLOPs count every GPU of t p c d", "[megatron][context]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  MegatronLayout l = with_context(megatron_layout(8, 2, 2, 1, 16), 4);
  l.sequence_parallel = true;
  l.bf16 = true;
  const auto p = predict_megatron(llama3_8b(65536), l, topology, false);
  REQUIRE(p.ok());
  CHECK(p->throughput_samples_per_s == Approx(16 / p->iteration_time.value).epsilon(1e-12));
  CHECK(p->model_tflops_per_gpu ==
        Approx(megatron_model_flops(llama3_8b(65536), l) / (p->iteration_time.value * 128) / 1e12).epsilon(1e-12));
  // Where the time goes names the exchange, and the parts add up to the iteration.
  const MegatronBreakdown& b = p->breakdown;
  CHECK((b.compute + b.tensor_comm + b.context_comm + b.recompute + b.host + b.data_allreduce + b.optimizer + b.bubble)
            .value == Approx(p->iteration_time.value).epsilon(1e-9));
}

TEST_CASE("context parallel: the trace draws the exposed exchange inside its compute spans, and reads back",
          "[megatron][context][trace]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  MegatronLayout l = with_context(megatron_layout(2, 2, 1, 1, 4), 4);
  l.context_comm = ContextComm::kAllGather;  // never overlapped: always exposed
  l.recompute = Recompute::kFull;
  const auto p = predict_megatron(llama3_8b(16384), l, topology, true);
  REQUIRE(p.ok());
  const Trace& trace = p->simulation.trace;
  int context_spans = 0;
  for (const Span& span : trace.spans) {
    if (span.stream != Stream::kContextComm) continue;
    ++context_spans;
    testing::owning_compute_span(trace, span);  // inside the compute span it belongs to
    // Its length: the stage's blocks' exposed exchange, the backward's with
    // the recomputed forward's.
    const LayerRange range = p->plan.stages[span.action.stage].layers;
    Seconds expected;
    for (int layer = range.begin; layer < range.end; ++layer) {
      const MegatronLayerTime& t = p->profile.times[layer];
      expected += span.action.kind == ActionKind::kForward ? t.context_forward : t.context_backward + t.context_forward;
    }
    CHECK((span.end - span.start).value == Approx(expected.value).epsilon(1e-9));
  }
  CHECK(context_spans > 0);
  auto back = parse_chrome_trace(trace_to_chrome_json(trace), "t.json");
  INFO((back.ok() ? std::string() : back.error().message));
  REQUIRE(back.ok());
  CHECK(std::count_if(back->spans.begin(), back->spans.end(),
                      [](const Span& s) { return s.stream == Stream::kContextComm; }) == context_spans);
  CHECK(trace_to_chrome_json(trace).find("\"context-parallel exchange\"") != std::string::npos);
}

TEST_CASE("context parallel: the checks name the flag", "[megatron][context]") {
  const MegatronLayout l = with_context(megatron_layout(8, 1, 1, 1, 8), 4);
  CHECK(check_megatron_layout(llama3_8b(8192), l, 256).ok());
  auto message = [&](const GptModel& m, const MegatronLayout& layout, int devices) {
    const Status status = check_megatron_layout(m, layout, devices);
    REQUIRE_FALSE(status.ok());
    return status.error().message;
  };
  // Megatron cuts each sequence into 2c chunks.
  CHECK_THAT(message(llama3_8b(8196), l, 256), Catch::Contains("--seq-length 8196 is not divisible"));
  GptModel plain = llama3_8b(8192);
  plain.flash_attention = false;  // Megatron's own attention has no ring
  CHECK_THAT(message(plain, l, 256), Catch::Contains("--use-flash-attn"));
  CHECK_THAT(message(llama3_8b(8192), with_context(l, 0), 256),
             Catch::Contains("--context-parallel-size must be at least 1"));
  CHECK_THAT(message(llama3_8b(8192), l, 16), Catch::Contains("x --context-parallel-size 4"));
}

TEST_CASE("context parallel: the plan file's arguments carry c when above 1", "[megatron][context]") {
  const MegatronLayout l = with_context(megatron_layout(8, 1, 2, 1, 8), 4);
  const nlohmann::json arguments = megatron_arguments(llama3_8b(8192), l);
  CHECK(arguments.at("context_parallel_size") == 4);
  CHECK_FALSE(arguments.contains("cp_comm_type"));  // p2p, the default
  auto back = megatron_from_arguments(arguments, "plan.json: megatron");
  REQUIRE(back.ok());
  CHECK(back->layout.context == 4);
  CHECK(back->layout.context_comm == ContextComm::kP2P);
  MegatronLayout gathered = l;
  gathered.context_comm = ContextComm::kAllGather;
  const nlohmann::json with_type = megatron_arguments(llama3_8b(8192), gathered);
  CHECK(with_type.at("cp_comm_type") == "all_gather");
  auto typed = megatron_from_arguments(with_type, "plan.json: megatron");
  REQUIRE(typed.ok());
  CHECK(typed->layout.context_comm == ContextComm::kAllGather);
  nlohmann::json unknown = with_type;
  unknown["cp_comm_type"] = "a2a+p2p";
  CHECK_FALSE(megatron_from_arguments(unknown, "plan.json: megatron").ok());
  CHECK_FALSE(megatron_arguments(llama3_8b(8192), with_context(l, 1)).contains("context_parallel_size"));
  nlohmann::json zero = arguments;
  zero["context_parallel_size"] = 0;
  CHECK_FALSE(megatron_from_arguments(zero, "plan.json: megatron").ok());
}

}  // namespace
}  // namespace baton
