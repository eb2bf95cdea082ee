// Plan: how a model is split over a cluster and which schedule runs it.
//
// Stages are consecutive layer ranges covering the whole profile. Stage s has
// `replicas` workers; replica j of stage s runs on `devices[j]`. Workers are
// numbered stage by stage, replica by replica (worker 0 = stage 0 replica 0).
// Microbatch k visits replica k mod replicas of every stage.
//
// File format `baton.plan.v1`:
//   {"format": "baton.plan.v1", optional "model": str, "schedule": "pipedream"|"1f1b"|"gpipe"|"dp"|"zb-h1"|"zb-h2",
//    "microbatch_size": int >= 1, "microbatches": int >= 1, optional "vertical_sync": bool,
//    optional "paired_steady_state": bool (interleaved-1f1b, or 1f1b on one
//      stage: see Plan),
//    optional "delay_wgrad_compute": bool (with paired_steady_state only: see Plan),
//    optional "virtual_stages": int >= 1 (chunks per device; default 1; when given, one the
//        schedule runs: check_virtual_stages),
//    "stages": [{"layers": [begin, end], "replicas": int >= 1, optional "devices": [int]}],
//    optional "prediction": {...}  (the planner's own figures, kept verbatim),
//    optional "topology": {"name": str, "devices": int >= 1, "device": str}  (the cluster the
//        plan was made for: `baton plan -o` writes it; check_plan refuses the plan on a
//        topology with another name, device count or device),
//    optional "megatron": {...}  (a GPT layout in Megatron's argument names, sim/megatron.h:
//        the plan of `baton plan -o` with Megatron's flags; its stages are megatron_plan's)}
// These are all the keys: the loader refuses any other, naming the object and
// the key. What `prediction` holds is the planner's and is not checked.
// Thread safety: plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/profile.h"
#include "sim/result.h"
#include "sim/topology.h"

namespace baton {

// pipedream: asynchronous 1F1B with weight stashing; the others end each
// iteration with a flush: 1f1b (PipeDream-Flush), gpipe, dp (one stage), and
// the zero-bubble zb-h1 and zb-h2 (Qi et al., ICLR 2024), which split each
// backward into an input-gradient pass (I) and a weight-gradient pass (W).
// Three run several model chunks (stages) on each device ("virtual stages",
// runs_chunks): interleaved-1f1b (Megatron-LM's interleaved 1F1B), zbv (the
// V-shaped zero-bubble schedule, Qi et al. section 6) and dualpipev
// (DeepSeek's DualPipeV).
enum class Schedule { kPipeDream, kOneFOneB, kGPipe, kDataParallel, kZbH1, kZbH2, kInterleaved1F1B, kZbV, kDualPipeV };

std::string_view schedule_name(Schedule schedule);
// Every schedule, in the order above.
const std::vector<Schedule>& all_schedules();
// "pipedream, 1f1b, gpipe, dp, zb-h1 or zb-h2" (with `last_joiner` before the last).
std::string schedule_names(std::string_view last_joiner = "or");
Result<Schedule> parse_schedule(std::string_view name);
// Whether the schedule runs several chunks (stages) on each device.
bool runs_chunks(Schedule schedule);

// Chunked schedules (runs_chunks): the plan's S stages are the model's chunks
// in layer order, v = virtual_stages of them per device, on p = S / v
// pipeline ranks. interleaved-1f1b puts stage s on rank s mod p (rank d holds
// d, d + p, d + 2p, ...); zbv and dualpipev (v = 2) put stage s < p on rank s
// and stage s >= p on rank 2p - 1 - s (down the devices and back up). All
// stages of a rank share its replicas and devices; the worker (rank, replica)
// runs all of them. Other schedules: v = 1, one stage per worker.
// The cluster a plan was made for, as its file names it.
struct PlanTopology {
  std::string name;
  int devices = 0;
  std::string device;
};
PlanTopology plan_topology_of(const Topology& topology);

struct StagePlan {
  LayerRange layers;
  int replicas = 1;
  std::vector<int> devices;  // one per replica
};

struct Plan {
  std::string model;
  Schedule schedule = Schedule::kOneFOneB;
  int microbatch_size = 1;
  // The batches of microbatch_size samples pushed through the pipeline (the
  // plan file's "microbatches"): for the flush schedules (all but pipedream)
  // the microbatches of one iteration; for pipedream the minibatches of one
  // simulation, each with its own weight update.
  int batches = 1;
  // pipedream only: every stage uses the weight version stage 0 used.
  bool vertical_sync = false;
  // Chunks per device (see above); 1 for the schedules that do not run chunks.
  int virtual_stages = 1;
  // interleaved-1f1b, or 1f1b on one stage (Megatron-core's no-pipelining
  // schedule: F0, F1&B0, F2&B1, ..., the last B): one forward more in each
  // rank's warm-up, then each
  // steady-state forward runs with the backward after it as an overlapped
  // pair (sim/program.h), as Megatron-core's --overlap-moe-expert-parallel-comm
  // merges the forward and the backward of two microbatches to hide each
  // one's all-to-alls behind the other's compute.
  bool paired_steady_state = false;
  // With paired_steady_state only: in each pair the experts' weight
  // gradients run beside the dispatch's backward all-to-all, not before it
  // (Megatron-core's --delay-wgrad-compute; sim/stage_costs.h's paired_time).
  bool delay_wgrad_compute = false;
  std::vector<StagePlan> stages;
  nlohmann::json prediction;             // opaque to the simulator
  std::optional<PlanTopology> made_for;  // "topology"
  nlohmann::json megatron;               // null, or a GPT layout (read by sim/megatron.h)

