#include "exec/worker.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <exception>

#include <fmt/format.h>

#include "exec/errors.h"

namespace baton::exec {

namespace {

Stream stream_of(ActionKind kind) { return is_compute(kind) ? Stream::kCompute : Stream::kComm; }

// A number of its own for every thread that asks (std::thread::id values are
// reused once a thread has been joined; these are not).
uint64_t thread_tag() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t tag = next++;
  return tag;
}

// CPU time consumed by the calling thread.
Seconds thread_cpu_time() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return Seconds(static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec));
}

// Leaves on `device` (copies of `tensors`).
std::vector<at::Tensor> leaves_on(std::vector<at::Tensor> tensors, at::Device device) {
  for (at::Tensor& t : tensors) t = t.to(device);
  return as_leaves(std::move(tensors));
}

}  // namespace

Worker::Worker(WorkerSetup setup) : setup_(std::move(setup)) {
  const at::Device device = setup_.device->device();
  for (const ChunkSetup& chunk : setup_.chunks) {
    Chunk state;
    state.setup = chunk;
    state.live = counter_.make(0, leaves_on(chunk.model->initial_params(setup_.options.seed), device));
    state.gradient_flat = at::zeros({chunk.model->num_elements()}, at::TensorOptions().device(device));
    state.gradient_views = chunk.model->views_of(state.gradient_flat);
    chunks_.push_back(std::move(state));
  }
  cur_ = &chunks_.front();
  bool reads_samples = false;
  for (const Chunk& chunk : chunks_) reads_samples |= chunk.setup.model->is_first() || chunk.setup.model->is_last();
  samples_ = std::make_unique<SampleLoader>(chunks_.front().setup.model->model(), setup_.options.seed,
                                            setup_.microbatch_size, setup_.program->batches, device,
                                            reads_samples && SampleLoader::made_ahead_on(device));
}

Worker::Chunk& Worker::chunk_for(int stage) {
  for (Chunk& chunk : chunks_)
    if (chunk.setup.stage == stage) return chunk;
  throw std::runtime_error(fmt::format("worker {} does not run stage {}", setup_.worker, stage));
}

const VersionPtr& Worker::live_of_stage(int stage) const {
  for (const Chunk& chunk : chunks_)
    if (chunk.setup.stage == stage) return chunk.live;
  throw std::runtime_error(fmt::format("worker {} does not run stage {}", setup_.worker, stage));
}

int64_t Worker::sample_index(int microbatch) const {
  return static_cast<int64_t>(step_) * setup_.program->batches + microbatch;
}

int64_t Worker::sequence(int receiving_stage, int microbatch) const {
  return sample_index(microbatch) * setup_.program->num_stages + receiving_stage;
}

void Worker::begin_iteration(int step) {
  step_ = step;
  samples_->begin_iteration(step);
  pass_base_ = chunks_.front().live->number;
  for (Chunk& chunk : chunks_) chunk.inflight.assign(static_cast<size_t>(setup_.program->batches), InFlight{});
  losses_.clear();
  loss_tensors_.clear();
  records_.clear();
  kept_.clear();
  uses_left_.clear();
  if (setup_.forward_versions.empty()) return;
  for (const Action& action : setup_.program->actions[static_cast<size_t>(setup_.worker)]) {
    if (action.kind != ActionKind::kForward) continue;
    ++uses_left_[pass_base_ + setup_.forward_versions[static_cast<size_t>(action.batch())]];
  }
  const VersionPtr& live = chunks_.front().live;
  if (uses_left_.count(live->number) > 0) kept_[live->number] = live;
}

Status Worker::post_receives() {
  const int64_t batch = setup_.microbatch_size;
  const std::vector<Action>& actions = setup_.program->actions[static_cast<size_t>(setup_.worker)];
  for (const int index : setup_.receive_order) {
    const Action& action = actions[static_cast<size_t>(index)];
    const StageModel& stage = *chunk_for(action.stage).setup.model;
    const bool activation = action.kind == ActionKind::kRecvAct;
    const MessageKey key{action.peer, setup_.worker, activation ? Payload::kActivation : Payload::kGradient,
                         sequence(action.stage, action.batch())};
    auto posted = activation ? setup_.transport->post_recv(key, stage.input_shape(batch), stage.input_dtype())
                             : setup_.transport->post_recv(key, stage.output_shape(batch), at::kFloat);
    if (!posted) return posted.error();
    posted_[{action.kind, action.stage, action.batch()}] = std::move(*posted);
  }
  return ok_status();
}

