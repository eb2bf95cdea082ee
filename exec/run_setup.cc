#include "exec/run_setup.h"

#include <algorithm>

#include <fmt/format.h>

#include "exec/checkpoint.h"
#include "sim/schedules.h"
#include "sim/validate.h"

namespace baton::exec {

namespace {

// B's (or W's) of `stage` run since the stage's previous STEP, for every STEP
// of the stage in one worker's list.
std::vector<int> local_step_counts(const std::vector<Action>& actions, int stage) {
  std::vector<int> counts;
  int backwards = 0;
  for (const Action& action : actions) {
    if (action.stage != stage) continue;
    if (action.kind == ActionKind::kBackward || action.kind == ActionKind::kBackwardWeight) ++backwards;
    if (action.kind == ActionKind::kStep) {
      counts.push_back(backwards);
      backwards = 0;
    }
  }
  return counts;
}

std::vector<std::map<int, std::vector<int>>> step_divisors(const Program& program) {
  const int workers = program.num_workers();
  std::vector<std::map<int, std::vector<int>>> local(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w)
    for (int s : stages_of(program.workers[static_cast<size_t>(w)]))
      local[static_cast<size_t>(w)][s] = local_step_counts(program.actions[static_cast<size_t>(w)], s);
  std::vector<std::map<int, std::vector<int>>> divisors = local;
  const std::vector<std::vector<int>> by_stage = workers_by_stage(program);
  for (int s = 0; s < static_cast<int>(by_stage.size()); ++s) {
    const std::vector<int>& group = by_stage[static_cast<size_t>(s)];
    if (group.size() < 2) continue;
    for (int w : group) {
      std::vector<int>& mine = divisors[static_cast<size_t>(w)][s];
      std::fill(mine.begin(), mine.end(), 0);
      for (int peer : group) {
        const std::vector<int>& theirs = local[static_cast<size_t>(peer)][s];
        for (size_t n = 0; n < mine.size() && n < theirs.size(); ++n) mine[n] += theirs[n];
      }
    }
  }
  return divisors;
}

std::vector<int> stage0_versions(const Program& program) {
  std::vector<int> versions(static_cast<size_t>(program.batches), 0);
  const std::vector<std::vector<int>> by_stage = workers_by_stage(program);
  for (int w : by_stage[0]) {
    int steps = 0;
    for (const Action& action : program.actions[static_cast<size_t>(w)]) {
      if (action.kind == ActionKind::kStep) ++steps;
      if (action.kind == ActionKind::kForward) versions[static_cast<size_t>(action.batch())] = steps;
    }
  }
  return versions;
}

Status check_checkpoint_options(const TrainOptions& options) {
  if (options.checkpoint_every < 0)
    return Error{fmt::format("checkpoint_every is {}; it must be >= 1 (or 0 for none)", options.checkpoint_every)};
  if ((options.checkpoint_every > 0 || options.resume) && options.checkpoint_dir.empty())
    return Error{"checkpoints (checkpoint_every, resume) need a checkpoint folder"};
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<PreparedRun>> prepare_run(const Plan& plan, const TrainOptions& options) {
  if (Status s = check_checkpoint_options(options); !s) return s.error();
  auto fault = fault_from_environment();
  if (!fault) return fault.error();
  auto model = make_model(options.model);
  if (!model) return model.error();
  auto info = model_info(options.model);
  if (!info) return info.error();
  const Status fits = check_plan_for_model(plan, *info, "plan");
  if (!fits) return fits.error();
  auto run = std::make_unique<PreparedRun>();
  run->model = std::make_unique<ModelDef>(std::move(*model));
  run->plan = plan;
  run->program = build_program(plan);
  const Status valid = validate_program(run->program);
  if (!valid) return Error{"the plan's program is invalid: " + valid.error().message};
  for (const StagePlan& stage : plan.stages) run->stages.emplace_back(*run->model, stage.layers);
  run->step_divisors = step_divisors(run->program);
  if (plan.schedule == Schedule::kPipeDream && plan.vertical_sync) run->stage0_versions = stage0_versions(run->program);
  if (*fault && (*fault)->rank >= run->program.num_workers()) {
    return Error{fmt::format("{} names rank {} but the plan has {} workers", kFaultVariable, (*fault)->rank,
                             run->program.num_workers())};
  }
  run->fault = *fault;
  return run;
}

WorkerSetup worker_setup(const PreparedRun& run, int worker, const TrainOptions& options, Transport* transport,
                         WorkerDevice* device, const std::vector<Reducer*>& reducers) {
  const WorkerInfo& info = run.program.workers[static_cast<size_t>(worker)];
  WorkerSetup setup;
  setup.program = &run.program;
  setup.worker = worker;
  const std::vector<int> stages = stages_of(info);
  for (size_t c = 0; c < stages.size(); ++c) {
    const int s = stages[c];
    setup.chunks.push_back(ChunkSetup{s, &run.stages[static_cast<size_t>(s)],
                                      c < reducers.size() ? reducers[c] : nullptr,
                                      run.step_divisors[static_cast<size_t>(worker)].at(s)});
  }
  setup.microbatch_size = run.plan.microbatch_size;
  setup.options = options;
  setup.transport = transport;
  setup.device = device;
  setup.forward_versions = run.stage0_versions;
  setup.receive_order = receive_order(run.program, worker);
  setup.fault = run.fault;
  return setup;
}

Trace measured_trace(const Program& program, std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.worker != b.worker) return a.worker < b.worker;
    return a.action_index < b.action_index;
  });
  Trace trace;
  trace.origin = "measured";
  trace.workers = program.workers;
  trace.num_stages = program.num_stages;
  trace.spans = std::move(spans);
  return trace;
}

std::vector<float> to_floats(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
  const float* data = flat.data_ptr<float>();
  return std::vector<float>(data, data + flat.numel());
}

std::vector<std::vector<std::vector<float>>> stage_weights(const StageModel& stage,
                                                           const std::vector<at::Tensor>& params) {
  std::vector<std::vector<std::vector<float>>> layers;
  size_t next = 0;
  for (int l = stage.layers().begin; l < stage.layers().end; ++l) {
    std::vector<std::vector<float>> layer;
    const size_t count = stage.model().layers[static_cast<size_t>(l)].params.size();
    for (size_t p = 0; p < count; ++p) layer.push_back(to_floats(params[next++]));
    layers.push_back(std::move(layer));
  }
  return layers;
}

double mean_loss(const std::vector<std::pair<int, double>>& losses) {
  if (losses.empty()) return 0.0;
  double sum = 0.0;
  for (const auto& [microbatch, loss] : losses) sum += loss;
  return sum / static_cast<double>(losses.size());
}

Result<int> restore_checkpoint(const PreparedRun& run, const TrainOptions& options,
                               const std::vector<Worker*>& workers) {
  if (!options.resume) return 0;
  auto completed = resumable_checkpoint(run.plan, options);
  if (!completed) return completed.error();
  for (Worker* worker : workers)
    for (int stage : stages_of(run.program.workers[static_cast<size_t>(worker->worker())])) {
      const StageModel& model = run.stages[static_cast<size_t>(stage)];
      auto state = read_stage_state(run.plan, options, *completed, stage, model.num_elements());
      if (!state) return state.error();
      worker->restore(stage, *state);
    }
  return *completed;
}

}  // namespace baton::exec
