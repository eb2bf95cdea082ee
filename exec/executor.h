// The executor's public API: runs a Plan's Program on real hardware and
// measures it. Torch-free on purpose: tools/, tests/ and bench/ include only
// this header; LibTorch stays inside exec/*.cc.
//
// What a run does (see docs in exec/worker.h for the per-action semantics):
// - the model is one of the zoo's (`model_names()`), a chain of named layers
//   whose names match the layers of its measured profile;
// - every worker of the Program interprets its action list in order, exactly
//   as the simulator does: F, B, SEND_*/RECV_*, ALLREDUCE, STEP;
// - data is synthetic and deterministic: microbatch k of step t is sample
//   number t * microbatches + k of the model's task, generated from
//   (seed, that number) on the first stage (inputs) and on the last (targets);
// - the optimizer is plain SGD with a fixed learning rate. A STEP applies
//   w <- w - lr * (sum of the gradients accumulated since the previous STEP,
//   all-reduced over the stage's replicas) / (number of microbatches they came
//   from), i.e. the gradient of the mean loss over those microbatches.
//   Flush schedules: one STEP per iteration over all M microbatches, so K steps
//   equal K steps of single-process training on minibatches of M microbatches.
// - pipedream: every STEP makes a new weight version; a microbatch's B uses
//   the version its F used on that stage (weight stashing), or with vertical
//   sync the version stage 0 used. Versions are kept while referenced.
//
// Errors are values (sim/result.h): a plan that does not fit the model, a
// Program that fails validation, a timeout or a failed peer. A gloo rank whose
// peer died reports "... failed: connection closed by rank 1 (...)", one whose
// peer went silent "... timed out after 30 s: rank 1 is not responding".
//
// Checkpoints (TrainOptions::checkpoint_dir, exec/checkpoint.h for the files):
// after every `checkpoint_every` completed steps each stage's live weights, its
// weight-version number and its gradient buffer are saved, with a manifest
// naming the model, the plan and the seed. `resume` continues from the latest
// complete checkpoint; as step t always trains on samples t * M + k, a resumed
// run ends with exactly the weights of an uninterrupted one.
//
// Fault injection (for tests): BATON_INJECT_FAULT="rank=R,step=S,kind=K" makes
// worker R (the gloo rank R) fail at the start of its step S (0-based), before
// its first action: kind=crash raises SIGKILL on its own process, kind=exit
// ends it with _exit(3), kind=hang sleeps for ever (gloo only; the threads
// backend refuses it). On the threads backend crash and exit end the whole
// process. Read when a run starts; see exec/fault.h.
// Thread safety: the functions may be called from any thread, but the
// executor sets LibTorch's process-wide intra-op thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/kernels_file.h"
#include "sim/link_fit.h"
#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/result.h"
#include "sim/trace.h"
#include "sim/units.h"

