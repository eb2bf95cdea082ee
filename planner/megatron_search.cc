#include "planner/megatron_search.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace baton {

namespace {

std::vector<int> divisors(int64_t n, int64_t limit) {
  std::vector<int> out;
  for (int64_t k = 1; k <= std::min(n, limit); ++k)
    if (n % k == 0) out.push_back(static_cast<int>(k));
  return out;
}

template <typename T>
std::vector<T> pinned_or(const std::optional<T>& pin, std::vector<T> all) {
  return pin ? std::vector<T>{*pin} : all;
}

// How the blocks are cut into stages and which schedule runs them: chunks of
// `per` blocks (interleaved), two chunks per GPU in a V (ZB-V, DualPipeV), or
// one chunk per GPU on 1F1B, ZB-H1 or ZB-H2, with an even split or one or two
// fewer blocks on the first and the last stage; `accounted`: interleaved or V
// chunks of counted layers, the embedding and the loss counted as layers of
// the split (--account-for-embedding/loss-in-pipeline-split), so the first
// and last chunk hold a block fewer.
struct PipelineShape {
  int per = 0;
  int zero_bubble = 0;
  int first = 0;
  int last = 0;
  bool accounted = false;
  VSchedule v = VSchedule::kNone;
};

// The splits of L blocks on p stages: even when p divides L, and with k_f in
// {0, 1, 2} and k_l in {0, ..., 2 + 2D} blocks fewer on the first and last
// stages than the m = (L + k_f + k_l) / p of the others (D multi-token
// prediction depths on the last stage, each a block and an output layer
// more: DeepSeek-V3's output layer takes about a block's time); each split
// once (with p = 2 one block fewer on the first stage is one more on the
// last: the flags first found are kept).
std::vector<std::pair<int, int>> stage_splits(const GptModel& model, int p, const MegatronAxes& fixed) {
  const int64_t layers = model.layers;
  const int64_t most_last = 2 + 2 * model.mtp_layers;
  if (fixed.stage_layers) return {*fixed.stage_layers};
  std::vector<std::pair<int, int>> splits;
  std::vector<std::tuple<int, int, int>> blocks;  // first, middle (none with p = 2), last
  if (layers % p == 0) {
    splits.emplace_back(0, 0);
    const int m = static_cast<int>(layers / p);
    blocks.emplace_back(m, p > 2 ? m : 0, m);
  }
  for (int kf = 0; kf <= 2 && p >= 2; ++kf)
    for (int kl = 0; kl <= most_last; ++kl) {
      if ((kf == 0 && kl == 0) || (layers + kf + kl) % p != 0) continue;
      const int m = static_cast<int>((layers + kf + kl) / p);
      if (m - kf < 1 || m - kl < 1) continue;
      const std::tuple<int, int, int> split{m - kf, p > 2 ? m : 0, m - kl};
      if (std::find(blocks.begin(), blocks.end(), split) != blocks.end()) continue;
      blocks.push_back(split);
      splits.emplace_back(kf > 0 ? m - kf : 0, kl > 0 ? m - kl : 0);
    }
  return splits;
}

// The V shapes: 2p chunks over the L blocks or the L + 2 counted layers
// (chunks of two or more then, so that the first and last keep a block), when
// the m microbatches fill the V. ZB-V unless DualPipeV is pinned: the search
// emits launch flags, and no Megatron-LM runs DualPipeV.
void add_v_shapes(std::vector<PipelineShape>& shapes, const GptModel& model, int p, int m, const MegatronAxes& fixed) {
  const bool pinned_other = (fixed.zero_bubble && *fixed.zero_bubble != 0) ||
                            (fixed.layers_per_virtual_stage && *fixed.layers_per_virtual_stage != 0) ||
                            (fixed.stage_layers && *fixed.stage_layers != std::pair<int, int>{0, 0});
  if (p < 2 || m < 2 * p || pinned_other) return;
  for (VSchedule v : pinned_or(fixed.v_schedule, {VSchedule::kZbV})) {
    if (v == VSchedule::kNone) continue;
    for (const bool accounted : {false, true}) {
      const int64_t layers = model.layers + (accounted ? 2 : 0);
      if (layers % (2 * p) == 0 && (!accounted || layers / (2 * p) >= 2))
        shapes.push_back(PipelineShape{0, 0, 0, 0, accounted, v});
    }
  }
}

std::vector<PipelineShape> pipeline_shapes(const GptModel& model, int p, int m, const MegatronAxes& fixed) {
  std::vector<PipelineShape> shapes;
  add_v_shapes(shapes, model, p, m, fixed);
  if (fixed.v_schedule && *fixed.v_schedule != VSchedule::kNone) return shapes;
  const std::vector<int> schedules = p >= 2 ? std::vector<int>{0, 1, 2} : std::vector<int>{0};
  for (int zb : pinned_or(fixed.zero_bubble, schedules))
    for (const auto& [first, last] : stage_splits(model, p, fixed))
      if (!fixed.layers_per_virtual_stage || *fixed.layers_per_virtual_stage == 0)
        shapes.push_back(PipelineShape{0, zb, first, last});
  if (p < 2 || m % p != 0 || (fixed.zero_bubble && *fixed.zero_bubble != 0) ||
      (fixed.stage_layers && *fixed.stage_layers != std::pair<int, int>{0, 0}))
    return shapes;
  // Interleaved chunks over the L blocks, or over L + 2 counted layers.
  for (const bool accounted : {false, true}) {
    const int64_t layers = model.layers + (accounted ? 2 : 0);
    if (layers % p != 0) continue;
    for (int per : pinned_or(fixed.layers_per_virtual_stage, divisors(layers / p, layers / p / 2)))
      if (per > 0) shapes.push_back(PipelineShape{per, 0, 0, 0, accounted});
  }
  return shapes;
}

// With d pinned and no GPU count, a layout may use any t p c d GPUs within
// the topology; otherwise exactly the GPU count (see megatron_search.h).
bool any_count_within(const MegatronAxes& fixed) { return fixed.data && !fixed.gpus; }

// The context-parallel sizes for `ranks` GPUs per tensor x pipeline layout
// (see megatron_search.h).
constexpr int kMostSearchedContext = 64;
std::vector<int> context_sizes(const GptModel& model, int ranks, const MegatronAxes& fixed) {
  if (fixed.context) return {*fixed.context};
  std::vector<int> sizes = {1};
  if (!model.flash_attention || model.mla) return sizes;  // multi-latent attention: not with c > 1
  for (int c = 2; c <= std::min(ranks, kMostSearchedContext); c *= 2)
    if (ranks % c == 0 && model.sequence % (2 * c) == 0) sizes.push_back(c);
  return sizes;
}

// How c > 1 ranks move the keys and values: every --cp-comm-type baton
// models, or the pinned one.
std::vector<ContextComm> context_comms(int c, const MegatronAxes& fixed) {
  if (c < 2) return {ContextComm::kP2P};
  return pinned_or(fixed.context_comm, {ContextComm::kP2P, ContextComm::kAllGather, ContextComm::kAllToAll});
}

// The expert-tensor-parallel sizes for tensor parallelism t (see
// megatron_search.h): t (0: the default) and, with t > 1, 1 (whole experts
// on each GPU), or the pinned one; 0 alone for a dense model.
std::vector<int> expert_tensor_sizes(const GptModel& model, int t, const MegatronAxes& fixed) {
  if (fixed.expert_tensor) return {*fixed.expert_tensor};
  if (!model.moe() || t == 1) return {0};
  return {0, 1};
}

// The MoE token dispatchers (with experts): allgather and alltoall, or the
// pinned one (flex, DeepEP's, only pinned: it needs the library installed);
// the default alone for a dense model.
std::vector<MoeDispatcher> moe_dispatchers(const GptModel& model, const MegatronAxes& fixed) {
  if (!model.moe()) return {MoeDispatcher::kAllGather};
  return pinned_or(fixed.moe_dispatcher, {MoeDispatcher::kAllGather, MoeDispatcher::kAllToAll});
}

// The expert-parallel sizes for a pipeline rank's `gpus` = t c d GPUs and
// expert tensor parallelism etp (see megatron_search.h): the divisors of
// t c d / etp that divide E; 1 for a dense model.
std::vector<int> expert_sizes(const GptModel& model, int gpus, int etp, const MegatronAxes& fixed) {
  if (fixed.expert_parallel) return {*fixed.expert_parallel};
  if (!model.moe() || gpus % etp != 0) return {1};
  std::vector<int> sizes;
  for (int ep : divisors(gpus / etp, gpus / etp))
    if (model.experts % ep == 0) sizes.push_back(ep);
  return sizes;
}

// Every layout the search considers (see megatron_search.h).
std::vector<MegatronLayout> enumerate(const GptModel& model, int global_batch, bool bf16, const MegatronAxes& fixed,
                                      const Topology& topology) {
  const int devices = topology.num_devices();
  const int gpus = fixed.gpus.value_or(devices);
  const bool within = any_count_within(fixed);
  const int inner = topology.levels.front().size;
  std::vector<MegatronLayout> out;
  for (int t : pinned_or(fixed.tensor, divisors(model.heads, inner))) {
    if (inner % t != 0 && !fixed.tensor) continue;
    std::vector<int> ps;
    if (within)
      for (int64_t p = 1; p <= model.layers; ++p) ps.push_back(static_cast<int>(p));
    else
      ps = divisors(gpus / t, model.layers);
    for (int p : pinned_or(fixed.pipeline, ps))
      for (int c : context_sizes(model, within ? devices / (t * p * *fixed.data) : gpus / (t * p), fixed)) {
        if (c < 1 || (!within && gpus % (t * p * c) != 0)) continue;
        const int d = within ? *fixed.data : gpus / (t * p * c);
        if (d < 1 || int64_t{t} * p * c * d > devices || (fixed.data && d != *fixed.data)) continue;
        if (global_batch % d != 0) continue;
        for (int b : pinned_or(fixed.micro_batch, divisors(global_batch / d, 16)))
          for (const PipelineShape& shape : pipeline_shapes(model, p, global_batch / (b * d), fixed))
            for (Recompute r : pinned_or(fixed.recompute, {Recompute::kNone, Recompute::kSelective, Recompute::kFull}))
              for (bool sp : pinned_or(fixed.sequence_parallel,
                                       t > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}))
                for (bool dist : pinned_or(fixed.distributed_optimizer,
                                           d * c > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})) {
                  MegatronLayout l = megatron_layout(t, p, d, b, global_batch);
                  l.layers_per_virtual_stage = shape.per;
                  l.zero_bubble = shape.zero_bubble;
                  l.first_stage_layers = shape.first;
                  l.last_stage_layers = shape.last;
                  l.embedding_in_split = l.loss_in_split = shape.accounted;
                  l.v_schedule = shape.v;
                  l.recompute = r;
                  l.sequence_parallel = sp;
                  l.distributed_optimizer = dist;
                  l.overlap_grad_reduce = fixed.overlap_grad_reduce;
                  l.grad_reduce_in_bf16 = fixed.grad_reduce_in_bf16;
                  l.overlap_param_gather = fixed.overlap_param_gather && dist;
                  l.tp_comm_overlap = fixed.tp_comm_overlap && sp;
                  l.context = c;
                  l.bf16 = bf16;
                  for (ContextComm comm : context_comms(c, fixed))
                    for (int etp : expert_tensor_sizes(model, t, fixed))
                      for (int ep : expert_sizes(model, t * d * c, etp > 0 ? etp : t, fixed))
                        for (MoeDispatcher dispatcher : moe_dispatchers(model, fixed)) {
                          l.context_comm = comm;
                          l.expert_tensor = etp;
                          l.expert_parallel = ep;
                          l.moe_dispatcher = dispatcher;
                          l.moe_shared_expert_overlap = fixed.shared_expert_overlap &&
                                                        sends_to_expert_ranks(dispatcher) &&
                                                        model.shared_expert_ffn > 0;
                          l.overlap_moe_ep_comm = fixed.overlap_moe_ep_comm && sends_to_expert_ranks(dispatcher) &&
                                                  ep > 1 && l.v_schedule == VSchedule::kNone && l.zero_bubble == 0 &&
                                                  (p == 1 || l.virtual_stages(model) > 1) &&
                                                  l.recompute != Recompute::kFull;
                          l.delay_wgrad_compute = fixed.delay_wgrad_compute && l.overlap_moe_ep_comm;
                          if (check_megatron_layout(model, l, gpus)) out.push_back(l);
                        }
                }
      }
  }
  return out;
}

