// The schedules that run several chunks per device: interleaved-1f1b
// (Megatron-LM), zbv (Qi et al., ICLR 2024, section 6) and dualpipev
// (DeepSeek). Closed forms with uniform one-layer chunks and free
// communication, the Programs' validity under replication, and the pairs
// (tests/sim/chunked_plan_file_test.cc has the plans the loader refuses).
#include <algorithm>
#include <map>
#include <string>

#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "sim/stage_costs.h"
#include "sim/validate.h"
#include "tests/schedule/schedule_test_support.h"
#include "tests/sim/chunked_test_support.h"
#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

Simulation simulate_chunked(Plan plan, const Times& t) {
  const Topology topology = make_flat_topology(64, 100.0, Seconds(0.0));
  REQUIRE(assign_devices(plan, topology).ok());
  return simulate_ok(plan, uniform_split(plan.num_stages(), t), topology);
}

// Each worker's compute order, sends and receives left out.
void check_orders(const Program& program, const std::vector<std::string>& orders) {
  REQUIRE(program.num_workers() == static_cast<int>(orders.size()));
  for (size_t w = 0; w < orders.size(); ++w) CHECK(testing::order_of_full(program, static_cast<int>(w)) == orders[w]);
}

}  // namespace

TEST_CASE("interleaved 1f1b: Megatron's order, groups of p microbatches through each chunk in turn",
          "[sim][chunks][interleaved]") {
  // The picture in sim/schedules.cc: p = 2, v = 2, M = 4.
  const Program program = generate_program(chunked_plan(Schedule::kInterleaved1F1B, 2, 2, 4));
  REQUIRE(program.num_workers() == 2);
  CHECK(program.workers[0].chunks == std::vector<int>{0, 2});
  CHECK(program.workers[1].chunks == std::vector<int>{1, 3});
  check_orders(program, {"s0:F0 s0:F1 s2:F0 s2:F1 s0:F2 s2:B0 s0:F3 s2:B1 s2:F2 s0:B0 s2:F3 s0:B1 s2:B2 s2:B3 "
                         "s0:B2 s0:B3 s0:STEP0 s2:STEP0",
                         "s1:F0 s1:F1 s3:F0 s3:B0 s3:F1 s3:B1 s1:F2 s1:B0 s1:F3 s1:B1 s3:F2 s3:B2 s3:F3 s3:B3 "
                         "s1:B2 s1:B3 s1:STEP0 s3:STEP0"});
}

TEST_CASE("interleaved 1f1b: makespan (M v + p - 1)(tF + tB), a bubble of (p - 1) / (v M) of the work",
          "[sim][chunks][interleaved][closed-form]") {
  // Each chunk one layer of tF, tB; free communication. Megatron's bubble is
  // (p - 1)(tF + tB) of chunk times, 1/v of 1F1B's on the same p devices.
  const Times t{1.0, 1.2, 0.8};
  const double chunk_work = (t.forward_ms + t.input_ms + t.weight_ms) * 1e-3;
  for (int ranks : {2, 3, 4}) {
    for (int chunks : {2, 3}) {
      for (int microbatches : {ranks, 2 * ranks, 4 * ranks}) {
        INFO("p = " << ranks << " v = " << chunks << " M = " << microbatches);
        const Simulation sim =
            simulate_chunked(chunked_plan(Schedule::kInterleaved1F1B, ranks, chunks, microbatches), t);
        const double work = microbatches * chunks * chunk_work;
        CHECK(close_rel(sim.metrics.makespan.value, (microbatches * chunks + ranks - 1) * chunk_work));
        CHECK(close_rel(sim.metrics.makespan.value / work - 1.0, double(ranks - 1) / (chunks * microbatches)));
      }
    }
  }
}

