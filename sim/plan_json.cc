// The plan file, baton.plan.v1 (format in sim/plan.h): reading with every
// field checked, and writing.
#include <cstdint>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "sim/json_fields.h"
#include "sim/plan.h"

namespace baton {

using json_fields::FieldPath;
using nlohmann::json;

namespace {

Result<StagePlan> stage_from_json(const json& value, const FieldPath& at) {
  if (auto ok = json_fields::check_object(value, at); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(value, at, {"layers", "replicas", "devices"}); !ok) return ok.error();
  StagePlan stage;
  auto layers = json_fields::read_array(value, at, "layers", true);
  if (!layers) return layers.error();
  const json& range = **layers;
  if (range.size() != 2 || !range[0].is_number_integer() || !range[1].is_number_integer())
    return at.field("layers").error("must be [begin, end] (whole numbers)", range);
  // get<int> would wrap 4294967296 to 0 and read a nonsense range as a valid one.
  const auto fits_int = [](const json& index) {
    constexpr int64_t kMin = std::numeric_limits<int>::min();
    constexpr int64_t kMax = std::numeric_limits<int>::max();
    if (index.is_number_unsigned()) return index.get<uint64_t>() <= static_cast<uint64_t>(kMax);
    return index.get<int64_t>() >= kMin && index.get<int64_t>() <= kMax;
  };
  if (!fits_int(range[0]) || !fits_int(range[1]))
    return at.field("layers").error("holds a layer index out of range", range);
  stage.layers = LayerRange{range[0].get<int>(), range[1].get<int>()};
  auto replicas = json_fields::read_integer_or(value, at, "replicas", 1, 1);
  if (!replicas) return replicas.error();
  if (*replicas > kMaxReplicas) return at.field("replicas").error("is too large", *replicas);
  stage.replicas = static_cast<int>(*replicas);
  if (value.contains("devices")) {
    auto devices = json_fields::read_array(value, at, "devices", false);
    if (!devices) return devices.error();
    for (size_t i = 0; i < (*devices)->size(); ++i) {
      const json& d = (**devices)[i];
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (1 << 24))
        return at.field("devices").index(i).error("must be a device id", d);
      stage.devices.push_back(d.get<int>());
    }
  }
  return stage;
}

Result<std::optional<PlanTopology>> made_for_from_json(const json& document, const FieldPath& root) {
  const auto it = document.find("topology");
  if (it == document.end()) return std::optional<PlanTopology>();
  const FieldPath at = root.field("topology");
  if (auto ok = json_fields::check_object(*it, at); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(*it, at, {"name", "devices", "device"}); !ok) return ok.error();
  auto name = json_fields::read_string(*it, at, "name");
  auto devices = json_fields::read_integer(*it, at, "devices", 1);
  auto device = json_fields::read_string(*it, at, "device");
  if (!name) return name.error();
  if (!devices) return devices.error();
  if (!device) return device.error();
  if (*devices > kMaxWorkers) return at.field("devices").error("is too large", *devices);
  return std::optional<PlanTopology>(PlanTopology{*name, static_cast<int>(*devices), *device});
}

}  // namespace

