#include "sim/metrics.h"

namespace baton {

nlohmann::json metrics_to_json(const Metrics& metrics) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerMetrics& w : metrics.workers) {
    workers.push_back({{"worker", w.worker},
                       {"stage", w.stage},
                       {"device", w.device},
                       {"busy_s", w.busy.value},
                       {"bubble_fraction", w.bubble_fraction},
                       {"peak_memory_bytes", w.peak_memory.value},
                       {"weight_bytes", w.weight_bytes.value},
                       {"weight_versions", w.weight_versions},
                       {"stashed_weight_bytes", w.peak_stashed_weight_bytes.value},
                       {"gradient_bytes", w.gradient_bytes.value},
                       {"optimizer_bytes", w.optimizer_bytes.value},
                       {"peak_activation_bytes", w.peak_activation_bytes.value},
                       {"peak_inflight_microbatches", w.peak_inflight_microbatches}});
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceMetrics& d : metrics.devices)
    devices.push_back({{"device", d.device}, {"workers", d.workers}, {"peak_memory_bytes", d.peak_memory.value}});
  return {{"iteration_time_s", metrics.iteration_time.value},
          {"throughput_samples_per_s", metrics.throughput_samples_per_s},
          {"bubble_fraction", metrics.bubble_fraction},
          {"makespan_s", metrics.makespan.value},
          {"window_s", {metrics.window_start.value, metrics.window_end.value}},
          {"actions", metrics.actions},
          {"workers", workers},
          {"devices", devices}};
}

}  // namespace baton