TEST_CASE("interleaved 1f1b, replicated: a worker's chunks all-reduce one after another, then step",
          "[sim][chunks][interleaved][closed-form]") {
  // r = 2 whole pipelines, each chunk one layer with P bytes of parameters
  // and an optimizer step of u; one flat level of B = 100 Gb/s without
  // latency, free transfers (no activation bytes). The compute is the closed
  // form above on each pipeline's M / r microbatches; then each worker's v
  // ALLREDUCEs, every one of 2 (r - 1) / r x P / B = P / B, run in turn over
  // the same two devices (one communicator, one stream): v P / B, not P / B as
  // if they shared nothing; and its v STEPs only after all of them (the
  // executor's STEP drains every outstanding reduction): v u more, not one u
  // after the last all-reduce.
  const Times t{1.0, 1.2, 0.8};
  const double chunk_work = (t.forward_ms + t.input_ms + t.weight_ms) * 1e-3;
  const Bytes params(12'500'000);                  // 1 ms at 100 Gb/s
  const double allreduce = params.value / 12.5e9;  // 2 (r - 1) / r = 1 for r = 2
  const Seconds step = Seconds::from_ms(0.3);
  for (int chunks : {2, 3, 4}) {
    const int ranks = 2, replicas = 2, microbatches = 8, local = microbatches / replicas;
    INFO("v = " << chunks);
    Plan plan = chunked_plan(Schedule::kInterleaved1F1B, ranks, chunks, microbatches, replicas);
    const Topology topology = make_flat_topology(64, 100.0, Seconds(0.0));
    REQUIRE(assign_devices(plan, topology).ok());
    Profile profile = uniform_split(plan.num_stages(), t);
    for (Layer& layer : profile.layers) {
      layer.param_bytes = params;
      layer.optimizer = step;
    }
    const Simulation sim = simulate_ok(plan, profile, topology);
    CHECK(close_rel(sim.metrics.makespan.value,
                    (local * chunks + ranks - 1) * chunk_work + chunks * (allreduce + step.value)));
  }
}

TEST_CASE("zbv: no bubble when tF = tI = tW, and 1F1B's activation memory", "[sim][chunks][zbv][closed-form]") {
  // Qi et al. section 6: with equal F, I and W the V schedule has no bubble
  // (the paper's cost: each device's span from first to last action), and a
  // device holds 2p chunk activations at its peak, p whole stages' worth: 1F1B's
  // stage-0 peak on the same p devices.
  for (int ranks : {2, 4, 6, 8}) {
    for (int microbatches : {2 * ranks, 3 * ranks, 4 * ranks + 1}) {
      INFO("p = " << ranks << " M = " << microbatches);
      const Times t{1.0, 1.0, 1.0};
      const Simulation sim = simulate_chunked(chunked_plan(Schedule::kZbV, ranks, 2, microbatches), t);
      CHECK(close_rel(longest_stage_span(sim), 2.0 * microbatches * 3e-3));
      for (const WorkerMetrics& w : sim.metrics.workers) CHECK(w.peak_inflight_microbatches == 2 * ranks);
    }
  }
}

TEST_CASE("dualpipev: DeepSeek's bubble (PP/2 - 1)(F&B + B - 3W) and PP + 1 chunk activations",
          "[sim][chunks][dualpipev][closed-form]") {
  // DeepSeek-V3 technical report (arXiv 2412.19437), table 2, and the DualPipe
  // repository's table for DualPipeV: on PP/2 devices holding PP chunks, the
  // bubble is (PP/2 - 1)(F&B + B - 3W) with B a whole backward (I + W) and F&B
  // an overlapped pair; parameters 2x (two chunks per device); activations of
  // PP + 1 chunks. Here PP = 2p; a pair runs its two passes one after the
  // other (F&B = F + B) but as one unit, as DualPipeV's code does: both inputs
  // received before, both outputs sent after. The schedule is handcrafted for
  // equal F, I and W (as ZB-V), where the figure is exact: with
  // tF = tI = tW = t the bubble, the zero-bubble paper's cost (each device's
  // first-to-last span, less its work), is (p - 1)(3t + 2t - 3t) = 2(p - 1)t.
  for (int ranks : {2, 3, 4, 8}) {
    for (int microbatches : {2 * ranks, 3 * ranks + 1, 6 * ranks}) {
      INFO("p = " << ranks << " M = " << microbatches);
      for (const double t : {1.0, 0.25}) {
        const Times times{t, t, t};
        const double f = t, b = 2 * t, w = t, fb = f + b;
        const Simulation sim = simulate_chunked(chunked_plan(Schedule::kDualPipeV, ranks, 2, microbatches), times);
        const double work_ms = 2.0 * microbatches * 3 * t;
        CHECK(close_rel(longest_stage_span(sim) * 1e3 - work_ms, (ranks - 1) * (fb + b - 3 * w)));
        for (const WorkerMetrics& wm : sim.metrics.workers) CHECK(wm.peak_inflight_microbatches == 2 * ranks + 1);
      }
    }
  }
}

