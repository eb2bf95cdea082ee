#include "exec/stage.h"

namespace baton::exec {

VersionPtr VersionCounter::make(int number, std::vector<at::Tensor> params) {
  const int alive = alive_.fetch_add(1) + 1;
  int peak = peak_.load();
  while (alive > peak && !peak_.compare_exchange_weak(peak, alive)) {
  }
  auto* version = new WeightVersion{number, std::move(params)};
  return VersionPtr(version, [this](const WeightVersion* v) {
    alive_.fetch_sub(1);
    delete v;
  });
}

StageModel::StageModel(const ModelDef& model, LayerRange layers) : model_(&model), layers_(layers) {
  size_t offset = 0;
  for (int l = layers.begin; l < layers.end; ++l) {
    layer_offsets_.push_back(offset);
    for (const ParamDef& param : model.layers[static_cast<size_t>(l)].params) {
      param_shapes_.push_back(param.shape);
      int64_t count = 1;
      for (int64_t d : param.shape) count *= d;
      num_elements_ += count;
      ++offset;
    }
  }
  layer_offsets_.push_back(offset);
}

at::Tensor StageModel::forward(const at::Tensor& input, const std::vector<at::Tensor>& params) const {
  at::Tensor x = input;
  const at::TensorList all(params);
  for (int l = layers_.begin; l < layers_.end; ++l) {
    const size_t i = static_cast<size_t>(l - layers_.begin);
    x = model_->layers[static_cast<size_t>(l)].forward(
        x, all.slice(layer_offsets_[i], layer_offsets_[i + 1] - layer_offsets_[i]));
  }
  return x;
}

std::vector<at::Tensor> StageModel::initial_params(uint64_t seed) const {
  std::vector<at::Tensor> params;
  for (int l = layers_.begin; l < layers_.end; ++l) {
    for (at::Tensor& p : init_layer_params(*model_, l, seed)) params.push_back(std::move(p));
  }
  return as_leaves(std::move(params));
}

std::vector<int64_t> StageModel::input_shape(int64_t batch) const {
  std::vector<int64_t> shape{batch};
  const std::vector<int64_t>& per_sample =
      is_first() ? model_->input_shape : model_->layers[static_cast<size_t>(layers_.begin - 1)].output_shape;
  shape.insert(shape.end(), per_sample.begin(), per_sample.end());
  return shape;
}

std::vector<int64_t> StageModel::output_shape(int64_t batch) const {
  std::vector<int64_t> shape{batch};
  const auto& per_sample = model_->layers[static_cast<size_t>(layers_.end - 1)].output_shape;
  shape.insert(shape.end(), per_sample.begin(), per_sample.end());
  return shape;
}

at::ScalarType StageModel::input_dtype() const { return is_first() ? model_->input_dtype : at::kFloat; }

std::vector<at::Tensor> StageModel::views_of(const at::Tensor& flat) const {
  std::vector<at::Tensor> views;
  int64_t offset = 0;
  for (const auto& shape : param_shapes_) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    views.push_back(flat.narrow(0, offset, count).view(shape));
    offset += count;
  }
  return views;
}

std::vector<at::Tensor> as_leaves(std::vector<at::Tensor> tensors) {
  for (at::Tensor& t : tensors) t = t.detach().requires_grad_(true);
  return tensors;
}

}  // namespace baton::exec
