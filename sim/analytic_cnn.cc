// Image classifiers at ImageNet resolution (3x224x224), laid out like
// torchvision's modules: VGG-16 and AlexNet one layer per module (layer names
// are torchvision's), ResNet-50 (v1.5, stride in the 3x3 conv) one layer per
// conv + BatchNorm (+ ReLU) and one per residual add + ReLU, so the profile is a
// DAG whose add layers read two producers.
#include <fmt/format.h>

#include "sim/analytic_ops.h"

namespace baton::analytic {

namespace {

// One sample's activation shape.
struct Chw {
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;

  int64_t elements() const { return channels * height * width; }
  std::string text() const { return fmt::format("{}x{}x{}", channels, height, width); }
};

struct Conv {
  int64_t out_channels = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t padding = 0;
};

enum class ConvTail { kNone, kBatchNorm, kBatchNormRelu };

ConvShape conv_shape(const Chw& in, const Conv& conv) {
  return ConvShape{in.channels, conv.out_channels, conv.kernel, conv.stride, conv.padding, in.height, in.width};
}

Chw conv_output(const Chw& in, const Conv& conv) {
  const ConvShape shape = conv_shape(in, conv);
  return Chw{conv.out_channels, shape.out_height(), shape.out_width()};
}

Chw pool_output(const Chw& in, int64_t kernel, int64_t stride, int64_t padding) {
  return Chw{in.channels, (in.height + 2 * padding - kernel) / stride + 1,
             (in.width + 2 * padding - kernel) / stride + 1};
}

// Conv2d, optionally followed by BatchNorm2d and ReLU (separate kernels, one layer).
// BatchNorm in training reads its input twice (statistics, then normalize) and
// writes once; ReLU reads and writes once.
LayerSpec conv_layer(const BuildContext& context, const std::string& name, const Chw& in, const Conv& conv, bool bias,
                     ConvTail tail) {
  const Chw out = conv_output(in, conv);
  const double out_elements = static_cast<double>(out.elements() * context.batch);
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("Conv2d({}, {}, {}x{}, stride {}, pad {}) {} -> {}", in.channels, conv.out_channels,
                          conv.kernel, conv.kernel, conv.stride, conv.padding, in.text(), out.text());
  spec.ops = {conv2d(conv_shape(in, conv), context.batch, context.bytes_per_element)};
  spec.parameters = conv.kernel * conv.kernel * in.channels * conv.out_channels + (bias ? conv.out_channels : 0);
  if (tail != ConvTail::kNone) {
    spec.what += " + BatchNorm2d";
    spec.ops.push_back(elementwise(out_elements, 2, 1, 5, context.bytes_per_element));
    spec.parameters += 2 * conv.out_channels;
  }
  if (tail == ConvTail::kBatchNormRelu) {
    spec.what += " + ReLU";
    spec.ops.push_back(elementwise(out_elements, 1, 1, 1, context.bytes_per_element));
  }
  spec.output_elements = out.elements();
  return spec;
}

LayerSpec max_pool_layer(const BuildContext& context, const std::string& name, const Chw& in, int64_t kernel,
                         int64_t stride, int64_t padding) {
  const Chw out = pool_output(in, kernel, stride, padding);
  const double b = static_cast<double>(context.batch);
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("MaxPool2d({}x{}, stride {}, pad {}) {} -> {}", kernel, kernel, stride, padding, in.text(),
                          out.text());
  // One comparison per window element; reads the input once, writes the output.
  spec.ops = {OpCost{static_cast<double>(out.elements() * kernel * kernel) * b,
                     static_cast<double>(in.elements() + out.elements()) * b * context.bytes_per_element, false}};
  spec.output_elements = out.elements();
  return spec;
}

LayerSpec avg_pool_layer(const BuildContext& context, const std::string& name, const Chw& in, const Chw& out) {
  const double b = static_cast<double>(context.batch);
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("AdaptiveAvgPool2d {} -> {}", in.text(), out.text());
  spec.ops = {OpCost{static_cast<double>(in.elements()) * b,
                     static_cast<double>(in.elements() + out.elements()) * b * context.bytes_per_element, false}};
  spec.output_elements = out.elements();
  return spec;
}

// A chain of modules named "<prefix>.<index>" (torchvision's nn.Sequential).
class SequentialBuilder {
 public:
  SequentialBuilder(const BuildContext& context, std::vector<LayerSpec>* layers, Chw shape)
      : context_(context), layers_(layers), shape_(shape) {}

