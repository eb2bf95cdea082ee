// Predicting one Megatron GPT training iteration on a topology: the profile of
// sim/megatron_profile.h simulated by the engine, with the layout's memory.
//
// The simulator's devices are whole tensor-parallel groups ("TP groups"): a
// group of t consecutive GPUs runs one pipeline rank's replica, its layers'
// times are those of one of its GPUs (they run in lock step), and its links
// are the t GPUs' links together (tensor_group_topology). Ranks are placed as
// Megatron places them: data-parallel replicas of one pipeline rank on
// consecutive groups (with context parallelism d c replicas, the c
// context-parallel ranks of each data-parallel rank consecutive), the
// pipeline ranks after one another. The tensor-
// parallel collectives are charged inside each layer's compute (on the
// innermost levels the t GPUs span, by sim/network.h's all-reduce); the
// trace adds them as spans of their own (Stream::kTensorComm) at the end of
// each F, B and I block, which Perfetto shows on a track of their own and the
// Gantt chart as a dark strip along the block; the layers' descriptions give
// them apart too. The exposed context-parallel exchange likewise
// (Stream::kContextComm, an orange strip just before them), and the
// expert-parallel all-to-alls (Stream::kExpertComm, a purple strip before
// that).
//
// Memory per GPU of pipeline rank r (Korthikanti et al. 2022, eqs. 1-6):
//   weights and optimizer: its parameters (with p > 1 the last rank's
//     include its copy of the word embedding, or the untied output layer) x (2 weights + g gradients + 12
//     fp32 master weights and Adam moments), g = 2 in fp16, 4 in bf16; with
//     the distributed optimizer the 12 are divided by d (d c with context
//     parallelism, whose ranks shard it too; d c / ep for the experts'
//     parameters, which only the ranks holding the same experts share);
//     with FP8 2 more for each weight of a block (its FP8 copy and
//     transpose, sim/megatron_fp8.h), none with --fp8-param-gather (the FP8
//     weight and its transpose in place of the bf16 one);
//   activations per layer and microbatch (bytes), s b h x
//     none:      10 + 24 / t + 5 a s / (h t)     (34 / t + 5 a s / (h t) with sequence parallelism)
//     selective: 10 + 24 / t                    (34 / t)
//     full:      2, the layer's input (2 / t), plus one layer's "none"
//                working set during its backward (uniform groups of N: 2 / N
//                a block, and N layers' working set; the block method: the
//                first N blocks of each chunk 2, the others "none");
//   with FP8 (sim/megatron_fp8.h) the linears' inputs are kept in FP8, a
//   byte a value: the QKV's and the MLP's (10 becomes 8), the projection's
//   and the second MLP GEMM's (24 becomes 19);
//   for a model beyond GPT-3's the 24 is 4 + 4 G / a + 4 f / h (6 f / h with
//   SwiGLU, 8 f / h with --no-bias-swiglu-fusion), and FlashAttention keeps 4 a / (h t) (its fp32 softmax
//   statistics) where the scores took 5 a s / (h t), selective or not;
//   with experts the MLP's terms are k copies' of width F, plus the experts'
//   gathered input 2 k and the router's probabilities 4 E / (h t)
//   (megatron_sim.cc's block_activation_bytes has the terms);
//   times the microbatches in flight on the rank at the worst moment, counted
//   chunk by chunk from the schedule's Program (with ZB-H1 and ZB-H2 a
//   microbatch whose I pass has run keeps what its W pass needs, (8 + 24 / t)
//   s b h for GPT, until the W runs); plus on the last rank the fp32 logits of one
//   microbatch twice (s b V / t x 4 x 2; with Transformer Engine's fused
//   cross entropy the half-precision logits once, x 2, their gradient written
//   in their place); with the allgather MoE dispatcher
//   on a rank with MoE blocks, the G = etp ep GPUs' gathered tokens in
//   Megatron's global buffer, G s b / t h x 2 bytes, and the larger of the
//   logits and the combine's unpermuted outputs with their fp32 copy (G s b
//   / t h x 6). With context parallelism every s above is the rank's s / c
//   tokens.
// The schedule is 1F1B, Megatron's interleaved 1F1B, with zero_bubble ZB-H1
// or ZB-H2, or with v_schedule ZB-V or DualPipeV (sim/schedules.h); the
// zero-bubble and V schedules run the profile's I and W halves.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/gpu_model.h"
#include "sim/megatron.h"
#include "sim/megatron_profile.h"
#include "sim/plan.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace baton {

