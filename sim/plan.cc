#include "sim/plan.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "sim/json_fields.h"

namespace baton {

using json_fields::FieldPath;
using nlohmann::json;

std::string_view schedule_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::kPipeDream: return "pipedream";
    case Schedule::kOneFOneB: return "1f1b";
    case Schedule::kGPipe: return "gpipe";
    case Schedule::kDataParallel: return "dp";
    case Schedule::kZbH1: return "zb-h1";
    case Schedule::kZbH2: return "zb-h2";
    case Schedule::kInterleaved1F1B: return "interleaved-1f1b";
    case Schedule::kZbV: return "zbv";
    case Schedule::kDualPipeV: return "dualpipev";
  }
  return "?";
}

const std::vector<Schedule>& all_schedules() {
  static const std::vector<Schedule> schedules = {
      Schedule::kPipeDream, Schedule::kOneFOneB,        Schedule::kGPipe, Schedule::kDataParallel, Schedule::kZbH1,
      Schedule::kZbH2,      Schedule::kInterleaved1F1B, Schedule::kZbV,   Schedule::kDualPipeV};
  return schedules;
}

std::string schedule_names(std::string_view last_joiner) {
  std::string text;
  const std::vector<Schedule>& schedules = all_schedules();
  for (size_t i = 0; i < schedules.size(); ++i) {
    if (i > 0) text += i + 1 == schedules.size() ? fmt::format(" {} ", last_joiner) : std::string(", ");
    text += schedule_name(schedules[i]);
  }
  return text;
}

Result<Schedule> parse_schedule(std::string_view name) {
  for (Schedule s : all_schedules()) {
    if (schedule_name(s) == name) return s;
  }
  return Error{fmt::format("unknown schedule \"{}\" (expected {})", name, schedule_names())};
}

bool runs_chunks(Schedule schedule) {
  return schedule == Schedule::kInterleaved1F1B || schedule == Schedule::kZbV || schedule == Schedule::kDualPipeV;
}

namespace {

bool v_shaped(Schedule schedule) { return schedule == Schedule::kZbV || schedule == Schedule::kDualPipeV; }

}  // namespace

int Plan::num_ranks() const {
  const int v = std::max(virtual_stages, 1);
  return runs_chunks(schedule) && num_stages() % v == 0 ? num_stages() / v : num_stages();
}

int Plan::rank_of(int stage) const {
  if (!runs_chunks(schedule)) return stage;
  const int p = num_ranks();
  if (p == num_stages()) return stage;  // v does not divide S: check_chunks refuses the plan
  if (v_shaped(schedule)) return stage < p ? stage : 2 * p - 1 - stage;
  return stage % p;
}

std::vector<int> stages_of_rank(const Plan& plan, int rank) {
  std::vector<int> stages;
  for (int s = 0; s < plan.num_stages(); ++s)
    if (plan.rank_of(s) == rank) stages.push_back(s);
  return stages;
}

bool WorkerInfo::runs(int s) const {
  return chunks.empty() ? s == stage : std::find(chunks.begin(), chunks.end(), s) != chunks.end();
}

std::vector<int> stages_of(const WorkerInfo& worker) {
  return worker.chunks.empty() ? std::vector<int>{worker.stage} : worker.chunks;
}

int Plan::num_workers() const {
  int total = 0;
  for (int s = 0; s < num_stages(); ++s)
    if (rank_of(s) == s) total += stages[s].replicas;
  return total;
}

std::vector<WorkerInfo> workers_of(const Plan& plan) {
  std::vector<WorkerInfo> workers;
  const bool chunks = runs_chunks(plan.schedule) && plan.num_ranks() < plan.num_stages();
  for (int s = 0; s < plan.num_stages(); ++s) {
    if (plan.rank_of(s) != s) continue;  // a later chunk of an earlier rank
    const StagePlan& stage = plan.stages[s];
    const std::vector<int> held = chunks ? stages_of_rank(plan, s) : std::vector<int>{};
    for (int r = 0; r < stage.replicas; ++r) {
      const int device = r < static_cast<int>(stage.devices.size()) ? stage.devices[r] : -1;
      workers.push_back(WorkerInfo{s, r, device, held});
    }
  }
  return workers;
}

