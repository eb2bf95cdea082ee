// The model zoo: registry, parameter initialisation, and the two
// classifiers (mlp, vgg-mini). gpt-mini lives in model_gpt.cc.
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "exec/executor.h"
#include "exec/model.h"
#include "exec/model_names.h"
#include "exec/weight_grad.h"

namespace baton::exec {

namespace {

constexpr int64_t kClasses = 10;
constexpr uint64_t kTeacherStream = 0x7EAC;
constexpr uint64_t kSampleStream = 0x5A3B;
constexpr uint64_t kInitStream = 0x1417;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

LayerDef linear_layer(std::string name, int64_t in, int64_t out, bool relu) {
  LayerDef layer;
  layer.name = std::move(name);
  layer.description = fmt::format("Linear({}, {}){}", in, out, relu ? " + ReLU" : "");
  layer.params = {ParamDef{{out, in}, relu ? Init::kHe : Init::kFanIn, static_cast<double>(in)},
                  ParamDef{{out}, Init::kFanIn, static_cast<double>(in)}};
  layer.output_shape = {out};
  layer.forward = [relu](const at::Tensor& x, at::TensorList p) {
    at::Tensor y = linear(x.flatten(1), p[0], p[1]);
    return relu ? at::relu(y) : y;
  };
  return layer;
}

// Conv 3x3, padding 1, ReLU, optional 2x2 max pool. `side` is the input's side.
LayerDef conv_layer(std::string name, int64_t in, int64_t out, int64_t side, bool pool) {
  LayerDef layer;
  layer.name = std::move(name);
  layer.description = fmt::format("Conv2d({}, {}, 3x3) + ReLU{}", in, out, pool ? " + MaxPool 2x2" : "");
  const double fan_in = static_cast<double>(in * 9);
  layer.params = {ParamDef{{out, in, 3, 3}, Init::kHe, fan_in}, ParamDef{{out}, Init::kFanIn, fan_in}};
  const int64_t out_side = pool ? side / 2 : side;
  layer.output_shape = {out, out_side, out_side};
  layer.forward = [pool](const at::Tensor& x, at::TensorList p) {
    at::Tensor y = at::relu(at::conv2d(x, p[0], p[1], /*stride=*/1, /*padding=*/1));
    return pool ? at::max_pool2d(y, {2, 2}) : y;
  };
  return layer;
}

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
}

// Samples of a classification task with kClasses clusters: sample j draws
// its class c and noise from its own numbers (random_key(seed, j));
// x = center_c + N(0, 1) noise, with the centers N(0, 1) drawn from the
// seed's teacher key. Images (C x H x W) get smooth centers: N(0, 1) at
// C x H/4 x W/4, each value repeated over a 4 x 4 block.
Sample cluster_sample(uint64_t seed, int64_t first, int64_t batch, const std::vector<int64_t>& shape) {
  const bool image = shape.size() == 3;
  int64_t size = 1;
  for (int64_t d : shape) size *= d;
  const int64_t center_size = image ? size / 16 : size;
  std::vector<float> centers(static_cast<size_t>(kClasses * center_size));
  fill_normal(centers.data(), static_cast<int64_t>(centers.size()), random_key(seed, kTeacherStream, 0));
  std::vector<int64_t> batch_shape{batch};
  batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
  at::Tensor x = at::empty(batch_shape);
  at::Tensor labels = at::empty({batch}, at::kLong);
  float* out = x.data_ptr<float>();
  for (int64_t j = 0; j < batch; ++j) {
    const uint64_t key = random_key(seed, kSampleStream, static_cast<uint64_t>(first + j));
    const int64_t label = static_cast<int64_t>(random_bits(key, 0) % kClasses);
    labels.data_ptr<int64_t>()[j] = label;
    float* row = out + j * size;
    fill_normal(row, size, random_key(seed, kSampleStream + 1, static_cast<uint64_t>(first + j)));
    const float* center = centers.data() + label * center_size;
    for (int64_t i = 0; i < size; ++i) {
      // Images: element (c, h, w) takes center (c, h / 4, w / 4).
      const int64_t from = image ? (i / (shape[1] * shape[2])) * (center_size / shape[0]) +
                                       ((i / shape[2]) % shape[1] / 4) * (shape[2] / 4) + (i % shape[2]) / 4
                                 : i;
      row[i] += center[from];
    }
  }
  return Sample{x, labels};
}

}  // namespace

at::Generator make_generator(uint64_t seed, uint64_t stream, uint64_t index) {
  return at::make_generator<at::CPUGeneratorImpl>(random_key(seed, stream, index));
}

