// Starting the executor's ranks from the command line (gloo backend): reading a
// rank's torchrun-style environment, and starting N ranks of this binary on
// this machine (exec/launcher.h) with a message that names the failed ranks.
// Only in builds with the executor (BATON_HAVE_EXEC).
#pragma once

#if BATON_HAVE_EXEC

#include <optional>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "sim/result.h"
#include "sim/units.h"
#include "tools/machine_load.h"

namespace baton::cli {

// This process's rank when RANK and WORLD_SIZE are set (torchrun, Slurm,
// mpirun, or launch_self_ranks); MASTER_ADDR defaults to 127.0.0.1,
// MASTER_PORT to 29500, LOCAL_RANK to RANK. A non-numeric value is a UsageError.
std::optional<exec::RankEnv> rank_env_from_environment();

// argv of this process without argv[0]: to start ranks with this command.
std::vector<std::string> own_arguments();

// Runs `baton <arguments>` as ranks 0..nproc-1 on 127.0.0.1 (a free port) and
// waits at most `timeout`; an Error says which rank failed first and how each
// ended (exec::describe_failure; ranks stopped at the deadline also get the
// machine's load then, tools/machine_load.h). Each rank runs on its own share of the CPUs
// (exec::LaunchSpec::pin) unless BATON_PIN_RANKS=0 is in the environment.
// Unless BATON_GLOO_IO is set, the ranks' Gloo I/O threads get SCHED_IDLE on an
// idle machine and the normal class where other work keeps half a CPU or more
// busy as they start (exec/transport_gloo.h says why; tools/machine_load.h).
// `load`: the machine's load sampled just before (tools/machine_load.h), or
// nullopt to sample it here.
Status launch_self_ranks(const std::vector<std::string>& arguments, int nproc, Seconds timeout,
                         const std::optional<MachineLoad>& load = std::nullopt);

}  // namespace baton::cli

#endif  // BATON_HAVE_EXEC