int worker_index(const Plan& plan, int stage, int replica) {
  const int rank = plan.rank_of(stage);
  int index = 0;
  for (int s = 0; s < rank; ++s)
    if (plan.rank_of(s) == s) index += plan.stages[s].replicas;
  return index + replica;
}

namespace {

bool parse_int(std::string_view text, int& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

Result<StagePlan> parse_one_stage(std::string_view item) {
  const auto bad = [&](std::string_view why) {
    return Error{
        fmt::format("--stages: \"{}\" {} (expected BEGIN-END[xREPLICAS][@D+D+...], "
                    "e.g. 0-13x15)",
                    item, why)};
  };
  StagePlan stage;
  std::string_view rest = item;
  if (auto at = rest.find('@'); at != std::string_view::npos) {
    std::string_view list = rest.substr(at + 1);
    rest = rest.substr(0, at);
    while (!list.empty()) {
      const auto plus = list.find('+');
      int device = 0;
      if (!parse_int(list.substr(0, plus), device) || device < 0) return bad("has a bad device id");
      stage.devices.push_back(device);
      list = plus == std::string_view::npos ? std::string_view{} : list.substr(plus + 1);
    }
  }
  if (auto x = rest.find('x'); x != std::string_view::npos) {
    if (!parse_int(rest.substr(x + 1), stage.replicas) || stage.replicas < 1 || stage.replicas > kMaxReplicas)
      return bad(fmt::format("has a bad replica count (1 to {})", kMaxReplicas));
    rest = rest.substr(0, x);
  }
  const auto dash = rest.find('-');
  if (dash == std::string_view::npos) return bad("has no layer range");
  if (!parse_int(rest.substr(0, dash), stage.layers.begin) || !parse_int(rest.substr(dash + 1), stage.layers.end))
    return bad("has a bad layer range");
  if (!stage.devices.empty() && static_cast<int>(stage.devices.size()) != stage.replicas)
    return bad("lists a different number of devices than replicas");
  return stage;
}

}  // namespace

Result<std::vector<StagePlan>> parse_stages(std::string_view text) {
  if (text.empty()) return Error{"--stages: no stage given"};
  std::vector<StagePlan> stages;
  int64_t workers = 0;
  for (;;) {  // every comma is followed by a stage: "0-3," is refused as ",0-3" is
    const auto comma = text.find(',');
    auto stage = parse_one_stage(text.substr(0, comma));
    if (!stage) return stage.error();
    workers += stage->replicas;
    if (workers > kMaxWorkers)
      return Error{fmt::format("--stages: more than {} workers (replicas) in all", kMaxWorkers)};
    stages.push_back(*stage);
    if (comma == std::string_view::npos) return stages;
    text = text.substr(comma + 1);
  }
}

Status assign_devices(Plan& plan, const Topology& topology) {
  std::set<int> taken;
  for (const StagePlan& stage : plan.stages) taken.insert(stage.devices.begin(), stage.devices.end());
  int next = 0;
  for (int s = 0; s < plan.num_stages(); ++s) {
    StagePlan& stage = plan.stages[s];
    if (!stage.devices.empty()) continue;
    if (const int rank = plan.rank_of(s); rank != s) {  // a later chunk: its rank's devices
      stage.devices = plan.stages[rank].devices;
      continue;
    }
    for (int r = 0; r < stage.replicas; ++r) {
      while (taken.count(next) != 0) ++next;
      stage.devices.push_back(next);
      taken.insert(next++);
    }
  }
  if (next > topology.num_devices())
    return Error{fmt::format("the plan needs {} devices but topology \"{}\" has {}", plan.num_workers(), topology.name,
                             topology.num_devices())};
  return ok_status();
}

namespace {

Status check_stage(const StagePlan& stage, int expected_begin, const Topology& topology, const FieldPath& at) {
  if (stage.layers.begin != expected_begin)
    return at.field("layers").error(fmt::format("must begin at layer {}", expected_begin),
                                    json::array({stage.layers.begin, stage.layers.end}));
  if (stage.layers.end <= stage.layers.begin)
    return at.field("layers").error("must hold at least one layer",
                                    json::array({stage.layers.begin, stage.layers.end}));
  if (stage.replicas < 1) return at.field("replicas").error("must be >= 1", stage.replicas);
  if (static_cast<int>(stage.devices.size()) != stage.replicas)
    return at.field("devices").error(fmt::format("must list one device per replica ({})", stage.replicas),
                                     stage.devices);
  for (int device : stage.devices) {
    if (device < 0 || device >= topology.num_devices())
      return at.field("devices").error(
          fmt::format("must be device ids in [0, {}) of topology \"{}\"", topology.num_devices(), topology.name),
          stage.devices);
  }
  return ok_status();
}

}  // namespace

PlanTopology plan_topology_of(const Topology& topology) {
  return PlanTopology{topology.name, topology.num_devices(), topology.device.name};
}

Status check_plan_topology(const Plan& plan, const Topology& topology, const std::string& source) {
  if (!plan.made_for) return ok_status();
  const PlanTopology& made = *plan.made_for;
  const PlanTopology here = plan_topology_of(topology);
  if (made.name == here.name && made.devices == here.devices && made.device == here.device) return ok_status();
  return Error{
      fmt::format("{} was made for topology \"{}\" ({} x {}), not \"{}\" ({} x {}): a plan's split and placement hold "
                  "for the cluster it was planned on; plan again with this topology (baton plan --topology ...)",
                  source, made.name, made.devices, made.device, here.name, here.devices, here.device)};
}

Status check_plan(const Plan& plan, const Profile& profile, const Topology& topology, const std::string& source) {
  const FieldPath root(source);
  if (auto ok = check_plan_topology(plan, topology, source); !ok) return ok;
  if (plan.stages.empty()) return root.field("stages").error("must hold at least one stage");
  if (plan.batches < 1) return root.field("microbatches").error("must be >= 1", plan.batches);
  if (static_cast<int64_t>(plan.batches) * plan.num_stages() > kMaxMicrobatchStages)
    return root.field("microbatches")
        .error(fmt::format("x {} stages must be at most {} microbatch-stage pairs (about 1 GiB to simulate); fewer "
                           "microbatches show the same steady state",
                           plan.num_stages(), kMaxMicrobatchStages),
               plan.batches);
  if (plan.schedule == Schedule::kDataParallel && plan.num_stages() != 1)
    return root.field("stages").error("must be a single stage for the dp schedule", stages_to_string(plan.stages));
  if (auto ok = check_chunks(plan, source); !ok) return ok;
  if (auto ok = check_pairing(plan, source); !ok) return ok;
  if (plan.num_workers() > topology.num_devices())
    return root.field("stages").error(fmt::format("use {} workers (replicas) but topology \"{}\" has only {} devices",
                                                  plan.num_workers(), topology.name, topology.num_devices()),
                                      stages_to_string(plan.stages));
  int expected_begin = 0;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan& stage = plan.stages[s];
    if (auto ok = check_stage(stage, expected_begin, topology, root.field("stages").index(s)); !ok) return ok;
    expected_begin = stage.layers.end;
  }
  if (expected_begin != profile.num_layers())
    return root.field("stages").error(fmt::format("must cover all {} layers of model \"{}\" (they end at layer {})",
                                                  profile.num_layers(), profile.model, expected_begin),
                                      stages_to_string(plan.stages));
  return ok_status();
}

