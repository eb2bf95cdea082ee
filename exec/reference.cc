// Single-process references the distributed runs are checked against (see
// train_reference in exec/executor.h). Written independently of the Worker:
// the whole model runs layer by layer in one autograd graph, and pipedream's
// weight versions come from the staleness formula, not from the Program.
#include <algorithm>

#include <fmt/format.h>

#include "exec/device.h"
#include "exec/errors.h"
#include "exec/executor.h"
#include "exec/model.h"
#include "exec/run_setup.h"
#include "sim/schedules.h"

namespace baton::exec {

namespace {

using Params = std::vector<at::Tensor>;  // a flat list, layer after layer

struct Reference {
  const ModelDef* model;
  const Plan* plan;
  const TrainOptions* options;
  at::Device device;  // options->device's
};

Params initial_params(const ModelDef& model, LayerRange layers, uint64_t seed, at::Device device) {
  Params params;
  for (int l = layers.begin; l < layers.end; ++l) {
    for (at::Tensor& p : init_layer_params(model, l, seed)) params.push_back(p.to(device));
  }
  return as_leaves(std::move(params));
}

Sample sample_on(const Reference& ref, int64_t first, int64_t batch) {
  const Sample sample = ref.model->sample(ref.options->seed, first, batch);
  return Sample{sample.input.to(ref.device), sample.target.to(ref.device)};
}

// The whole model on `input`, stage s using parameter list `params[s]` of
// the layer range `ranges[s]`; returns the mean loss.
at::Tensor model_loss(const ModelDef& model, const std::vector<LayerRange>& ranges,
                      const std::vector<const Params*>& params, const Sample& sample) {
  at::Tensor x = sample.input;
  for (size_t s = 0; s < ranges.size(); ++s) {
    size_t next = 0;
    for (int l = ranges[s].begin; l < ranges[s].end; ++l) {
      const size_t count = model.layers[static_cast<size_t>(l)].params.size();
      x = model.layers[static_cast<size_t>(l)].forward(x, at::TensorList(*params[s]).slice(next, count));
      next += count;
    }
  }
  return model.loss(x, sample.target);
}

Params sgd_step(const Params& params, const std::vector<at::Tensor>& gradient_sum, double scale) {
  at::NoGradGuard no_grad;
  Params next;
  for (size_t i = 0; i < params.size(); ++i) next.push_back(params[i] - gradient_sum[i] * scale);
  return as_leaves(std::move(next));
}

// gpipe, 1f1b, dp: one forward/backward of the whole minibatch per step.
ReferenceReport train_flush(const Reference& ref) {
  const ModelDef& model = *ref.model;
  const int64_t minibatch = int64_t{ref.plan->microbatch_size} * ref.plan->batches;
  const std::vector<LayerRange> whole{LayerRange{0, model.num_layers()}};
  Params params = initial_params(model, whole[0], ref.options->seed, ref.device);
  ReferenceReport report;
  for (int step = 0; step < ref.options->steps; ++step) {
    const Sample sample = sample_on(ref, step * minibatch, minibatch);
    const at::Tensor loss = model_loss(model, whole, {&params}, sample);
    report.mean_loss.push_back(loss.item<double>());
    params = sgd_step(params, torch::autograd::grad({loss}, params), ref.options->learning_rate);
  }
  report.weights.layers = stage_weights(StageModel(model, whole[0]), params);
  return report;
}

// The staleness rule: version (within the pass) that stage s uses for microbatch k.
int pipedream_version(const Plan& plan, int stage, int microbatch) {
  const int replicas = plan.stages[static_cast<size_t>(stage)].replicas;
  const int local_index = microbatch / replicas;
  const int warmup = warmup_forwards(plan, stage, plan.batches / replicas);
  return std::max(0, local_index - warmup);
}

struct StageState {
  LayerRange layers;
  int replicas = 1;
  std::vector<Params> versions;          // index = version number
  std::vector<at::Tensor> gradient_sum;  // of the current round
  int in_round = 0;
};

void add_gradients(StageState& stage, const std::vector<at::Tensor>& grads, size_t first, double lr) {
  at::NoGradGuard no_grad;
  if (stage.gradient_sum.empty()) {
    for (const at::Tensor& p : stage.versions.back()) stage.gradient_sum.push_back(at::zeros_like(p));
  }
  for (size_t i = 0; i < stage.gradient_sum.size(); ++i) stage.gradient_sum[i].add_(grads[first + i]);
  if (++stage.in_round < stage.replicas) return;
  stage.versions.push_back(sgd_step(stage.versions.back(), stage.gradient_sum, lr / stage.replicas));
  stage.gradient_sum.clear();
  stage.in_round = 0;
}

Result<ReferenceReport> train_pipedream(const Reference& ref) {
  const Plan& plan = *ref.plan;
  const ModelDef& model = *ref.model;
  std::vector<StageState> stages;
  std::vector<LayerRange> ranges;
  for (const StagePlan& s : plan.stages) {
    stages.push_back(
        StageState{s.layers, s.replicas, {initial_params(model, s.layers, ref.options->seed, ref.device)}, {}, 0});
    ranges.push_back(s.layers);
  }
  ReferenceReport report;
  for (int pass = 0; pass < ref.options->steps; ++pass) {
    std::vector<int> base;
    for (const StageState& stage : stages) base.push_back(static_cast<int>(stage.versions.size()) - 1);
    double loss_sum = 0.0;
    for (int k = 0; k < plan.batches; ++k) {
      std::vector<const Params*> used;
      Params all;
      for (int s = 0; s < plan.num_stages(); ++s) {
        const int version = base[static_cast<size_t>(s)] + pipedream_version(plan, plan.vertical_sync ? 0 : s, k);
        if (version >= static_cast<int>(stages[static_cast<size_t>(s)].versions.size()))
          return Error{fmt::format("reference: stage {} needs version {} before it exists", s, version)};
        used.push_back(&stages[static_cast<size_t>(s)].versions[static_cast<size_t>(version)]);
        all.insert(all.end(), used.back()->begin(), used.back()->end());
      }
      const int64_t first = (int64_t{pass} * plan.batches + k) * plan.microbatch_size;
      const at::Tensor loss = model_loss(model, ranges, used, sample_on(ref, first, plan.microbatch_size));
      loss_sum += loss.item<double>();
      const std::vector<at::Tensor> grads = torch::autograd::grad({loss}, all);
      size_t offset = 0;
      for (StageState& stage : stages) {
        const size_t count = stage.versions.back().size();
        add_gradients(stage, grads, offset, ref.options->learning_rate);
        offset += count;
      }
    }
    report.mean_loss.push_back(loss_sum / plan.batches);
  }
  for (const StageState& stage : stages) {
    for (auto& layer : stage_weights(StageModel(model, stage.layers), stage.versions.back()))
      report.weights.layers.push_back(std::move(layer));
  }
  return report;
}

}  // namespace

Result<ReferenceReport> train_reference(const Plan& plan, const TrainOptions& options) {
  auto model = make_model(options.model);
  if (!model) return model.error();
  auto info = model_info(options.model);
  if (!info) return info.error();
  if (Status s = check_plan_for_model(plan, *info, "plan"); !s) return s.error();
  at::set_num_threads(std::max(1, options.intra_op_threads));
  auto device = make_worker_device(options.device);
  if (!device) return device.error();
  const Reference ref{&*model, &plan, &options, (*device)->device()};
  try {
    if (plan.schedule == Schedule::kPipeDream) return train_pipedream(ref);
    return train_flush(ref);
  } catch (const std::exception& e) {
    return Error{fmt::format("reference training: {}", error_text(e))};
  }
}

}  // namespace baton::exec
