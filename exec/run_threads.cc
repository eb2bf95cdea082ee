// The threads backend: every worker of the Program on its own thread of this
// process, one Mailbox for transfers and a ThreadsReduceGroup per replicated
// stage. A step starts all worker threads at a common origin and joins them;
// if one fails, the mailbox and reduce groups are aborted so the others stop
// waiting, and the first error is returned. Checkpoints are taken between
// steps, when every worker thread has been joined.
// On a GPU (TrainOptions::device) every worker has its own stream on it
// (exec/device.h); a worker's tensors are made on its stream, by the thread
// that builds the worker with the worker's device bound.
#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "exec/checkpoint.h"
#include "exec/errors.h"
#include "exec/executor.h"
#include "exec/run_setup.h"
#include "exec/transport_threads.h"

namespace baton::exec {

namespace {

struct ThreadsWorld {
  std::vector<WorkerDevicePtr> devices;  // [worker]
  std::unique_ptr<Mailbox> mailbox;
  std::vector<std::unique_ptr<ThreadsReduceGroup>> groups;    // [stage], null when not replicated
  std::vector<std::unique_ptr<ThreadsTransport>> transports;  // [worker]
  std::vector<std::unique_ptr<ThreadsReducer>> reducers;      // one per (worker, stage), null when not replicated
  std::vector<std::unique_ptr<Worker>> workers;

  void abort() {
    mailbox->abort();
    for (auto& group : groups) {
      if (group) group->abort();
    }
  }
};

Result<ThreadsWorld> make_world(const PreparedRun& run, const TrainOptions& options) {
  ThreadsWorld world;
  for (int w = 0; w < run.program.num_workers(); ++w) {
    auto device = make_worker_device(options.device);
    if (!device) return device.error();
    world.devices.push_back(std::move(*device));
  }
  world.mailbox = std::make_unique<Mailbox>(run.program.num_workers(), options.timeout);
  for (const StagePlan& stage : run.plan.stages) {
    world.groups.push_back(stage.replicas > 1 ? std::make_unique<ThreadsReduceGroup>(stage.replicas, options.timeout)
                                              : nullptr);
  }
  for (int w = 0; w < run.program.num_workers(); ++w) {
    const WorkerInfo& info = run.program.workers[static_cast<size_t>(w)];
    WorkerDevice& device = *world.devices[static_cast<size_t>(w)];
    world.transports.push_back(std::make_unique<ThreadsTransport>(*world.mailbox, device));
    std::vector<Reducer*> reducers;
    for (int s : stages_of(info)) {
      ThreadsReduceGroup* group = world.groups[static_cast<size_t>(s)].get();
      world.reducers.push_back(group ? std::make_unique<ThreadsReducer>(*group, info.replica, device) : nullptr);
      reducers.push_back(world.reducers.back().get());
    }
    device.bind_thread();
    world.workers.push_back(
        std::make_unique<Worker>(worker_setup(run, w, options, world.transports.back().get(), &device, reducers)));
    device.unbind_thread();
  }
  return world;
}

// One long-lived thread per worker. run() hands every thread the same job
// (its worker's index) and returns when all have finished it; the threads
// wait between jobs and are joined when the crew is destroyed.
class StepCrew {
 public:
  StepCrew(size_t count, int intra_op_threads) {
    try {
      for (size_t w = 0; w < count; ++w) {
        threads_.emplace_back([this, w, intra_op_threads] {
          // OpenMP's thread count is per calling thread: set it in every worker.
          at::set_num_threads(intra_op_threads);
          loop(w);
        });
      }
    } catch (...) {
      stop();  // the threads already made end before their jthreads join
      throw;
    }
  }
  ~StepCrew() { stop(); }  // the jthreads join after this

  StepCrew(const StepCrew&) = delete;
  StepCrew& operator=(const StepCrew&) = delete;

  void run(const std::function<void(size_t)>& job) {
    std::unique_lock lock(mutex_);
    job_ = &job;
    pending_ = threads_.size();
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
  }