// The topology whose devices are groups of `tensor` consecutive GPUs of
// `topology`. Error: t that neither divides a level's size nor is a multiple
// of the levels it spans.
Result<Topology> tensor_group_topology(const Topology& topology, int tensor);

// The plan of a layout: S = p v stages (chunks) of L / (p v) blocks, the
// embedding on the first and the head on the last, d c replicas each, on the
// TP groups as Megatron places them (chunk s on rank s mod p; with a V, on
// rank s for s < p and 2p - 1 - s after); schedule 1f1b, interleaved-1f1b,
// zb-h1, zb-h2, zbv or dualpipev.
Plan megatron_plan(const GptModel& model, const MegatronLayout& layout);

// One pipeline rank's share of a profile, summed over the layers of its
// stages: what every caller that asks "how much does rank r do" adds up.
struct MegatronRankWork {
  Seconds compute;                 // per microbatch: GEMMs and memory-bound kernels, forward and backward
  Seconds tensor_comm;             // per microbatch: exposed tensor-parallel collectives
  Seconds context_comm;            // per microbatch: the exposed context-parallel exchange
  Seconds expert_comm;             // per microbatch: the expert-parallel all-to-alls
  Seconds recompute;               // per microbatch
  Seconds expert_recompute;        // per microbatch: of it, the recomputed forward's all-to-alls
  Seconds host;                    // per microbatch: waiting for the host (dispatch, work per pass)
  Seconds forward;                 // per microbatch: the profile layers' forward
  Seconds backward;                // per microbatch: the profile layers' backward
  Seconds optimizer;               // one optimizer step
  Seconds embedding_allreduce;     // once: the tied word embedding's, before the step (first and last rank, p > 1)
  Bytes gradients;                 // what the replicas all-reduce (Layer::param_bytes)
  double reduced_bytes = 0.0;      // of it, the gradients reduced (MegatronLayerTime::reduced_bytes)
  double gathered_bytes = 0.0;     // and the weights all-gathered (distributed optimizer)
  double parameters = 0.0;         // of one GPU
  double fp8_parameters = 0.0;     // of them, also cached in FP8 (value and transpose)
  double expert_parameters = 0.0;  // of them, the experts'
};
MegatronRankWork megatron_rank_work(const MegatronProfile& profile, const Plan& plan, int rank);

// The tensor-parallel all-reduce among the first `tensor` GPUs of `topology`
// (sim/network.h's ring), as make_megatron_profile takes it.
CollectiveTime tensor_allreduce(const Topology& topology, int tensor);

// The embedding group's all-reduce (make_megatron_profile): the first
// pipeline stage's GPU 0 with the last stage's GPU 0, (p - 1) t d GPUs
// further (sim/network.h's ring of two; every other pair runs on links of its
// own, one rail each across servers). Zero with p = 1.
CollectiveTime embedding_allreduce(const Topology& topology, const MegatronLayout& layout);

