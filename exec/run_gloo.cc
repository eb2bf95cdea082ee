// The gloo backend, one rank: worker `rank` of the Program in this process,
// talking to the others through c10d's ProcessGroupGloo (exec/transport_gloo.h).
//
// Per step: world barrier, origin = this rank's steady clock, the action
// list, world barrier; the step's wall time is rank 0's barrier to barrier.
// At the end every rank sends rank 0 one "report" (its spans of the last
// step, its losses, its stats) as a float64 tensor, and each stage's replica
// 0 sends its final weights as one float32 tensor:
//   report = [n_spans, n_spans x (action_index, start_s, end_s, bytes),
//             n_losses, n_losses x (step, microbatch, loss),
//             actions, loop_s, compute_s, waiting_s, loop_cpu_s, compute_cpu_s,
//             peak_weight_versions, threads, n_steps, n_steps x step_compute_s]
// Checkpoints: after the end-of-step barrier each stage's replica 0 writes its
// stage file; a second barrier ensures all are in place before rank 0 writes
// the manifest, which makes the checkpoint complete.
// On GPUs (TrainOptions::device "cuda", run --backend nccl) rank r computes on
// GPU LOCAL_RANK and its activations, gradients and all-reduces move over NCCL
// (exec/cuda/nccl_links.h); barriers, the rendezvous and the end-of-run
// gathers stay on Gloo, with the tensors copied to the host.
#include <signal.h>

#include <algorithm>

#include <fmt/format.h>

#include "exec/checkpoint.h"
#include "exec/cuda/nccl_links.h"
#include "exec/errors.h"
#include "exec/executor.h"
#include "exec/run_setup.h"
#include "exec/transport_gloo.h"

namespace baton::exec {

namespace {

constexpr int kReportSizeTag = kFirstControlTag;
constexpr int kReportTag = kFirstControlTag + 1;
constexpr int kWeightsTag = kFirstControlTag + 2;

using Losses = std::vector<std::tuple<int, int, double>>;  // (step, microbatch, loss)

std::vector<double> encode_report(const std::vector<Span>& spans, const Losses& losses, const WorkerStats& stats) {
  std::vector<double> out{static_cast<double>(spans.size())};
  for (const Span& span : spans) {
    out.insert(out.end(), {static_cast<double>(span.action_index), span.start.value, span.end.value,
                           static_cast<double>(span.bytes.value)});
  }
  out.push_back(static_cast<double>(losses.size()));
  for (const auto& [step, microbatch, loss] : losses) out.insert(out.end(), {double(step), double(microbatch), loss});
  out.insert(out.end(), {static_cast<double>(stats.actions), stats.loop.value, stats.compute.value, stats.waiting.value,
                         stats.loop_cpu.value, stats.compute_cpu.value, static_cast<double>(stats.peak_weight_versions),
                         static_cast<double>(stats.threads)});
  out.push_back(static_cast<double>(stats.step_compute.size()));
  for (Seconds compute : stats.step_compute) out.push_back(compute.value);
  return out;
}

void decode_report(const std::vector<double>& in, const Program& program, int worker, std::vector<Span>& spans,
                   Losses& losses, WorkerStats& stats) {
  size_t i = 0;
  const auto next = [&] { return i < in.size() ? in[i++] : 0.0; };
  const auto spans_count = static_cast<size_t>(next());
  for (size_t s = 0; s < spans_count; ++s) {
    const auto index = static_cast<int32_t>(next());
    const Action& action = program.actions[static_cast<size_t>(worker)][static_cast<size_t>(index)];
    const Seconds start(next());
    const Seconds end(next());
    spans.push_back(Span{worker, index, action, is_compute(action.kind) ? Stream::kCompute : Stream::kComm, start, end,
                         Bytes(static_cast<int64_t>(next()))});
  }
  const auto losses_count = static_cast<size_t>(next());
  for (size_t l = 0; l < losses_count; ++l) {
    const int step = static_cast<int>(next());
    const int microbatch = static_cast<int>(next());
    losses.emplace_back(step, microbatch, next());
  }
  stats.actions = static_cast<int64_t>(next());
  stats.loop = Seconds(next());
  stats.compute = Seconds(next());
  stats.waiting = Seconds(next());
  stats.loop_cpu = Seconds(next());
  stats.compute_cpu = Seconds(next());
  stats.peak_weight_versions = static_cast<int>(next());
  stats.threads = static_cast<int>(next());
  const auto steps_count = static_cast<size_t>(next());
  for (size_t k = 0; k < steps_count; ++k) stats.step_compute.emplace_back(next());
}

// On the host, for Gloo.
at::Tensor flat_params(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : params) flat.push_back(p.detach().reshape({-1}));
  return at::cat(flat).to(at::kCPU);
}

// The ranks' shared state while running.
struct Rank {
  const PreparedRun* run = nullptr;
  RankEnv env;
  TrainOptions options;
  GlooGroups groups;
  std::unique_ptr<Transport> transport;
  std::vector<std::unique_ptr<Reducer>> reducers;  // one per stage the rank runs, null when not replicated
  std::unique_ptr<Worker> worker;
  WorkerDevicePtr device;  // the CPU, or GPU LOCAL_RANK (bound to this thread)