TEST_CASE("dualpipev: two chunks' parameters per device, DeepSeek's 2x of 1F1B on PP stages",
          "[sim][chunks][dualpipev]") {
  // DualPipeV on p devices holds PP = 2p chunks, two per device; 1F1B on the
  // same PP stages holds one per device.
  for (int ranks : {2, 4}) {
    const Profile profile =
        make_uniform_profile(2 * ranks, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(1000), Bytes(1 << 20));
    const Topology topology = make_flat_topology(64, 100.0, Seconds(0.0));
    Plan v = chunked_plan(Schedule::kDualPipeV, ranks, 2, 2 * ranks);
    Plan flat = chunked_plan(Schedule::kOneFOneB, 2 * ranks, 1, 2 * ranks);
    REQUIRE(assign_devices(v, topology).ok());
    REQUIRE(assign_devices(flat, topology).ok());
    const Simulation on_v = simulate_ok(v, profile, topology);
    const Simulation on_flat = simulate_ok(flat, profile, topology);
    for (const WorkerMetrics& w : on_v.metrics.workers)
      CHECK(w.weight_bytes.value == 2 * on_flat.metrics.workers[0].weight_bytes.value);
  }
}

TEST_CASE("dualpipev: with its pairs undone the bubble would be half DeepSeek's", "[sim][chunks][dualpipev]") {
  // The same programs with every pair undone: the pair's first output leaves
  // as soon as its pass ends and the second pass waits only for its own input,
  // and the bubble with tF = tI = tW = t falls to (p - 1)t. That is what
  // pairing costs and why the executor and the simulator both keep it.
  for (int ranks : {2, 4, 8}) {
    Plan plan = chunked_plan(Schedule::kDualPipeV, ranks, 2, 3 * ranks);
    const Topology topology = make_flat_topology(64, 100.0, Seconds(0.0));
    REQUIRE(assign_devices(plan, topology).ok());
    Program program = generate_program(plan);
    int pairs = 0;
    for (auto& list : program.actions)
      for (Action& a : list) pairs += a.paired ? 1 : 0;
    CHECK(pairs > 0);
    for (auto& list : program.actions)
      for (Action& a : list) a.paired = false;
    const Profile profile = uniform_split(plan.num_stages(), Times{1.0, 1.0, 1.0});
    const auto sim = simulate_program(lower_communication(program), stage_costs(profile, plan, topology), topology,
                                      plan.microbatch_size, {.record_trace = true});
    REQUIRE(sim.ok());
    CHECK(close_rel(longest_stage_span(*sim) * 1e3 - 2.0 * plan.batches * 3.0, (ranks - 1) * 1.0));
  }
}

TEST_CASE("dualpipev: a pair hides each pass's all-to-alls behind the other's compute", "[sim][chunks][dualpipev]") {
  // pair_hidden: the first's overlap up to the second's compute beside it,
  // and back. F 1 ms with 0.3 of all-to-alls beside B 2 ms with 0.4: both
  // hidden; a pass mostly communication hides only what the other computes.
  const PairHidden both =
      pair_hidden(Seconds::from_ms(1.0), Seconds::from_ms(0.3), Seconds::from_ms(2.0), Seconds::from_ms(0.4));
  CHECK(both.first.ms() == Approx(0.3));
  CHECK(both.second.ms() == Approx(0.4));
  const PairHidden short_one =
      pair_hidden(Seconds::from_ms(1.0), Seconds::from_ms(0.9), Seconds::from_ms(0.5), Seconds::from_ms(0.4));
  CHECK(short_one.first.ms() == Approx(0.1));
  CHECK(short_one.second.ms() == Approx(0.1));
  // In the simulator: every worker's compute is shorter by 0.7 ms a pair,
  // nothing else changes in its passes.
  const int ranks = 4;
  Plan plan = chunked_plan(Schedule::kDualPipeV, ranks, 2, 3 * ranks);
  const Topology topology = make_flat_topology(64, 100.0, Seconds(0.0));
  REQUIRE(assign_devices(plan, topology).ok());
  const Profile plain = uniform_split(plan.num_stages(), Times{1.0, 1.0, 1.0});
  Profile overlapped = plain;
  for (Layer& layer : overlapped.layers) {
    layer.forward_overlap = Seconds::from_ms(0.3);
    layer.backward_overlap = Seconds::from_ms(0.4);
  }
  const Program program = build_program(plan);
  const auto busy = [&](const Profile& profile) {
    auto sim = simulate_program(program, stage_costs(profile, plan, topology), topology, plan.microbatch_size,
                                {.record_trace = true});
    REQUIRE(sim.ok());
    std::map<int, double> per_worker;
    for (const Span& span : sim->trace.spans)
      if (span.stream == Stream::kCompute) per_worker[span.worker] += (span.end - span.start).ms();
    return std::make_pair(per_worker, sim->metrics.iteration_time);
  };
  const auto [before, slower] = busy(plain);
  const auto [after, faster] = busy(overlapped);
  for (int w = 0; w < program.num_workers(); ++w) {
    int pairs = 0;
    for (const Action& a : program.actions[w]) pairs += a.paired ? 1 : 0;
    CAPTURE(w);
    CHECK(pairs > 0);
    CHECK(after.at(w) == Approx(before.at(w) - 0.7 * pairs).epsilon(1e-9));
  }
  CHECK(faster < slower);
}