Status Worker::prepare_iteration(int step) {
  begin_iteration(step);
  if (Status posted = post_receives(); !posted)
    return Error{fmt::format("worker {}, step {}: posting receives: {}", setup_.worker, step, posted.error().message)};
  prepared_step_ = step;
  return ok_status();
}

Status Worker::run_iteration(int step, const Origin& origin, std::vector<Span>* spans) {
  if (std::find(thread_tags_.begin(), thread_tags_.end(), thread_tag()) == thread_tags_.end()) {
    thread_tags_.push_back(thread_tag());
    stats_.threads = static_cast<int>(thread_tags_.size());
  }
  if (setup_.fault && setup_.fault->rank == setup_.worker && setup_.fault->step == step) inject_fault(*setup_.fault);
  if (prepared_step_ != step) {
    if (Status prepared = prepare_iteration(step); !prepared) return prepared;
  }
  prepared_step_ = -1;
  WorkerDevice& device = *setup_.device;
  device.begin(origin);
  const std::vector<Action>& actions = setup_.program->actions[static_cast<size_t>(setup_.worker)];
  const Seconds loop_cpu_start = thread_cpu_time();
  const int loop_start = device.mark();
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& action = actions[i];
    const size_t sends_before = sends_.size();
    const size_t reduces_before = reduces_.size();
    const Seconds cpu_start = is_compute(action.kind) ? thread_cpu_time() : Seconds();
    Result<Timing> timing = Error{};
    try {
      cur_ = &chunk_for(action.stage);
      timing = run_action(action);
    } catch (const std::exception& e) {
      timing = Error{error_text(e)};
    }
    if (is_compute(action.kind)) stats_.compute_cpu += thread_cpu_time() - cpu_start;
    if (!timing) {
      return Error{fmt::format("worker {}, action {} ({}), step {}: {}", setup_.worker, i, to_string(action), step,
                               timing.error().message)};
    }
    records_.push_back(Record{static_cast<int32_t>(i), action, *timing});
    const int record = static_cast<int>(records_.size()) - 1;
    if (sends_.size() > sends_before) sends_.back().record = record;
    if (reduces_.size() > reduces_before) reduces_.back().record = record;
    poll_outstanding(sends_);
  }
  const Status drained = drain(sends_);
  const int loop_end = device.mark();
  stats_.loop_cpu += thread_cpu_time() - loop_cpu_start;
  stats_.actions += static_cast<int64_t>(actions.size());
  stats_.peak_weight_versions = counter_.peak();
  if (!drained) return Error{fmt::format("worker {}: {}", setup_.worker, drained.error().message)};
  if (Status settled = device.settle(); !settled)
    return Error{fmt::format("worker {}, step {}: {}", setup_.worker, step, settled.error().message)};
  account(loop_start, loop_end, spans);
  return ok_status();
}

void Worker::account(int loop_start, int loop_end, std::vector<Span>* spans) {
  const WorkerDevice& device = *setup_.device;
  stats_.loop += device.seconds(loop_end) - device.seconds(loop_start);
  Seconds step_compute;
  for (const Record& record : records_) {
    const ActionKind kind = record.action.kind;
    const Seconds start = device.seconds(record.timing.start);
    const Seconds end = device.seconds(record.timing.end);
    if (is_compute(kind)) step_compute += end - start;
    if (is_recv(kind)) stats_.waiting += end - start;
    if (record.timing.wait_start >= 0) stats_.waiting += start - device.seconds(record.timing.wait_start);
    if (record.timing.issued >= 0) stats_.waiting += device.seconds(record.timing.issued) - start;
    if (spans != nullptr) {
      spans->push_back(
          Span{setup_.worker, record.index, record.action, stream_of(kind), start, end, Bytes(record.timing.bytes)});
    }
  }
  stats_.compute += step_compute;
  stats_.step_compute.push_back(step_compute);
  for (const auto& [microbatch, loss] : loss_tensors_) losses_.emplace_back(microbatch, loss.item<double>());
  loss_tensors_.clear();
}

