// Single-layer formulas of the analytic cost model, stated as math
// (see sim/analytic.h for the model).
#include <algorithm>
#include "tests/catch_compat.h"

#include "sim/analytic.h"
#include "sim/analytic_ops.h"
#include "tests/analytic/analytic_fixtures.h"

namespace baton {
namespace {

using testing::compute_only_device;
using testing::forward_flops;
using testing::layer_named;
using testing::make_or_fail;

constexpr double kBatch = 32;
// V100 as stated in sim/analytic_devices.cc.
constexpr double kV100FlopsPerS = 125e12 * 0.40;
constexpr double kV100BytesPerS = 900e9 * 0.80;

TEST_CASE("first VGG-16 conv: roofline of 2*K*K*Cin*Cout*Hout*Wout*batch FLOPs", "[analytic]") {
  const Profile vgg = make_or_fail("vgg16", *device_spec("v100"), 32);
  const Layer& conv = layer_named(vgg, "features.0");
  const double flops = 2.0 * 3 * 3 * 3 * 64 * 224 * 224 * kBatch;
  // fp16: reads the 3x224x224 input and the 3x3x3x64 weights, writes 64x224x224.
  const double bytes = (3.0 * 224 * 224 * kBatch + 3 * 3 * 3 * 64 + 64.0 * 224 * 224 * kBatch) * 2;
  const double expected_s = std::max(flops / kV100FlopsPerS, bytes / kV100BytesPerS);
  CHECK(conv.forward.value == Approx(expected_s).epsilon(1e-12));
  // Three input channels make it memory-bound: writing its output takes longer.
  CHECK(bytes / kV100BytesPerS > flops / kV100FlopsPerS);
  CHECK(conv.backward.value == Approx(2 * expected_s).epsilon(1e-12));
  CHECK(conv.output_bytes.value == int64_t{64} * 224 * 224 * 32 * 2);
  CHECK(conv.param_bytes.value == (3 * 3 * 3 * 64 + 64) * 4);
}

TEST_CASE("second VGG-16 conv is compute-bound: time = FLOPs / (peak x efficiency)", "[analytic]") {
  const Profile vgg = make_or_fail("vgg16", *device_spec("v100"), 32);
  const Layer& conv = layer_named(vgg, "features.2");
  const double flops = 2.0 * 3 * 3 * 64 * 64 * 224 * 224 * kBatch;
  CHECK(conv.forward.value == Approx(flops / kV100FlopsPerS).epsilon(1e-12));
  // Its weight-gradient half is one forward, its input-gradient half another.
  REQUIRE(conv.backward_weight.has_value());
  CHECK(conv.backward_weight->value == Approx(conv.forward.value).epsilon(1e-12));
  CHECK(conv.backward_input->value == Approx(conv.forward.value).epsilon(1e-12));
}

TEST_CASE("ReLU is memory-bound: read and write every element once", "[analytic]") {
  const Profile vgg = make_or_fail("vgg16", *device_spec("v100"), 32);
  const Layer& relu = layer_named(vgg, "features.1");
  const double bytes = 2.0 * 64 * 224 * 224 * kBatch * 2;
  CHECK(relu.forward.value == Approx(bytes / kV100BytesPerS).epsilon(1e-12));
  CHECK(relu.param_bytes.value == 0);
  CHECK(relu.backward_weight->value == 0.0);
  CHECK(relu.backward_input->value == Approx(relu.backward.value).epsilon(1e-12));
}

TEST_CASE("VGG-16 first classifier Linear: 2*in*out*batch FLOPs, memory-bound at batch 32", "[analytic]") {
  const Profile vgg = make_or_fail("vgg16", *device_spec("v100"), 32);
  const Layer& fc = layer_named(vgg, "classifier.0");
  const double flops = 2.0 * 25088 * 4096 * kBatch;
  const double bytes = (kBatch * 25088 + 25088.0 * 4096 + kBatch * 4096) * 2;
  CHECK(fc.forward.value == Approx(std::max(flops / kV100FlopsPerS, bytes / kV100BytesPerS)).epsilon(1e-12));
  CHECK(bytes / kV100BytesPerS > flops / kV100FlopsPerS);  // reading 205 MB of weights dominates
  CHECK(fc.param_bytes.value == (int64_t{25088} * 4096 + 4096) * 4);
}

TEST_CASE("GPT block FLOPs: 24 s d^2 + 4 s^2 d GEMMs plus elementwise terms", "[analytic]") {
  const DeviceSpec ideal = compute_only_device();
  const double s = 2048, d = 2048, h = 16, f = 4 * d, b = 2;
  const Profile gpt = make_or_fail("gpt-1.3b", ideal, 2);
  const Layer& block = layer_named(gpt, "block.0");
  const double gemms = b * (24 * s * d * d + 4 * s * s * d);
  // LayerNorm 8 per element (x2), softmax 5 per score, GeLU 8 per element, residual adds 1 (x2).
  const double elementwise = b * (2 * 8 * s * d + 5 * h * s * s + 8 * s * f + 2 * s * d);
  CHECK(forward_flops(block, ideal) == Approx(gemms + elementwise).epsilon(1e-9));
  CHECK(block.param_bytes.value == int64_t{4} * (12 * 2048 * 2048 + 13 * 2048));
  CHECK(block.output_bytes.value == int64_t{2} * 2048 * 2048 * 2);
}

TEST_CASE("LSTM FLOPs: 2*B*T*4H*(in + H) GEMMs plus gates", "[analytic]") {
  const DeviceSpec ideal = compute_only_device();
  const double b = 64, t = 50, hidden = 1024;
  const Profile gnmt = make_or_fail("gnmt8", ideal, 64);
  // encoder.rnn2: LSTM(1024, 1024) + residual add.
  const Layer& lstm = layer_named(gnmt, "encoder.rnn2");
  const double gemms = 2 * b * t * 4 * hidden * (hidden + hidden);
  const double gates = 10 * b * t * hidden;
  const double residual = b * t * hidden;
  CHECK(forward_flops(lstm, ideal) == Approx(gemms + gates + residual).epsilon(1e-9));
  CHECK(lstm.param_bytes.value == int64_t{4} * (4 * 1024 * (1024 + 1024) + 8 * 1024));
}

TEST_CASE("backward = 2 x forward and its split sums to it, for every layer", "[analytic]") {
  for (const std::string& arch : analytic_architectures()) {
    const Profile profile = make_or_fail(arch, *device_spec("a100"), 2);
    for (const Layer& layer : profile.layers) {
      INFO(arch << " " << layer.name);
      CHECK(layer.backward.value == Approx(2 * layer.forward.value).epsilon(1e-12));
      REQUIRE(layer.backward_input.has_value());
      CHECK((*layer.backward_input + *layer.backward_weight).value == Approx(layer.backward.value).epsilon(1e-12));
      CHECK(layer.backward_weight->value >= 0.0);
      CHECK(layer.forward.value > 0.0);
    }
  }
}

TEST_CASE("output bytes scale with the microbatch and times grow with it", "[analytic]") {
  const DeviceSpec v100 = *device_spec("v100");
  const Profile one = make_or_fail("resnet50", v100, 1);
  const Profile eight = make_or_fail("resnet50", v100, 8);
  REQUIRE(one.num_layers() == eight.num_layers());
  for (int i = 0; i < one.num_layers(); ++i) {
    CHECK(eight.layers[i].output_bytes.value == 8 * one.layers[i].output_bytes.value);
    CHECK(eight.layers[i].param_bytes == one.layers[i].param_bytes);
    CHECK(eight.layers[i].forward > one.layers[i].forward);
  }
  CHECK(eight.microbatch_size == 8);
}

TEST_CASE("matmul and conv2d operator counts", "[analytic]") {
  const analytic::OpCost mm = analytic::matmul(3, 5, 7, 2, true);
  CHECK(mm.flops == 2.0 * 3 * 5 * 7);
  CHECK(mm.bytes == (3.0 * 7 + 7 * 5 + 3 * 5) * 2);
  const analytic::ConvShape shape{16, 32, 3, 2, 1, 9, 9};  // 9x9 -> 5x5
  CHECK(shape.out_height() == 5);
  const analytic::OpCost conv = analytic::conv2d(shape, 4, 2);
  CHECK(conv.flops == 2.0 * 3 * 3 * 16 * 32 * 5 * 5 * 4);
  CHECK(conv.bytes == (16.0 * 9 * 9 * 4 + 3 * 3 * 16 * 32 + 32.0 * 5 * 5 * 4) * 2);
}

}  // namespace
}  // namespace baton