// Compute, tensor-, context- and expert-parallel communication and
// recomputation of the busiest pipeline rank over the iteration: no schedule
// hides them, but DualPipeV's pairs and --overlap-moe-expert-parallel-comm's
// hide the all-to-alls (sim/program.h), left out of its bound.
Seconds lower_bound(const MegatronProfile& profile, const Plan& plan, const MegatronLayout& layout) {
  Seconds worst;
  const bool pairs_hide = layout.v_schedule == VSchedule::kDualPipeV || layout.overlap_moe_ep_comm;
  for (int rank = 0; rank < layout.pipeline; ++rank) {
    const MegatronRankWork work = megatron_rank_work(profile, plan, rank);
    const Seconds hidden = pairs_hide ? work.expert_comm + work.expert_recompute : Seconds(0.0);
    worst =
        max(worst, (work.compute + work.tensor_comm + work.context_comm + work.expert_comm + work.recompute - hidden) *
                       layout.microbatches());
  }
  return worst;
}

using FamilyMap = std::map<std::pair<int, int>, MegatronFamily>;

MegatronFamily& family_of(FamilyMap& families, const MegatronLayout& l) {
  MegatronFamily& family = families[{l.tensor, l.pipeline}];
  family.tensor = l.tensor;
  family.pipeline = l.pipeline;
  return family;
}

