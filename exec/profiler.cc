// Per-layer profiler: measure_profile (exec/executor.h).
//
// Each measured step runs the model layer by layer, every layer's input a
// fresh leaf, so each layer's forward and backward can be timed on its own:
//   forward  l: y_l = layer_l(x_l)            (the last layer: + the loss)
//                the first layer's forward also generates the microbatch's
//                input and the last layer's its target, as the executor's
//                first and last stages do (exec/worker.cc): synthetic data
//                costs time there, so the profile carries it
//   backward l: grad of y_l w.r.t. (params_l, x_l), given dL/dy_l; before it,
//                the zero-bubble split of the same backward timed apart, as
//                the executor runs it (exec/weight_grad.h): I = the backward
//                with the linear layers' weight products put off (x_l's
//                gradient and the other operators' parameters'), W = those
//                products. The profile keeps the fused backward as
//                backward_ms and splits it in the ratio of the I and W medians
//                (backward_input_ms, backward_weight_ms), so the halves add up
//                to the whole
//   optimizer l: what the executor's STEP does to the layer's parameters
//                (exec/worker.cc): w - lr * g out of place into new leaves,
//                and the gradient buffer zeroed
// With ProfileOptions::whole_pass each step then times the whole model's
// forward (input, every layer, the loss), backward (one autograd call for
// every parameter) and optimizer step as one call each.
// With ProfileOptions::streams >= 2, after the steps, the whole model's passes
// run on that many threads at once (measure_shared_streams).
// Every timed region starts with the profiler's work done and is timed by the device
// (exec/device.h): the host clock on the CPU; on a GPU, CUDA events on the
// profiler's own stream, from an event recorded once that stream was idle to one
// recorded after the region's last kernel.
// The options.quantile of the measured steps is kept (default the median);
// the spread of the samples around each layer's median is the compute noise.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "exec/device.h"
#include "exec/errors.h"
#include "exec/executor.h"
#include "exec/model.h"
#include "exec/sample_loader.h"
#include "exec/stage.h"
#include "exec/weight_grad.h"
#include "sim/stats.h"

namespace baton::exec {

namespace {

struct LayerTimes {
  std::vector<double> forward_s;
  std::vector<double> backward_s;
  std::vector<double> forward_host_s;  // the issuing call's wall time (HostTimes)
  std::vector<double> backward_host_s;
  std::vector<double> input_s;   // I alone
  std::vector<double> weight_s;  // W alone
  std::vector<double> optimizer_s;
};

// What the executor's STEP does to parameters (exec/worker.cc): w - lr * g
// out of place into new leaves (discarded here), the gradients zeroed.
void optimizer_step(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> next;
  for (size_t p = 0; p < params.size(); ++p) next.push_back(params[p] - grads[p] * 0.05);
  for (size_t p = 0; p < params.size(); ++p) grads[p].zero_();
  next = as_leaves(std::move(next));
}

// The whole model's pass, one call each (ProfileOptions::whole_pass).
struct PassTimes {
  std::vector<double> forward_s;
  std::vector<double> backward_s;
  std::vector<double> optimizer_s;
};

struct Profiler {
  const ModelDef* model;
  WorkerDevice* clock;  // bound to the profiling thread
  at::Device device;
  std::vector<std::vector<at::Tensor>> params;  // [layer]
  uint64_t seed = 1;
  int64_t batch = 1;
  Seconds gap;
  std::vector<int> gap_at;  // see ProfileOptions::gap_at
  // Sample 0's input and target, read as a run's forwards read them
  // (exec/sample_loader.h: on a GPU made ahead and only copied in the forward).
  SampleLoader* samples = nullptr;

  bool pause_forward(size_t l) const {
    return gap_before(gap_at, static_cast<int>(params.size()), static_cast<int>(l), true);
  }
  bool pause_backward(size_t l) const {
    return gap_before(gap_at, static_cast<int>(params.size()), static_cast<int>(l), false);
  }

