// The model zoo's internal form (LibTorch): a model is a chain of layers, each
// a pure function of its input and its own parameter tensors. Being
// functional (no modules holding state) is what lets one stage run several
// weight versions at once: a forward takes the parameter tensors of the
// version it must use.
//
// Every model also defines a synthetic task: deterministic samples from
// (seed, sample index), a loss on the last layer's output, and structure that
// makes the task learnable (so the loss falls).
//
// Shapes (B = microbatch size):
//   mlp       x [B, 32] float           -> 6 layers -> logits [B, 10]  (10 noisy clusters)
//   vgg-mini  x [B, 3, 16, 16] float    -> 6 layers -> logits [B, 10]
//   gpt-mini  tokens [B, 16] int64      -> embed, 4 blocks, head -> logits [B, 16, 32]
// Thread safety: a ModelDef is immutable; its functions may run on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "exec/pch.h"
#include "sim/result.h"

namespace baton::exec {

// How a parameter tensor starts.
enum class Init {
  kFanIn,   // uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), as torch.nn.Linear/Conv2d
  kHe,      // uniform(-sqrt(6/fan_in), sqrt(6/fan_in)): keeps the scale through ReLUs
  kNormal,  // normal(0, scale)
  kOnes,
  kZeros,
};

struct ParamDef {
  std::vector<int64_t> shape;
  Init init = Init::kFanIn;
  double scale = 0.0;  // fan_in for kFanIn and kHe, std for kNormal
};

using LayerFn = std::function<at::Tensor(const at::Tensor& input, at::TensorList params)>;

struct LayerDef {
  std::string name;
  std::string description;
  std::vector<ParamDef> params;
  std::vector<int64_t> output_shape;  // per sample (no batch dimension)
  LayerFn forward;
};

// One microbatch of the synthetic task.
struct Sample {
  at::Tensor input;   // the first layer's input
  at::Tensor target;  // what the loss compares the last layer's output with
};

struct ModelDef {
  std::string name;
  std::string description;
  std::vector<LayerDef> layers;
  std::vector<int64_t> input_shape;  // per sample
  at::ScalarType input_dtype = at::kFloat;
  // Samples [first, first + batch) of the task, a pure function of
  // (seed, first, batch): sample j depends only on (seed, j).
  std::function<Sample(uint64_t seed, int64_t first, int64_t batch)> sample;
  // Scalar mean loss of a batch.
  std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)> loss;

  int num_layers() const { return static_cast<int>(layers.size()); }
};

Result<ModelDef> make_model(std::string_view name);

// Layer `layer`'s initial parameters; depend only on (seed, layer).
std::vector<at::Tensor> init_layer_params(const ModelDef& model, int layer, uint64_t seed);

// A CPU generator for stream `stream`, item `index` of `seed` (splitmix64 mixed).
at::Generator make_generator(uint64_t seed, uint64_t stream, uint64_t index);

// Counter-based random numbers for synthetic data, without ATen dispatch per
// sample (a sample costs microseconds, not tens of them): the i-th number of
// (seed, stream, index) is splitmix64 of a mixed key plus i, so any sample can
// be drawn alone, on any worker, in any order.
uint64_t random_key(uint64_t seed, uint64_t stream, uint64_t index);
uint64_t random_bits(uint64_t key, uint64_t i);
// out[0..count) ~ N(0, 1) (Box-Muller on consecutive pairs of numbers of `key`).
void fill_normal(float* out, int64_t count, uint64_t key);

// The zoo's builders (one file each).
ModelDef make_mlp();
ModelDef make_vgg_mini();
ModelDef make_gpt_mini();

}  // namespace baton::exec