// Every enumerated layout's memory; those that fit, with their lower bounds.
std::vector<MegatronCandidate> fitting_layouts(const GptModel& model, int global_batch, bool bf16,
                                               const MegatronAxes& fixed, const Topology& topology, const GpuModel& gpu,
                                               MegatronSearchResult& result, FamilyMap& families) {
  std::vector<MegatronCandidate> fitting;
  // (p, chunks, m, schedule, share, blocks of each chunk)
  std::map<std::tuple<int, int, int, Schedule, bool, double, std::vector<int>>, std::vector<HeldPeak>> held;
  std::map<int, CollectiveTime> collectives;                                   // per t
  std::map<std::tuple<int, int, ContextComm>, CollectiveTime> context_comms;   // per t, c and type
  std::map<std::tuple<int, int, MoeDispatcher>, CollectiveTime> expert_comms;  // per etp, ep and dispatcher
  const CollectiveTime no_collective;
  auto tensor_collective = [&](int size) -> const CollectiveTime& {
    auto found = collectives.find(size);
    if (found == collectives.end()) found = collectives.emplace(size, tensor_allreduce(topology, size)).first;
    return found->second;
  };
  for (const MegatronLayout& layout : enumerate(model, global_batch, bf16, fixed, topology)) {
    ++result.enumerated;
    MegatronFamily& family = family_of(families, layout);
    ++family.enumerated;
    const CollectiveTime& collective = tensor_collective(layout.tensor);
    const int etp = layout.expert_tensor_parallel();
    const CollectiveTime& expert_tensor = etp != layout.tensor ? tensor_collective(etp) : no_collective;
    const auto comm_key = std::make_tuple(layout.tensor, layout.context, layout.context_comm);
    auto context = context_comms.find(comm_key);
    if (context == context_comms.end())
      context = context_comms.emplace(comm_key, context_comm_time(topology, layout)).first;
    const auto expert_key = std::make_tuple(etp, layout.expert_parallel, layout.moe_dispatcher);
    auto expert = expert_comms.find(expert_key);
    if (expert == expert_comms.end())
      expert = expert_comms.emplace(expert_key, expert_dispatch_time(topology, model, layout)).first;
    // The lower bound and the memory need no gradient reduction: weight 1.
    const MegatronProfile profile =
        make_megatron_profile(model, layout, gpu, collective, {}, context->second, expert->second, 1.0, expert_tensor);
    const Plan plan = megatron_plan(model, layout);
    const double share = weight_pass_share(model, layout);
    // The held activations count each chunk's blocks: the split is part of
    // the key; so is the pairing, whose warm-up holds one microbatch more.
    const auto key = std::make_tuple(layout.pipeline, layout.virtual_stages(model), layout.microbatches(),
                                     plan.schedule, plan.paired_steady_state, share, layout.stage_layers(model));
    auto found = held.find(key);
    if (found == held.end()) found = held.emplace(key, held_peaks(plan, share)).first;
    const MegatronMemory memory = megatron_memory(model, layout, plan, profile, topology.device.memory, &found->second);
    const Bytes peak = memory.peak();
    if (!memory.fits()) {
      ++result.not_fitting;
      ++family.not_fitting;
      if (family.least_peak.value == 0 || peak < family.least_peak) family.least_peak = peak;
      continue;
    }
    MegatronCandidate candidate;
    candidate.layout = layout;
    candidate.lower_bound = lower_bound(profile, plan, layout);
    candidate.peak_memory = peak;
    if (family.best_bound.value == 0 || candidate.lower_bound < family.best_bound)
      family.best_bound = candidate.lower_bound;
    fitting.push_back(candidate);
  }
  return fitting;
}