  int num_stages() const { return static_cast<int>(stages.size()); }
  // Whether the schedule runs overlapped pairs (sim/program.h): DualPipeV's,
  // or 1F1B's (interleaved, or on one stage) with paired_steady_state.
  bool has_pairs() const { return schedule == Schedule::kDualPipeV || paired_steady_state; }
  int num_workers() const;
  // Pipeline ranks: S / virtual_stages (S when it does not divide).
  int num_ranks() const;
  // The rank that runs stage s (s itself without chunks).
  int rank_of(int stage) const;
};

// The stages rank `rank` runs, in increasing order.
std::vector<int> stages_of_rank(const Plan& plan, int rank);

// Where each worker sits. Derived from a Plan; workers numbered as above
// (rank by rank, replica by replica, when the schedule runs chunks).
struct WorkerInfo {
  int stage = 0;  // the worker's stage; with chunks, its first (= its rank)
  int replica = 0;
  int device = 0;
  std::vector<int> chunks;  // with chunks: every stage it runs, increasing; else empty

  // Whether the worker runs `s`.
  bool runs(int s) const;
};
// The stages a worker runs: its chunks, or its one stage.
std::vector<int> stages_of(const WorkerInfo& worker);
std::vector<WorkerInfo> workers_of(const Plan& plan);
// Worker index of (stage, replica): the worker of the stage's rank.
int worker_index(const Plan& plan, int stage, int replica);

// Parses "0-13x15,13-41x1" (half-open ranges, "xR" optional = 1 replica,
// optional "@d0+d1+..." device list per stage). Devices left out are
// assigned in order by `assign_devices`.
Result<std::vector<StagePlan>> parse_stages(std::string_view text);
// Gives every stage without devices the next free devices in order.
// Fails when the plan needs more devices than the topology has.
Status assign_devices(Plan& plan, const Topology& topology);
// Error when the plan names a topology (made_for) other than `topology`: its
// name, device count or device differ (a plan made for another cluster).
Status check_plan_topology(const Plan& plan, const Topology& topology, const std::string& source);

// Bounds that keep worker counts (Plan::num_workers, an int) from overflowing,
// for --stages and plan files alike: replicas per stage, and workers in all
// (no more than a topology can hold devices).
inline constexpr int kMaxReplicas = 1 << 20;
inline constexpr int64_t kMaxWorkers = int64_t{1} << 24;

// The most microbatch-stage pairs (microbatches per iteration x stages) a plan
// may ask the simulator for. Each pair is four to six actions, about 220 bytes
// of Program, timeline and trace (measured: 3.2 million actions of a 2-stage
// plan at 174 MB; 44 million of a GPT pipeline at 1.76 GB): this bound keeps a
// simulation under about 1 GiB, where a mistyped count would otherwise run the
// machine out of memory. Real iterations hold thousands of pairs, not millions.
inline constexpr int64_t kMaxMicrobatchStages = int64_t{1} << 22;

// Checks a plan against a profile and topology: check_plan_topology, ranges consecutive and
// covering every layer, replicas >= 1, one device per replica, device ids in
// range, no device shared unless the plan lists devices explicitly, microbatches x stages
// at most kMaxMicrobatchStages; for a
// schedule that runs chunks, what check_chunks checks.
// `source` names the plan's origin in messages.
Status check_plan(const Plan& plan, const Profile& profile, const Topology& topology, const std::string& source);

// A schedule that runs chunks: v >= 2 (interleaved-1f1b) or v = 2 (zbv,
// dualpipev), S a multiple of v, every stage of a rank with the rank's
// replicas and devices, interleaved-1f1b's microbatches a multiple of
// p x replicas (Megatron advances them in groups of p); zbv and dualpipev need
// at least 2p microbatches per replica. Any other schedule needs v = 1. The
// error says what would fit.
Status check_chunks(const Plan& plan, const std::string& source);
// paired_steady_state with interleaved-1f1b or 1f1b on one stage only,
// delay_wgrad_compute with paired_steady_state only; the error names the key.
Status check_pairing(const Plan& plan, const std::string& source);
// What check_chunks asks of v alone: 1 for a schedule that runs no chunks,
// >= 2 for interleaved-1f1b, 2 for zbv and dualpipev. plan_from_json applies
// it to a file that gives "virtual_stages".
Status check_virtual_stages(Schedule schedule, int virtual_stages, const std::string& source);

Result<Plan> plan_from_json(const nlohmann::json& document, const std::string& source);
Result<Plan> parse_plan(std::string_view text, const std::string& source);
nlohmann::json plan_to_json(const Plan& plan);
// "0-13x15,13-41x1"
std::string stages_to_string(const std::vector<StagePlan>& stages);

}  // namespace baton
