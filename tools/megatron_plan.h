// `baton plan` with Megatron-LM's flags: the layout search of
// planner/megatron_search.h, its report, and the layout as Megatron flags.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "tools/megatron_flags.h"

namespace baton::cli {

struct MegatronPlanArgs {
  std::string topology;
  bool json = false;
  std::string emit;  // "", "megatron", "torchrun"
  int keep = 5;
  std::string output;             // -o: the plan file (baton.plan.v1 with "megatron" and "topology")
  int gpus = 0;                   // --gpus: t x p x d equals it (0: every GPU of the topology)
  double memory_limit_gib = 0.0;  // --memory-limit-gib: memory per GPU (0: the topology's)
};

// The torchrun line that starts `program` on the servers a job of `gpus`
// GPUs spans on `topology` (consecutive GPUs, whole servers first): where the
// last server is used in part, --nproc-per-node is a shell expression of
// $NODE_RANK giving it the rest (12 GPUs on servers of 8: 8 on node 0, 4 on 1).
std::string torchrun_line(const Topology& topology, int gpus, const std::string& program);

// Plans the layout; `cmd` tells which layout flags were given (those pin their axis).
int run_megatron_plan(const MegatronArgs& flags, const MegatronPlanArgs& args, const CLI::App& cmd);

}  // namespace baton::cli