// Why a family got no simulation (none fit, or no bound could beat the best),
// and the tensor sizes the search leaves out.
void close_families(FamilyMap& families, MegatronSearchResult& result, const GptModel& model, const MegatronAxes& fixed,
                    const Topology& topology) {
  const Seconds best = result.best.empty() ? Seconds(0.0) : result.best.back().iteration_time;
  for (auto& [key, family] : families) {
    if (family.simulated > 0) continue;
    if (family.not_fitting == family.enumerated)
      family.reason = fmt::format("does not fit: the least peak is {:.1f} GiB of {:.3g} GiB", family.least_peak.gib(),
                                  topology.device.memory.gib());
    else
      family.reason = fmt::format("its best lower bound, {:.3f} s, cannot beat the kept layouts (up to {:.3f} s)",
                                  family.best_bound.value, best.value);
  }
  const int inner = topology.levels.front().size;
  if (!fixed.tensor)
    for (int t : divisors(model.heads, topology.num_devices()))
      if (inner % t != 0 && topology.num_devices() % t == 0)
        families[{t, 0}] =
            MegatronFamily{t,
                           0,
                           0,
                           0,
                           0,
                           0,
                           {},
                           {},
                           {},
                           t > inner ? fmt::format("tensor parallelism across servers ({} GPUs per server)", inner)
                                     : fmt::format("tensor groups that do not divide a server's {} GPUs", inner)};
  for (auto& [key, family] : families) result.families.push_back(family);
}

