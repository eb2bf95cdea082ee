// Choosing a Megatron layout: tensor x pipeline x data parallelism,
// micro-batch, interleaving, recomputation, sequence parallelism and the
// distributed optimizer for a GPT model at a global batch on a topology.
//
// The search is exact over the layouts it enumerates:
//   t: a divisor of the heads that divides the topology's innermost level
//      (tensor parallelism inside a server);
//   p: a divisor of the GPUs / t up to the layers;
//   c (context parallel): 1, and for a model with FlashAttention's core (and
//      without multi-latent attention, not modelled with c > 1) every
//      power of two up to 64 that divides the GPUs / (t p) and halves each
//      sequence's 2c chunks evenly (s divisible by 2c), each with the
//      --cp-comm-type p2p, all_gather and (heads and key-value groups per
//      rank divisible by c) a2a;
//   etp (expert tensor parallel, for a model with experts): t, and 1 when
//      t > 1 (the experts whole on each GPU);
//   ep (expert parallel, for a model with experts): every divisor of the
//      experts that divides t c d / etp (d c with etp = t);
//   d = GPUs / (t p c), where GPUs is every GPU of the topology, or
//      MegatronAxes::gpus of them; with d pinned (and no GPU count), any p up
//      to the layers with t p c d within the topology: the layout runs on the
//      first t p c d GPUs, as simulate runs a layout of fewer GPUs than the
//      topology has;
//   the split of the blocks: even (p dividing L), or (without interleaving)
//      one or two blocks fewer on the first and/or the last stage (on the
//      last up to 2 + 2D with D multi-token prediction depths there), the
//      others an equal share (Megatron-core's uneven pipeline);
//   b: a divisor of B / d up to 16;
//   interleaving: none, or every layers-per-virtual-stage giving >= 2 chunks
//      (p >= 2, microbatches a multiple of p), over the L blocks (p dividing
//      L) or over L + 2 layers with the embedding and the loss counted as
//      layers of the split (p dividing L + 2; the first and last chunk one
//      block fewer: Megatron-core's --account-for-embedding-in-pipeline-split
//      and --account-for-loss-in-pipeline-split);
//   without interleaving and with p >= 2, the schedule: 1F1B, ZB-H1 or ZB-H2;
//   recomputation none, selective, full; sequence parallelism (t > 1) or not;
//   the distributed optimizer (d > 1) or not; the overlaps asked for
//      (MegatronAxes: not searched, each on the layouts it applies to);
// a flag given in MegatronSearch::fixed pins that axis. Every layout that
// fits the device memory (sim/megatron_sim.h) gets a lower bound on its
// iteration time: its busiest pipeline rank's compute, tensor-, context- and
// expert-parallel communication and recomputation, which no schedule hides; layouts are
// simulated in the order of their bounds, and one whose bound is no better
// than the best simulated time so far cannot win and is not simulated. Every
// reported time is the simulator's (predict_megatron).
// Thread safety: pure.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/megatron_sim.h"

namespace baton {

struct MegatronAxes {  // a set field pins its axis
  std::optional<int> tensor, pipeline, micro_batch, layers_per_virtual_stage;
  std::optional<int> data;                      // d
  std::optional<int> context;                   // c (context parallel)
  std::optional<ContextComm> context_comm;      // its --cp-comm-type (with c > 1)
  std::optional<int> expert_parallel;           // ep (with experts)
  std::optional<int> expert_tensor;             // etp (with experts; default: searched, 1 or t)
  std::optional<MoeDispatcher> moe_dispatcher;  // with experts; default: both searched
  std::optional<int> gpus;              // t p c d: this many of the topology's GPUs (the first ones); default all
  std::optional<int> zero_bubble;       // MegatronLayout::zero_bubble: 0, 1 (ZB-H1), 2 (ZB-H2)
  std::optional<VSchedule> v_schedule;  // MegatronLayout::v_schedule (kNone: no V)
  std::optional<std::pair<int, int>> stage_layers;  // first and last stage's blocks, (0, 0) even
  std::optional<Recompute> recompute;
  std::optional<bool> sequence_parallel, distributed_optimizer;
  // Overlaps asked for, not searched: --overlap-grad-reduce on every layout,
  // --overlap-param-gather on those with the distributed optimizer (with
  // --overlap-grad-reduce, as Megatron asks), --tp-comm-overlap on those
  // with sequence parallelism.
  bool overlap_grad_reduce = false, overlap_param_gather = false, tp_comm_overlap = false;
  bool grad_reduce_in_bf16 = false;  // --grad-reduce-in-bf16, on every layout (with bf16)
  // --moe-shared-expert-overlap, on the layouts with the alltoall dispatcher
  // (with a shared expert).
  bool shared_expert_overlap = false;
  // --overlap-moe-expert-parallel-comm, on the interleaved alltoall layouts
  // with ep >= 2 and without full recomputation (MegatronLayout).
  bool overlap_moe_ep_comm = false;
  // --delay-wgrad-compute, on the layouts with the one above.
  bool delay_wgrad_compute = false;
};

struct MegatronCandidate {
  MegatronLayout layout;
  Seconds lower_bound;
  Seconds iteration_time;  // simulated (only simulated candidates are reported)
  double model_tflops_per_gpu = 0.0;
  Bytes peak_memory;
};

// What became of the layouts of one tensor x pipeline size (a family): the
// fastest simulated, or why none was simulated.
struct MegatronFamily {
  int tensor = 0;
  int pipeline = 0;  // 0: every p (a tensor size the search does not enumerate)
  int enumerated = 0;
  int not_fitting = 0;
  int pruned = 0;
  int simulated = 0;
  Bytes least_peak;    // the least peak memory among those that do not fit
  Seconds best_bound;  // the lowest lower bound among those that fit
  Seconds best_time;   // the fastest simulated (when any was)
  std::string reason;  // why none was simulated; empty when one was
};

struct MegatronSearchResult {
  std::vector<MegatronCandidate> best;   // simulated, fastest first (at most `keep`)
  std::vector<MegatronFamily> families;  // by t, then p
  int enumerated = 0;
  int not_fitting = 0;
  int pruned = 0;  // fit, but their bound was no better than the best time
  int simulated = 0;
  double wall_seconds = 0.0;
};

// Searches the layouts for `model` at `global_batch` on `topology` (bf16 if
// `bf16`); keeps the `keep` fastest. Errors: no layout exists for the GPU
// count (d must divide the batch and p split the layers; the message names
// the largest count below it that has one), none fits, the pinned GPU count
// is more than the topology has, or the topology's GPU is unknown.
Result<MegatronSearchResult> search_megatron_layouts(const GptModel& model, int global_batch, bool bf16,
                                                     const MegatronAxes& fixed, const Topology& topology, int keep = 5);

}  // namespace baton