  void start(const std::string& prefix) {
    prefix_ = prefix;
    index_ = 0;
  }
  void conv(const Conv& conv) {
    layers_->push_back(conv_layer(context_, next(), shape_, conv, /*bias=*/true, ConvTail::kNone));
    shape_ = conv_output(shape_, conv);
  }
  void relu() { layers_->push_back(relu_layer(context_, next(), shape_.elements(), shape_.text())); }
  void dropout() { layers_->push_back(dropout_layer(context_, next(), shape_.elements(), shape_.text())); }
  void max_pool(int64_t kernel, int64_t stride) {
    layers_->push_back(max_pool_layer(context_, next(), shape_, kernel, stride, 0));
    shape_ = pool_output(shape_, kernel, stride, 0);
  }
  // Flattens the current shape (a free view) into the linear layer's input.
  void linear(int64_t out_features) {
    layers_->push_back(linear_layer(context_, next(), 1, shape_.elements(), out_features, /*bias=*/true));
    shape_ = Chw{out_features, 1, 1};
  }
  void avg_pool(const std::string& name, const Chw& out) {
    layers_->push_back(avg_pool_layer(context_, name, shape_, out));
    shape_ = out;
  }

 private:
  std::string next() { return fmt::format("{}.{}", prefix_, index_++); }