// Why no layout was enumerated, and the largest GPU count below this one
// that has one under the same pins (a count that factors with the batch and
// the layers), with the t, p, d of its layout of most model parallelism.
std::string no_layout_message(const GptModel& model, int global_batch, bool bf16, const MegatronAxes& fixed,
                              const Topology& topology) {
  const int gpus = fixed.gpus.value_or(topology.num_devices());
  const bool within = any_count_within(fixed);
  std::string message = within
                            ? fmt::format("no layout with d {} on at most {} GPUs", *fixed.data, topology.num_devices())
                            : fmt::format("no layout uses {} GPUs", gpus);
  message += fmt::format(
      " under the flags given: d must divide the global batch {}, p split the {} layers (evenly, or with the "
      "first and last stages one or two blocks fewer) and t divide the {} heads and a server's {} GPUs",
      global_batch, model.layers, model.heads, topology.levels.front().size);
  if (within) return message;
  MegatronAxes fewer = fixed;
  for (int count = gpus - 1; count >= 1; --count) {
    fewer.gpus = count;
    const std::vector<MegatronLayout> layouts = enumerate(model, global_batch, bf16, fewer, topology);
    if (layouts.empty()) continue;
    // The example with the most model parallelism: the likeliest to fit.
    const MegatronLayout& l =
        *std::max_element(layouts.begin(), layouts.end(), [](const MegatronLayout& a, const MegatronLayout& b) {
          return std::make_pair(a.tensor * a.pipeline, a.tensor) < std::make_pair(b.tensor * b.pipeline, b.tensor);
        });
    return message + fmt::format("; the most GPUs that have one: --gpus {} (for example t {}, p {}, d {})", count,
                                 l.tensor, l.pipeline, l.data);
  }
  return message;
}

}  // namespace

