// A stage of a model (a layer range) and its weight versions.
//
// A WeightVersion is immutable: its tensors are autograd leaves that no one
// modifies in place. An optimizer step makes a new version out of place
// (w' = w - lr * g), so a microbatch whose forward used an older version can
// still run its backward through it; that is weight stashing without the
// "modified by an inplace operation" error. Versions are shared_ptrs: the
// live one is held by the worker, stashed ones by the in-flight microbatches
// (and, under vertical sync, by the worker until no future forward needs
// them), so a version is freed the moment its last user lets go, as the
// simulator's MemoryTracker counts.
//
// Parameter layout: `params` is flat, layer by layer, each layer's in its
// LayerDef order; `layer_offsets[l]` is where layer begin + l starts.
// The gradient buffer is one contiguous float tensor of `num_elements()`
// floats (so one all-reduce moves it), with a view per parameter.
// Thread safety: StageModel is immutable; versions are read-only.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "exec/model.h"
#include "sim/profile.h"

namespace baton::exec {

struct WeightVersion {
  int number = 0;                  // STEPs applied before it (per worker)
  std::vector<at::Tensor> params;  // leaves, requires_grad
};
using VersionPtr = std::shared_ptr<const WeightVersion>;

// Counts the versions alive at once (live + stashed) for one worker.
class VersionCounter {
 public:
  VersionPtr make(int number, std::vector<at::Tensor> params);
  int peak() const { return peak_.load(); }

 private:
  std::atomic<int> alive_{0};
  std::atomic<int> peak_{0};
};

class StageModel {
 public:
  StageModel(const ModelDef& model, LayerRange layers);

  const ModelDef& model() const { return *model_; }
  LayerRange layers() const { return layers_; }
  bool is_first() const { return layers_.begin == 0; }
  bool is_last() const { return layers_.end == model_->num_layers(); }

  // Runs the stage's layers on `input` with `params` (a version's tensors).
  at::Tensor forward(const at::Tensor& input, const std::vector<at::Tensor>& params) const;
  // Initial parameters (leaves), the same on every replica.
  std::vector<at::Tensor> initial_params(uint64_t seed) const;
  // Shape of one microbatch's input / output, and their element types.
  std::vector<int64_t> input_shape(int64_t batch) const;
  std::vector<int64_t> output_shape(int64_t batch) const;
  at::ScalarType input_dtype() const;

  int64_t num_elements() const { return num_elements_; }
  // One view of `flat` (num_elements() floats) per parameter, shaped like it.
  std::vector<at::Tensor> views_of(const at::Tensor& flat) const;

 private:
  const ModelDef* model_;
  LayerRange layers_;
  std::vector<size_t> layer_offsets_;  // into the flat parameter list
  std::vector<std::vector<int64_t>> param_shapes_;
  int64_t num_elements_ = 0;
};

// Leaves requiring grad, detached copies of `tensors` (no graph history).
std::vector<at::Tensor> as_leaves(std::vector<at::Tensor> tensors);

}  // namespace baton::exec
