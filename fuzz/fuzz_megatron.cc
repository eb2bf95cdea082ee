// Fuzzes megatron_from_arguments, the loader of a plan file's "megatron"
// object (a model and its layout in Megatron's argument names), and what
// `simulate --plan` does with one: check it (check_megatron_layout, on the
// fixture's 64 GPUs) and predict it (predict_megatron).
//
// Properties: no crash anywhere; accepted arguments write
// (megatron_arguments) to a document that loads again and writes the same,
// and with a key the format does not have it is refused; a layout the check
// accepts, small enough to simulate, predicts an Error or a finite, positive
// iteration time, throughput and peak memory on every rank.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_support.h"
#include "sim/gpu_model.h"
#include "sim/megatron.h"
#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"

namespace {

using baton::fuzz::fail;

// Work caps: larger layouts are only loaded and checked (the simulation's
// size grows with the layers and the microbatches, not its bugs).
constexpr int64_t kMaxLayers = 64;
constexpr int64_t kMaxMicrobatches = 64;

bool small_enough(const baton::GptModel& model, const baton::MegatronLayout& layout) {
  const int64_t per_rank = int64_t{layout.micro_batch} * layout.data;
  if (per_rank <= 0 || model.layers > kMaxLayers) return false;
  return layout.global_batch / per_rank <= kMaxMicrobatches && model.mtp_layers <= 4;
}

const baton::GpuModel& fixture_gpu() {
  static const baton::GpuModel gpu = [] {
    auto model = baton::gpu_model("H100-SXM5-80GB");
    if (!model) fail("the H100 model loads", model.error().message);
    return *model;
  }();
  return gpu;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = baton::fuzz::as_text(data, size);
  const nlohmann::json document = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (document.is_discarded()) return 0;
  auto spec = baton::megatron_from_arguments(document, "fuzz.megatron");
  if (!spec) return 0;
  const nlohmann::json written = baton::megatron_arguments(spec->model, spec->layout);
  auto again = baton::megatron_from_arguments(written, "rewritten");
  if (!again) fail("the written arguments load again", again.error().message);
  if (baton::megatron_arguments(again->model, again->layout) != written)
    fail("rewriting keeps the arguments", written.dump());
  baton::fuzz::check_unknown_key_refused(written, [](const nlohmann::json& arguments) {
    return baton::megatron_from_arguments(arguments, "extended");
  });
  const baton::Topology& topology = baton::fuzz::fixture_topology();
  if (!baton::check_megatron_layout(spec->model, spec->layout, topology.num_devices()).ok()) return 0;
  if (!small_enough(spec->model, spec->layout)) return 0;
  auto prediction = baton::predict_megatron(spec->model, spec->layout, topology, false, &fixture_gpu());
  if (!prediction) return 0;
  const double iteration = prediction->iteration_time.value;
  if (!std::isfinite(iteration) || iteration <= 0.0) fail("the iteration time is finite and positive", written.dump());
  if (!std::isfinite(prediction->throughput_samples_per_s) || prediction->throughput_samples_per_s <= 0.0)
    fail("the throughput is finite and positive", written.dump());
  for (const baton::MegatronRankMemory& rank : prediction->memory.ranks) {
    const double peak = static_cast<double>(rank.peak.value);
    if (!std::isfinite(peak) || peak <= 0.0) fail("every rank's peak memory is finite and positive", written.dump());
  }
  return 0;
}
