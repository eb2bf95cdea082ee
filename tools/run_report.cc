#include "tools/run_report.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace baton {

Result<RunRecord> parse_run_record(const std::string& text, const std::string& source) {
  RunRecord record;
  try {
    const nlohmann::json report = nlohmann::json::parse(text);
    for (const auto& step : report.at("steps")) record.walls.emplace_back(step.at("wall_s").get<double>());
    if (record.walls.empty()) return Error{fmt::format("{}: no steps", source)};
    const nlohmann::json workers = report.value("workers", nlohmann::json::array());
    const bool per_step = std::all_of(workers.begin(), workers.end(),
                                      [](const nlohmann::json& w) { return w.contains("step_compute_s"); });
    double compute = 0.0;
    for (const auto& worker : workers) {
      compute += worker.at("compute_s").get<double>();
      if (!per_step) continue;
      record.step_compute.emplace_back();
      for (const auto& seconds : worker.at("step_compute_s"))
        record.step_compute.back().emplace_back(seconds.get<double>());
      const double actions = worker.at("actions").get<double>();
      const double overhead = worker.at("overhead_s").get<double>();
      record.action_overhead.emplace_back(actions > 0.0 ? std::max(0.0, overhead / actions) : 0.0);
    }
    record.compute_per_step = Seconds(compute / double(record.walls.size()));
  } catch (const nlohmann::json::exception& e) {
    return Error{fmt::format("{}: not a run report with steps[].wall_s and workers[] ({})", source, e.what())};
  }
  return record;
}

}  // namespace baton
