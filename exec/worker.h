// Worker: the interpreter of one worker's action list, the executor's
// counterpart of the simulator's engine. It runs the actions strictly in order:
//
//   F k        forward of the stage's layers on microbatch k with the weight
//              version chosen below; the first stage generates the input of
//              sample sequence (step * M + k), the last stage its target and
//              the loss. Input and output (with its autograd graph) and the
//              version stay stashed until B k.
//   B k        torch::autograd::grad of the output (the loss on the last
//              stage, else with the received output gradient) with respect to
//              the version's parameters and the stage input; parameter
//              gradients are added to the gradient buffer, the input gradient
//              kept for SEND_GRAD; the stash is released.
//   I k        (zero bubble) the backward with the linear layers' weight
//              gradients put off (exec/weight_grad.h): the gradient of the
//              stage input and of the other operators' parameters; each
//              linear layer's input and output gradient are kept in the
//              microbatch's store; the graph is released.
//   W k        the kept weight-gradient products (dW = dy^T x, db = sum dy),
//              added to the gradient buffer; the stash is released. I + W do
//              the products of one fused B, each once.
//   SEND_* k   hands the output (or input gradient) to the Transport; does not
//              block; the span ends when the transfer is seen complete.
//   RECV_* k   blocks until the activation (or output gradient) is there. Every
//              receive of an iteration is posted to the Transport when the
//              iteration begins (Transport::post_recv), so data moves as soon
//              as its sender sends, whatever the transport's protocol; per
//              peer in the order the peer sends (receive_order), which a
//              transport that matches messages in order needs.
//   ALLREDUCE  issues the sum of the gradient buffer over the stage's
//              replicas; does not block.
//   STEP n     waits for this worker's ALLREDUCE, then makes the next weight
//              version w - lr * buffer / divisor(n) out of place and zeroes
//              the buffer; divisor(n) = microbatches whose gradients it holds.
//
// Version used by F k: the live one; with vertical sync, the version whose
// number (relative to this pass) stage 0 used for k, `forward_versions[k]`,
// kept alive until its last forward. Without weight stashing (a study mode),
// B recomputes its forward from the stashed input with the live version.
// Several chunks (interleaved-1f1b, zbv, dualpipev): each stage the worker
// runs has its own weights, gradient buffer, replica group and stashes, and an
// action works on the chunk its stage names. Where the worker runs both sides
// of a cut (a V's turn) there is no transfer: F of the later stage takes the
// earlier one's output, and its input gradient becomes the earlier one's
// output gradient, in this worker's memory.
// Spans: one per action, times from `origin` (see exec/executor.h).
// Between iterations nothing is in flight (see boundary_state), so the live
// version, its number and the gradient buffer are the whole training state.
// Thread safety: a Worker is used by one thread at a time.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "exec/checkpoint.h"
#include "exec/device.h"
#include "exec/executor.h"
#include "exec/fault.h"
#include "exec/sample_loader.h"
#include "exec/stage.h"
#include "exec/transport.h"
#include "exec/weight_grad.h"
#include "sim/program.h"
#include "sim/trace.h"

namespace baton::exec {

// One stage the worker runs (a chunk, when the schedule runs several per worker).
struct ChunkSetup {
  int stage = 0;
  const StageModel* model = nullptr;
  Reducer* reducer = nullptr;      // null unless the stage has replicas
  std::vector<int> step_divisors;  // [round]
};

struct WorkerSetup {
  const Program* program = nullptr;
  int worker = 0;
  std::vector<ChunkSetup> chunks;  // the worker's stages, increasing; one unless it runs chunks
  int microbatch_size = 1;
  TrainOptions options;
  Transport* transport = nullptr;
  WorkerDevice* device = nullptr;      // where it computes and how its actions are timed
  std::vector<int> forward_versions;   // [microbatch], vertical sync only; else empty
  std::vector<int> receive_order;      // its RECV actions in the order they are posted (sim/program.h)
  std::optional<InjectedFault> fault;  // carried out at the start of its step if it names this worker
};

class Worker {
 public:
  explicit Worker(WorkerSetup setup);

  // Runs the whole action list once as iteration `step`, its times measured
  // from `origin` (on the worker's device: exec/device.h), and waits until the
  // device has done the work. Appends one span per action to `spans` when it
  // is not null.
  Status run_iteration(int step, const Origin& origin, std::vector<Span>* spans);
  // Starts iteration `step` ahead of run_iteration: resets the per-iteration
  // state and posts every receive of the iteration. run_iteration does it
  // itself unless it was done for that step.
  Status prepare_iteration(int step);

  const WorkerStats& stats() const { return stats_; }
  // (microbatch, loss) of the last iteration; last stage only.
  const std::vector<std::pair<int, double>>& losses() const { return losses_; }
  const VersionPtr& live() const { return chunks_.front().live; }
  // The live version of one of the worker's stages.
  const VersionPtr& live_of_stage(int stage) const;
  int worker() const { return setup_.worker; }

