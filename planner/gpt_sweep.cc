#include "planner/gpt_sweep.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/sweep.h"
#include "sim/megatron_sim.h"

namespace baton {

namespace {

enum class AxisKind {
  kWhole,
  kWholeOrZero,
  kRecompute,
  kYesNo,
  kZeroBubble,
  kVSchedule,
  kDispatcher,
  kFp8,
  kTopology,
  kCluster
};

struct AxisInfo {
  const char* name;
  const char* alias;
  AxisKind kind;
};

constexpr AxisInfo kLayoutAxes[] = {
    {"tensor-model-parallel-size", "tp", AxisKind::kWhole},
    {"pipeline-model-parallel-size", "pp", AxisKind::kWhole},
    {"context-parallel-size", "cp", AxisKind::kWhole},
    {"expert-model-parallel-size", "ep", AxisKind::kWhole},
    {"expert-tensor-parallel-size", "etp", AxisKind::kWhole},
    {"micro-batch-size", "mbs", AxisKind::kWhole},
    {"global-batch-size", "gbs", AxisKind::kWhole},
    {"num-layers-per-virtual-pipeline-stage", "vpp", AxisKind::kWholeOrZero},
    {"recompute-granularity", "", AxisKind::kRecompute},
    {"sequence-parallel", "", AxisKind::kYesNo},
    {"use-distributed-optimizer", "", AxisKind::kYesNo},
    {"overlap-grad-reduce", "", AxisKind::kYesNo},
    {"overlap-param-gather", "", AxisKind::kYesNo},
    {"tp-comm-overlap", "", AxisKind::kYesNo},
    {"moe-shared-expert-overlap", "", AxisKind::kYesNo},
    {"overlap-moe-expert-parallel-comm", "", AxisKind::kYesNo},
    {"delay-wgrad-compute", "", AxisKind::kYesNo},
    {"zero-bubble", "", AxisKind::kZeroBubble},
    {"v-schedule", "", AxisKind::kVSchedule},
    {"moe-token-dispatcher-type", "", AxisKind::kDispatcher},
    {"fp8-format", "", AxisKind::kFp8},
    {"topology", "", AxisKind::kTopology},
};

constexpr const char* kAxisList =
    "tensor-model-parallel-size (tp), pipeline-model-parallel-size (pp), context-parallel-size (cp), "
    "expert-model-parallel-size (ep), expert-tensor-parallel-size (etp), micro-batch-size (mbs), "
    "global-batch-size (gbs), num-layers-per-virtual-pipeline-stage (vpp), recompute-granularity, "
    "sequence-parallel, use-distributed-optimizer, overlap-grad-reduce, overlap-param-gather, tp-comm-overlap, "
    "moe-shared-expert-overlap, overlap-moe-expert-parallel-comm, delay-wgrad-compute, "
    "zero-bubble, v-schedule, moe-token-dispatcher-type, fp8-format, topology, "
    "servers, "
    "devices_per_server, bandwidth_gbps.L, latency_us.L, memory_gib";

const AxisInfo* find_axis(const std::string& name) {
  for (const AxisInfo& info : kLayoutAxes)
    if (name == info.name || (info.alias[0] != '\0' && name == info.alias)) return &info;
  return nullptr;
}

AxisKind kind_of(const std::string& canonical) {
  const AxisInfo* info = find_axis(canonical);
  return info ? info->kind : AxisKind::kCluster;
}

// The value spelled canonically, or an Error.
Result<std::string> canonical_value(const AxisInfo& info, const std::string& value) {
  const auto bad = [&](const char* expected) {
    return Error{fmt::format("--vary {}: \"{}\" is not {}", info.name, value, expected)};
  };
  switch (info.kind) {
    case AxisKind::kWhole:
    case AxisKind::kWholeOrZero: {
      const int least = info.kind == AxisKind::kWhole ? 1 : 0;
      const std::optional<int64_t> number = parse_whole(value, least);
      if (!number || *number > 9'999'999)
        return bad(least ? "a whole number >= 1" : "a whole number >= 0 (0: not interleaved)");
      return std::to_string(*number);
    }
    case AxisKind::kRecompute:
      if (parse_recompute(value)) return value;
      return bad("none, selective or full");
    case AxisKind::kZeroBubble:
      if (parse_zero_bubble(value)) return value;
      return bad("1f1b, zb-h1 or zb-h2");
    case AxisKind::kVSchedule:
      if (parse_v_schedule(value)) return value;
      return bad("none, zbv or dualpipev");
    case AxisKind::kDispatcher:
      if (parse_moe_dispatcher(value)) return value;
      return bad("allgather, alltoall or flex");
    case AxisKind::kFp8:
      if (parse_fp8_format(value)) return value;
      return bad("none, e4m3 or hybrid");
    case AxisKind::kYesNo:
      if (value == "yes" || value == "1" || value == "on" || value == "true") return std::string("yes");
      if (value == "no" || value == "0" || value == "off" || value == "false") return std::string("no");
      return bad("yes or no (1/0, on/off)");
    default: return value;
  }
}

bool cluster_axis(const std::string& name) {
  return name == "servers" || name == "devices_per_server" || name == "memory_gib" ||
         name.rfind("bandwidth_gbps.", 0) == 0 || name.rfind("latency_us.", 0) == 0;
}

// A cluster axis' values are numbers each topology of the sweep takes, as a
// profile sweep's (planner/sweep.h's apply_axis: servers >= 1 and whole, a
// level that exists, a bandwidth > 0, ...).
Status check_cluster_axis(const GptSweepAxis& axis, const std::map<std::string, Topology>& topologies) {
  if (axis.name == "microbatches" || axis.name == "virtual_stages")
    return Error{fmt::format("--vary {}: GPT sweeps vary {} instead", axis.name,
                             axis.name == "microbatches" ? "micro-batch-size or global-batch-size"
                                                         : "num-layers-per-virtual-pipeline-stage")};
  if (!cluster_axis(axis.name))
    return Error{fmt::format("--vary: unknown axis \"{}\" for a GPT model (expected {})", axis.name, kAxisList)};
  for (const std::string& text : axis.values) {
    const std::optional<double> value = parse_number(text);
    if (!value) return Error{fmt::format("--vary {}: \"{}\" is not a number", axis.name, text)};
    for (const auto& [file, topology] : topologies) {
      Topology copy = topology;
      PointKnobs unused;
      if (auto ok = apply_axis(axis.name, *value, copy, unused); !ok) return ok;
    }
  }
  return ok_status();
}

// Applies the cluster axes' values to `topology`.
Status apply_cluster(const std::vector<GptSweepAxis>& axes, const std::vector<size_t>& digits, Topology& topology) {
  for (size_t a = 0; a < axes.size(); ++a) {
    if (kind_of(axes[a].name) != AxisKind::kCluster) continue;
    PointKnobs unused;
    if (auto ok = apply_axis(axes[a].name, std::stod(axes[a].values[digits[a]]), topology, unused); !ok) return ok;
  }
  return ok_status();
}

// Applies one layout axis' value to `layout` and pins it in `pinned`.
void apply_layout_axis(const std::string& name, const std::string& value, MegatronLayout& layout,
                       MegatronAxes& pinned) {
  const bool yes = value == "yes";
  const int number =
      kind_of(name) == AxisKind::kWhole || kind_of(name) == AxisKind::kWholeOrZero ? std::stoi(value) : 0;
  if (name == "tensor-model-parallel-size") pinned.tensor = layout.tensor = number;
  if (name == "pipeline-model-parallel-size") pinned.pipeline = layout.pipeline = number;
  if (name == "context-parallel-size") pinned.context = layout.context = number;
  if (name == "expert-model-parallel-size") pinned.expert_parallel = layout.expert_parallel = number;
  if (name == "expert-tensor-parallel-size") pinned.expert_tensor = layout.expert_tensor = number;
  if (name == "micro-batch-size") pinned.micro_batch = layout.micro_batch = number;
  if (name == "global-batch-size") layout.global_batch = number;
  if (name == "num-layers-per-virtual-pipeline-stage")
    pinned.layers_per_virtual_stage = layout.layers_per_virtual_stage = number;
  if (name == "recompute-granularity") pinned.recompute = layout.recompute = *parse_recompute(value);
  if (name == "sequence-parallel") pinned.sequence_parallel = layout.sequence_parallel = yes;
  if (name == "use-distributed-optimizer") pinned.distributed_optimizer = layout.distributed_optimizer = yes;
  // The overlaps: on the point's layout, and for the search on every layout
  // it applies to (MegatronAxes).
  if (name == "overlap-grad-reduce") pinned.overlap_grad_reduce = layout.overlap_grad_reduce = yes;
  if (name == "overlap-param-gather") pinned.overlap_param_gather = layout.overlap_param_gather = yes;
  if (name == "tp-comm-overlap") pinned.tp_comm_overlap = layout.tp_comm_overlap = yes;
  if (name == "moe-shared-expert-overlap") pinned.shared_expert_overlap = layout.moe_shared_expert_overlap = yes;
  if (name == "overlap-moe-expert-parallel-comm") pinned.overlap_moe_ep_comm = layout.overlap_moe_ep_comm = yes;
  if (name == "delay-wgrad-compute") pinned.delay_wgrad_compute = layout.delay_wgrad_compute = yes;
  if (name == "zero-bubble") pinned.zero_bubble = layout.zero_bubble = *parse_zero_bubble(value);
  if (name == "v-schedule") pinned.v_schedule = layout.v_schedule = *parse_v_schedule(value);
  if (name == "moe-token-dispatcher-type") pinned.moe_dispatcher = layout.moe_dispatcher = *parse_moe_dispatcher(value);
}

}  // namespace

Status check_gpt_axis(GptSweepAxis& axis, const std::map<std::string, Topology>& topologies) {
  if (axis.values.empty()) return Error{fmt::format("--vary {}: no values given", axis.name)};
  const AxisInfo* info = find_axis(axis.name);
  if (info == nullptr) return check_cluster_axis(axis, topologies);
  axis.name = info->name;
  for (std::string& value : axis.values) {
    auto canonical = canonical_value(*info, value);
    if (!canonical) return canonical.error();
    value = *canonical;
    if (info->kind == AxisKind::kTopology && topologies.count(value) == 0)
      return Error{fmt::format("--vary topology: \"{}\" was not loaded", value)};
  }
  return ok_status();
}

size_t gpt_sweep_size(const GptSweepSpec& spec) {
  size_t total = 1;
  for (const GptSweepAxis& axis : spec.axes) total *= axis.values.size();
  return total;
}

std::vector<std::string> gpt_sweep_header(const GptSweepSpec& spec) {
  std::vector<std::string> header = sweep_lead_columns();
  for (const GptSweepAxis& axis : spec.axes) header.push_back(axis.name);
  for (const char* column : {"tensor_model_parallel_size",
                             "pipeline_model_parallel_size",
                             "data_parallel_size",
                             "context_parallel_size",
                             "expert_model_parallel_size",
                             "expert_tensor_parallel_size",
                             "moe_token_dispatcher_type",
                             "micro_batch_size",
                             "num_layers_per_virtual_pipeline_stage",
                             "recompute_granularity",
                             "sequence_parallel",
                             "use_distributed_optimizer",
                             "pipeline_schedule",
                             "gpus",
                             "microbatches",
                             "iteration_time_s",
                             "throughput_samples_per_s",
                             "model_tflops_per_gpu",
                             "peak_memory_bytes",
                             "memory_capacity_bytes",
                             "fits",
                             "error"})
    header.push_back(column);
  return header;
}

namespace {

struct PointResult {
  MegatronLayout layout;
  bool has_layout = false;
  Seconds iteration_time;
  double tflops = 0.0;
  Bytes peak;
  bool fits = false;
  std::string error;
};

PointResult simulate_point(const GptModel& model, MegatronLayout layout, const Topology& topology) {
  PointResult out;
  out.layout = layout;
  if (layout.data == 0) {
    const int per_replica = std::max(1, layout.tensor) * std::max(1, layout.pipeline) * std::max(1, layout.context);
    out.layout.data = layout.data = topology.num_devices() / per_replica;
    if (layout.data < 1) {
      out.error = fmt::format("t x p x c = {} GPUs, the topology has {}", per_replica, topology.num_devices());
      return out;
    }
  }
  out.has_layout = true;
  auto predicted = predict_megatron(model, layout, topology, false, nullptr, false);
  if (!predicted) {
    out.error = predicted.error().message;
    return out;
  }
  out.iteration_time = predicted->iteration_time;
  out.tflops = predicted->model_tflops_per_gpu;
  out.peak = predicted->memory.peak();
  out.fits = predicted->memory.fits();
  return out;
}

PointResult plan_point(const GptModel& model, const MegatronLayout& layout, const MegatronAxes& pinned,
                       const Topology& topology) {
  PointResult out;
  auto found = search_megatron_layouts(model, layout.global_batch, layout.bf16, pinned, topology, 1);
  if (!found) {
    out.error = found.error().message;
    return out;
  }
  const MegatronCandidate& best = found->best.front();
  out.layout = best.layout;
  out.has_layout = true;
  out.iteration_time = best.iteration_time;
  out.tflops = best.model_tflops_per_gpu;
  out.peak = best.peak_memory;
  out.fits = true;  // the search keeps only layouts that fit
  return out;
}

std::string model_name(const GptModel& model) {
  return fmt::format("GPT {:.1f}B ({} layers, h {})", gpt_parameters(model, 1) / 1e9, model.layers, model.hidden);
}

std::vector<std::string> point_row(const GptSweepSpec& spec, size_t index, const std::vector<size_t>& digits,
                                   const Topology& topology, const PointResult& r) {
  std::vector<std::string> row = {std::to_string(index), std::to_string(gpt_sweep_size(spec)), model_name(spec.model),
                                  topology.name};
  for (size_t a = 0; a < spec.axes.size(); ++a) row.push_back(spec.axes[a].values[digits[a]]);
  const MegatronLayout& l = r.layout;
  const auto yes_no = [](bool b) { return std::string(b ? "yes" : "no"); };
  for (const std::string& field :
       {std::to_string(l.tensor), std::to_string(l.pipeline), r.has_layout ? std::to_string(l.data) : "",
        std::to_string(l.context), std::to_string(l.expert_parallel), std::to_string(l.expert_tensor_parallel()),
        spec.model.moe() ? std::string(moe_dispatcher_name(l.moe_dispatcher)) : std::string(),
        std::to_string(l.micro_batch), std::to_string(l.layers_per_virtual_stage),
        std::string(recompute_name(l.recompute)), yes_no(l.sequence_parallel), yes_no(l.distributed_optimizer),
        l.v_schedule != VSchedule::kNone ? std::string(v_schedule_name(l.v_schedule))
        : l.layers_per_virtual_stage > 0 ? std::string("interleaved-1f1b")
                                         : std::string(zero_bubble_name(l.zero_bubble)),
        r.has_layout ? std::to_string(l.gpus()) : "",
        r.has_layout && l.micro_batch * l.data > 0 ? std::to_string(l.microbatches()) : ""})
    row.push_back(field);
  const bool figures = r.error.empty();
  row.push_back(figures ? fmt::format("{:.9f}", r.iteration_time.value) : "");
  row.push_back(figures ? fmt::format("{:.6f}", l.global_batch / r.iteration_time.value) : "");
  row.push_back(figures ? fmt::format("{:.3f}", r.tflops) : "");
  row.push_back(figures ? std::to_string(r.peak.value) : "");
  row.push_back(std::to_string(topology.device.memory.value));
  row.push_back(figures ? yes_no(r.fits) : "");
  row.push_back(r.error);
  return row;
}

std::vector<std::string> evaluate(const GptSweepSpec& spec, const Topology& base, size_t index) {
  std::vector<size_t> sizes;
  for (const GptSweepAxis& axis : spec.axes) sizes.push_back(axis.values.size());
  const std::vector<size_t> digits = grid_digits(index, sizes);
  Topology topology = base;
  MegatronLayout layout = spec.layout;
  MegatronAxes pinned = spec.pinned;
  GptModel model = spec.model;
  for (size_t a = 0; a < spec.axes.size(); ++a) {
    const std::string& value = spec.axes[a].values[digits[a]];
    if (kind_of(spec.axes[a].name) == AxisKind::kTopology)
      topology = spec.topologies.at(value);
    else if (kind_of(spec.axes[a].name) == AxisKind::kFp8)
      model.fp8 = *parse_fp8_format(value);
    else if (kind_of(spec.axes[a].name) != AxisKind::kCluster)
      apply_layout_axis(spec.axes[a].name, value, layout, pinned);
  }
  PointResult result;
  result.layout = layout;
  if (auto ok = apply_cluster(spec.axes, digits, topology); !ok)
    result.error = ok.error().message;
  else if (spec.plan)
    result = plan_point(model, layout, pinned, topology);
  else
    result = simulate_point(model, layout, topology);
  return point_row(spec, index, digits, topology, result);
}

}  // namespace

Result<SweepTable> run_gpt_sweep(GptSweepSpec spec, const Topology& base,
                                 const std::function<void(size_t, size_t)>& progress) {
  GivenAxes given;
  // The topologies the points run on: the topology axis' files, else `base`.
  std::map<std::string, Topology> swept = spec.topologies;
  const bool varies_topology =
      std::any_of(spec.axes.begin(), spec.axes.end(), [](const GptSweepAxis& axis) { return axis.name == "topology"; });
  if (!varies_topology) swept = {{"", base}};
  for (GptSweepAxis& axis : spec.axes) {
    const std::string as_given = axis.name;
    if (auto ok = check_gpt_axis(axis, swept); !ok) return ok.error();  // makes the name canonical
    if (auto ok = given.add(axis.name, as_given); !ok) return ok.error();
  }
  const PointRange range = shard_range(gpt_sweep_size(spec), spec.shard);
  SweepTable table{gpt_sweep_header(spec), std::vector<std::vector<std::string>>(range.size())};
  run_points(
      range, spec.threads, [&](size_t i) { table.rows[i - range.begin] = evaluate(spec, base, i); }, progress);
  return table;
}

}  // namespace baton