Result<Plan> plan_from_json(const json& document, const std::string& source) {
  const FieldPath root(source);
  if (auto ok = json_fields::check_object(document, root); !ok) return ok.error();
  if (auto ok = json_fields::check_format(document, root, "baton.plan.v1"); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(
          document, root,
          {"format", "model", "schedule", "microbatch_size", "microbatches", "vertical_sync", "virtual_stages",
           "paired_steady_state", "delay_wgrad_compute", "stages", "prediction", "topology", "megatron"});
      !ok)
    return ok.error();
  Plan plan;
  auto model = json_fields::read_string_or(document, root, "model", "");
  if (!model) return model.error();
  plan.model = *model;
  auto schedule_text = json_fields::read_string(document, root, "schedule");
  if (!schedule_text) return schedule_text.error();
  auto schedule = parse_schedule(*schedule_text);
  if (!schedule) return root.field("schedule").error(fmt::format("must be {}", schedule_names()), *schedule_text);
  plan.schedule = *schedule;
  auto mbs = json_fields::read_integer(document, root, "microbatch_size", 1);
  if (!mbs) return mbs.error();
  if (*mbs > (1 << 24)) return root.field("microbatch_size").error("is too large", *mbs);
  plan.microbatch_size = static_cast<int>(*mbs);
  auto count = json_fields::read_integer(document, root, "microbatches", 1);
  if (!count) return count.error();
  if (*count > (1 << 24)) return root.field("microbatches").error("is too large", *count);
  plan.batches = static_cast<int>(*count);
  if (auto it = document.find("vertical_sync"); it != document.end()) {
    if (!it->is_boolean()) return root.field("vertical_sync").error("must be true or false", *it);
    plan.vertical_sync = it->get<bool>();
  }
  if (auto it = document.find("paired_steady_state"); it != document.end()) {
    if (!it->is_boolean()) return root.field("paired_steady_state").error("must be true or false", *it);
    plan.paired_steady_state = it->get<bool>();
  }
  if (auto it = document.find("delay_wgrad_compute"); it != document.end()) {
    if (!it->is_boolean()) return root.field("delay_wgrad_compute").error("must be true or false", *it);
    plan.delay_wgrad_compute = it->get<bool>();
  }
  auto virtual_stages = json_fields::read_integer_or(document, root, "virtual_stages", 1, 1);
  if (!virtual_stages) return virtual_stages.error();
  if (*virtual_stages > (1 << 16)) return root.field("virtual_stages").error("is too large", *virtual_stages);
  plan.virtual_stages = static_cast<int>(*virtual_stages);
  // A file that gives its chunks per device must give a schedule that runs that
  // many: `simulate --plan` sets each schedule's own count (plan_with_schedule),
  // which would otherwise drop the file's without a word.
  if (document.contains("virtual_stages"))
    if (auto ok = check_virtual_stages(plan.schedule, plan.virtual_stages, source); !ok) return ok.error();
  auto stages = json_fields::read_array(document, root, "stages", true);
  if (!stages) return stages.error();
  int64_t workers = 0;
  for (size_t s = 0; s < (*stages)->size(); ++s) {
    auto stage = stage_from_json((**stages)[s], root.field("stages").index(s));
    if (!stage) return stage.error();
    workers += stage->replicas;
    if (workers > kMaxWorkers)
      return root.field("stages").error(fmt::format("use more than {} workers (replicas) in all", kMaxWorkers));
    plan.stages.push_back(*stage);
  }
  if (auto ok = check_pairing(plan, source); !ok) return ok.error();  // after the stages: 1f1b pairs on one
  if (auto it = document.find("prediction"); it != document.end()) plan.prediction = *it;
  if (auto made_for = made_for_from_json(document, root); !made_for)
    return made_for.error();
  else
    plan.made_for = *made_for;
  if (auto it = document.find("megatron"); it != document.end()) {
    if (auto ok = json_fields::check_object(*it, root.field("megatron")); !ok) return ok.error();
    plan.megatron = *it;
  }
  return plan;
}

Result<Plan> parse_plan(std::string_view text, const std::string& source) {
  auto document = json_fields::parse_json_text(text, source);
  if (!document) return document.error();
  return plan_from_json(*document, source);
}

json plan_to_json(const Plan& plan) {
  json stages = json::array();
  for (const StagePlan& stage : plan.stages) {
    stages.push_back(
        {{"layers", {stage.layers.begin, stage.layers.end}}, {"replicas", stage.replicas}, {"devices", stage.devices}});
  }
  json document = {{"format", "baton.plan.v1"},
                   {"model", plan.model},
                   {"schedule", schedule_name(plan.schedule)},
                   {"microbatch_size", plan.microbatch_size},
                   {"microbatches", plan.batches},
                   {"vertical_sync", plan.vertical_sync},
                   {"stages", stages}};
  if (plan.virtual_stages != 1) document["virtual_stages"] = plan.virtual_stages;
  if (plan.paired_steady_state) document["paired_steady_state"] = true;
  if (plan.delay_wgrad_compute) document["delay_wgrad_compute"] = true;
  if (!plan.prediction.is_null()) document["prediction"] = plan.prediction;
  if (plan.made_for)
    document["topology"] = {
        {"name", plan.made_for->name}, {"devices", plan.made_for->devices}, {"device", plan.made_for->device}};
  if (!plan.megatron.is_null()) document["megatron"] = plan.megatron;
  return document;
}

}  // namespace baton