// Context parallelism's collective (make_megatron_profile's `context_comm`)
// among the c ranks of one data-parallel rank, t GPUs apart (the t GPUs of a
// rank each on links of their own: one rail across servers), for `bytes` per
// GPU: with p2p one step of the ring, the slowest hop of GPU 0 of rank j to
// GPU 0 of rank j + 1 (mod c) (sim/network.h's transfer); with all_gather the
// all-gather in which each GPU gives `bytes` (on sim/network.h's ring: half
// an all-reduce of the c `bytes` gathered), with a2a the all-to-all in which
// each holds `bytes` (Network::all_to_all_time). Empty with c = 1.
CollectiveTime context_comm_time(const Topology& topology, const MegatronLayout& layout);
// Expert parallelism's all-to-all (make_megatron_profile's `expert_comm`)
// among the ep ranks of one expert-parallel group, etp GPUs apart (GPU 0 of
// each expert-tensor-parallel group, t GPUs apart with etp = t: the etp GPUs
// of a rank each on links of their own), in which each GPU holds `bytes`
// (Network::all_to_all_time: inside a server half an all-reduce of them;
// across servers each GPU's share for the other servers leaves on its own
// rail, not pooled as an all-reduce's). Empty with ep = 1.
CollectiveTime expert_all_to_all_time(const Topology& topology, const MegatronLayout& layout);
// The MoE dispatcher's collective (make_megatron_profile's `expert_comm`):
// with the alltoall dispatcher expert_all_to_all_time; with allgather the
// all-reduce of `bytes` among the etp ep consecutive GPUs of an expert group
// (Megatron-core's expert grid tp-ep-dp-pp; sim/megatron_block.h says how
// its halves are charged); with flex flex_dispatch_time; empty when that
// group is one GPU.
CollectiveTime expert_dispatch_time(const Topology& topology, const GptModel& model, const MegatronLayout& layout);
// DeepEP's dispatch (or combine) among the G = etp ep consecutive GPUs of
// the tp_ep group (Megatron-core's MoEFlexTokenDispatcher), each GPU holding
// `bytes` (one copy of its tokens): a token goes once to each GPU holding
// one of its k experts (an expert's etp shards each), once to each other
// server holding one, over RDMA, then over NVLink to its GPUs there. Per
// level, each of the n children (m GPUs: a GPU holds its ep rank's E / ep
// experts, a wider child its ep ranks') is touched by a token with chance
// 1 - C(E - held, k) / C(E, k) (balanced routing; with group-limited
// routing the token's K of g groups first, hypergeometric, then its k
// experts among their K E / g), a token sent to (n - 1) / n of the
// children's sum of it, dropped copies not sent, at the GPU's share of the
// child's min(m, rails) rails; the levels move side by side (the slowest
// sets the time), one latency each. Empty with G = 1.
CollectiveTime flex_dispatch_time(const Topology& topology, const GptModel& model, const MegatronLayout& layout);
// make_megatron_profile's `expert_gradient_weight`: the simulator reduces a
// pipeline rank's gradients over its d c tensor-parallel groups; the
// experts' are reduced over the t c d / (etp ep) expert-tensor-parallel
// groups that hold the same experts, ep groups apart (Megatron-core's
// expert-data-parallel group; d c / ep tensor-parallel groups with etp = t).
// The weight is the ratio of the two reductions' time per byte of one GPU,
// each on its groups' topology: 0 when t c d / (etp ep) is 1 (nothing to reduce), 1
// without experts.
double expert_gradient_weight(const Topology& topology, const MegatronLayout& layout);

// Activation bytes one block keeps for one microbatch on one rank (above;
// with full recomputation the layer's input only).
double megatron_layer_activation_bytes(const GptModel& model, const MegatronLayout& layout);

struct MegatronRankMemory {
  int rank = 0;
  Bytes weights_and_optimizer;
  Bytes activations;
  Bytes peak;
  int inflight_microbatches = 0;  // the most microbatches (of any chunk) held at once
};

struct MegatronMemory {
  std::vector<MegatronRankMemory> ranks;
  Bytes capacity;
  bool fits() const;
  Bytes peak() const;  // the largest rank's
};