  void loop(size_t w) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(size_t)>* job = nullptr;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      (*job)(w);
      {
        std::lock_guard lock(mutex_);
        --pending_;
      }
      done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::vector<std::jthread> threads_;  // last: joined before the rest is destroyed
};

// Runs one step on the crew's threads; spans of every worker go to `spans` when not null.
Result<StepReport> run_step(ThreadsWorld& world, StepCrew& crew, int step, std::vector<std::vector<Span>>* spans) {
  const size_t count = world.workers.size();
  std::vector<Status> results(count, ok_status());
  const Origin origin = world.devices.front()->origin();
  crew.run([&](size_t w) {
    world.devices[w]->bind_thread();
    try {
      results[w] = world.workers[w]->run_iteration(step, origin, spans ? &(*spans)[w] : nullptr);
    } catch (const std::exception& e) {
      results[w] = Error{fmt::format("worker {}, step {}: {}", w, step, error_text(e))};
    }
    world.devices[w]->unbind_thread();
    if (!results[w]) world.abort();
  });
  const Seconds wall(std::chrono::duration<double>(Clock::now() - origin.host).count());
  // Report the root cause: a worker's own failure rather than a peer's "abandoned".
  for (const Status& result : results) {
    if (!result && result.error().message.find("abandoned") == std::string::npos) return result.error();
  }
  for (const Status& result : results) {
    if (!result) return result.error();
  }
  std::vector<std::pair<int, double>> losses;
  for (const auto& worker : world.workers) {
    losses.insert(losses.end(), worker->losses().begin(), worker->losses().end());
  }
  std::sort(losses.begin(), losses.end());
  return StepReport{wall, mean_loss(losses)};
}

// Every stage's replica 0 writes its stage's file (a worker that runs chunks,
// one per chunk), then the manifest is written.
Status save_checkpoint(const PreparedRun& run, const ThreadsWorld& world, const TrainOptions& options,
                       int completed_steps) {
  for (size_t w = 0; w < world.workers.size(); ++w) {
    const WorkerInfo& info = run.program.workers[w];
    if (info.replica != 0) continue;
    auto states = world.workers[w]->boundary_states();
    if (!states) return states.error();
    for (const auto& [stage, state] : *states)
      if (Status s = write_stage_state(run.plan, options, completed_steps, stage, state); !s) return s;
  }
  return write_manifest(run.plan, options, completed_steps);
}

std::vector<Worker*> all_workers(const ThreadsWorld& world) {
  std::vector<Worker*> workers;
  for (const auto& worker : world.workers) workers.push_back(worker.get());
  return workers;
}

// Stage by stage, from the stage's replica 0.
Weights final_weights(const PreparedRun& run, const ThreadsWorld& world) {
  Weights weights;
  const std::vector<std::vector<int>> by_stage = workers_by_stage(run.program);
  for (int s = 0; s < run.program.num_stages; ++s) {
    const int w = by_stage[static_cast<size_t>(s)].front();
    auto layers = stage_weights(run.stages[static_cast<size_t>(s)],
                                world.workers[static_cast<size_t>(w)]->live_of_stage(s)->params);
    for (auto& layer : layers) weights.layers.push_back(std::move(layer));
  }
  return weights;
}

}  // namespace

Result<RunReport> run_threads(const Plan& plan, const TrainOptions& options) {
  auto prepared = prepare_run(plan, options);
  if (!prepared) return prepared.error();
  const PreparedRun& run = **prepared;
  if (run.fault && run.fault->kind == FaultKind::kHang)
    return Error{fmt::format("{}: kind=hang needs the gloo backend (a hung worker thread could never be joined)",
                             kFaultVariable)};
  at::set_num_threads(std::max(1, options.intra_op_threads));
  try {
    auto made = make_world(run, options);
    if (!made) return made.error();
    ThreadsWorld& world = *made;
    auto first_step = restore_checkpoint(run, options, all_workers(world));
    if (!first_step) return first_step.error();
    RunReport report;
    report.first_step = *first_step;
    std::vector<std::vector<Span>> spans(world.workers.size());
    StepCrew crew(world.workers.size(), std::max(1, options.intra_op_threads));
    for (int step = *first_step; step < options.steps; ++step) {
      const bool last = step + 1 == options.steps;
      auto result = run_step(world, crew, step, last ? &spans : nullptr);
      if (!result) return result.error();
      report.steps.push_back(*result);
      if (options.on_step) options.on_step(step, result->wall);
      if (!checkpoint_due(options, step + 1)) continue;
      if (Status s = save_checkpoint(run, world, options, step + 1); !s) return s.error();
    }
    std::vector<Span> all;
    for (auto& list : spans) all.insert(all.end(), list.begin(), list.end());
    report.trace = measured_trace(run.program, std::move(all));
    report.weights = final_weights(run, world);
    report.device = world.devices.front()->describe();
    for (const auto& worker : world.workers) report.workers.push_back(worker->stats());
    return report;
  } catch (const std::exception& e) {
    return Error{fmt::format("threads backend: {}", error_text(e))};
  }
}

}  // namespace baton::exec