TEST_CASE("dualpipev: the pairs are DeepSeek's, F0&B1 and F1&B0 in the main step", "[sim][chunks][dualpipev]") {
  // p = 2, M = 5: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2. The
  // last rank's first pair is not overlapped (its F0 feeds its own F1).
  const Program program = generate_program(chunked_plan(Schedule::kDualPipeV, 2, 2, 5));
  check_orders(program, {"s0:F0 s0:F1 s0:F2 s3:F0 s3:I0 s3:W0 s3:F1 s0:F3& s3:B1 s3:F2& s0:B0 s0:F4& s3:B2 s3:F3& "
                         "s0:B1 s3:B3 s3:F4& s0:B2 s3:B4 s0:I3 s0:W3 s0:I4 s0:W4 s0:STEP0 s3:STEP0",
                         "s1:F0 s2:F0 s1:F1 s2:F1 s1:F2 s2:B0 s2:F2& s1:B0 s1:F3& s2:B1 s2:F3& s1:B1 s1:F4& s2:B2 "
                         "s2:F4& s1:B2 s2:B3 s1:B3 s2:I4 s1:I4 s2:W4 s1:W4 s1:STEP0 s2:STEP0"});
}

TEST_CASE("dualpipev lowered: a pair's receives come before both passes, its sends after both",
          "[sim][chunks][dualpipev]") {
  for (int ranks : {3, 4}) {
    const Program lowered = build_program(chunked_plan(Schedule::kDualPipeV, ranks, 2, 3 * ranks));
    int pairs_with_both = 0;
    for (const std::vector<Action>& list : lowered.actions) {
      for (size_t i = 0; i + 1 < list.size(); ++i) {
        if (!list[i].paired) continue;
        INFO("p = " << ranks << " pair " << to_string(list[i]) << " " << to_string(list[i + 1]));
        REQUIRE(is_compute(list[i + 1].kind));
        bool recv_before = false, send_after = false;
        for (size_t j = 0; j < list.size(); ++j) {
          const Action& a = list[j];
          const auto moves_for = [&](const Action& pass) {
            const bool act = a.kind == ActionKind::kSendAct || a.kind == ActionKind::kRecvAct;
            const bool grad = a.kind == ActionKind::kSendGrad || a.kind == ActionKind::kRecvGrad;
            return a.stage == pass.stage && a.number == pass.number && (pass.kind == ActionKind::kForward ? act : grad);
          };
          const bool of_pair = moves_for(list[i]) || moves_for(list[i + 1]);
          if (!of_pair) continue;
          if (is_recv(a.kind)) {
            CHECK(j < i);
            recv_before = recv_before || j < i;
          } else {
            CHECK(j > i + 1);
            send_after = send_after || j > i + 1;
          }
        }
        pairs_with_both += recv_before && send_after ? 1 : 0;
      }
    }
    CHECK(pairs_with_both > 0);
  }
}

TEST_CASE("chunked schedules: every Program is valid, with and without replicated pipelines",
          "[sim][chunks][validate]") {
  for (Schedule schedule : {Schedule::kInterleaved1F1B, Schedule::kZbV, Schedule::kDualPipeV}) {
    for (int ranks : {1, 2, 3, 5}) {
      for (int replicas : {1, 2, 3}) {
        const int chunks = schedule == Schedule::kInterleaved1F1B ? 3 : 2;
        for (int groups : {2, 3}) {
          const int microbatches = groups * ranks * replicas * (schedule == Schedule::kInterleaved1F1B ? 1 : 2);
          const Plan plan = chunked_plan(schedule, ranks, chunks, microbatches, replicas);
          INFO(schedule_name(schedule) << " p = " << ranks << " r = " << replicas << " M = " << microbatches);
          REQUIRE(check_chunks(plan, "plan").ok());
          const Program program = build_program(plan);
          CHECK(program.num_workers() == ranks * replicas);
          const Status valid = validate_program(program);
          CHECK(valid.ok());
          if (!valid) FAIL_CHECK(valid.error().message);
          // Every chunk of every worker runs each of its microbatches once forward.
          for (int w = 0; w < program.num_workers(); ++w) {
            const int local = (microbatches - program.workers[w].replica + replicas - 1) / replicas;
            CHECK(testing::count_kind(program, w, ActionKind::kForward) == local * chunks);
            CHECK(testing::count_kind(program, w, ActionKind::kStep) == chunks);
            CHECK(testing::count_kind(program, w, ActionKind::kAllReduce) == (replicas > 1 ? chunks : 0));
          }
        }
      }
    }
  }
}