Status check_virtual_stages(Schedule schedule, int virtual_stages, const std::string& source) {
  const FieldPath at = FieldPath(source).field("virtual_stages");
  const std::string name(schedule_name(schedule));
  if (!runs_chunks(schedule)) {
    if (virtual_stages == 1) return ok_status();
    return at.error(fmt::format("must be 1 for {} (interleaved-1f1b, zbv and dualpipev run chunks)", name),
                    virtual_stages);
  }
  if (schedule == Schedule::kInterleaved1F1B && virtual_stages < 2)
    return at.error("must be >= 2 for interleaved-1f1b (with 1 chunk per device it is 1f1b: use --schedule 1f1b)",
                    virtual_stages);
  if (schedule != Schedule::kInterleaved1F1B && virtual_stages != 2)
    return at.error(fmt::format("must be 2 for {} (two chunks per device, a V)", name), virtual_stages);
  return ok_status();
}

Status check_pairing(const Plan& plan, const std::string& source) {
  const FieldPath root(source);
  const bool one_stage_1f1b = plan.schedule == Schedule::kOneFOneB && plan.num_stages() == 1;
  if (plan.paired_steady_state && plan.schedule != Schedule::kInterleaved1F1B && !one_stage_1f1b)
    return root.field("paired_steady_state")
        .error(fmt::format(
            "pairs the steady state of interleaved-1f1b, or of 1f1b on one stage, not of {}{}",
            schedule_name(plan.schedule),
            plan.schedule == Schedule::kOneFOneB ? fmt::format(" on {} stages", plan.num_stages()) : std::string()));
  if (plan.delay_wgrad_compute && !plan.paired_steady_state)
    return root.field("delay_wgrad_compute").error("delays the weight gradients of paired_steady_state's pairs only");
  return ok_status();
}