  BuildContext context_;
  std::vector<LayerSpec>* layers_;
  Chw shape_;
  std::string prefix_;
  int index_ = 0;
};

}  // namespace

std::vector<LayerSpec> vgg16_layers(const BuildContext& context) {
  constexpr int64_t kPool = 0;
  const int64_t config[] = {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
                            kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
  std::vector<LayerSpec> layers;
  SequentialBuilder chain(context, &layers, Chw{3, 224, 224});
  chain.start("features");
  for (int64_t channels : config) {
    if (channels == kPool) {
      chain.max_pool(2, 2);
    } else {
      chain.conv(Conv{channels, 3, 1, 1});
      chain.relu();
    }
  }
  chain.avg_pool("avgpool", Chw{512, 7, 7});
  chain.start("classifier");
  chain.linear(4096);
  chain.relu();
  chain.dropout();
  chain.linear(4096);
  chain.relu();
  chain.dropout();
  chain.linear(1000);
  return layers;
}

std::vector<LayerSpec> alexnet_layers(const BuildContext& context) {
  std::vector<LayerSpec> layers;
  SequentialBuilder chain(context, &layers, Chw{3, 224, 224});
  chain.start("features");
  chain.conv(Conv{64, 11, 4, 2});
  chain.relu();
  chain.max_pool(3, 2);
  chain.conv(Conv{192, 5, 1, 2});
  chain.relu();
  chain.max_pool(3, 2);
  chain.conv(Conv{384, 3, 1, 1});
  chain.relu();
  chain.conv(Conv{256, 3, 1, 1});
  chain.relu();
  chain.conv(Conv{256, 3, 1, 1});
  chain.relu();
  chain.max_pool(3, 2);
  chain.avg_pool("avgpool", Chw{256, 6, 6});
  chain.start("classifier");
  chain.dropout();
  chain.linear(4096);
  chain.relu();
  chain.dropout();
  chain.linear(4096);
  chain.relu();
  chain.linear(1000);
  return layers;
}

namespace {

// A tensor produced by a named layer.
struct Produced {
  std::string layer;
  Chw shape;
};

// The residual add of a bottleneck block, then its ReLU (two kernels).
LayerSpec residual_add_layer(const BuildContext& context, const std::string& name, const Produced& branch,
                             const Produced& shortcut) {
  const double elements = static_cast<double>(branch.shape.elements() * context.batch);
  LayerSpec spec;
  spec.name = name;
  spec.what = fmt::format("residual add + ReLU {}", branch.shape.text());
  spec.ops = {elementwise(elements, 2, 1, 1, context.bytes_per_element),
              elementwise(elements, 1, 1, 1, context.bytes_per_element)};
  spec.output_elements = branch.shape.elements();
  spec.inputs = std::vector<std::string>{branch.layer, shortcut.layer};
  return spec;
}

// torchvision's Bottleneck: 1x1 (width) -> 3x3 (width, stride) -> 1x1 (4 x width),
// plus a 1x1 strided projection of the input when the shape changes.
Produced add_bottleneck(const BuildContext& context, std::vector<LayerSpec>* layers, const std::string& prefix,
                        const Produced& in, int64_t width, int64_t stride) {
  const Conv reduce{width, 1, 1, 0};
  const Conv spatial{width, 3, stride, 1};
  const Conv expand{4 * width, 1, 1, 0};
  const Chw reduced = conv_output(in.shape, reduce);
  const Chw spatial_out = conv_output(reduced, spatial);
  layers->push_back(conv_layer(context, prefix + ".conv1", in.shape, reduce, false, ConvTail::kBatchNormRelu));
  layers->back().inputs = std::vector<std::string>{in.layer};
  layers->push_back(conv_layer(context, prefix + ".conv2", reduced, spatial, false, ConvTail::kBatchNormRelu));
  layers->push_back(conv_layer(context, prefix + ".conv3", spatial_out, expand, false, ConvTail::kBatchNorm));
  const Produced branch{prefix + ".conv3", conv_output(spatial_out, expand)};
  Produced shortcut = in;
  if (in.shape.channels != 4 * width || stride != 1) {
    const Conv projection{4 * width, 1, stride, 0};
    layers->push_back(conv_layer(context, prefix + ".downsample", in.shape, projection, false, ConvTail::kBatchNorm));
    layers->back().inputs = std::vector<std::string>{in.layer};
    shortcut = Produced{prefix + ".downsample", conv_output(in.shape, projection)};
  }
  layers->push_back(residual_add_layer(context, prefix + ".add", branch, shortcut));
  return Produced{prefix + ".add", branch.shape};
}

}  // namespace

std::vector<LayerSpec> resnet50_layers(const BuildContext& context) {
  std::vector<LayerSpec> layers;
  const Chw image{3, 224, 224};
  const Conv stem{64, 7, 2, 3};
  layers.push_back(conv_layer(context, "conv1", image, stem, false, ConvTail::kBatchNormRelu));
  const Chw stem_out = conv_output(image, stem);
  layers.push_back(max_pool_layer(context, "maxpool", stem_out, 3, 2, 1));
  Produced current{"maxpool", pool_output(stem_out, 3, 2, 1)};
  struct Stage {
    int64_t width;
    int blocks;
    int64_t stride;
  };
  const Stage stages[] = {{64, 3, 1}, {128, 4, 2}, {256, 6, 2}, {512, 3, 2}};
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < stages[s].blocks; ++b) {
      const std::string prefix = fmt::format("layer{}.{}", s + 1, b);
      current = add_bottleneck(context, &layers, prefix, current, stages[s].width, b == 0 ? stages[s].stride : 1);
    }
  }
  layers.push_back(avg_pool_layer(context, "avgpool", current.shape, Chw{2048, 1, 1}));
  layers.push_back(linear_layer(context, "fc", 1, 2048, 1000, /*bias=*/true));
  return layers;
}

}  // namespace baton::analytic
