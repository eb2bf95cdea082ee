// Whole architectures: layer structure and parameter counts against the
// published models (torchvision, Hugging Face, the GPT-3 paper).
#include "tests/catch_compat.h"

#include "sim/analytic.h"
#include "tests/analytic/analytic_fixtures.h"

namespace baton {
namespace {

using testing::compute_only_device;
using testing::forward_flops;
using testing::layer_named;
using testing::make_or_fail;
using testing::total_param_bytes;

TEST_CASE("VGG-16: torchvision's 138,357,544 parameters, one layer per module", "[analytic]") {
  const Profile vgg = make_or_fail("vgg16", *device_spec("v100"), 32);
  CHECK(total_param_bytes(vgg) == int64_t{138357544} * 4);
  // 13 conv + 13 ReLU + 5 max-pool, avgpool, 3 Linear + 2 ReLU + 2 Dropout.
  CHECK(vgg.num_layers() == 13 + 13 + 5 + 1 + 7);
  CHECK(vgg.layers.front().name == "features.0");
  CHECK(vgg.layers.back().name == "classifier.6");
  CHECK(vgg.layers.back().output_bytes.value == 1000 * 32 * 2);
  CHECK(vgg.model == "vgg16");
  CHECK(vgg.microbatch_size == 32);
  CHECK(vgg.device == "V100-SXM2-16GB (analytic: 125 TFLOP/s fp16 tensor x 0.40, 900 GB/s x 0.80)");
}

TEST_CASE("VGG-16 forward is about 15.5 GMAC = 31 GFLOP per image", "[analytic]") {
  const DeviceSpec ideal = compute_only_device();
  const Profile vgg = make_or_fail("vgg16", ideal, 1);
  double flops = 0.0;
  for (const Layer& layer : vgg.layers) flops += forward_flops(layer, ideal);
  CHECK(flops == Approx(2 * 15.47e9).epsilon(0.02));
}

TEST_CASE("AlexNet: torchvision's 61,100,840 parameters", "[analytic]") {
  const Profile alexnet = make_or_fail("alexnet", *device_spec("v100"), 128);
  CHECK(total_param_bytes(alexnet) == int64_t{61100840} * 4);
  CHECK(alexnet.num_layers() == 21);
  CHECK(layer_named(alexnet, "features.2").output_bytes.value == int64_t{64} * 27 * 27 * 128 * 2);
}

TEST_CASE("ResNet-50: torchvision's 25,557,032 parameters and a DAG of residual adds", "[analytic]") {
  const Profile resnet = make_or_fail("resnet50", *device_spec("v100"), 32);
  CHECK(total_param_bytes(resnet) == int64_t{25557032} * 4);
  // stem conv, maxpool, 16 blocks x (3 convs + add), 4 projections, avgpool, fc.
  CHECK(resnet.num_layers() == 2 + 16 * 4 + 4 + 2);
  int multi_input = 0;
  for (const Layer& layer : resnet.layers) {
    if (layer.inputs.size() > 1) ++multi_input;
  }
  CHECK(multi_input == 16);  // one residual add per bottleneck
  const Layer& add = layer_named(resnet, "layer2.0.add");
  REQUIRE(add.inputs.size() == 2);
  CHECK(resnet.layers[add.inputs[0]].name == "layer2.0.conv3");
  CHECK(resnet.layers[add.inputs[1]].name == "layer2.0.downsample");
  const Layer& identity_add = layer_named(resnet, "layer2.1.add");
  CHECK(resnet.layers[identity_add.inputs[1]].name == "layer2.0.add");
  const Layer& projection = layer_named(resnet, "layer2.0.downsample");
  REQUIRE(projection.inputs.size() == 1);
  CHECK(resnet.layers[projection.inputs[0]].name == "layer1.2.add");
}

TEST_CASE("ResNet-50 forward is about 4.1 GMAC = 8.2 GFLOP per image", "[analytic]") {
  const DeviceSpec ideal = compute_only_device();
  const Profile resnet = make_or_fail("resnet50", ideal, 1);
  double flops = 0.0;
  for (const Layer& layer : resnet.layers) flops += forward_flops(layer, ideal);
  CHECK(flops == Approx(2 * 4.09e9).epsilon(0.03));
}

TEST_CASE("GPT sizes are within 3% of 1.3B, 13B and 175B parameters", "[analytic]") {
  const DeviceSpec h100 = *device_spec("h100");
  struct Case {
    const char* arch;
    double parameters;
    int blocks;
  };
  for (const Case& c : {Case{"gpt-1.3b", 1.3e9, 24}, Case{"gpt-13b", 13e9, 40}, Case{"gpt-175b", 175e9, 96}}) {
    INFO(c.arch);
    const Profile gpt = make_or_fail(c.arch, h100, 1);
    CHECK(static_cast<double>(total_param_bytes(gpt)) / 4 == Approx(c.parameters).epsilon(0.03));
    CHECK(gpt.num_layers() == c.blocks + 2);                                   // embedding, blocks, head
    CHECK(gpt.layers.back().output_bytes.value == int64_t{2048} * 50257 * 2);  // logits
  }
}

TEST_CASE("GPT-1.3B parameters: (V + s) d + L (12 d^2 + 13 d) + 2 d exactly", "[analytic]") {
  const int64_t v = 50257, s = 2048, d = 2048, layers = 24;
  const Profile gpt = make_or_fail("gpt-1.3b", *device_spec("a100"), 1);
  CHECK(total_param_bytes(gpt) == 4 * ((v + s) * d + layers * (12 * d * d + 13 * d) + 2 * d));
}

TEST_CASE("BERT-large: Hugging Face's 335,141,888 plus the pre-training heads", "[analytic]") {
  const Profile bert = make_or_fail("bert-large", *device_spec("a100"), 8);
  const int64_t d = 1024;
  const int64_t mlm_head = (d * d + d) + 2 * d + 30522;  // transform, LayerNorm, decoder bias
  const int64_t nsp_head = 2 * d + 2;
  // 335,141,888 = BertModel including its pooler, which our "heads" layer holds.
  CHECK(total_param_bytes(bert) == 4 * (int64_t{335141888} + mlm_head + nsp_head));
  CHECK(bert.num_layers() == 26);
  CHECK(layer_named(bert, "encoder.layer.23").output_bytes.value == int64_t{8} * 512 * 1024 * 2);
}

TEST_CASE("GNMT: 4+4 and 8+8 LSTM layers with attention inputs", "[analytic]") {
  const DeviceSpec v100 = *device_spec("v100");
  const Profile gnmt8 = make_or_fail("gnmt8", v100, 64);
  const Profile gnmt16 = make_or_fail("gnmt16", v100, 64);
  // 2 embeddings + encoder + decoder LSTMs + attention + classifier.
  CHECK(gnmt8.num_layers() == 2 + 4 + 4 + 1 + 1);
  CHECK(gnmt16.num_layers() == 2 + 8 + 8 + 1 + 1);
  const Layer& attention = layer_named(gnmt8, "decoder.attention");
  REQUIRE(attention.inputs.size() == 2);
  CHECK(gnmt8.layers[attention.inputs[0]].name == "decoder.rnn0");
  CHECK(gnmt8.layers[attention.inputs[1]].name == "encoder.rnn3");
  CHECK(layer_named(gnmt8, "decoder.embedding").inputs.empty());
  const int64_t h = 1024, v = 32320;
  auto lstm = [h](int64_t in) { return 4 * h * (in + h) + 8 * h; };
  const int64_t gnmt8_params = 2 * v * h                                      // two embeddings
                               + 2 * lstm(h) + lstm(2 * h) + 2 * lstm(h)      // encoder
                               + lstm(h) + (2 * h * h + h) + 3 * lstm(2 * h)  // decoder
                               + (h * v + v);                                 // classifier
  CHECK(total_param_bytes(gnmt8) == 4 * gnmt8_params);
}

TEST_CASE("every architecture builds on every device and round-trips through JSON", "[analytic]") {
  for (const std::string& device_name : analytic_devices()) {
    auto device = device_spec(device_name);
    REQUIRE(device.ok());
    for (const std::string& arch : analytic_architectures()) {
      INFO(arch << " on " << device_name);
      const Profile profile = make_or_fail(arch, *device, 2);
      auto back = profile_from_json(profile_to_json(profile), "round-trip");
      REQUIRE(back.ok());
      CHECK(testing::first_difference(profile_to_json(*back), profile_to_json(profile), "profile").value_or("") == "");
    }
  }
}

TEST_CASE("errors are values that name the bad input", "[analytic]") {
  const DeviceSpec v100 = *device_spec("v100");
  auto unknown_arch = make_analytic_profile("vgg19", v100, 1);
  REQUIRE_FALSE(unknown_arch.ok());
  CHECK_THAT(unknown_arch.error().message, Catch::Contains("vgg19") && Catch::Contains("vgg16"));
  auto zero_batch = make_analytic_profile("vgg16", v100, 0);
  REQUIRE_FALSE(zero_batch.ok());
  CHECK_THAT(zero_batch.error().message, Catch::Contains("got 0"));
  auto unknown_device = device_spec("tpu");
  REQUIRE_FALSE(unknown_device.ok());
  CHECK_THAT(unknown_device.error().message, Catch::Contains("tpu") && Catch::Contains("h100"));
  DeviceSpec broken = v100;
  broken.efficiency = 0.0;
  CHECK_FALSE(make_analytic_profile("vgg16", broken, 1).ok());
}

}  // namespace
}  // namespace baton