  // Between iterations: the state a checkpoint keeps, one per stage the
  // worker runs (its chunks, in increasing order). An iteration ends with
  // every B (or I and W) after its F (stashes released), every transfer and
  // all-reduce drained, and every version kept for vertical sync used, so
  // nothing is in flight; an Error names what is if that ever fails to hold.
  Result<std::vector<std::pair<int, StageState>>> boundary_states() const;
  // Between iterations: stage `stage` (one of the worker's) continues from
  // `state` (weights, version number, gradient buffer) instead of the
  // initial weights.
  void restore(int stage, const StageState& state);

 private:
  struct InFlight {
    at::Tensor received;  // RECV_ACT
    at::Tensor input;     // the stage input as used by F (a leaf when differentiable)
    at::Tensor output;    // stage output, or the loss on the last stage
    VersionPtr version;
    at::Tensor grad_output;    // RECV_GRAD
    at::Tensor grad_input;     // for SEND_GRAD
    WeightGradStore deferred;  // split backward: the weight products I left for W
  };
  // Marks of the worker's device (WorkerDevice::mark), read once it settled.
  struct Timing {
    int start = -1;
    int end = -1;
    int64_t bytes = 0;
    int wait_start = -1;  // STEP: where it began to wait for its ALLREDUCE
    // ALLREDUCE: where its issue returned (`end` moves on to its completion).
    // On one GPU the threads backend's last contributor sums the replicas'
    // gradients on its own stream inside the issue: communication, not the
    // executor's overhead.
    int issued = -1;
  };
  struct Record {
    int32_t index = 0;  // in the action list
    Action action;
    Timing timing;
  };
  struct Outstanding {
    int record = -1;  // index into records_, -1 when not recorded
    PendingPtr pending;
  };

  struct Chunk {
    ChunkSetup setup;
    VersionPtr live;
    at::Tensor gradient_flat;
    std::vector<at::Tensor> gradient_views;
    std::vector<InFlight> inflight;  // [microbatch], this iteration
  };

  at::Device device() const { return setup_.device->device(); }
  Chunk& chunk_for(int stage);
  // The output gradient of microbatch k on the current chunk: received, or
  // handed over by the worker's own next stage.
  const at::Tensor& output_gradient(InFlight& mb, int microbatch);
  void begin_iteration(int step);
  Status post_receives();
  Result<Timing> run_action(const Action& action);
  Result<Timing> forward(int microbatch);
  Result<Timing> backward(int microbatch);
  Result<Timing> backward_input(int microbatch);
  Result<Timing> backward_weight(int microbatch);
  Result<Timing> send(const Action& action);
  Result<Timing> recv(const Action& action);
  Result<Timing> allreduce();
  Result<Timing> step(int round);
  Result<VersionPtr> version_for_forward(int microbatch);
  at::Tensor recompute_with_live(InFlight& mb, int microbatch);
  // Ends the spans of the finished transfers (poll) or of all of them (drain).
  void poll_outstanding(std::vector<Outstanding>& list);
  Status drain(std::vector<Outstanding>& list);
  void mark_end(int record);
  // After the device settled: the iteration's spans, accounting and losses.
  void account(int loop_start, int loop_end, std::vector<Span>* spans);
  // Message number of microbatch k's transfer to `receiving_stage` (unique per
  // run, payload and receiver): (step M + k) S + receiving_stage.
  int64_t sequence(int receiving_stage, int microbatch) const;
  // The first stage's sample number of microbatch k: step M + k.
  int64_t sample_index(int microbatch) const;

  WorkerSetup setup_;
  VersionCounter counter_;                 // declared before every VersionPtr holder
  std::vector<Chunk> chunks_;              // one per ChunkSetup
  std::unique_ptr<SampleLoader> samples_;  // the first stage's inputs, the last stage's targets
  Chunk* cur_ = nullptr;                   // the chunk of the action being run
  std::map<int, VersionPtr> kept_;         // vertical sync: versions future forwards need
  std::map<int, int> uses_left_;           // vertical sync: forwards left per version number
  std::vector<Outstanding> sends_;
  std::vector<Outstanding> reduces_;
  std::map<std::tuple<ActionKind, int, int>, PostedRecvPtr> posted_;  // (RECV kind, stage, microbatch)
  std::vector<std::pair<int, double>> losses_;
  std::vector<std::pair<int, at::Tensor>> loss_tensors_;  // read once the device settled
  std::vector<Record> records_;                           // this iteration's actions
  WorkerStats stats_;
  std::vector<uint64_t> thread_tags_;  // the threads that ran its iterations (thread_tag())
  int step_ = 0;
  int pass_base_ = 0;       // live version number when the iteration began
  int prepared_step_ = -1;  // the step prepare_iteration ran for, -1 when none
};

}  // namespace baton::exec
