// The overlaps Megatron-LM's scaling runs name (--tp-comm-overlap,
// --overlap-param-gather) and the distributed optimizer's reduce-scatter and
// all-gather (sim/megatron_profile.h, sim/megatron_predict.cc): what each
// hides, stated as the arithmetic of the collectives and the GEMMs.

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/gpu_model.h"
#include "sim/megatron_sim.h"
#include "sim/network.h"

namespace baton {
namespace {

Topology shipped(const std::string& name) { return testing::shipped_topology(name); }

// GPT shapes with h 8192 (large GEMMs) and h 1024 (small ones), 16 heads.
const GptModel kWide{4, 8192, 64, 2048, 51200};
const GptModel kSmall{4, 1024, 16, 1024, 50257};

MegatronLayout sequence_parallel(int t, int p, int d, int b, int global) {
  MegatronLayout l = testing::megatron_layout(t, p, d, b, global);
  l.sequence_parallel = true;
  return l;
}

// A GPT block's linears on one of t ranks, per microbatch: the attention's
// (QKV [T x h] x [h x 3h / t], projection [T x h / t] x [h / t x h]) and the
// MLP's (up [T x h] x [h x 4h / t], down [T x 4h / t] x [4h / t x h]),
// forward, and backward (input and weight gradients).
struct Linears {
  double attention_forward, mlp_forward, attention_backward, mlp_backward;
};
Linears gpt_linears(const GpuModel& gpu, const GptModel& m, const MegatronLayout& l) {
  const double T = double(l.micro_batch) * double(m.sequence), h = double(m.hidden), t = l.tensor;
  const double qkv = gpu.gemm(T, 3 * h / t, h).value, proj = gpu.gemm(T, h, h / t).value;
  const double up = gpu.gemm(T, 4 * h / t, h).value, down = gpu.gemm(T, h, 4 * h / t).value;
  const double attention_backward = gpu.gemm(T, h, 3 * h / t).value + gpu.gemm(T, h / t, h).value +
                                    gpu.gemm(3 * h / t, h, T).value + gpu.gemm(h, h / t, T).value;
  const double mlp_backward = gpu.gemm(T, 4 * h / t, h).value + gpu.gemm(T, h, 4 * h / t).value +
                              gpu.gemm(4 * h / t, h, T).value + gpu.gemm(h, 4 * h / t, T).value;
  return {qkv + proj, up + down, attention_backward, mlp_backward};
}

// What a collective of `comm` pipelined in t chunks with `gemm` adds to it.
double exposed(double comm, double gemm, double t) { return std::max(0.0, comm - gemm) + std::min(comm, gemm) / t; }

// A model's profile on a100_4x8 without and with --tp-comm-overlap.
struct BeforeAfter {
  MegatronProfile before, after;
};
BeforeAfter with_and_without_overlap(const GptModel& model, const MegatronLayout& plain) {
  const Topology topology = shipped("a100_4x8.json");
  MegatronLayout overlapped = plain;
  overlapped.tp_comm_overlap = true;
  auto before = megatron_profile_on(model, plain, topology);
  auto after = megatron_profile_on(model, overlapped, topology);
  REQUIRE(before.ok());
  REQUIRE(after.ok());
  return {std::move(*before), std::move(*after)};
}

GpuModel a100() { return *gpu_model("A100-SXM4-80GB"); }

TEST_CASE("tp-comm-overlap: collectives shorter than their GEMMs expose one chunk in t", "[megatron][overlap]") {
  const MegatronLayout plain = sequence_parallel(8, 1, 1, 2, 8);
  const BeforeAfter profiles = with_and_without_overlap(kWide, plain);
  const MegatronLayerTime& a = profiles.before.times[1];
  const MegatronLayerTime& b = profiles.after.times[1];
  // Without the overlap a GPT block's forward carries two collectives of the
  // same size, the attention's and the MLP's.
  const double sublayer = a.forward_comm.value / 2;
  const Linears linears = gpt_linears(a100(), kWide, plain);
  REQUIRE(sublayer < linears.attention_forward);  // the case this test states
  REQUIRE(sublayer < linears.mlp_forward);
  CHECK(b.forward_comm.value == Approx(a.forward_comm.value / 8).epsilon(1e-9));
  // In the backward the better of that and Megatron's asynchronous overlap.
  CHECK(b.backward_comm.value == Approx(std::min(a.forward_comm.value / 8, a.backward_comm.value)).epsilon(1e-9));
  CHECK(b.backward_comm.value <= a.backward_comm.value);
  // The work does not change; the pass gets shorter by what is hidden.
  CHECK(b.forward_compute.value == Approx(a.forward_compute.value).epsilon(1e-12));
  CHECK(b.backward_compute.value == Approx(a.backward_compute.value).epsilon(1e-12));
  CHECK(profiles.after.profile.layers[1].forward.value ==
        Approx(profiles.before.profile.layers[1].forward.value - a.forward_comm.value * 7 / 8).epsilon(1e-9));
}

TEST_CASE("tp-comm-overlap: collectives longer than their GEMMs expose what outlasts them and one chunk",
          "[megatron][overlap]") {
  // t 16 spans two servers of a100_4x8: at micro-batch 32 the ring's
  // InfiniBand hop makes the collectives of a small block longer than its
  // GEMMs.
  const MegatronLayout plain = sequence_parallel(16, 1, 1, 32, 32);
  const BeforeAfter profiles = with_and_without_overlap(kSmall, plain);
  const double sublayer = profiles.before.times[1].forward_comm.value / 2;
  const Linears linears = gpt_linears(a100(), kSmall, plain);
  REQUIRE(sublayer > linears.attention_forward);
  REQUIRE(sublayer > linears.mlp_backward);
  CHECK(profiles.after.times[1].forward_comm.value ==
        Approx(exposed(sublayer, linears.attention_forward, 16) + exposed(sublayer, linears.mlp_forward, 16))
            .epsilon(1e-9));
  CHECK(
      profiles.after.times[1].backward_comm.value ==
      Approx(std::min(profiles.before.times[1].backward_comm.value,
                      exposed(sublayer, linears.attention_backward, 16) + exposed(sublayer, linears.mlp_backward, 16)))
          .epsilon(1e-9));
}

TEST_CASE("the overlaps are refused without what Megatron asks for them", "[megatron][overlap]") {
  MegatronLayout l = testing::megatron_layout(8, 1, 4, 1, 8);
  l.tp_comm_overlap = true;
  auto refused = check_megatron_layout(kSmall, l, 64);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("--tp-comm-overlap needs --sequence-parallel") != std::string::npos);
  l.sequence_parallel = true;
  CHECK(check_megatron_layout(kSmall, l, 64).ok());