namespace baton::exec {

// --- Model zoo -------------------------------------------------------------

struct ModelInfo {
  std::string name;
  std::string description;
  std::vector<std::string> layer_names;  // profile order
};

// "mlp", "vgg-mini", "gpt-mini".
std::vector<std::string> model_names();
Result<ModelInfo> model_info(std::string_view name);

// Refuses a plan that does not fit the model: stages must be consecutive,
// non-empty layer ranges covering exactly [0, layers of the model), every
// stage must have >= 1 replica, and pipedream's microbatch count must be a
// multiple of every stage's replica count. `source` names the plan in messages.
Status check_plan_for_model(const Plan& plan, const ModelInfo& model, const std::string& source);

// --- Training runs -----------------------------------------------------------

struct TrainOptions {
  std::string model;            // a zoo name
  int steps = 1;                // times the whole Program runs (iterations)
  double learning_rate = 0.05;  // SGD, fixed
  uint64_t seed = 1;            // weights and data
  // Where the workers compute: "cpu", or "cuda" / "cuda:N" (threads backend:
  // every worker on that GPU, each on its own CUDA stream; exec/device.h).
  // Actions are timed on the device (CUDA events on a GPU).
  std::string device = "cpu";
  // pipedream only: false makes a B use the live weights (its forward is
  // recomputed from the stashed input with them), the inconsistency weight
  // stashing exists to avoid. For tests and studies.
  bool weight_stashing = true;
  int intra_op_threads = 1;  // LibTorch threads per process
  // Any single wait (receive, send, all-reduce, barrier, rendezvous). A peer
  // that died is usually seen at once (its connection closes); a silent one
  // only after this long, so it bounds how long a fault goes unnoticed.
  Seconds timeout = Seconds(30);
  // Checkpoints: empty for none. Every `checkpoint_every` (>= 1) completed
  // steps a checkpoint goes to checkpoint_dir/step-<n>; 0 writes none.
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  // Continue from the latest complete checkpoint in checkpoint_dir (one with
  // n < steps completed steps, made by the same model, plan and seed) with
  // step n, up to `steps`.
  bool resume = false;
  // Optional: called after each step with its number and wall time, by the
  // threads backend and by rank 0 of the gloo backend (whose step ends at the
  // barrier every rank meets). `baton run` prints its progress from it.
  std::function<void(int step, Seconds wall)> on_step;
};

// Final weights: layers[l][p] = parameter p of layer l, flattened row-major.
struct Weights {
  std::vector<std::vector<std::vector<float>>> layers;
};

struct StepReport {
  Seconds wall;            // first worker start to last worker end (gloo: barrier to barrier)
  double mean_loss = 0.0;  // mean over the step's microbatches
};

// One worker's own accounting over all steps. Wall-clock figures include
// time the OS ran other threads; the CPU-time pair counts only what this
// worker's thread consumed, so its overhead is immune to CPU contention.
struct WorkerStats {
  int64_t actions = 0;
  Seconds loop;                  // wall time inside its action loop
  Seconds compute;               // wall time of the F, B and STEP bodies
  Seconds waiting;               // in RECV, in STEP waiting for ALLREDUCE, or issuing an ALLREDUCE
  Seconds loop_cpu;              // thread CPU time inside the action loop
  Seconds compute_cpu;           // thread CPU time of the F, B and STEP bodies
  int peak_weight_versions = 0;  // weight versions alive at once (live + stashed)
  // Threads that ran its steps: 1 in every backend (LibTorch's caches per
  // thread, cuDNN's execution plans among them, then last the whole run).
  int threads = 0;
  // What the executor itself cost: loop - compute - waiting (wall clock), and
  // loop_cpu - compute_cpu (CPU time: scheduling, bookkeeping, stashing,
  // transfers' CPU side, waking up).
  Seconds overhead() const { return loop - compute - waiting; }
  Seconds overhead_cpu() const { return loop_cpu - compute_cpu; }
  // compute per step, each step this process ran in order (a shared
  // machine's speed from step to step: validate predicts at its runs' own)
  std::vector<Seconds> step_compute;
};

struct RunReport {
  Trace trace;         // the last step, origin "measured"
  int first_step = 0;  // steps[i] is step first_step + i (> 0 when resumed)
  std::vector<StepReport> steps;
  Weights weights;  // replica 0 of every stage, after the last step
  std::vector<WorkerStats> workers;
  std::string device = "cpu";  // where the workers computed ("cuda:0 (<GPU name>)" on a GPU)
};

// All workers in this process, one thread each, talking through in-process
// mailboxes; replica groups reduce through shared memory. Checkpoints are
// written by the calling thread between steps.
Result<RunReport> run_threads(const Plan& plan, const TrainOptions& options);

// With options.resume: the completed steps of the checkpoint the run would
// resume from. An Error names the folder and says why none fits: there is no
// complete checkpoint, or its manifest names another model, plan or seed, or
// it already holds options.steps steps. Reads only manifests (no torch work),
// so a launcher can refuse before starting any rank.
Result<int> resumable_checkpoint(const Plan& plan, const TrainOptions& options);

// GPUs the executor can run on (TrainOptions::device "cuda:N", N below it):
// 0 when this build's LibTorch has no CUDA or no GPU is visible.
int cuda_device_count();

// Whether `address` is this machine's loopback (localhost, 127.x.x.x, ::1).
bool is_loopback(const std::string& address);

// Where a rank finds its peers (torchrun-style environment variables).
struct RankEnv {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
};

// One rank of a c10d Gloo run: rank r runs worker r of the Program. Rank 0
// serves the TCPStore rendezvous at master_addr:master_port; every rank joins
// a world process group, and each replicated stage's members a group of their
// own (a ProcessGroupGloo over a PrefixStore "stage<s>/" of the same store).
// Clocks: all ranks meet at a barrier before each step and time their spans
// from their own steady clock read just after it (skew = barrier exit spread).
// Rank 0 returns the whole report (all ranks' spans, losses and final
// weights, gathered through the world group); other ranks return their own.
// Checkpoints: each stage's replica 0 writes its stage's file, all ranks meet
// at a barrier, then rank 0 writes the manifest. Sets SIGPIPE to be ignored
// for the whole process: a write to a peer that died must become an error
// naming that peer, not end this rank without a word.
// With options.device "cuda" (run --backend nccl) the rank computes on GPU
// LOCAL_RANK, its spans are CUDA events from an event recorded after the
// barrier, and activations, gradients and all-reduces move over NCCL, one
// communicator per direction between two ranks and one per replicated stage
// (exec/cuda/nccl_links.h); a wait that runs out of time aborts its
// communicator and names the peer as above. The rendezvous, barriers and
// gathers stay on Gloo. Needs a build against a LibTorch with CUDA and NCCL.
Result<RunReport> run_gloo_rank(const Plan& plan, const TrainOptions& options, const RankEnv& env);

// --- Single-process references (what the distributed runs must equal) ----------

struct ReferenceReport {
  Weights weights;
  std::vector<double> mean_loss;  // per step
};

// Single-process training of the whole model on the same data as the plan's
// run for options.steps iterations.
// - flush schedules (gpipe, 1f1b, dp): per step one forward and backward of
//   the whole minibatch (all M microbatches concatenated), then one SGD step;
// - pipedream: per pass, microbatches in order; microbatch k (local index
//   i = k / r_s on stage s with r_s replicas) runs stage s with weight version
//   max(0, i - warmup_s) of that pass (warmup_s = warmup_forwards(plan, s, .)),
//   or with vertical sync stage 0's version number; stage s steps once per
//   r_s microbatches (one round of its replicas) with their mean gradient.
Result<ReferenceReport> train_reference(const Plan& plan, const TrainOptions& options);

// max over parameters of ||a - b|| / max(||b||, tiny): the error measure of the tests.
double max_relative_error(const Weights& a, const Weights& b);

nlohmann::json weights_to_json(const Weights& weights);
Result<Weights> weights_from_json(const nlohmann::json& document, const std::string& source);

// --- Per-layer profiling -----------------------------------------------------------

struct ProfileOptions {
  std::string device = "cpu";  // "cpu" or "cuda"
  int warmup = 3;              // steps thrown away
  int steps = 10;              // steps measured (at least); see `quantile`
  // Keep measuring steps until this much time has passed as well: on a shared
  // machine whose speed changes over seconds, the median then describes the
  // machine over a span of time rather than one moment of it.
  Seconds min_time = Seconds(0);
  // Which order statistic of the steps is kept per layer: 0.5 the median; a
  // low one (0.1) describes the machine when nothing else disturbs it.
  double quantile = 0.5;
  // Sleep this long before each timed region (0: back to back). With every
  // rank profiling at once, this reproduces how stages compute in a run:
  // between waits, with the other cores busy. On a virtual machine that
  // costs speed (a core that idled comes back slower), which a profile
  // measured back to back on an idle machine does not see.
  Seconds gap = Seconds(0);
  // Where the gap is slept: empty, before every timed region; else before
  // the forward of each layer listed (the first layers of a plan's stages)
  // and before the backward of the layer just below each listed one and of
  // the last layer (the stages' last layers), as a stage's work follows a
  // wait in a run once per stage, not once per layer.
  std::vector<int> gap_at;
  int intra_op_threads = 1;
  uint64_t seed = 1;
  // Also time the whole model's forward, backward and optimizer step as one
  // call each, after every step's layers (MeasuredProfile::whole_pass), and
  // set the profile's call_cost from them.
  bool whole_pass = false;
  // >= 2: also measure the profile's shared_streams (sim/profile.h): the whole
  // model's passes (forward, backward, optimizer step, issued back to back)
  // on this many threads at once, each with its own stream, parameters and
  // samples, against one of them alone; 3 rounds, the median kept.
  int streams = 1;
  std::function<void(const std::string&)> progress;  // optional, one line per event
};

// Measures every layer of `model` at `microbatch_size`: forward, backward and
// optimizer-step time (options.quantile of the steps; the first layer's
// forward includes generating the input, the last layer's the target and the
// loss), output bytes (one microbatch's activation) and parameter bytes, as a
// baton.profile.v1 Profile; and the machine's compute noise: kNoiseQuantiles
// quantiles ((i + 0.5) / kNoiseQuantiles) of every forward and backward sample
// divided by its layer's value in the profile (options.quantile of its
// samples), the sample DeviceType::compute_noise holds.
constexpr int kNoiseQuantiles = 200;
// The host's side of a layer's pass: the wall time of the call that issues
// it, which on a GPU returns once its kernels are queued (a backward once
// LibTorch's autograd engine thread for that GPU has queued them). Where it
// exceeds the device's time the GPU waits for the host; it is what workers
// sharing one GPU and one engine thread queue on (bench/RESULTS.md). On the
// CPU it is the pass itself. Medians of the measured steps.
struct HostTimes {
  Seconds forward;
  Seconds backward;
};

struct MeasuredProfile {
  Profile profile;
  std::vector<double> compute_noise;
  std::vector<HostTimes> host;          // per layer
  std::optional<WholePass> whole_pass;  // with ProfileOptions::whole_pass
};
// What measure_profile refuses before it measures anything: an unknown
// model, a microbatch size < 1, steps < 1, warmup < 0, streams outside 1-64,
// a --gap-at layer the model does not have. Its failures afterwards (a device
// it cannot use, memory LibTorch cannot allocate) are the run's, not the
// request's.
Status check_profile_request(std::string_view model, int microbatch_size, const ProfileOptions& options);
Result<MeasuredProfile> measure_profile(std::string_view model, int microbatch_size, const ProfileOptions& options);

// --- Kernel timing (baton kernels measure) ----------------------------------------

// Times single kernels on one device (sim/kernels_file.h): each GEMM shape
// (at::mm, or at::bmm when count > 1, into a preallocated result), a copy of
// each stream size, and a one-element add; on a GPU with CUDA events around
// each call, on the CPU with the host clock. Each time is the median of
// `repeats` calls after `warmup` more.
struct KernelOptions {
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  std::string dtype = "bf16";  // "bf16", "fp16" or "fp32"
  std::vector<GemmShape> gemms;
  std::vector<int64_t> stream_bytes;  // read + written
  int warmup = 3;
  int repeats = 10;
  std::function<void(const std::string&)> progress;  // one line per shape
};
Result<MeasuredKernels> measure_kernels(const KernelOptions& options);

// Whether the profiler sleeps options.gap before `layer`'s forward (backward)
// in a model of `layers` layers, given options.gap_at.
bool gap_before(const std::vector<int>& gap_at, int layers, int layer, bool forward);

// --- Link calibration ------------------------------------------------------------

struct LinkOptions {
  // Message sizes of the point-to-point and all-reduce measurements.
  std::vector<int64_t> sizes_bytes{4, 1 << 10, 16 << 10, 128 << 10, 1 << 20, 4 << 20};
  // On a GPU a hand-over is a device-to-device copy: at an H100's ~1.5 TB/s
  // 4 MiB take 3 us against an 8 us latency, too little for the fit to see
  // the bandwidth (on an H100 the one-way time did not grow with the size in
  // 6 of 9 calibrations up to 4 MiB); up to 256 MiB it does (~170 us).
  static std::vector<int64_t> gpu_sizes_bytes() {
    return {4, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20};
  }
  int warmup = 5;    // round trips (all-reduces) thrown away per size
  int repeats = 25;  // measured per size; the median is kept
  // Rounds of the loaded exchange between ranks 0 and 1 (0: skip it; it needs
  // the ranks on one machine, whose steady clocks agree).
  int loaded_rounds = 0;
  // Each iteration's forward of the loaded exchange is drawn from this range
  // (its backward 1-2 forwards): the receive noise grows with how long the
  // ranks compute between messages, so validate sets it from the model's
  // stage (bench/RESULTS.md, "The receive noise follows the compute").
  Seconds loaded_forward_min = Seconds::from_ms(0.3);
  Seconds loaded_forward_max = Seconds::from_ms(1.5);
  Seconds timeout = Seconds(30);
};

// One message of the loaded exchange, as its receiver (rank 0 or 1) saw it,
// on the machine's steady clock: when its sender sent it, when the receiver
// began to wait for it and when the wait ended.
struct LoadedTransfer {
  Bytes size;
  Seconds sent;
  Seconds waited;
  Seconds completed;
};

struct LinkMeasurement {
  int ranks = 0;
  // One-way time of a message from rank 0 to rank 1: half the median round trip
  // (rank 0 sends, rank 1 receives and sends the same bytes back).
  std::vector<TransferSample> point_to_point;
  // Gradient all-reduce (sum of float32) over all ranks, median as rank 0 sees it.
  std::vector<TransferSample> allreduce;
  // Every all-reduce of each size (as `allreduce`), in the order they ran.
  std::vector<std::vector<Seconds>> allreduce_samples;
  // Messages of the loaded exchange (empty without one): both ranks compute,
  // send and wait as pipeline stages do, so messages meet ranks at work.
  std::vector<LoadedTransfer> loaded;
  // Gloo ranks: the class their Gloo I/O threads ran in, "idle" or "normal"
  // (exec/transport_gloo.h); empty for the threads backend.
  std::string gloo_io;
};

// The link of the threads backend between `workers` (>= 2) workers on `device`
// ("cuda", "cuda:N"; "cpu" works but its hand-overs move no data): the same
// sizes, warm-up and repeats; one-way times are worker 0 to worker 1's
// receive of data already there (the fastest repeat), all-reduces over all
// workers (median, and every sample); `loaded` stays empty.
// exec/calibrate_threads.cc says how each is timed.
Result<LinkMeasurement> measure_link_threads(const std::string& device, int workers, const LinkOptions& options);

// What `device` ("cpu", "cuda", "cuda:N") is: "cuda:0 (NVIDIA H100 80GB HBM3)",
// and its memory in bytes (0 for the CPU: not the executor's to say).
struct DeviceInfo {
  std::string description;
  int64_t memory_bytes = 0;
};
Result<DeviceInfo> device_info(const std::string& device);

// One rank of the link calibration, over c10d Gloo like run_gloo_rank (same
// rendezvous and environment). Needs WORLD_SIZE >= 2. Rank 0 returns the
// measurement; other ranks return `ranks` only.
Result<LinkMeasurement> measure_link_rank(const RankEnv& env, const LinkOptions& options);

}  // namespace baton::exec