TEST_CASE("chunked schedules: the V's turn hands over in the worker's memory, no transfer", "[sim][chunks][lowering]") {
  // Rank p - 1 runs stages p - 1 and p: nothing is sent between them.
  const Program program = build_program(chunked_plan(Schedule::kZbV, 3, 2, 6));
  for (const Action& a : program.actions[2]) {
    if (is_send(a.kind) || is_recv(a.kind)) CHECK(a.peer != 2);
    if (a.kind == ActionKind::kSendAct) CHECK(a.stage != 2);  // stage 2's output goes to stage 3, same worker
  }
}

TEST_CASE("interleaved 1f1b, paired: each steady-state forward runs with the backward after it",
          "[sim][chunks][interleaved]") {
  // The picture of the first interleaved test, p = 2, v = 2, M = 4, with
  // Plan::paired_steady_state (Megatron-core's
  // --overlap-moe-expert-parallel-comm): one forward more in the warm-up, then
  // the steady state's F&B pairs, none of one microbatch through one chunk.
  Plan plan = chunked_plan(Schedule::kInterleaved1F1B, 2, 2, 4);
  plan.paired_steady_state = true;
  const Program program = generate_program(plan);
  check_orders(program, {"s0:F0 s0:F1 s2:F0 s2:F1 s0:F2 s0:F3& s2:B0 s2:F2& s2:B1 s2:F3& s0:B0 s0:B1 s2:B2 s2:B3 "
                         "s0:B2 s0:B3 s0:STEP0 s2:STEP0",
                         "s1:F0 s1:F1 s3:F0 s3:F1& s3:B0 s1:F2& s3:B1 s1:F3& s1:B0 s3:F2& s1:B1 s3:F3& s3:B2 s3:B3 "
                         "s1:B2 s1:B3 s1:STEP0 s3:STEP0"});
  for (int w = 0; w < 2; ++w)
    for (size_t i = 0; i + 1 < program.actions[w].size(); ++i) {
      const Action& a = program.actions[w][i];
      if (!a.paired) continue;
      const Action& b = program.actions[w][i + 1];
      CHECK_FALSE((a.stage == b.stage && a.batch() == b.batch()));
    }
  // Valid (no worker waits on itself) at every size, and each pair hides its
  // passes' all-to-alls behind the other's compute as DualPipeV's do.
  for (int ranks : {2, 3, 4})
    for (int chunks : {2, 3})
      for (int microbatches : {ranks, 2 * ranks, 4 * ranks}) {
        INFO("p = " << ranks << " v = " << chunks << " M = " << microbatches);
        Plan paired = chunked_plan(Schedule::kInterleaved1F1B, ranks, chunks, microbatches);
        paired.paired_steady_state = true;
        const Program built = build_program(paired);
        const Status valid = validate_program(built);
        CHECK(valid.ok());
        if (!valid) FAIL_CHECK(valid.error().message);
        const Topology topology = make_flat_topology(64, 100.0, Seconds(0.0));
        REQUIRE(assign_devices(paired, topology).ok());
        Profile overlapped = uniform_split(paired.num_stages(), Times{1.0, 1.0, 1.0});
        for (Layer& layer : overlapped.layers) {
          layer.forward_overlap = Seconds::from_ms(0.3);
          layer.backward_overlap = Seconds::from_ms(0.4);
        }
        Plan plain_plan = paired;
        plain_plan.paired_steady_state = false;
        const Simulation unpaired = simulate_ok(plain_plan, overlapped, topology);
        const Simulation hidden = simulate_ok(paired, overlapped, topology);
        // With M = p every pass is warm-up or cool-down: nothing to pair.
        if (microbatches == ranks)
          CHECK(hidden.metrics.makespan.value == Approx(unpaired.metrics.makespan.value).epsilon(1e-12));
        else
          CHECK(hidden.metrics.makespan < unpaired.metrics.makespan);
      }
}