uint64_t random_key(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index);
}

uint64_t random_bits(uint64_t key, uint64_t i) { return splitmix64(key + i * 0xD1B54A32D192ED03ull); }

void fill_normal(float* out, int64_t count, uint64_t key) {
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < count; i += 2) {
    // Uniforms in (0, 1]: 53 random bits, shifted away from 0 for the log.
    const double u1 = (static_cast<double>(random_bits(key, static_cast<uint64_t>(i)) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(random_bits(key, static_cast<uint64_t>(i + 1)) >> 11) * 0x1.0p-53;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(radius * std::cos(kTwoPi * u2));
    if (i + 1 < count) out[i + 1] = static_cast<float>(radius * std::sin(kTwoPi * u2));
  }
}

std::vector<at::Tensor> init_layer_params(const ModelDef& model, int layer, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::Generator gen = make_generator(seed, kInitStream, static_cast<uint64_t>(layer));
  std::vector<at::Tensor> params;
  for (const ParamDef& def : model.layers[static_cast<size_t>(layer)].params) {
    switch (def.init) {
      case Init::kFanIn: {
        const double bound = 1.0 / std::sqrt(def.scale);
        params.push_back(at::empty(def.shape).uniform_(-bound, bound, gen));
        break;
      }
      case Init::kHe: {
        const double bound = std::sqrt(6.0 / def.scale);
        params.push_back(at::empty(def.shape).uniform_(-bound, bound, gen));
        break;
      }
      case Init::kNormal: params.push_back(at::empty(def.shape).normal_(0.0, def.scale, gen)); break;
      case Init::kOnes: params.push_back(at::ones(def.shape)); break;
      case Init::kZeros: params.push_back(at::zeros(def.shape)); break;
    }
  }
  return params;
}

// mlp: 32 features -> 5 x (Linear 64 + ReLU) -> 10 classes.
ModelDef make_mlp() {
  ModelDef model;
  model.name = "mlp";
  model.description = "multi-layer perceptron, 32 -> 5 x 64 -> 10, cross-entropy on 10 noisy clusters";
  model.input_shape = {32};
  model.layers.push_back(linear_layer("fc1", 32, 64, true));
  for (int i = 2; i <= 5; ++i) model.layers.push_back(linear_layer(fmt::format("fc{}", i), 64, 64, true));
  model.layers.push_back(linear_layer("head", 64, kClasses, false));
  model.sample = [](uint64_t seed, int64_t first, int64_t batch) { return cluster_sample(seed, first, batch, {32}); };
  model.loss = cross_entropy;
  return model;
}

// vgg-mini: 3x16x16 images -> 4 convs (2 pools) -> 2 linear -> 10 classes.
ModelDef make_vgg_mini() {
  ModelDef model;
  model.name = "vgg-mini";
  model.description = "VGG-style CNN on 3x16x16 images: 4 conv 3x3 (8, 8, 16, 16 channels), 2 linear";
  model.input_shape = {3, 16, 16};
  model.layers.push_back(conv_layer("conv1", 3, 8, 16, false));
  model.layers.push_back(conv_layer("conv2", 8, 8, 16, true));
  model.layers.push_back(conv_layer("conv3", 8, 16, 8, false));
  model.layers.push_back(conv_layer("conv4", 16, 16, 8, true));
  model.layers.push_back(linear_layer("fc1", 16 * 4 * 4, 64, true));
  model.layers.push_back(linear_layer("fc2", 64, kClasses, false));
  model.sample = [](uint64_t seed, int64_t first, int64_t batch) {
    return cluster_sample(seed, first, batch, {3, 16, 16});
  };
  model.loss = cross_entropy;
  return model;
}

Result<ModelDef> make_model(std::string_view name) {
  if (name == "mlp") return make_mlp();
  if (name == "vgg-mini") return make_vgg_mini();
  if (name == "gpt-mini") return make_gpt_mini();
  return Error{fmt::format("unknown model '{}' (known: {})", name, fmt::join(kZooModelNames, ", "))};
}

std::vector<std::string> model_names() { return {kZooModelNames.begin(), kZooModelNames.end()}; }

Result<ModelInfo> model_info(std::string_view name) {
  auto model = make_model(name);
  if (!model) return model.error();
  ModelInfo info{model->name, model->description, {}};
  for (const LayerDef& layer : model->layers) info.layer_names.push_back(layer.name);
  return info;
}

}  // namespace baton::exec
