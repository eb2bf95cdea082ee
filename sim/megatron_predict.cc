// predict_megatron and megatron_profile_on (declared in sim/megatron_sim.h).
#include <algorithm>

#include <fmt/format.h>

#include "sim/gpu_model.h"
#include "sim/megatron_sim.h"
#include "sim/network.h"
#include "sim/schedules.h"
#include "sim/stage_costs.h"
#include "sim/zb_heuristic.h"

namespace baton {

namespace {

// ZB-1p / ZB-2p: the Zero Bubble authors' greedy order (sim/zb_heuristic.h)
// on the stages' times, under p or 2p microbatches' activations per stage
// (an F takes one, its I releases all but the W's share, its W the rest);
// the transfer between stages is the longest of the plan's.
Result<Simulation> simulate_zb_heuristic(const MegatronPrediction& p, double weight_share, int factor,
                                         const SimOptions& options, Program* simulated) {
  if (auto ok = check_plan(p.plan, p.profile.profile, p.groups, "plan"); !ok) return ok.error();
  const std::vector<StageCost> costs = stage_costs(p.profile.profile, p.plan, p.groups);
  const int stages = p.plan.num_stages();
  ZbHeuristicInput in = zb_equal_stages(stages, p.plan.batches / p.plan.stages.front().replicas, 0.0, 0.0, 0.0, 0.0,
                                        static_cast<double>(factor * stages), weight_share);
  Network network(p.groups);
  for (int s = 0; s < stages; ++s) {
    const size_t i = static_cast<size_t>(s);
    const StageCost& c = costs[i];
    in.forward[i] = c.forward.value;
    in.input[i] = c.backward_input.value;
    in.weight[i] = c.backward_weight.value;
    if (s + 1 < stages) {
      const TransferTimes moved = network.transfer(p.plan.stages[s].devices.front(),
                                                   p.plan.stages[s + 1].devices.front(), c.activation_out, Seconds(0));
      in.comm = std::max(in.comm, moved.delivered.value);
    }
  }
  auto order = zb_heuristic_order(in);
  if (!order) return order.error();
  const bool one = simulates_one_replica(p.plan, p.groups, options);
  const Program whole = make_zb_heuristic(p.plan, *order);
  Program program = lower_communication(one ? one_replica_program(whole) : whole);
  auto simulation = simulate_program(program, costs, p.groups, p.plan.microbatch_size, options);
  if (simulation) simulation->one_replica = one;
  *simulated = std::move(program);
  return simulation;
}

// Per pipeline rank, what its overlapped pairs (DualPipeV's, or interleaved
// 1F1B's with Plan::paired_steady_state) hide per iteration: pair_hidden over
// replica 0's pairs, on the plan's stage costs.
std::vector<Seconds> hidden_by_pairs(const MegatronPrediction& p, const MegatronLayout& layout) {
  std::vector<Seconds> hidden(static_cast<size_t>(layout.pipeline));
  if (!p.plan.has_pairs()) return hidden;
  const std::vector<StageCost> costs = stage_costs(p.profile.profile, p.plan, p.groups);
  const Program program = generate_replica0_program(p.plan);
  for (const std::vector<Action>& list : program.actions)
    for (size_t i = 0; i + 1 < list.size(); ++i) {
      if (!list[i].paired || !is_compute(list[i + 1].kind)) continue;
      const PairHidden h = pair_hidden(costs[static_cast<size_t>(list[i].stage)], list[i].kind,
                                       costs[static_cast<size_t>(list[i + 1].stage)], list[i + 1].kind);
      hidden[static_cast<size_t>(p.plan.rank_of(list[i].stage))] += h.first + h.second;
    }
  return hidden;
}

MegatronBreakdown breakdown_of(const MegatronPrediction& p, const MegatronLayout& layout, const Topology& groups) {
  // The busiest pipeline rank: the most compute per iteration.
  const int per_rank_microbatches = layout.microbatches();
  MegatronBreakdown best;
  Seconds best_busy(-1.0);
  const Network network(groups);
  const std::vector<Seconds> hidden = hidden_by_pairs(p, layout);
  for (int rank = 0; rank < layout.pipeline; ++rank) {
    const MegatronRankWork work = megatron_rank_work(p.profile, p.plan, rank);
    MegatronBreakdown b;
    b.rank = rank;
    b.compute = work.compute * per_rank_microbatches;
    b.tensor_comm = work.tensor_comm * per_rank_microbatches;
    b.context_comm = work.context_comm * per_rank_microbatches;
    // The all-to-alls' exposed part: less what the rank's pairs hide.
    b.expert_comm = max(Seconds(0.0), work.expert_comm * per_rank_microbatches - hidden[static_cast<size_t>(rank)]);
    b.recompute = work.recompute * per_rank_microbatches;
    b.host = work.host * per_rank_microbatches;
    b.optimizer = work.optimizer;
    if (layout.replicas() > 1) b.data_allreduce = network.allreduce_time(p.plan.stages[rank].devices, work.gradients);
    b.data_allreduce += work.embedding_allreduce;
    const Seconds busy = b.compute + b.tensor_comm + b.context_comm + b.expert_comm + b.recompute + b.host +
                         b.optimizer + b.data_allreduce;
    if (busy > best_busy) {
      best_busy = busy;
      best = b;
    }
  }
  best.bubble = max(Seconds(0.0), p.iteration_time - best_busy);
  return best;
}

// Layout changes that make an unfitting layout fit, as flags.
std::vector<std::string> fit_hints(const GptModel& model, const MegatronLayout& layout, const Topology& topology,
                                   const GpuModel& gpu) {
  struct Variant {
    std::string flag;
    MegatronLayout layout;
  };
  std::vector<Variant> variants;
  auto add = [&](std::string flag, MegatronLayout changed) { variants.push_back({std::move(flag), changed}); };
  MegatronLayout v = layout;
  v.tensor = layout.tensor * 2;
  v.data = std::max(1, layout.data / 2);
  add(fmt::format("--tensor-model-parallel-size {} (data parallel {})", v.tensor, v.data), v);
  v = layout;
  v.pipeline = layout.pipeline * 2;
  v.data = std::max(1, layout.data / 2);
  add(fmt::format("--pipeline-model-parallel-size {} (data parallel {})", v.pipeline, v.data), v);
  if (layout.recompute != Recompute::kSelective && layout.recompute != Recompute::kFull) {
    v = layout;
    v.recompute = Recompute::kSelective;
    add("--recompute-granularity selective", v);
  }
  if (layout.recompute != Recompute::kFull) {
    v = layout;
    v.recompute = Recompute::kFull;
    add("--recompute-granularity full", v);
  }
  if (layout.recompute == Recompute::kFull && (layout.recompute_block || layout.recompute_layers > 1)) {
    v = layout;  // every block recomputed, one by one
    v.recompute_block = false;
    v.recompute_layers = 1;
    add("--recompute-method uniform --recompute-num-layers 1", v);
  }
  if (model.flash_attention) {  // twice the context-parallel ranks, from the data-parallel ones
    v = layout;
    v.context = layout.context * 2;
    v.data = std::max(1, layout.data / 2);
    add(fmt::format("--context-parallel-size {} (data parallel {})", v.context, v.data), v);
  }
  if (model.moe() && model.experts % (2 * layout.expert_parallel) == 0) {  // each rank half the experts
    v = layout;
    v.expert_parallel = layout.expert_parallel * 2;
    add(fmt::format("--expert-model-parallel-size {}", v.expert_parallel), v);
  }
  if (!layout.distributed_optimizer && layout.replicas() > 1) {
    v = layout;
    v.distributed_optimizer = true;
    add("--use-distributed-optimizer", v);
  }
  if (!layout.sequence_parallel && layout.tensor > 1) {
    v = layout;
    v.sequence_parallel = true;
    add("--sequence-parallel", v);
  }
  std::vector<std::string> hints;
  for (const Variant& variant : variants) {
    if (!check_megatron_layout(model, variant.layout, topology.num_devices())) continue;
    if (!tensor_group_topology(topology, variant.layout.tensor)) continue;
    const MegatronProfile profile =
        make_megatron_profile(model, variant.layout, gpu, [](double) { return Seconds(0.0); });
    const Plan plan = megatron_plan(model, variant.layout);
    const MegatronMemory memory = megatron_memory(model, variant.layout, plan, profile, topology.device.memory);
    if (memory.fits()) hints.push_back(fmt::format("{}: peak {:.1f} GiB", variant.flag, memory.peak().gib()));
  }
  return hints;
}

// --overlap-grad-reduce: Megatron reduces each bucket of gradients as soon as
// the last microbatch's backward has produced it, so the reduction hides
// behind that backward up to its length. With the distributed optimizer the
// reduction is a reduce-scatter, and the all-gather of the updated weights
// follows the optimizer step, exposed, or with --overlap-param-gather runs
// beside the next iteration's first forward pass (the rank's, through all its
// chunks) up to its length. The simulator's ALLREDUCE then stands for the
// exposed rest: each rank's gradient bytes are scaled by the exposed time
// over the time of the all-reduce they stand for.
void expose_overlapped_reduction(MegatronPrediction& p, const MegatronLayout& layout) {
  const Network network(p.groups);
  for (int rank = 0; rank < layout.pipeline; ++rank) {
    const MegatronRankWork work = megatron_rank_work(p.profile, p.plan, rank);
    const std::vector<int> stages = stages_of_rank(p.plan, rank);
    const std::vector<int>& devices = p.plan.stages[stages.front()].devices;
    const Seconds whole = network.allreduce_time(devices, work.gradients);
    auto ring = [&](double bytes) { return network.allreduce_time(devices, Bytes::counted(bytes)); };
    const double half = layout.distributed_optimizer ? 0.5 : 1.0;  // a reduce-scatter: half an all-reduce
    const Seconds reduce = ring(work.reduced_bytes) * half;
    const Seconds gather = layout.distributed_optimizer ? ring(work.gathered_bytes) * 0.5 : Seconds(0.0);
    const Seconds exposed = max(Seconds(0.0), reduce - work.backward) +
                            (layout.overlap_param_gather ? max(Seconds(0.0), gather - work.forward) : gather);
    const double share = whole.value > 0.0 ? std::min(1.0, exposed / whole) : 0.0;
    for (int s : stages)
      for (int layer = p.plan.stages[s].layers.begin; layer < p.plan.stages[s].layers.end; ++layer) {
        Bytes& bytes = p.profile.profile.layers[layer].param_bytes;
        bytes = Bytes(static_cast<int64_t>(static_cast<double>(bytes.value) * share));
      }
  }
}

// The tensor-parallel collectives of each F, B and I span as a span of their
// own (Stream::kTensorComm), as long as their sum over the stage's layers and
// drawn at the end of the compute span: in the run they are interleaved with
// the layers' kernels, two per layer and pass. The exposed context-parallel
// exchange likewise (Stream::kContextComm), drawn just before them, and the
// expert-parallel all-to-alls (Stream::kExpertComm) just before that, what an
// overlapped pair hides of them left out.
void add_tensor_spans(MegatronPrediction& p, const MegatronLayout& layout) {
  if (layout.tensor < 2 && layout.context < 2 && layout.expert_parallel < 2) return;
  // Each F, B and I span's collectives; an overlapped pair's all-to-alls
  // less what the pair hides of them (pair_hidden, on the plan's stage costs,
  // which only a plan with pairs needs).
  const std::vector<StageCost> costs =
      p.plan.has_pairs() ? stage_costs(p.profile.profile, p.plan, p.groups) : std::vector<StageCost>{};
  struct Drawn {
    Span span;
    Seconds comm, context, expert;
  };
  std::vector<Drawn> drawn;
  std::vector<int> open_pair(static_cast<size_t>(p.simulation.trace.workers.size()), -1);  // per worker: a first pass
  for (const Span& span : p.simulation.trace.spans) {
    const ActionKind kind = span.action.kind;
    if (span.stream != Stream::kCompute ||
        (kind != ActionKind::kForward && kind != ActionKind::kBackward && kind != ActionKind::kBackwardInput))
      continue;
    Drawn d{span, {}, {}, {}};
    const LayerRange range = p.plan.stages[span.action.stage].layers;
    for (int layer = range.begin; layer < range.end; ++layer) {
      const MegatronLayerTime& t = p.profile.times[layer];
      const bool recomputed = layout.recompute != Recompute::kNone && t.recompute.value > 0.0;
      if (kind == ActionKind::kForward) {
        d.comm += t.forward_comm;
        d.context += t.context_forward;
        d.expert += t.expert_forward;
      } else {
        d.comm +=
            t.backward_comm + (layout.recompute == Recompute::kFull && recomputed ? t.forward_comm : Seconds(0.0));
        d.context += t.context_backward + (recomputed ? t.context_forward : Seconds(0.0));
        d.expert += t.expert_backward + t.expert_recompute;
      }
    }
    const size_t worker = static_cast<size_t>(span.worker);
    if (worker < open_pair.size() && open_pair[worker] >= 0) {  // the second pass of a pair
      Drawn& first = drawn[static_cast<size_t>(open_pair[worker])];
      const PairHidden hidden = pair_hidden(costs[static_cast<size_t>(first.span.action.stage)], first.span.action.kind,
                                            costs[static_cast<size_t>(span.action.stage)], kind);
      first.expert = max(Seconds(0.0), first.expert - hidden.first);
      d.expert = max(Seconds(0.0), d.expert - hidden.second);
      open_pair[worker] = -1;
    }
    if (span.action.paired && worker < open_pair.size()) open_pair[worker] = static_cast<int>(drawn.size());
    drawn.push_back(d);
  }
  std::vector<Span> added;
  for (const Drawn& d : drawn) {
    const Span& span = d.span;
    if (d.comm.value > 0.0) {
      Span tensor = span;
      tensor.stream = Stream::kTensorComm;
      tensor.start = max(span.start, span.end - d.comm);
      added.push_back(tensor);
    }
    if (d.context.value > 0.0) {
      Span exchange = span;
      exchange.stream = Stream::kContextComm;
      exchange.end = max(span.start, span.end - d.comm);
      exchange.start = max(span.start, exchange.end - d.context);
      added.push_back(exchange);
    }
    if (d.expert.value > 0.0) {
      Span all_to_all = span;
      all_to_all.stream = Stream::kExpertComm;
      all_to_all.end = max(span.start, span.end - d.comm - d.context);
      all_to_all.start = max(span.start, all_to_all.end - d.expert);
      added.push_back(all_to_all);
    }
  }
  std::vector<Span>& spans = p.simulation.trace.spans;
  spans.insert(spans.end(), added.begin(), added.end());
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.worker != b.worker) return a.worker < b.worker;
    return a.action_index < b.action_index;
  });
}

}  // namespace