  // Times `body`, after `gap` of sleep when `pause`; the wall time of the
  // call itself goes to `host` when given.
  template <typename F>
  double timed(F&& body, bool pause, std::vector<double>* host = nullptr) const {
    if (pause && gap.value > 0.0) std::this_thread::sleep_for(std::chrono::duration<double>(gap.value));
    clock->begin(clock->origin());
    const Clock::time_point issued = Clock::now();
    body();
    if (host) host->push_back(std::chrono::duration<double>(Clock::now() - issued).count());
    const int end = clock->mark();
    if (Status settled = clock->settle(); !settled) throw std::runtime_error(settled.error().message);
    return clock->seconds(end).value;
  }
  // One forward and backward; appends the times of every layer.
  void measure_step(std::vector<LayerTimes>& times, std::vector<int64_t>& output_bytes) const;
  // One forward, backward and optimizer step of the whole model, one call
  // each; appends their times.
  void measure_whole_pass(PassTimes& times) const;
};

void Profiler::measure_whole_pass(PassTimes& times) const {
  at::Tensor loss;
  times.forward_s.push_back(timed(
      [&] {
        at::Tensor x = samples->input(0);
        for (size_t l = 0; l < params.size(); ++l) x = model->layers[l].forward(x, params[l]);
        loss = model->loss(x, samples->target(0));
      },
      gap_at.empty()));
  std::vector<at::Tensor> all;
  for (const std::vector<at::Tensor>& layer : params) all.insert(all.end(), layer.begin(), layer.end());
  std::vector<at::Tensor> grads;
  times.backward_s.push_back(timed([&] { grads = torch::autograd::grad({loss}, all); }, gap_at.empty()));
  times.optimizer_s.push_back(timed([&] { optimizer_step(all, grads); }, gap_at.empty()));
}

void Profiler::measure_step(std::vector<LayerTimes>& times, std::vector<int64_t>& output_bytes) const {
  const size_t layers = params.size();
  std::vector<at::Tensor> inputs(layers);
  std::vector<at::Tensor> outputs(layers);
  at::Tensor x;
  for (size_t l = 0; l < layers; ++l) {
    if (l > 0) inputs[l] = x.detach().requires_grad_(true);
    times[l].forward_s.push_back(timed(
        [&] {
          if (l == 0) inputs[l] = samples->input(0);
          outputs[l] = model->layers[l].forward(inputs[l], params[l]);
          output_bytes[l] = static_cast<int64_t>(outputs[l].nbytes());
          x = outputs[l];
          if (l + 1 == layers) outputs[l] = model->loss(outputs[l], samples->target(0));
        },
        pause_forward(l), &times[l].forward_host_s));
  }
  at::Tensor grad_output;
  std::vector<at::Tensor> grads;
  for (size_t l = layers; l-- > 0;) {
    std::vector<at::Tensor> seeds;
    if (grad_output.defined()) seeds.push_back(grad_output);
    // The fused backward first, right after the next layer's, as in a run:
    // timed after this layer's I and W, it found the activations and weights
    // they had just read in the cache (vgg-mini's backwards ran 7-42% longer
    // in runs than so profiled). The graph is kept for I and W after it.
    times[l].backward_s.push_back(timed(
        [&] {
          std::vector<at::Tensor> wrt = params[l];
          if (l > 0) wrt.push_back(inputs[l]);
          grads = torch::autograd::grad({outputs[l]}, wrt, seeds, /*retain_graph=*/true);
        },
        pause_backward(l), &times[l].backward_host_s));
    WeightGradStore deferred;
    times[l].input_s.push_back(timed(
        [&] {
          std::vector<at::Tensor> wrt = params[l];
          if (l > 0) wrt.push_back(inputs[l]);
          const DeferWeightGrads defer(deferred);
          torch::autograd::grad({outputs[l]}, wrt, seeds, /*retain_graph=*/true, /*create_graph=*/false,
                                /*allow_unused=*/true);
        },
        false));
    std::vector<at::Tensor> scratch;
    for (const at::Tensor& p : params[l]) scratch.push_back(at::zeros_like(p));
    times[l].weight_s.push_back(timed([&] { deferred.apply(params[l], scratch); }, false));
    if (l > 0) grad_output = grads.back();
    times[l].optimizer_s.push_back(timed([&] { optimizer_step(params[l], grads); }, gap_at.empty()));
  }
}

Profile to_profile(const ModelDef& model, const ProfileOptions& options, const std::string& device, int microbatch_size,
                   const std::vector<LayerTimes>& times, const std::vector<int64_t>& output_bytes) {
  Profile profile;
  profile.model = model.name;
  profile.device = options.device == "cpu" ? fmt::format("cpu ({} threads)", options.intra_op_threads) : device;
  profile.microbatch_size = microbatch_size;
  for (size_t l = 0; l < times.size(); ++l) {
    const LayerDef& def = model.layers[l];
    Layer layer;
    layer.name = def.name;
    layer.description = def.description;
    layer.forward = Seconds(quantile(times[l].forward_s, options.quantile));
    layer.backward = Seconds(quantile(times[l].backward_s, options.quantile));
    const double input = quantile(times[l].input_s, 0.5);
    const double weight = quantile(times[l].weight_s, 0.5);
    const double input_share = input + weight > 0.0 ? input / (input + weight) : 0.5;
    layer.backward_input = layer.backward * input_share;
    layer.backward_weight = layer.backward - *layer.backward_input;
    layer.optimizer = Seconds(quantile(times[l].optimizer_s, options.quantile));
    layer.output_bytes = Bytes(output_bytes[l]);
    int64_t params = 0;
    for (const ParamDef& p : def.params) {
      int64_t count = 1;
      for (int64_t d : p.shape) count *= d;
      params += count * static_cast<int64_t>(sizeof(float));
    }
    layer.param_bytes = Bytes(params);
    if (l > 0) layer.inputs = {static_cast<int>(l) - 1};
    profile.layers.push_back(std::move(layer));
  }
  return profile;
}

// Every forward and backward sample over its layer's kept quantile (the
// profile's value), as kNoiseQuantiles
// quantiles (enough to keep the 0.25% tail: the rare ops a scheduler tick
// interrupts).
std::vector<double> compute_noise_of(const std::vector<LayerTimes>& times, double kept) {
  std::vector<double> factors;
  for (const LayerTimes& layer : times) {
    for (const std::vector<double>* samples : {&layer.forward_s, &layer.backward_s}) {
      const double reference = quantile(*samples, kept);
      if (!(reference > 0.0)) continue;
      for (double t : *samples) factors.push_back(t / reference);
    }
  }
  std::vector<double> out;
  if (factors.empty()) return out;
  std::sort(factors.begin(), factors.end());
  for (int i = 0; i < kNoiseQuantiles; ++i) out.push_back(quantile(factors, (i + 0.5) / kNoiseQuantiles));
  return out;
}

// One forward (input, every layer, the loss), backward and optimizer step of
// the whole model, issued back to back without waiting for the device.
void issue_pass(const ModelDef& model, const std::vector<std::vector<at::Tensor>>& params, SampleLoader& samples) {
  at::Tensor x = samples.input(0);
  for (size_t l = 0; l < params.size(); ++l) x = model.layers[l].forward(x, params[l]);
  const at::Tensor loss = model.loss(x, samples.target(0));
  std::vector<at::Tensor> all;
  for (const std::vector<at::Tensor>& layer : params) all.insert(all.end(), layer.begin(), layer.end());
  std::vector<at::Tensor> grads = torch::autograd::grad({loss}, all);
  optimizer_step(all, grads);
}

// ProfileOptions::streams: `streams` threads, each with its own worker device
// (on a GPU its own stream), parameters and samples, run the whole model's
// passes. A round: thread 0 alone runs `passes` of them (T1, from its start to
// its device idle again), then every thread runs `passes` at once (Tk, from
// the first start to the last finish). speedup = streams T1 / Tk, the median
// of 3 rounds. `passes` makes thread 0's part last about 50 ms (at least 2).
Result<SharedStreams> measure_shared_streams(const ModelDef& model, const ProfileOptions& options,
                                             int microbatch_size) {
  const int streams = options.streams;
  constexpr int kRounds = 3;
  std::barrier sync(streams);
  std::mutex guard;
  std::string failure;
  int passes = 2;
  std::vector<double> alone(kRounds, 0.0);
  std::vector<std::vector<std::pair<double, double>>> spans(kRounds, std::vector<std::pair<double, double>>(streams));
  const Clock::time_point zero = Clock::now();
  const auto since = [&] { return std::chrono::duration<double>(Clock::now() - zero).count(); };
  const auto work = [&](int index) {
    try {
      auto made = make_worker_device(options.device);
      if (!made) throw std::runtime_error(made.error().message);
      WorkerDevicePtr device = std::move(*made);
      device->bind_thread();
      struct Unbind {
        WorkerDevice& device;
        ~Unbind() { device.unbind_thread(); }
      } unbind{*device};
      std::vector<std::vector<at::Tensor>> params;
      for (int l = 0; l < model.num_layers(); ++l) {
        std::vector<at::Tensor> layer;
        for (const at::Tensor& p : init_layer_params(model, l, options.seed)) layer.push_back(p.to(device->device()));
        params.push_back(as_leaves(std::move(layer)));
      }
      SampleLoader samples(model, options.seed + static_cast<uint64_t>(index), microbatch_size, /*batches=*/1,
                           device->device(), SampleLoader::made_ahead_on(device->device()));
      samples.begin_iteration(0);
      for (int i = 0; i < 2; ++i) issue_pass(model, params, samples);
      device->origin();
      if (index == 0) {
        const double start = since();
        issue_pass(model, params, samples);
        device->origin();
        passes = std::clamp(static_cast<int>(std::ceil(0.05 / std::max(since() - start, 1e-6))), 2, 500);
      }
      sync.arrive_and_wait();
      for (int round = 0; round < kRounds; ++round) {
        if (index == 0) {
          const double start = since();
          for (int i = 0; i < passes; ++i) issue_pass(model, params, samples);
          device->origin();
          alone[round] = since() - start;
        }
        sync.arrive_and_wait();
        const double start = since();
        for (int i = 0; i < passes; ++i) issue_pass(model, params, samples);
        device->origin();
        spans[round][index] = {start, since()};
        sync.arrive_and_wait();
      }
    } catch (const std::exception& e) {
      const std::lock_guard<std::mutex> lock(guard);
      if (failure.empty()) failure = error_text(e);
      // Nothing throws after a thread's last arrival: this arrives at the phase
      // the others wait in, and their rounds go on without it.
      sync.arrive_and_drop();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < streams; ++i) threads.emplace_back(work, i);
  work(0);
  for (std::thread& thread : threads) thread.join();
  if (!failure.empty()) return Error{fmt::format("measuring {} streams at once: {}", streams, failure)};
  std::vector<double> speedups;
  std::vector<double> together;
  for (int round = 0; round < kRounds; ++round) {
    double first = spans[round][0].first;
    double last = spans[round][0].second;
    for (const auto& [start, end] : spans[round]) {
      first = std::min(first, start);
      last = std::max(last, end);
    }
    together.push_back(last - first);
    speedups.push_back(streams * alone[round] / (last - first));
  }
  if (options.progress)
    options.progress(
        fmt::format("{} streams at once: {} whole passes each in {:.3f} ms, {} alone in {:.3f} ms: "
                    "speedup {:.3f} (median of {:.3f})",
                    streams, passes, 1e3 * quantile(together, 0.5), passes, 1e3 * quantile(alone, 0.5),
                    quantile(speedups, 0.5), fmt::join(speedups, ", ")));
  return SharedStreams{streams, quantile(speedups, 0.5)};
}

}  // namespace

bool gap_before(const std::vector<int>& gap_at, int layers, int layer, bool forward) {
  if (gap_at.empty()) return true;
  const auto listed = [&](int l) { return std::find(gap_at.begin(), gap_at.end(), l) != gap_at.end(); };
  return forward ? listed(layer) : layer + 1 == layers || listed(layer + 1);
}

Status check_profile_request(std::string_view model_name, int microbatch_size, const ProfileOptions& options) {
  auto model = make_model(model_name);
  if (!model) return model.error();
  if (microbatch_size < 1) return Error{fmt::format("microbatch size must be >= 1, got {}", microbatch_size)};
  if (options.steps < 1 || options.warmup < 0) return Error{"profile: steps must be >= 1 and warmup >= 0"};
  if (options.streams < 1 || options.streams > 64)
    return Error{fmt::format("profile: streams must be 1 (none measured) to 64, got {}", options.streams)};
  for (int layer : options.gap_at) {
    if (layer >= model->num_layers()) {
      return Error{fmt::format("profile: --gap-at {}: model '{}' has {} layers (0 to {})", layer, model_name,
                               model->num_layers(), model->num_layers() - 1)};
    }
  }
  return ok_status();
}

Result<MeasuredProfile> measure_profile(std::string_view model_name, int microbatch_size,
                                        const ProfileOptions& options) {
  if (auto request = check_profile_request(model_name, microbatch_size, options); !request) return request.error();
  auto model = make_model(model_name);
  if (!model) return model.error();
  auto clock = make_worker_device(options.device);
  if (!clock) return clock.error();
  WorkerDevice& device = **clock;
  at::set_num_threads(std::max(1, options.intra_op_threads));
  device.bind_thread();
  struct Unbind {
    WorkerDevice& device;
    ~Unbind() { device.unbind_thread(); }
  } unbind{device};
  try {
    Profiler profiler{&*model,      &device,         device.device(), {},
                      options.seed, microbatch_size, options.gap,     options.gap_at};
    SampleLoader samples(*model, options.seed, microbatch_size, /*batches=*/1, device.device(),
                         SampleLoader::made_ahead_on(device.device()));
    samples.begin_iteration(0);
    profiler.samples = &samples;
    for (int l = 0; l < model->num_layers(); ++l) {
      std::vector<at::Tensor> params;
      for (const at::Tensor& p : init_layer_params(*model, l, options.seed)) params.push_back(p.to(device.device()));
      profiler.params.push_back(as_leaves(std::move(params)));
    }
    std::vector<LayerTimes> times(static_cast<size_t>(model->num_layers()));
    std::vector<int64_t> output_bytes(times.size(), 0);
    PassTimes whole;
    for (int step = 0; step < options.warmup; ++step) {
      profiler.measure_step(times, output_bytes);
      if (options.whole_pass) profiler.measure_whole_pass(whole);
      if (options.progress) options.progress(fmt::format("warm-up step {}/{}", step + 1, options.warmup));
    }
    times.assign(times.size(), LayerTimes{});
    whole = PassTimes{};
    const Clock::time_point start = Clock::now();
    const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    for (int step = 0; step < options.steps || elapsed() < options.min_time.value; ++step) {
      profiler.measure_step(times, output_bytes);
      if (options.whole_pass) profiler.measure_whole_pass(whole);
      if (options.progress && (step < options.steps || step % 50 == 0)) {
        options.progress(step < options.steps ? fmt::format("measured step {}/{}", step + 1, options.steps)
                                              : fmt::format("measured step {} ({:.1f} s of at least {:.1f} s)",
                                                            step + 1, elapsed(), options.min_time.value));
      }
    }
    std::vector<HostTimes> host;
    for (const LayerTimes& layer : times)
      host.push_back(
          HostTimes{Seconds(quantile(layer.forward_host_s, 0.5)), Seconds(quantile(layer.backward_host_s, 0.5))});
    MeasuredProfile measured{to_profile(*model, options, device.describe(), microbatch_size, times, output_bytes),
                             compute_noise_of(times, options.quantile), std::move(host), std::nullopt};
    // On a GPU the host's side of each pass rides along in the profile
    // (sim/profile.h: host_forward_ms, host_backward_ms); on the CPU the host
    // is the device.
    if (options.device != "cpu")
      for (size_t l = 0; l < measured.profile.layers.size(); ++l) {
        measured.profile.layers[l].host_forward = measured.host[l].forward;
        measured.profile.layers[l].host_backward = measured.host[l].backward;
      }
    if (options.whole_pass) {
      measured.whole_pass = WholePass{Seconds(quantile(whole.forward_s, options.quantile)),
                                      Seconds(quantile(whole.backward_s, options.quantile)),
                                      Seconds(quantile(whole.optimizer_s, options.quantile))};
      measured.profile.call_cost = call_cost_from(measured.profile, *measured.whole_pass);
    }
    if (options.streams >= 2) {
      auto shared = measure_shared_streams(*model, options, microbatch_size);
      if (!shared) return shared.error();
      measured.profile.shared_streams = *shared;
    }
    return measured;
  } catch (const std::exception& e) {
    return Error{fmt::format("profiling {}: {}", model_name, error_text(e))};
  }
}

}  // namespace baton::exec