  // `what` names the barrier ("barrier before step 3").
  Status barrier(const std::string& what) {
    return wait_work(groups.world->barrier(), options.timeout, what, "another rank");
  }
  Status send(const at::Tensor& tensor, int tag) {
    std::vector<at::Tensor> buffers{tensor};
    return wait_work(groups.world->send(buffers, 0, tag), options.timeout, "sending the report to rank 0", "rank 0");
  }
  Result<at::Tensor> recv(int src, std::vector<int64_t> shape, at::ScalarType dtype, int tag) {
    std::vector<at::Tensor> buffers{at::empty(shape, at::TensorOptions().dtype(dtype))};
    const Status status = wait_work(groups.world->recv(buffers, src, tag), options.timeout,
                                    fmt::format("receiving the report of rank {}", src), fmt::format("rank {}", src));
    if (!status) return status.error();
    return buffers[0];
  }
};

// Activations, gradients and all-reduces over NCCL (GPUs).
Status connect_nccl_links(Rank& rank) {
  auto links =
      cuda::connect_nccl(*rank.groups.store, rank.run->program, rank.env.rank, *rank.device, rank.options.timeout);
  if (!links) return links.error();
  rank.transport = std::move(links->transport);
  rank.reducers = std::move(links->reducers);
  return ok_status();
}

Status connect(Rank& rank) {
  auto groups = connect_world(rank.env, rank.options.timeout);
  if (!groups) return groups.error();
  rank.groups = std::move(*groups);
  const WorkerInfo& info = rank.run->program.workers[static_cast<size_t>(rank.env.rank)];
  std::vector<Reducer*> reducers;
  if (rank.options.device != "cpu") {
    if (Status s = connect_nccl_links(rank); !s) return s;
    for (const auto& reducer : rank.reducers) reducers.push_back(reducer.get());
    rank.worker = std::make_unique<Worker>(
        worker_setup(*rank.run, rank.env.rank, rank.options, rank.transport.get(), rank.device.get(), reducers));
    return ok_status();
  }
  for (int s : stages_of(info)) {
    const int replicas = rank.run->plan.stages[static_cast<size_t>(s)].replicas;
    rank.reducers.push_back(nullptr);
    if (replicas > 1) {
      auto group = connect_subgroup(rank.groups, s, info.replica, replicas, rank.options.timeout, rank.env.master_addr);
      if (!group) return group.error();
      rank.reducers.back() =
          std::make_unique<GlooReducer>(std::move(*group), workers_by_stage(rank.run->program)[static_cast<size_t>(s)]);
    }
    reducers.push_back(rank.reducers.back().get());
  }
  rank.transport = std::make_unique<GlooTransport>(rank.groups.world, rank.options.timeout);
  rank.worker = std::make_unique<Worker>(
      worker_setup(*rank.run, rank.env.rank, rank.options, rank.transport.get(), rank.device.get(), reducers));
  return ok_status();
}

// Called by every rank after the barrier that ends step completed_steps - 1.
Status save_checkpoint(Rank& rank, int completed_steps) {
  const WorkerInfo& info = rank.run->program.workers[static_cast<size_t>(rank.env.rank)];
  if (info.replica == 0) {
    auto states = rank.worker->boundary_states();
    if (!states) return states.error();
    for (const auto& [stage, state] : *states)
      if (Status s = write_stage_state(rank.run->plan, rank.options, completed_steps, stage, state); !s) return s;
  }
  if (Status s = rank.barrier(fmt::format("barrier after writing checkpoint {}", completed_steps)); !s) return s;
  if (rank.env.rank != 0) return ok_status();
  return write_manifest(rank.run->plan, rank.options, completed_steps);
}

Status run_steps(Rank& rank, int first_step, std::vector<Span>& spans, Losses& losses, std::vector<Seconds>& walls) {
  for (int step = first_step; step < rank.options.steps; ++step) {
    // Receives are posted before the barrier: Gloo's receiver announces each
    // one to its sender, socket writes that on a busy 2-core machine could
    // stall a rank 2-5 ms at the step's start; posted here, every send of the
    // step finds its receive posted.
    if (Status s = rank.worker->prepare_iteration(step); !s) return s;
    if (Status s = rank.barrier(fmt::format("barrier before step {}", step)); !s) return s;
    const Origin origin = rank.device->origin();
    const bool last = step + 1 == rank.options.steps;
    if (Status s = rank.worker->run_iteration(step, origin, last ? &spans : nullptr); !s) return s;
    if (Status s = rank.barrier(fmt::format("barrier after step {}", step)); !s) return s;
    walls.emplace_back(std::chrono::duration<double>(Clock::now() - origin.host).count());
    if (rank.env.rank == 0 && rank.options.on_step) rank.options.on_step(step, walls.back());
    for (const auto& [microbatch, loss] : rank.worker->losses()) losses.emplace_back(step, microbatch, loss);
    if (!checkpoint_due(rank.options, step + 1)) continue;
    if (Status s = save_checkpoint(rank, step + 1); !s) return s;
  }
  return ok_status();
}

Status send_to_root(Rank& rank, const std::vector<Span>& spans, const Losses& losses) {
  const std::vector<double> report = encode_report(spans, losses, rank.worker->stats());
  const at::Tensor size = at::full({1}, static_cast<int64_t>(report.size()), at::kLong);
  if (Status s = rank.send(size, kReportSizeTag); !s) return s;
  if (Status s = rank.send(at::tensor(report, at::kDouble), kReportTag); !s) return s;
  const WorkerInfo& info = rank.run->program.workers[static_cast<size_t>(rank.env.rank)];
  if (info.replica != 0) return ok_status();
  const std::vector<int> stages = stages_of(info);
  for (size_t c = 0; c < stages.size(); ++c)
    if (Status s =
            rank.send(flat_params(rank.worker->live_of_stage(stages[c])->params), kWeightsTag + static_cast<int>(c));
        !s)
      return s;
  return ok_status();
}

// Rank 0: gathers every rank's report and the weights of each stage's replica 0.
// walls[i] is step first_step + i.
Result<RunReport> gather_at_root(Rank& rank, int first_step, std::vector<Span> spans, Losses losses,
                                 const std::vector<Seconds>& walls) {
  const PreparedRun& run = *rank.run;
  RunReport report;
  report.first_step = first_step;
  report.device = rank.device->describe();  // rank 0's
  report.workers.push_back(rank.worker->stats());
  for (int r = 1; r < rank.env.world_size; ++r) {
    auto size = rank.recv(r, {1}, at::kLong, kReportSizeTag);
    if (!size) return size.error();
    auto blob = rank.recv(r, {size->item<int64_t>()}, at::kDouble, kReportTag);
    if (!blob) return blob.error();
    const double* data = blob->data_ptr<double>();
    WorkerStats stats;
    decode_report(std::vector<double>(data, data + blob->numel()), run.program, r, spans, losses, stats);
    report.workers.push_back(stats);
  }
  // Stage by stage, from each stage's replica 0 (the n-th stage a rank runs comes with tag kWeightsTag + n).
  const std::vector<std::vector<int>> by_stage = workers_by_stage(run.program);
  for (int s = 0; s < run.program.num_stages; ++s) {
    const int w = by_stage[static_cast<size_t>(s)].front();
    const StageModel& stage = run.stages[static_cast<size_t>(s)];
    at::Tensor flat;
    if (w == 0) {
      flat = flat_params(rank.worker->live_of_stage(s)->params);
    } else {
      const std::vector<int> stages = stages_of(run.program.workers[static_cast<size_t>(w)]);
      const int chunk = static_cast<int>(std::find(stages.begin(), stages.end(), s) - stages.begin());
      auto received = rank.recv(w, {stage.num_elements()}, at::kFloat, kWeightsTag + chunk);
      if (!received) return received.error();
      flat = *received;
    }
    for (auto& layer : stage_weights(stage, stage.views_of(flat))) report.weights.layers.push_back(std::move(layer));
  }
  std::sort(losses.begin(), losses.end());
  for (size_t i = 0; i < walls.size(); ++i) {
    std::vector<std::pair<int, double>> of_step;
    for (const auto& [s, microbatch, loss] : losses) {
      if (s == first_step + static_cast<int>(i)) of_step.emplace_back(microbatch, loss);
    }
    report.steps.push_back(StepReport{walls[i], mean_loss(of_step)});
  }
  report.trace = measured_trace(run.program, std::move(spans));
  return report;
}

Status check_env(const RankEnv& env, const Program& program) {
  if (env.world_size != program.num_workers()) {
    return Error{fmt::format("WORLD_SIZE is {} but the plan has {} workers: one rank per worker is needed",
                             env.world_size, program.num_workers())};
  }
  if (env.rank < 0 || env.rank >= env.world_size)
    return Error{fmt::format("RANK {} is outside [0, WORLD_SIZE = {})", env.rank, env.world_size)};
  return ok_status();
}

}  // namespace