Result<MegatronProfile> megatron_profile_on(const GptModel& model, const MegatronLayout& layout,
                                            const Topology& topology, const GpuModel* gpu) {
  if (auto ok = check_megatron_layout(model, layout, topology.num_devices()); !ok) return ok.error();
  auto known = gpu ? Result<GpuModel>(*gpu) : gpu_model(topology.device.name);
  if (!known) return known.error();
  if (auto ok = check_fp8_gpu(model, *known); !ok) return ok.error();
  const int etp = layout.expert_tensor_parallel();
  if (etp != layout.tensor && !tensor_group_topology(topology, etp))
    return Error{
        fmt::format("--expert-tensor-parallel-size {} does not tile topology '{}': an expert's "
                    "tensor-parallel group must fill whole units of a level or divide it",
                    etp, topology.name)};
  return make_megatron_profile(model, layout, *known, tensor_allreduce(topology, layout.tensor),
                               embedding_allreduce(topology, layout), context_comm_time(topology, layout),
                               expert_dispatch_time(topology, model, layout), expert_gradient_weight(topology, layout),
                               etp != layout.tensor ? tensor_allreduce(topology, etp) : CollectiveTime{});
}

Result<MegatronPrediction> predict_megatron(const GptModel& model, const MegatronLayout& layout,
                                            const Topology& topology, bool record_trace, const GpuModel* gpu,
                                            bool with_fit_hints) {
  auto profile = megatron_profile_on(model, layout, topology, gpu);
  if (!profile) return profile.error();
  auto groups = tensor_group_topology(topology, layout.tensor);
  if (!groups) return groups.error();
  MegatronPrediction p;
  p.profile = std::move(*profile);
  p.groups = std::move(*groups);
  p.plan = megatron_plan(model, layout);
  if (layout.overlap_grad_reduce && layout.replicas() > 1) expose_overlapped_reduction(p, layout);
  SimOptions options;
  options.record_trace = record_trace;
  options.one_replica = true;   // without a trace: one data-parallel replica when they are interchangeable
  options.skip_repeats = true;  // and the steady state's repeats jumped over
  Program simulated;
  auto simulation =
      layout.zero_bubble_heuristic
          ? simulate_zb_heuristic(p, weight_pass_share(model, layout), layout.zero_bubble, options, &simulated)
          : simulate_plan(p.plan, p.profile.profile, p.groups, options, &simulated);
  if (!simulation) return simulation.error();
  p.simulation = std::move(*simulation);
  if (record_trace) add_tensor_spans(p, layout);
  p.iteration_time = p.simulation.metrics.iteration_time;
  p.throughput_samples_per_s = layout.global_batch / p.iteration_time.value;
  p.model_tflops_per_gpu = megatron_model_flops(model, layout) / (p.iteration_time.value * layout.gpus()) / 1e12;
  p.breakdown = breakdown_of(p, layout, p.groups);
  const std::vector<HeldPeak> held = held_peaks(p.plan, simulated, weight_pass_share(model, layout));
  p.memory = megatron_memory(model, layout, p.plan, p.profile, topology.device.memory, &held);
  if (!p.memory.fits() && with_fit_hints) {
    auto known = gpu ? Result<GpuModel>(*gpu) : gpu_model(topology.device.name);
    if (known) p.fit_hints = fit_hints(model, layout, topology, *known);
  }
  return p;
}

}  // namespace baton