  l.overlap_param_gather = true;
  refused = check_megatron_layout(kSmall, l, 64);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("--use-distributed-optimizer") != std::string::npos);
  l.distributed_optimizer = true;
  refused = check_megatron_layout(kSmall, l, 64);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("--overlap-grad-reduce") != std::string::npos);
  l.overlap_grad_reduce = true;
  CHECK(check_megatron_layout(kSmall, l, 64).ok());
}

TEST_CASE("distributed optimizer: reduce-scatter the gradients, all-gather the 2-byte weights: half an all-reduce each",
          "[megatron][overlap]") {
  const Topology topology = shipped("a100_vtrain.json");
  for (const bool bf16 : {false, true}) {
    MegatronLayout plain = testing::megatron_layout(8, 1, 4, 1, 8);
    plain.bf16 = bf16;
    MegatronLayout sharded = plain;
    sharded.distributed_optimizer = true;
    const auto a = megatron_profile_on(kSmall, plain, topology);
    const auto b = megatron_profile_on(kSmall, sharded, topology);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    for (size_t i = 0; i < a->times.size(); ++i) {
      const double weights = a->times[i].parameters * 8;  // the t GPUs together
      const double gradient = bf16 ? 4.0 : 2.0;
      CHECK(a->times[i].reduced_bytes == Approx(weights * gradient).epsilon(1e-12));
      CHECK(a->times[i].gathered_bytes == 0.0);
      CHECK(b->times[i].gathered_bytes == Approx(weights * 2).epsilon(1e-12));
      // fp16: 2 + 2 bytes over two halves, as the all-reduce's 2; bf16
      // (gradients reduced in fp32): 4 + 2 over two, 3 where it was 4.
      CHECK(double(b->profile.layers[i].param_bytes.value) ==
            Approx(double(a->profile.layers[i].param_bytes.value) * (bf16 ? 0.75 : 1.0)).epsilon(1e-6));
    }
  }
}

TEST_CASE("overlap-param-gather: the weights' all-gather hides behind the next first forward up to its length",
          "[megatron][overlap]") {
  // One microbatch per replica over 16 servers: the reduce-scatter outlasts
  // the backward and the all-gather the forward, so both leave a rest.
  const Topology topology = shipped("a100_vtrain.json");
  MegatronLayout l = testing::megatron_layout(8, 1, 16, 1, 16);
  l.bf16 = l.distributed_optimizer = l.overlap_grad_reduce = true;
  MegatronLayout gathered = l;
  gathered.overlap_param_gather = true;
  const GptModel model{4, 4096, 32, 1024, 50257};
  const auto after_step = predict_megatron(model, l, topology, false);
  const auto overlapped = predict_megatron(model, gathered, topology, false);
  REQUIRE(after_step.ok());
  REQUIRE(overlapped.ok());
  // The same arithmetic from the parts: the network's ring over the 16
  // groups, the rank's reduced and gathered bytes, its passes.
  const Network network(after_step->groups);
  const MegatronRankWork work = megatron_rank_work(after_step->profile, after_step->plan, 0);
  const std::vector<int>& devices = after_step->plan.stages[0].devices;
  const double reduce = network.allreduce_time(devices, Bytes::counted(work.reduced_bytes)).value / 2;
  const double gather = network.allreduce_time(devices, Bytes::counted(work.gathered_bytes)).value / 2;
  REQUIRE(reduce > work.backward.value);
  REQUIRE(gather > work.forward.value);
  const double rest = reduce - work.backward.value;
  // The simulator all-reduces bytes scaled to the exposed share; its ring's
  // latency makes that a little off a linear scale.
  CHECK(after_step->breakdown.data_allreduce.value == Approx(rest + gather).epsilon(2e-3));
  CHECK(overlapped->breakdown.data_allreduce.value == Approx(rest + gather - work.forward.value).epsilon(2e-3));
  CHECK(overlapped->iteration_time.value ==
        Approx(after_step->iteration_time.value - work.forward.value).epsilon(2e-3));
}

}  // namespace
}  // namespace baton