Result<std::vector<std::pair<int, StageState>>> Worker::boundary_states() const {
  for (const Chunk& chunk : chunks_)
    for (size_t k = 0; k < chunk.inflight.size(); ++k) {
      const InFlight& mb = chunk.inflight[k];
      if (mb.received.defined() || mb.input.defined() || mb.output.defined() || mb.version ||
          mb.grad_output.defined() || mb.grad_input.defined())
        return Error{fmt::format("worker {}: microbatch {} of stage {} is in flight at the iteration boundary",
                                 setup_.worker, k, chunk.setup.stage)};
    }
  if (!sends_.empty() || !reduces_.empty() || !posted_.empty())
    return Error{fmt::format("worker {}: a transfer is outstanding at the iteration boundary", setup_.worker)};
  if (!kept_.empty()) {
    return Error{fmt::format("worker {}: weight version {} is still kept for vertical sync at the iteration boundary",
                             setup_.worker, kept_.begin()->first)};
  }
  std::vector<std::pair<int, StageState>> states;
  for (const Chunk& chunk : chunks_) {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& p : chunk.live->params) flat.push_back(p.detach().reshape({-1}));
    states.emplace_back(chunk.setup.stage, StageState{chunk.live->number, at::cat(flat).to(at::kCPU),
                                                      chunk.gradient_flat.to(at::kCPU, /*non_blocking=*/false,
                                                                             /*copy=*/true)});
  }
  return states;
}

void Worker::restore(int stage, const StageState& state) {
  Chunk& chunk = chunk_for(stage);
  std::vector<at::Tensor> params;
  for (const at::Tensor& view : chunk.setup.model->views_of(state.weights)) params.push_back(view.clone());
  chunk.live.reset();  // first, so that the version count stays what it was
  chunk.live = counter_.make(state.weight_version, leaves_on(std::move(params), setup_.device->device()));
  chunk.gradient_flat.copy_(state.gradient);
}

const at::Tensor& Worker::output_gradient(InFlight& mb, int microbatch) {
  if (!mb.grad_output.defined()) {
    // No RECV_GRAD: the worker runs the next stage too and its backward ran first.
    InFlight& next = chunk_for(cur_->setup.stage + 1).inflight[static_cast<size_t>(microbatch)];
    mb.grad_output = std::move(next.grad_input);
    next.grad_input = at::Tensor();
  }
  return mb.grad_output;
}

Result<Worker::Timing> Worker::run_action(const Action& action) {
  switch (action.kind) {
    case ActionKind::kForward: return forward(action.batch());
    case ActionKind::kBackward: return backward(action.batch());
    case ActionKind::kSendAct:
    case ActionKind::kSendGrad: return send(action);
    case ActionKind::kRecvAct:
    case ActionKind::kRecvGrad: return recv(action);
    case ActionKind::kAllReduce: return allreduce();
    case ActionKind::kStep: return step(action.round());
    case ActionKind::kBackwardInput: return backward_input(action.batch());
    case ActionKind::kBackwardWeight: return backward_weight(action.batch());
  }
  return Error{fmt::format("unknown action kind {}", static_cast<int>(action.kind))};
}

Result<VersionPtr> Worker::version_for_forward(int microbatch) {
  if (setup_.forward_versions.empty()) return cur_->live;
  const int number = pass_base_ + setup_.forward_versions[static_cast<size_t>(microbatch)];
  auto it = kept_.find(number);
  if (it == kept_.end()) return Error{fmt::format("vertical sync: weight version {} is not held", number)};
  VersionPtr version = it->second;
  if (--uses_left_[number] == 0) kept_.erase(it);
  return version;
}

Result<Worker::Timing> Worker::forward(int microbatch) {
  InFlight& mb = cur_->inflight[static_cast<size_t>(microbatch)];
  auto version = version_for_forward(microbatch);
  if (!version) return version.error();
  const StageModel& stage = *cur_->setup.model;
  const ModelDef& model = stage.model();
  Timing timing{setup_.device->mark()};
  if (stage.is_first()) {
    mb.input = samples_->input(microbatch);
  } else {
    // No RECV_ACT: the worker runs the previous stage too, which ran F k first.
    const at::Tensor& source = mb.received.defined()
                                   ? mb.received
                                   : chunk_for(cur_->setup.stage - 1).inflight[static_cast<size_t>(microbatch)].output;
    mb.input = source.detach().requires_grad_(true);
    mb.received = at::Tensor();
  }
  mb.output = stage.forward(mb.input, (*version)->params);
  if (stage.is_last()) {
    mb.output = model.loss(mb.output, samples_->target(microbatch));
    loss_tensors_.emplace_back(microbatch, mb.output.detach());
  }
  mb.version = std::move(*version);
  timing.end = setup_.device->mark();
  return timing;
}