// The worst moment of each pipeline rank's schedule: the most blocks x
// microbatches of activations held (each chunk's microbatches in flight times
// its blocks) and the most microbatches in flight. It depends only on p, the
// chunks and the microbatches per rank: replica 0's workers of a Program of
// the plan (whole or one replica's, lowered or not) are followed; without
// one, one replica's Program is generated.
// With a zero-bubble schedule a block keeps `weight_share` of its
// activations from its I pass to its W pass (weight_pass_share), and a
// microbatch is in flight until its W. In a pair of Plan::paired_steady_state
// (Megatron's batch-level overlap) the forward's blocks run beside the
// backward's in reverse order, each backward block freeing its activations as
// it ends: the pair holds at worst one forward block more than before it (with
// chunks of equal blocks), and both microbatches count in flight. DualPipeV's
// pairs are counted pass by pass. `stage_blocks`, where given, counts
// each stage's blocks in another unit (per stage, what one microbatch of it
// holds over one block's activations: --recompute-method block).
struct HeldPeak {
  double block_microbatches = 0.0;
  int microbatches = 0;
};
std::vector<HeldPeak> held_peaks(const Plan& plan, double weight_share = 0.0,
                                 const std::vector<double>& stage_blocks = {});
std::vector<HeldPeak> held_peaks(const Plan& plan, const Program& program, double weight_share,
                                 const std::vector<double>& stage_blocks = {});

// What a block keeps from its I to its W pass over what it keeps from its
// forward to its backward (0 without a zero-bubble schedule): its weight
// GEMMs' inputs and output gradients, (8 + 24 / t) s b h bytes (32 / t s b h
// with sequence parallelism), over its activations (above).
double weight_pass_share(const GptModel& model, const MegatronLayout& layout);

// Memory per GPU of each pipeline rank (above). Plan from megatron_plan;
// `held`: held_peaks of it, when the caller has them already.
MegatronMemory megatron_memory(const GptModel& model, const MegatronLayout& layout, const Plan& plan,
                               const MegatronProfile& profile, Bytes capacity,
                               const std::vector<HeldPeak>* held = nullptr);

// Where the time of the busiest pipeline rank goes, seconds per iteration.
struct MegatronBreakdown {
  int rank = 0;
  Seconds compute;         // GEMMs and memory-bound kernels, forward and backward
  Seconds tensor_comm;     // exposed tensor-parallel collectives
  Seconds context_comm;    // the exposed context-parallel exchange of keys and values
  Seconds expert_comm;     // the expert-parallel all-to-alls (dispatch and combine), less what pairs hide
  Seconds recompute;       // forward work redone
  Seconds host;            // waiting for the host: its dispatch of kernels and its work per pass
  Seconds data_allreduce;  // gradient all-reduces: across the d replicas, and the embedding group's
  Seconds optimizer;
  Seconds bubble;  // the rest: pipeline fill and drain, waiting for transfers
};

struct MegatronPrediction {
  Plan plan;
  Topology groups;  // tensor_group_topology
  MegatronProfile profile;
  Simulation simulation;
  Seconds iteration_time;
  double throughput_samples_per_s = 0.0;
  // megatron_model_flops over the iteration and the GPUs (Narayanan et al. 2021,
  // eq. 3; with full recomputation it counts the recomputed forward).
  double model_tflops_per_gpu = 0.0;
  MegatronBreakdown breakdown;
  MegatronMemory memory;
  std::vector<std::string> fit_hints;  // when it does not fit: what would
};

// Checks the layout (check_megatron_layout), builds the profile for the
// topology's GPU, simulates one iteration. A layout that does not fit the
// device memory is still simulated; memory.fits() says so and fit_hints what
// would make it fit.
// `gpu` replaces the topology's GPU model (bench/groundtruth_vtrain --fit
// varies its constants); null: gpu_model(topology.device.name).
// `with_fit_hints` false leaves fit_hints empty (sweeps, which need only
// whether it fits, skip their six memory models).
Result<MegatronPrediction> predict_megatron(const GptModel& model, const MegatronLayout& layout,
                                            const Topology& topology, bool record_trace, const GpuModel* gpu = nullptr,
                                            bool with_fit_hints = true);

// The same profile predict_megatron simulates (for `baton profile analytic
// --arch gpt`): the topology gives the GPU and the tensor-parallel links.
Result<MegatronProfile> megatron_profile_on(const GptModel& model, const MegatronLayout& layout,
                                            const Topology& topology, const GpuModel* gpu = nullptr);

}  // namespace baton