Result<RunReport> run_gloo_rank(const Plan& plan, const TrainOptions& options, const RankEnv& env) {
  if (options.device != "cpu" && options.device != "cuda") {
    return Error{fmt::format("device '{}': a rank computes on the CPU, or (cuda) on GPU LOCAL_RANK", options.device)};
  }
  auto prepared = prepare_run(plan, options);
  if (!prepared) return prepared.error();
  if (Status s = check_env(env, (*prepared)->program); !s) return s.error();
  at::set_num_threads(std::max(1, options.intra_op_threads));
  signal(SIGPIPE, SIG_IGN);  // see exec/executor.h
  try {
    auto device = make_worker_device(options.device == "cpu" ? "cpu" : fmt::format("cuda:{}", env.local_rank));
    if (!device) return device.error();
    (*device)->bind_thread();  // for the whole run: this thread is the rank's worker
    Rank rank{prepared->get(), env, options, {}, nullptr, {}, nullptr, std::move(*device)};
    if (Status s = connect(rank); !s) return s.error();
    auto first_step = restore_checkpoint(**prepared, options, {rank.worker.get()});
    if (!first_step) return first_step.error();
    std::vector<Span> spans;
    Losses losses;
    std::vector<Seconds> walls;
    if (Status s = run_steps(rank, *first_step, spans, losses, walls); !s) return s.error();
    if (env.rank != 0) {
      if (Status s = send_to_root(rank, spans, losses); !s) return s.error();
      RunReport own;
      own.workers.push_back(rank.worker->stats());
      return own;
    }
    return gather_at_root(rank, *first_step, std::move(spans), std::move(losses), walls);
  } catch (const std::exception& e) {
    return Error{fmt::format("rank {}: {}", env.rank, error_text(e))};
  }
}

}  // namespace baton::exec