Result<MegatronSearchResult> search_megatron_layouts(const GptModel& model, int global_batch, bool bf16,
                                                     const MegatronAxes& fixed, const Topology& topology, int keep) {
  if (fixed.gpus && (*fixed.gpus < 1 || *fixed.gpus > topology.num_devices()))
    return Error{fmt::format("the layout's {} GPUs: the topology {} has {}", *fixed.gpus, topology.name,
                             topology.num_devices())};
  if (fixed.overlap_param_gather && !fixed.overlap_grad_reduce) return Error{kOverlapParamGatherNeedsGradReduce};
  const auto start = std::chrono::steady_clock::now();
  auto gpu = gpu_model(topology.device.name);
  if (!gpu) return gpu.error();
  if (auto ok = check_fp8_gpu(model, *gpu); !ok) return ok.error();
  MegatronSearchResult result;
  FamilyMap families;
  std::vector<MegatronCandidate> fitting =
      fitting_layouts(model, global_batch, bf16, fixed, topology, *gpu, result, families);
  if (result.enumerated == 0) return Error{no_layout_message(model, global_batch, bf16, fixed, topology)};
  if (fitting.empty()) {
    Bytes least;
    for (const auto& [key, family] : families)
      if (family.not_fitting > 0 && (least.value == 0 || family.least_peak < least)) least = family.least_peak;
    return Error{fmt::format(
        "no layout of the {} enumerated fits the {:.3g} GiB of one {}: the least peak of any is {:.1f} GiB, so a "
        "device of at least that much memory would fit one (or more GPUs, a smaller batch or model)",
        result.enumerated, topology.device.memory.gib(), topology.device.name, least.gib())};
  }
  std::stable_sort(fitting.begin(), fitting.end(), [](const MegatronCandidate& a, const MegatronCandidate& b) {
    return a.lower_bound < b.lower_bound;
  });
  for (MegatronCandidate& candidate : fitting) {
    MegatronFamily& family = family_of(families, candidate.layout);
    // The keep-th best time so far: a bound no better cannot enter the list.
    if (static_cast<int>(result.best.size()) >= keep && candidate.lower_bound >= result.best.back().iteration_time) {
      ++result.pruned;
      ++family.pruned;
      continue;
    }
    auto prediction = predict_megatron(model, candidate.layout, topology, false, &*gpu);
    if (!prediction) return prediction.error();
    ++result.simulated;
    ++family.simulated;
    candidate.iteration_time = prediction->iteration_time;
    candidate.model_tflops_per_gpu = prediction->model_tflops_per_gpu;
    if (family.best_time.value == 0 || candidate.iteration_time < family.best_time)
      family.best_time = candidate.iteration_time;
    result.best.push_back(candidate);
    std::stable_sort(
        result.best.begin(), result.best.end(),
        [](const MegatronCandidate& a, const MegatronCandidate& b) { return a.iteration_time < b.iteration_time; });
    if (static_cast<int>(result.best.size()) > keep) result.best.pop_back();
  }
  close_families(families, result, model, fixed, topology);
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace baton
