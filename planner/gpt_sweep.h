// GPT layout sweeps (`baton sweep` with Megatron-LM's model flags): a grid of
// layout axes (tensor and pipeline parallelism, micro-batch, interleaving,
// recomputation, ...) and cluster axes (servers, bandwidth and latency per
// level, device memory, whole topology files), each point simulated with the
// given layout (predict_megatron, as `baton simulate` does) or planned
// (search_megatron_layouts with the varied axes pinned, as `baton plan` does).
//
// Axis names are Megatron's flags without the dashes' "--" (short names in
// brackets are accepted and written as the long ones):
//   tensor-model-parallel-size [tp], pipeline-model-parallel-size [pp],
//   micro-batch-size [mbs], global-batch-size [gbs],
//   num-layers-per-virtual-pipeline-stage [vpp]   (0: not interleaved)
//   recompute-granularity                          none, selective, full
//   sequence-parallel, use-distributed-optimizer, overlap-grad-reduce   yes/no (1/0, on/off)
//   zero-bubble                                    1f1b, zb-h1, zb-h2 (not interleaved)
//   v-schedule                                     none, zbv, dualpipev (two chunks per GPU in a V)
//   moe-token-dispatcher-type                      allgather, alltoall (with experts)
//   moe-shared-expert-overlap                      yes/no (with a shared expert and alltoall)
//   overlap-moe-expert-parallel-comm               yes/no (interleaved, ep >= 2, alltoall)
// and the cluster's: topology (topology files), servers, devices_per_server,
// bandwidth_gbps.L, latency_us.L, memory_gib (planner/sweep.h).
// The grid is numbered with the last axis fastest; the table is
// planner/sweep_table.h's with the layout's columns in Megatron's argument
// names after the axes (moe_token_dispatcher_type empty for a dense model). The data-parallel size of a point is its
// GPUs / (t p) unless the base layout gives one. Thread safety: pure; run_gpt_sweep runs points on threads.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "planner/megatron_search.h"
#include "planner/sweep_grid.h"
#include "planner/sweep_table.h"
#include "sim/megatron.h"
#include "sim/topology.h"

namespace baton {

struct GptSweepAxis {
  std::string name;  // canonical after check_gpt_axis
  std::vector<std::string> values;
};

struct GptSweepSpec {
  GptModel model;
  MegatronLayout layout;  // the base layout; data 0: each point's GPUs / (t p)
  bool plan = false;      // plan every point instead of simulating its layout
  MegatronAxes pinned;    // plan: the layout flags given beside the axes
  std::vector<GptSweepAxis> axes;
  std::map<std::string, Topology> topologies;  // the `topology` axis' files, loaded
  int threads = 1;
  Shard shard;
};

// Canonical name and values of an axis; Error naming the axis and what it
// accepts. A `topology` axis' values must be keys of `topologies`.
Status check_gpt_axis(GptSweepAxis& axis, const std::map<std::string, Topology>& topologies);

size_t gpt_sweep_size(const GptSweepSpec& spec);

// The header of the table (planner/sweep_table.h).
std::vector<std::string> gpt_sweep_header(const GptSweepSpec& spec);

// The points of the spec's shard, in point order. Errors: an axis that
// check_gpt_axis refuses. A point that cannot run (an invalid layout, no
// layout fits) is a row with its error.
Result<SweepTable> run_gpt_sweep(GptSweepSpec spec, const Topology& base,
                                 const std::function<void(size_t, size_t)>& progress);

}  // namespace baton