Status check_chunks(const Plan& plan, const std::string& source) {
  const FieldPath root(source);
  const int v = plan.virtual_stages;
  const std::string name(schedule_name(plan.schedule));
  if (auto ok = check_virtual_stages(plan.schedule, v, source); !ok) return ok;
  if (!runs_chunks(plan.schedule)) return ok_status();
  const int stages = plan.num_stages();
  if (stages % v != 0) {
    const int lower = std::max(v, stages / v * v);
    return root.field("stages").error(
        fmt::format("hold {} stages, which {} with {} chunks per device cannot place: give a multiple of {} "
                    "(for example {} or {})",
                    stages, name, v, v, lower, lower + v),
        stages_to_string(plan.stages));
  }
  const int p = plan.num_ranks();
  for (int s = 0; s < stages; ++s) {
    const int rank = plan.rank_of(s);
    const StagePlan& own = plan.stages[rank];
    const StagePlan& stage = plan.stages[s];
    if (stage.replicas != plan.stages[0].replicas)
      return root.field("stages")
          .index(s)
          .field("replicas")
          .error(fmt::format("must be {}, stage 0's: {} replicates whole pipelines (every stage alike)",
                             plan.stages[0].replicas, name),
                 stage.replicas);
    if (s != rank && !stage.devices.empty() && !own.devices.empty() && stage.devices != own.devices)
      return root.field("stages").index(s).field("devices").error(
          fmt::format("must be stage {}'s ({}), the rank that runs both", rank, json(own.devices).dump()),
          stage.devices);
  }
  const int replicas = plan.stages[0].replicas;
  if (plan.schedule == Schedule::kInterleaved1F1B && plan.batches % (p * replicas) != 0) {
    const int group = p * replicas;
    const int lower = std::max(group, plan.batches / group * group);
    return root.field("microbatches")
        .error(fmt::format("must be a multiple of {} for interleaved-1f1b on {} ranks x {} replicas (microbatches "
                           "advance in groups of p), for example {} or {}",
                           group, p, replicas, lower, lower + group),
               plan.batches);
  }
  if (v_shaped(plan.schedule) && plan.batches < 2 * p * replicas)
    return root.field("microbatches")
        .error(fmt::format("must be at least {} for {} on {} ranks x {} replicas (2p per pipeline, to fill the V)",
                           2 * p * replicas, name, p, replicas),
               plan.batches);
  return ok_status();
}

std::string stages_to_string(const std::vector<StagePlan>& stages) {
  std::string text;
  for (const StagePlan& stage : stages) {
    if (!text.empty()) text += ',';
    text += fmt::format("{}-{}x{}", stage.layers.begin, stage.layers.end, stage.replicas);
  }
  return text;
}

}  // namespace baton
