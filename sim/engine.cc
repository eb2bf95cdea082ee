// The event loop behind simulate_program (see simulator.h for the model and
// engine_internal.h for its state).
//
// A worker runs non-blocking actions (sends, all-reduce issue) at once and
// yields after each compute action, on a receive whose data is not there yet,
// and on a STEP whose all-reduce has not finished.
// A compute action's cost is its worker's SimOptions::worker_slowdown times
// its stage's (where given); with SimOptions::worker_action_overhead, a
// worker reaches each action that long after it is free to. With a noise
// seed and device compute noise, each compute action's time is its cost
// times the mean of one factor per layer of its stage, drawn uniformly from
// the device's compute_noise; with device all-reduce noise, each all-reduce
// takes one drawn extra time (never below zero in total);
// with device transfer noise, each receive completes one drawn extra time
// after the later of its data's modelled arrival and the worker reaching it,
// drawn from transfer_noise when the worker waited for the data and from
// transfer_noise_ready when they were there (never before the worker reached
// it, nor before its data were sent).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/engine_internal.h"

namespace baton {

namespace engine_detail {

Engine::Engine(const Program& program, const std::vector<StageCost>& costs, const Topology& topology,
               const SimOptions& options)
    : program_(program),
      costs_(costs),
      options_(options),
      network_(topology),
      microbatches_(std::max(program.batches, 1)),
      keep_intervals_(program.schedule == Schedule::kPipeDream),
      noise_(options.noise_seed) {
  if (options.noise_seed != 0 && !topology.device.compute_noise.empty())
    noise_factors_ = &topology.device.compute_noise;
  if (options.noise_seed != 0 && !topology.device.allreduce_noise.empty())
    allreduce_extras_ = &topology.device.allreduce_noise;
  if (options.noise_seed != 0 && !topology.device.transfer_noise.empty())
    late_extras_ = &topology.device.transfer_noise;
  if (options.noise_seed != 0 && !topology.device.transfer_noise_ready.empty())
    ready_extras_ = &topology.device.transfer_noise_ready;
  transfer_noise_ = late_extras_ != nullptr || ready_extras_ != nullptr;
  const int workers = program.num_workers();
  const size_t cells = static_cast<size_t>(program.num_stages) * static_cast<size_t>(microbatches_);
  state_.resize(static_cast<size_t>(workers));
  device_free_.assign(static_cast<size_t>(topology.num_compute_units()), Seconds(0.0));
  compute_unit_.reserve(program.workers.size());
  for (const WorkerInfo& info : program.workers) compute_unit_.push_back(topology.compute_unit(info.device));
  if (topology.levels.front().shared_compute && topology.levels.front().shared_speedup > 1.0)
    shared_.assign(device_free_.size(), SharedUnit(topology.levels.front().shared_speedup));
  act_arrival_.assign(cells, kUnknown);
  grad_arrival_.assign(cells, kUnknown);
  if (transfer_noise_) {
    act_extra_.assign(cells, {0.0, 0.0});
    grad_extra_.assign(cells, {0.0, 0.0});
  }
  collectives_.resize(static_cast<size_t>(program.num_stages));
  stage_devices_.resize(static_cast<size_t>(program.num_stages));
  stage_members_.assign(static_cast<size_t>(program.num_stages), 0);
  collective_free_.assign(static_cast<size_t>(topology.num_devices()), Seconds(0.0));
  for (const WorkerInfo& info : program.workers)
    for (int s : stages_of(info)) {
      stage_devices_[s].push_back(info.device);
      ++stage_members_[s];
    }
  for (size_t s = 0; s < program.allreduce_devices.size(); ++s)
    if (!program.allreduce_devices[s].empty()) stage_devices_[s] = program.allreduce_devices[s];
  version_used_.assign(static_cast<size_t>(program.num_stages) * microbatches_, 0);
  stage0_version_.assign(static_cast<size_t>(microbatches_), 0);
  const double factor = optimizer_state_factor(options.optimizer);
  for (const WorkerInfo& info : program.workers) {
    Bytes params;
    for (int s : stages_of(info)) params += costs[s].params;
    memory_.emplace_back(params, costs[info.stage].stash, factor);
  }
  device_held_.assign(static_cast<size_t>(topology.num_devices()), Bytes(0));
  for (size_t w = 0; w < memory_.size(); ++w) {
    raw_.memory_device.push_back(topology.memory_device(program.workers[w].device));
    device_held_[static_cast<size_t>(raw_.memory_device.back())] += memory_[w].held();
  }
  raw_.device_peak_memory = device_held_;
  raw_.busy.assign(static_cast<size_t>(workers), Seconds(0.0));
  raw_.compute_intervals.resize(static_cast<size_t>(workers));
  raw_.stage0_completion.assign(static_cast<size_t>(microbatches_), Seconds(-1.0));
  skipping_ = options.skip_repeats && !options.record_trace && noise_factors_ == nullptr &&
              allreduce_extras_ == nullptr && !transfer_noise_ && !keep_intervals_ && !program.vertical_sync &&
              shared_.empty() && options.worker_action_overhead.empty() && workers > 0;
}

double Engine::host_share(const Action& action) const {
  const StageCost& cost = costs_[action.stage];
  switch (action.kind) {
    case ActionKind::kForward: return cost.host_forward_share;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight: return cost.host_backward_share;
    default: return 1.0;  // the optimizer step: small kernels, as long as their issuing
  }
}

double SharedUnit::run(double start, double work, double share) {
  // Steps that ended before `start` no longer matter (starts come in time order).
  size_t first = 0;
  while (first + 1 < at_.size() && at_[first + 1] <= start) ++first;
  const auto drop = static_cast<std::ptrdiff_t>(first);
  at_.erase(at_.begin(), at_.begin() + drop);
  used_.erase(used_.begin(), used_.begin() + drop);
  issued_.erase(issued_.begin(), issued_.begin() + drop);
  if (at_.empty() || at_.front() > start) {  // idle until the first step (or for ever)
    at_.insert(at_.begin(), start);
    used_.insert(used_.begin(), 0.0);
    issued_.insert(issued_.begin(), 0.0);
  } else if (at_.front() < start) {
    at_.front() = start;
  }
  if (work <= 0.0) return start;
  // Walk the steps, taking what each leaves (at most 1), until the work is done.
  const auto split = [&](size_t i, double at) {
    const auto next = static_cast<std::ptrdiff_t>(i) + 1;
    at_.insert(at_.begin() + next, at);
    used_.insert(used_.begin() + next, used_[i]);
    issued_.insert(issued_.begin() + next, issued_[i]);
  };
  double left = work;
  for (size_t i = 0;; ++i) {
    double rate = std::min(1.0, std::max(0.0, capacity_ - used_[i]));
    if (share > 0.0) rate = std::min(rate, std::max(0.0, 1.0 - issued_[i]) / share);
    const bool last = i + 1 == at_.size();
    if (last) {  // nothing runs after here: the whole device (rate 1)
      const double end = at_[i] + left;
      split(i, end);
      used_[i] += 1.0;
      issued_[i] += share;
      used_[i + 1] = issued_[i + 1] = 0.0;
      return end;
    }
    const double length = at_[i + 1] - at_[i];
    if (rate > 0.0 && rate * length >= left) {  // ends inside this step: split it
      const double end = at_[i] + left / rate;
      split(i, end);
      used_[i] += rate;
      issued_[i] += rate * share;
      return end;
    }
    left -= rate * length;
    used_[i] += rate;
    issued_[i] += rate * share;
  }
}

double& Engine::arrival(int stage, ActionKind kind, int microbatch) {
  const size_t index = slot(stage, microbatch);
  return kind == ActionKind::kSendAct || kind == ActionKind::kRecvAct ? act_arrival_[index] : grad_arrival_[index];
}

Status Engine::run() {
  for (int w = 0; w < program_.num_workers(); ++w) schedule(w, Seconds(0.0));
  while (!queue_.empty()) {
    const Event event = queue_.top();
    queue_.pop();
    const int worker = event.worker();
    double time = event.time();
    state_[worker].next_event = kUnknown;
    if (skipping_ && worker == 0) time = skip_repeats(time);
    advance(worker, Seconds(time));
  }
  for (int w = 0; w < program_.num_workers(); ++w) {
    const auto& list = program_.actions[w];
    if (state_[w].pc < static_cast<int>(list.size()))
      return Error{fmt::format("simulation deadlocked: worker {} waits forever at action {} ({})\n{}", w, state_[w].pc,
                               to_string(list[state_[w].pc]), program_grid(program_, w, state_[w].pc))};
  }
  return ok_status();
}

void Engine::advance(int worker, Seconds now) {
  WorkerState& st = state_[worker];
  st.blocked = false;
  const auto& list = program_.actions[worker];
  while (st.pc < static_cast<int>(list.size())) {
    const Action& action = list[st.pc];
    if (!st.dispatched && !options_.worker_action_overhead.empty()) {
      st.dispatched = true;
      const Seconds overhead = options_.worker_action_overhead[static_cast<size_t>(worker)];
      if (overhead.value > 0.0) {
        schedule(worker, now + overhead);
        return;  // resumes at the action, which it then reaches
      }
    }
    if (st.reached < 0) st.reached = now.value;
    bool proceed = true;
    if (is_compute(action.kind)) {
      proceed = run_compute(worker, action, now);
      if (proceed) {
        ++st.pc;
        st.reached = kUnknown;
        st.dispatched = false;
        return;  // resumes at the compute's end
      }
    } else if (is_send(action.kind)) {
      run_send(worker, action, now);
    } else if (is_recv(action.kind)) {
      proceed = run_recv(worker, action, now);
    } else {
      run_allreduce(worker, action, now);
    }
    if (!proceed) return;
    ++st.pc;
    st.reached = kUnknown;
    st.dispatched = false;
  }
}

Seconds Engine::compute_time(const Action& action) const { return pass_cost(costs_[action.stage], action.kind).time; }

Seconds Engine::pass_time(int worker, const Action& action) const {
  const PassCost own = pass_cost(costs_[action.stage], action.kind);
  const int pc = state_[worker].pc;
  if (pc < 1) return own.time;
  const Action& first = program_.actions[worker][pc - 1];
  if (!first.paired || !is_compute(first.kind)) return own.time;
  const PairHidden hidden = pair_hidden(costs_[first.stage], first.kind, costs_[action.stage], action.kind);
  return max(Seconds(0.0), own.time - hidden.first - hidden.second);
}

bool Engine::run_compute(int worker, const Action& action, Seconds now) {
  if (action.kind == ActionKind::kStep && !step_ready(worker, now)) return false;
  const int unit_index = compute_unit_[worker];
  Seconds start = now;
  Seconds end;
  if (!shared_.empty()) {  // the unit's streams run at once: it starts now, at the rate left to it
    const Seconds work = noisy(slowed(worker, pass_time(worker, action)), costs_[action.stage].layers);
    end = Seconds(shared_[unit_index].run(now.value, work.value, host_share(action)));
  } else {  // one compute stream, taken in turns
    Seconds& free = device_free_[unit_index];
    start = max(now, free);
    end = start + noisy(slowed(worker, pass_time(worker, action)), costs_[action.stage].layers);
    free = end;
  }
  raw_.busy[worker] += end - start;
  if (keep_intervals_) raw_.compute_intervals[worker].emplace_back(start, end);
  track_memory(worker, action, true);
  if (ends_microbatch(action.kind)) {
    track_memory(worker, action, false);
    if (action.stage == 0) {
      raw_.stage0_completion[action.batch()] = end;
      if (skipping_) completion_log_.push_back(action.batch());
    }
  }
  raw_.makespan = max(raw_.makespan, end);
  record(worker, action, Stream::kCompute, start, end, Bytes(0));
  schedule(worker, end);
  return true;
}

// Every worker's change reaches its device's sum as it happens, so the
// device's peak is that of the sum at one instant, not the sum of the
// workers' peaks (which may fall at different times).
void Engine::track_memory(int worker, const Action& action, bool starting) {
  const Bytes before = memory_[worker].held();
  update_memory(worker, action, starting);
  const auto device = static_cast<size_t>(raw_.memory_device[static_cast<size_t>(worker)]);
  device_held_[device] += memory_[worker].held() - before;
  raw_.device_peak_memory[device] = max(raw_.device_peak_memory[device], device_held_[device]);
}

void Engine::update_memory(int worker, const Action& action, bool starting) {
  MemoryTracker& memory = memory_[worker];
  const size_t index = slot(action.stage, action.batch());
  if (action.kind == ActionKind::kStep) {
    memory.step();
  } else if (action.kind == ActionKind::kForward) {
    int version = memory.live_version();
    if (program_.vertical_sync && action.stage > 0) version = stage0_version_[action.batch()];
    if (action.stage == 0) stage0_version_[action.batch()] = version;
    version_used_[index] = version;
    memory.forward(version, costs_[action.stage].stash);
  } else if (!starting) {
    memory.backward(version_used_[index], costs_[action.stage].stash);
  }
}

bool Engine::step_ready(int worker, Seconds now) {
  WorkerState& st = state_[worker];
  // A STEP waits for every all-reduce its worker has issued, not only its own
  // stage's: a worker of several chunks steps none before all its chunks'
  // gradients are reduced, as the executor does (exec/worker.cc: STEP drains
  // every outstanding reduction) and as Megatron-LM does (finalize_model_grads,
  // then optimizer.step).
  double latest = 0.0;
  for (const auto& [stage, round] : st.pending) {
    const Collective& collective = collectives_[stage][round];
    if (collective.end < 0) {
      st.blocked = true;  // the last replica to issue wakes us
      return false;
    }
    latest = std::max(latest, collective.end);
  }
  if (latest > now.value) {
    schedule(worker, Seconds(latest));
    return false;
  }
  st.pending.clear();  // every one has ended: the worker's other STEPs need not look again
  return true;
}

Seconds Engine::slowed(int worker, Seconds cost) const {
  return options_.worker_slowdown.empty() ? cost : cost * options_.worker_slowdown[static_cast<size_t>(worker)];
}

Seconds Engine::noisy(Seconds cost, int layers) {
  if (noise_factors_ == nullptr || cost.value <= 0.0) return cost;
  std::uniform_int_distribution<size_t> pick(0, noise_factors_->size() - 1);
  const int draws = std::max(1, layers);
  double sum = 0.0;
  for (int i = 0; i < draws; ++i) sum += (*noise_factors_)[pick(noise_)];
  return cost * (sum / draws);
}

void Engine::run_send(int worker, const Action& action, Seconds now) {
  const StageCost& cost = action.kind == ActionKind::kSendAct ? costs_[action.stage] : costs_[action.stage - 1];
  const Bytes size = cost.activation_out;
  const TransferTimes times =
      network_.transfer(program_.workers[worker].device, program_.workers[action.peer].device, size, now);
  const bool forward = action.kind == ActionKind::kSendAct;
  const ActionKind recv_kind = forward ? ActionKind::kRecvAct : ActionKind::kRecvGrad;
  const int recv_stage = forward ? action.stage + 1 : action.stage - 1;
  arrival(recv_stage, recv_kind, action.batch()) = times.delivered.value;
  if (transfer_noise_) {
    // Never before the data left: an extra below minus the transfer's time is that.
    const auto draw = [&](const std::vector<Seconds>* sample) {
      if (sample == nullptr) return 0.0;
      const size_t pick = std::uniform_int_distribution<size_t>(0, sample->size() - 1)(noise_);
      return std::max((*sample)[pick].value, (now - times.delivered).value);
    };
    // A braced list evaluates left to right: the late draw first, as the seed fixes.
    (forward ? act_extra_ : grad_extra_)[slot(recv_stage, action.batch())] = {draw(late_extras_), draw(ready_extras_)};
  }
  if (skipping_) sent_.push_back(static_cast<uint32_t>(2 * slot(recv_stage, action.batch()) + (forward ? 0 : 1)));
  WorkerState& peer = state_[action.peer];
  if (peer.blocked) {
    const Action& waiting = program_.actions[action.peer][peer.pc];
    if (waiting.kind == recv_kind && waiting.batch() == action.batch() && waiting.stage == recv_stage) {
      peer.blocked = false;
      schedule(action.peer, Seconds(receive_ready(action.peer, waiting)));
    }
  }
  raw_.makespan = max(raw_.makespan, times.delivered);
  record(worker, action, Stream::kComm, times.wire_start, times.delivered, size);
}

double Engine::receive_ready(int worker, const Action& action) {
  const double arrived = arrival(action.stage, action.kind, action.batch());
  if (!transfer_noise_) return arrived;
  const double reached = state_[worker].reached;
  const auto& extras =
      (action.kind == ActionKind::kRecvAct ? act_extra_ : grad_extra_)[slot(action.stage, action.batch())];
  // A receive that waited for its data: from the modelled arrival, never before
  // the worker got there; one whose data were there: from the worker's arrival.
  return reached < arrived ? std::max(arrived + extras[0], reached) : reached + std::max(extras[1], 0.0);
}

bool Engine::run_recv(int worker, const Action& action, Seconds now) {
  double& arrived = arrival(action.stage, action.kind, action.batch());
  if (arrived < 0) {
    state_[worker].blocked = true;
    return false;
  }
  const double ready = receive_ready(worker, action);
  if (ready > now.value) {
    schedule(worker, Seconds(ready));
    return false;
  }
  const StageCost& cost = action.kind == ActionKind::kRecvAct ? costs_[action.stage - 1] : costs_[action.stage];
  record(worker, action, Stream::kComm, Seconds(state_[worker].reached), now, cost.activation_out);
  arrived = kConsumed;
  return true;
}

void Engine::run_allreduce(int worker, const Action& action, Seconds now) {
  auto& rounds = collectives_[action.stage];
  if (static_cast<int>(rounds.size()) <= action.round()) rounds.resize(action.round() + 1);
  Collective& collective = rounds[action.round()];
  ++collective.arrived;
  collective.latest_issue = max(collective.latest_issue, now);
  collective.members.emplace_back(worker, state_[worker].pc);
  auto& pending = state_[worker].pending;
  const auto earlier = std::find_if(pending.begin(), pending.end(),
                                    [&](const std::pair<int, int>& p) { return p.first == action.stage; });
  if (earlier != pending.end()) {
    earlier->second = action.round();  // a later round of the stage supersedes (pipedream)
  } else {
    pending.emplace_back(action.stage, action.round());
  }
  const auto& devices = stage_devices_[action.stage];
  if (collective.arrived < stage_members_[action.stage]) return;
  const Bytes size = costs_[action.stage].params;
  Seconds time = network_.allreduce_time(devices, size);
  if (allreduce_extras_ != nullptr) {
    const size_t pick = std::uniform_int_distribution<size_t>(0, allreduce_extras_->size() - 1)(noise_);
    time = max(Seconds(0.0), time + (*allreduce_extras_)[pick]);
  }
  // Collectives over a device run one after another on it (one communicator,
  // one stream; bandwidth is not shared out among several at once): a worker
  // that runs several chunks reduces them in turn.
  Seconds start = collective.latest_issue;
  for (int device : devices) start = max(start, collective_free_[static_cast<size_t>(device)]);
  const Seconds end = start + time;
  for (int device : devices) collective_free_[static_cast<size_t>(device)] = end;
  collective.end = end.value;
  raw_.makespan = max(raw_.makespan, end);
  for (const auto& [member, index] : collective.members) {
    const Action& member_action = program_.actions[member][index];
    if (options_.record_trace)
      raw_.spans.push_back(Span{member, index, member_action, Stream::kComm, start, end, size});
    if (state_[member].blocked) {
      state_[member].blocked = false;
      schedule(member, end);
    }
  }
}

void Engine::record(int worker, const Action& action, Stream stream, Seconds start, Seconds end, Bytes bytes) {
  if (!options_.record_trace) return;
  raw_.spans.push_back(Span{worker, state_[worker].pc, action, stream, start, end, bytes});
}

}  // namespace engine_detail

Result<RawRun> run_engine(const Program& program, const std::vector<StageCost>& costs, const Topology& topology,
                          const SimOptions& options) {
  const size_t workers = program.workers.size();
  if (!options.worker_slowdown.empty()) {
    if (options.worker_slowdown.size() != workers)
      return Error{
          fmt::format("worker_slowdown has {} factors for {} workers", options.worker_slowdown.size(), workers)};
    for (double factor : options.worker_slowdown)
      if (!(factor > 0.0) || !std::isfinite(factor))
        return Error{fmt::format("worker_slowdown: {} is not a positive factor", factor)};
  }
  if (!options.worker_action_overhead.empty()) {
    if (options.worker_action_overhead.size() != workers)
      return Error{fmt::format("worker_action_overhead has {} times for {} workers",
                               options.worker_action_overhead.size(), workers)};
    for (Seconds overhead : options.worker_action_overhead)
      if (!(overhead.value >= 0.0) || !std::isfinite(overhead.value))
        return Error{fmt::format("worker_action_overhead: {} s is not a time >= 0", overhead.value)};
  }
  engine_detail::Engine engine(program, costs, topology, options);
  if (auto ok = engine.run(); !ok) return ok.error();
  return engine.take();
}

}  // namespace baton
