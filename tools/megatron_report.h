// Text and JSON reports of a Megatron GPT prediction (`baton simulate` with
// Megatron flags).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/megatron_sim.h"

namespace baton::cli {

// Layout, iteration time, throughput, model TFLOP/s per GPU, where the time of
// the busiest pipeline rank goes, memory per pipeline rank and whether it fits.
std::string megatron_text(const GptModel& model, const MegatronLayout& layout, const Topology& topology,
                          const MegatronPrediction& prediction);
// The same as JSON: iteration_time_s, throughput_samples_per_s,
// model_tflops_per_gpu, the layout in Megatron's argument names, breakdown_s,
// memory (per pipeline rank, bytes), fits, fit_hints.
nlohmann::json megatron_json(const GptModel& model, const MegatronLayout& layout, const Topology& topology,
                             const MegatronPrediction& prediction);

}  // namespace baton::cli