// Without weight stashing: the forward again, from the stashed input, with
// the live weights (the last stage's loss included).
at::Tensor Worker::recompute_with_live(InFlight& mb, int microbatch) {
  const StageModel& stage = *cur_->setup.model;
  if (!stage.is_first()) mb.input = mb.input.detach().requires_grad_(true);
  at::Tensor out = stage.forward(mb.input, cur_->live->params);
  if (!stage.is_last()) return out;
  return stage.model().loss(out, samples_->target(microbatch));
}

Result<Worker::Timing> Worker::backward(int microbatch) {
  InFlight& mb = cur_->inflight[static_cast<size_t>(microbatch)];
  const StageModel& stage = *cur_->setup.model;
  Timing timing{setup_.device->mark()};
  const VersionPtr& used = setup_.options.weight_stashing ? mb.version : cur_->live;
  if (used != mb.version) mb.output = recompute_with_live(mb, microbatch);
  const bool input_grad = !stage.is_first();
  {  // scoped so that freeing the gradients counts as the backward's work
    std::vector<at::Tensor> inputs = used->params;
    if (input_grad) inputs.push_back(mb.input);
    std::vector<at::Tensor> grad_outputs;
    if (!stage.is_last()) grad_outputs.push_back(output_gradient(mb, microbatch));
    std::vector<at::Tensor> grads = torch::autograd::grad({mb.output}, inputs, grad_outputs);
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < cur_->gradient_views.size(); ++i) cur_->gradient_views[i].add_(grads[i]);
    if (input_grad) mb.grad_input = grads.back();
  }
  mb.input = mb.output = mb.grad_output = at::Tensor();
  mb.version.reset();
  timing.end = setup_.device->mark();
  return timing;
}

Result<Worker::Timing> Worker::backward_input(int microbatch) {
  InFlight& mb = cur_->inflight[static_cast<size_t>(microbatch)];
  const StageModel& stage = *cur_->setup.model;
  Timing timing{setup_.device->mark()};
  if (!mb.output.defined() || !mb.version)
    return Error{fmt::format("I{0} runs before F{0} or after its stash was released", microbatch)};
  {  // scoped so that freeing the gradients counts as the pass's work
    std::vector<at::Tensor> wrt = mb.version->params;
    if (!stage.is_first()) wrt.push_back(mb.input);
    std::vector<at::Tensor> grad_outputs;
    if (!stage.is_last()) grad_outputs.push_back(output_gradient(mb, microbatch));
    std::vector<at::Tensor> grads;
    {
      const DeferWeightGrads defer(mb.deferred);  // the linear layers' weight products wait for W
      grads = torch::autograd::grad({mb.output}, wrt, grad_outputs, /*retain_graph=*/false,
                                    /*create_graph=*/false, /*allow_unused=*/true);
    }
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < cur_->gradient_views.size(); ++i)
      if (grads[i].defined()) cur_->gradient_views[i].add_(grads[i]);  // the parameters of other operators
    if (!stage.is_first()) mb.grad_input = grads.back();
  }
  mb.output = mb.grad_output = at::Tensor();  // the graph is gone; the store holds what W needs
  timing.end = setup_.device->mark();
  return timing;
}

Result<Worker::Timing> Worker::backward_weight(int microbatch) {
  InFlight& mb = cur_->inflight[static_cast<size_t>(microbatch)];
  Timing timing{setup_.device->mark()};
  if (!mb.version) return Error{fmt::format("W{0} runs before F{0} or after its stash was released", microbatch)};
  if (!mb.deferred.apply(mb.version->params, cur_->gradient_views))
    return Error{fmt::format("W{}: a deferred weight gradient belongs to no parameter of the stage", microbatch)};
  mb.input = at::Tensor();
  mb.version.reset();
  timing.end = setup_.device->mark();
  return timing;
}

