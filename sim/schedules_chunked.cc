// The schedules that run chunks (sim/schedules.h): Megatron-LM's interleaved
// 1F1B, ZB-V and DualPipeV, one worker per (rank, replica).
#include "sim/schedules.h"

#include <algorithm>
#include <utility>

#include "sim/schedules_internal.h"

namespace baton {

using schedules_detail::empty_program;
using schedules_detail::local_microbatches;

namespace {

// The end of an iteration on a worker that runs several chunks: every
// chunk's ALLREDUCE (replicated pipelines) first, so they overlap, then every
// chunk's STEP.
void append_chunk_updates(std::vector<Action>& out, const std::vector<int>& stages, int replicas) {
  if (replicas > 1)
    for (int s : stages) out.push_back(make_action(ActionKind::kAllReduce, s, 0));
  for (int s : stages) out.push_back(make_action(ActionKind::kStep, s, 0));
}

// Megatron-LM's interleaved 1F1B on one worker: rank d of p, v chunks
// (stages d, d + p, ..., d + (v - 1) p), `local` microbatches (a multiple of
// p). Virtual microbatch i (0 <= i < v m) is local microbatch
// (i / (p v)) p + i mod p on chunk (i / p) mod v when it runs forward, and
// on chunk v - 1 - (i / p) mod v when it runs backward: groups of p
// microbatches go through chunk 0, then through chunk 1, and so on. Warm-up:
// 2 (p - d - 1) + (v - 1) p forwards (all of them when m = p), then 1F1B;
// `paired`: one forward more in the warm-up, then each steady-state forward
// and the backward after it an overlapped pair (Plan::paired_steady_state).
struct InterleavedCursor {
  int ranks, chunks;
  int group = 0, chunk = 0, position = 0;  // i = (group v + chunk) p + position

  int batch() const { return group * ranks + position; }  // its index in the local list
  void next() {
    if (++position < ranks) return;
    position = 0;
    if (++chunk < chunks) return;
    chunk = 0;
    ++group;
  }
};

void append_interleaved(std::vector<Action>& out, int rank, int ranks, int chunks, const std::vector<int>& local,
                        int replicas, bool paired) {
  const int m = static_cast<int>(local.size());
  const int total = m * chunks;
  // Pass i of a direction: microbatch local[(i / (p v)) p + i mod p] through
  // chunk (i / p) mod v; the two cursors walk i = 0, 1, ... in that order.
  InterleavedCursor forwards{ranks, chunks}, backwards{ranks, chunks};
  const auto forward = [&] {
    out.push_back(make_action(ActionKind::kForward, forwards.chunk * ranks + rank, local[forwards.batch()]));
    forwards.next();
  };
  const auto backward = [&] {
    out.push_back(
        make_action(ActionKind::kBackward, (chunks - 1 - backwards.chunk) * ranks + rank, local[backwards.batch()]));
    backwards.next();
  };
  // Paired, one more forward first (Megatron-core's, with
  // --overlap-moe-expert-parallel-comm): no pair joins a microbatch's forward
  // and backward through the same chunk.
  const int warmup =
      m == ranks ? total : std::min(total, 2 * (ranks - rank - 1) + (chunks - 1) * ranks + (paired ? 1 : 0));
  out.reserve(out.size() + 2 * static_cast<size_t>(total) + 2 * static_cast<size_t>(chunks));
  for (int i = 0; i < warmup; ++i) forward();
  for (int i = 0; i < total - warmup; ++i) {
    forward();
    if (paired) out.back().paired = true;  // Plan::paired_steady_state
    backward();
  }
  for (int i = std::max(total - warmup, 0); i < total; ++i) backward();
  std::vector<int> stages;
  for (int c = 0; c < chunks; ++c) stages.push_back(c * ranks + rank);
  append_chunk_updates(out, stages, replicas);
}

// Counts per chunk of a V-shaped schedule on one worker: the next local
// microbatch of each pass, and the W's due (their I has run), oldest first.
struct VCursor {
  VCursor(std::vector<Action>& actions, const std::vector<int>& microbatches, int rank, int ranks)
      : out(&actions), local(&microbatches), stage{rank, 2 * ranks - 1 - rank} {}

  std::vector<Action>* out;
  const std::vector<int>* local;
  int stage[2];  // chunk 0 (going down) and chunk 1 (coming back)
  int forwards[2] = {0, 0};
  int backwards[2] = {0, 0};  // B or I
  int weights[2] = {0, 0};
  std::vector<std::pair<int, int>> due;  // (chunk, local index) of I's whose W has not run
  size_t next_due = 0;

  int count() const { return static_cast<int>(local->size()); }
  void forward(int c) { emit(ActionKind::kForward, c, forwards[c]++); }
  void input(int c) {
    due.emplace_back(c, backwards[c]);
    emit(ActionKind::kBackwardInput, c, backwards[c]++);
  }
  void full_backward(int c) {
    emit(ActionKind::kBackward, c, backwards[c]++);
    ++weights[c];
  }
  void weight(int c) { emit(ActionKind::kBackwardWeight, c, weights[c]++); }
  // The oldest due W, if any.
  void weight_if_due() {
    if (next_due >= due.size()) return;
    const auto [c, index] = due[next_due++];
    emit(ActionKind::kBackwardWeight, c, index);
    ++weights[c];
  }
  void emit(ActionKind kind, int c, int index) {
    out->push_back(make_action(kind, stage[c], (*local)[static_cast<size_t>(index)]));
  }
  // The action just emitted and the next one are an overlapped pair.
  void pair_last() { out->back().paired = true; }
};

// ZB-V (Qi et al., ICLR 2024, section 6), the handcrafted order for equal
// F, I and W times as torch.distributed.pipelining's ScheduleZBVZeroBubble
// states it; rank d of p, n >= 2p local microbatches:
//   warm-up   2(p - d) - 1 x F0;  d x (F1 F0);  p - d x (F1 I1 W1)
//   steady    while F1 < F0 or F0 < n: [F0 if F0 < n] I0 W0 F1 I1 W1
//   cool-down d x (I0 I1);  p - d x (I0 W0);  the W1's left, then the W0's left
// (F0 = a forward of chunk 0, the stage going down; I1 = an input gradient of
// chunk 1, the stage coming back). At most 2p microbatches held per chunk pair.
void append_zbv(std::vector<Action>& out, int rank, int ranks, const std::vector<int>& local, int replicas) {
  VCursor v(out, local, rank, ranks);
  const int n = v.count();
  for (int i = 0; i < 2 * (ranks - rank) - 1; ++i) v.forward(0);
  for (int i = 0; i < rank; ++i) {
    v.forward(1);
    v.forward(0);
  }
  for (int i = 0; i < ranks - rank; ++i) {
    v.forward(1);
    v.emit(ActionKind::kBackwardInput, 1, v.backwards[1]++);
    v.weight(1);
  }
  while (v.forwards[1] < v.forwards[0] || v.forwards[0] < n) {
    if (v.forwards[0] < n) v.forward(0);
    v.emit(ActionKind::kBackwardInput, 0, v.backwards[0]++);
    v.weight(0);
    v.forward(1);
    v.emit(ActionKind::kBackwardInput, 1, v.backwards[1]++);
    v.weight(1);
  }
  for (int i = 0; i < rank; ++i) {
    v.emit(ActionKind::kBackwardInput, 0, v.backwards[0]++);
    v.emit(ActionKind::kBackwardInput, 1, v.backwards[1]++);
  }
  for (int i = 0; i < ranks - rank; ++i) {
    v.emit(ActionKind::kBackwardInput, 0, v.backwards[0]++);
    v.weight(0);
  }
  while (v.weights[1] < v.backwards[1]) v.weight(1);
  while (v.weights[0] < v.backwards[0]) v.weight(0);
  append_chunk_updates(out, {v.stage[0], v.stage[1]}, replicas);
}

// DualPipeV (DeepSeek; the order of its open-source schedule as
// torch.distributed.pipelining's ScheduleDualPipeV states it); rank d of p,
// n >= 2p local microbatches; "F0&B1" is DualPipe's overlapped pair (the
// forward of one chunk beside the backward of the other, to hide MoE all-to-all
// communication; Action::paired: both inputs in before, both outputs out after
// the pair), and B is a whole backward (I and W together):
//   1. 2(p - d - 1) x F0          2. d + 1 x (F0 F1)
//   3. p - d - 1 x (I1 [oldest due W] F1)
//   4. n - 2p + d + 1 x (F0&B1, F1&B0); the last rank's first F0 B1 not paired
//      (DeepSeek's order: its F0 feeds its own F1)
//   5. p - d - 1 x (B1, F1&B0)
//   6. d + 1 x (B1 B0), each an I instead from the middle pair on (for rank d
//      odd from the pair's first, even from its second)
//   7. p - d - 1 x ([oldest due W] B0 or I0)   8. d + 1 x [oldest due W]
void append_dualpipev(std::vector<Action>& out, int rank, int ranks, const std::vector<int>& local, int replicas) {
  VCursor v(out, local, rank, ranks);
  const int n = v.count();
  for (int i = 0; i < 2 * (ranks - rank - 1); ++i) v.forward(0);
  for (int i = 0; i <= rank; ++i) {
    v.forward(0);
    v.forward(1);
  }
  for (int i = 0; i < ranks - rank - 1; ++i) {
    v.input(1);
    v.weight_if_due();
    v.forward(1);
  }
  for (int i = 0; i < n - 2 * ranks + rank + 1; ++i) {
    v.forward(0);
    if (i > 0 || rank != ranks - 1) v.pair_last();
    v.full_backward(1);
    v.forward(1);
    v.pair_last();
    v.full_backward(0);
  }
  for (int i = 0; i < ranks - rank - 1; ++i) {
    v.full_backward(1);
    v.forward(1);
    v.pair_last();
    v.full_backward(0);
  }
  bool split = false;
  const int pairs = rank + 1;
  const auto backward = [&](int c) { split ? v.input(c) : v.full_backward(c); };
  for (int i = 0; i < pairs; ++i) {
    if (i == pairs / 2 && rank % 2 == 1) split = true;
    backward(1);
    if (i == pairs / 2 && rank % 2 == 0) split = true;
    backward(0);
  }
  for (int i = 0; i < ranks - rank - 1; ++i) {
    v.weight_if_due();
    backward(0);
  }
  for (int i = 0; i < pairs; ++i) v.weight_if_due();
  append_chunk_updates(out, {v.stage[0], v.stage[1]}, replicas);
}

// The schedules that run chunks: one worker per (rank, replica).
Program make_chunked(const Plan& plan, const Program* only) {
  Program program = only ? *only : empty_program(plan);
  const int ranks = plan.num_ranks();
  for (int w = 0; w < program.num_workers(); ++w) {
    const WorkerInfo& worker = program.workers[w];
    const int replicas = plan.stages[worker.stage].replicas;
    const std::vector<int> local = local_microbatches(plan, worker);
    std::vector<Action>& out = program.actions[w];
    switch (plan.schedule) {
      case Schedule::kZbV: append_zbv(out, worker.stage, ranks, local, replicas); break;
      case Schedule::kDualPipeV: append_dualpipev(out, worker.stage, ranks, local, replicas); break;
      default:
        append_interleaved(out, worker.stage, ranks, plan.virtual_stages, local, replicas, plan.paired_steady_state);
        break;
    }
  }
  return program;
}

}  // namespace

// Interleaved 1F1B, p = 2 ranks, v = 2 chunks (stages 0 and 2 on rank 0, 1 and
// 3 on rank 1), M = 4: rank 0 warms up with 2 (p - 1) + (v - 1) p = 4
// forwards, rank 1 with 2; groups of p = 2 microbatches go through chunk 0,
// then chunk 1:
//
//   rank 0 | s0:F0 s0:F1 s2:F0 s2:F1 s0:F2 s2:B0 s0:F3 s2:B1 s2:F2 s0:B0 s2:F3 s0:B1 s2:B2 s2:B3 s0:B2 s0:B3
//   rank 1 | s1:F0 s1:F1 s3:F0 s3:B0 s3:F1 s3:B1 s1:F2 s1:B0 s1:F3 s1:B1 s3:F2 s3:B2 s3:F3 s3:B3 s1:B2 s1:B3
//
// then every chunk's ALLREDUCE0 (replicated pipelines) and STEP0.
Program make_interleaved_1f1b(const Plan& plan, const Program* only) { return make_chunked(plan, only); }

// ZB-V and DualPipeV: see append_zbv and append_dualpipev above.
Program make_zbv(const Plan& plan, const Program* only) { return make_chunked(plan, only); }
Program make_dualpipev(const Plan& plan, const Program* only) { return make_chunked(plan, only); }

}  // namespace baton