Result<Worker::Timing> Worker::send(const Action& action) {
  InFlight& mb = cur_->inflight[static_cast<size_t>(action.batch())];
  const bool activation = action.kind == ActionKind::kSendAct;
  at::Tensor tensor = activation ? mb.output.detach() : mb.grad_input;
  if (!activation) mb.grad_input = at::Tensor();
  const MessageKey key{setup_.worker, action.peer, activation ? Payload::kActivation : Payload::kGradient,
                       sequence(action.stage + (activation ? 1 : -1), action.batch())};
  Timing timing{setup_.device->mark(), -1, static_cast<int64_t>(tensor.nbytes())};
  auto pending = setup_.transport->send(key, tensor);
  if (!pending) return pending.error();
  timing.end = setup_.device->mark();
  if (*pending) sends_.push_back(Outstanding{-1, std::move(*pending)});
  return timing;
}

Result<Worker::Timing> Worker::recv(const Action& action) {
  InFlight& mb = cur_->inflight[static_cast<size_t>(action.batch())];
  const bool activation = action.kind == ActionKind::kRecvAct;
  const auto posted = posted_.find({action.kind, action.stage, action.batch()});
  if (posted == posted_.end()) return Error{fmt::format("{} was not posted", to_string(action))};
  Timing timing{setup_.device->mark()};
  auto tensor = posted->second->wait(setup_.options.timeout);
  posted_.erase(posted);
  if (!tensor) return tensor.error();
  timing.end = setup_.device->mark();
  timing.bytes = static_cast<int64_t>(tensor->nbytes());
  (activation ? mb.received : mb.grad_output) = std::move(*tensor);
  return timing;
}

Result<Worker::Timing> Worker::allreduce() {
  if (cur_->setup.reducer == nullptr) return Error{"ALLREDUCE on a stage without replicas"};
  Timing timing{setup_.device->mark(), -1, static_cast<int64_t>(cur_->gradient_flat.nbytes())};
  auto pending = cur_->setup.reducer->allreduce(cur_->gradient_flat);
  if (!pending) return pending.error();
  timing.end = setup_.device->mark();
  timing.issued = timing.end;
  reduces_.push_back(Outstanding{-1, std::move(*pending)});
  return timing;
}

Result<Worker::Timing> Worker::step(int round) {
  const int wait_start = setup_.device->mark();
  const Status reduced = drain(reduces_);
  if (!reduced) return reduced.error();
  const std::vector<int>& divisors = cur_->setup.step_divisors;
  if (round < 0 || round >= static_cast<int>(divisors.size()) || divisors[static_cast<size_t>(round)] < 1)
    return Error{fmt::format("STEP {} has no gradients to apply", round)};
  Timing timing{setup_.device->mark()};
  timing.wait_start = wait_start;
  const double scale = setup_.options.learning_rate / divisors[static_cast<size_t>(round)];
  VersionPtr previous = std::move(cur_->live);
  std::vector<at::Tensor> next;
  {
    at::NoGradGuard no_grad;
    next.reserve(previous->params.size());
    for (size_t i = 0; i < cur_->gradient_views.size(); ++i)
      next.push_back(previous->params[i] - cur_->gradient_views[i] * scale);
    cur_->gradient_flat.zero_();
  }
  const int number = previous->number + 1;
  previous.reset();  // freed here unless a stash or a future forward holds it
  cur_->live = counter_.make(number, as_leaves(std::move(next)));
  if (uses_left_.count(cur_->live->number) > 0) kept_[cur_->live->number] = cur_->live;
  timing.end = setup_.device->mark();
  return timing;
}

void Worker::poll_outstanding(std::vector<Outstanding>& list) {
  if (list.empty()) return;
  std::erase_if(list, [&](Outstanding& item) {
    if (!item.pending->done()) return false;
    mark_end(item.record);
    return true;
  });
}

Status Worker::drain(std::vector<Outstanding>& list) {
  for (Outstanding& item : list) {
    const Status status = item.pending->wait(setup_.options.timeout);
    if (!status) return status;
    mark_end(item.record);
  }
  list.clear();
  return ok_status();
}

void Worker::mark_end(int record) {
  if (record >= 0) records_[static_cast<size_t>(record)].timing.end = setup_.device->mark();
}

}  // namespace baton::exec
