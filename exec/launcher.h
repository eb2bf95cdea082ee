// Local launcher of the gloo backend: starts N copies of a program as ranks
// 0..N-1 with torchrun-style environment variables (MASTER_ADDR, MASTER_PORT,
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) added to this process's
// environment, and waits for them.
//
// Contract: no torch here (the launcher must not start LibTorch threads before
// it forks). Every child is started with posix_spawn, so it begins as a fresh
// process. When a rank fails (non-zero exit or a signal) the others get
// `grace` to finish, then the launcher kills the ones it started (by pid) and
// reaps them; the same happens to all of them when `timeout` passes. Ranks of
// the executor notice a dead peer at once and a silent one within their own
// wait timeout, so `grace` only lets them print why they stop; a rank still
// running after it is hung (and killing it closes its connections, which
// wakes any rank still waiting on it).
// CPUs: with `pin` (the default) and at least one CPU of the launcher's own
// affinity per rank, rank r is started on its own share of them (rank_cpus),
// which its threads inherit. Why: Gloo's I/O threads run only on otherwise
// idle cores (exec/transport_gloo.h); on a machine with as many cores as
// ranks a woken I/O thread was often placed on a core busy with the other
// rank's compute and waited 1-4 ms there for a message its own idle core
// could have read at once. Pinned, it runs on its rank's core as soon as that
// rank waits.
// Thread safety: call from one thread; it waits for its own children only.
#pragma once

#include <string>
#include <vector>

#include "sim/result.h"
#include "sim/units.h"

namespace baton::exec {

// The most ranks (or threads-backend workers) started on one machine: each
// loads its own copy of the model and LibTorch, and more than this many only
// compete for the machine's cores. Larger worlds start their ranks with
// torchrun, Slurm or mpirun (RANK, WORLD_SIZE, ... in each rank's environment).
constexpr int kMaxLocalRanks = 256;

// The class of a rank's Gloo I/O threads, "idle" or "normal", read by the
// gloo transport (exec/transport_gloo.h says why it is a choice).
constexpr const char* kGlooIoVariable = "BATON_GLOO_IO";

struct LaunchSpec {
  std::string executable;              // path of the program to start
  std::vector<std::string> arguments;  // argv[1..]
  int nproc = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;             // 0: pick a free loopback port
  Seconds timeout = Seconds(300);  // for the whole run
  Seconds grace = Seconds(5);      // after the first failure
  bool pin = true;                 // each rank on its own share of the CPUs (see above)
  // NAME=value entries for every rank's environment, over inherited ones of
  // the same name.
  std::vector<std::string> environment;
};

// The CPUs of each of `nproc` ranks, from `allowed` (in order): rank r gets
// the r-th run of allowed.size() / nproc of them (the rest unused); none
// (an empty list) when there are fewer CPUs than ranks.
std::vector<std::vector<int>> rank_cpus(const std::vector<int>& allowed, int nproc);

struct LaunchOutcome {
  int master_port = 0;
  // Per rank: the exit code, 128 + signal when killed by a signal, -1 when
  // the launcher had to kill it.
  std::vector<int> exit_codes;
  // The rank whose failure the launcher saw first; -1 when none failed on its
  // own (all succeeded, or the deadline passed first).
  int first_failure = -1;
  bool ok() const;
};

Result<LaunchOutcome> launch_local_ranks(const LaunchSpec& spec);

// Why a launch that is not ok() failed, first failure first, e.g.
// "rank 1 failed first: killed by signal 9 (Killed); rank 0: exit code 1" or
// "rank 0 failed first: exit code 1; rank 1: killed by the launcher, still
// running 5 s after the first failure".
std::string describe_failure(const LaunchOutcome& outcome, const LaunchSpec& spec);

// A TCP port that was free on 127.0.0.1 a moment ago (bind to port 0).
Result<int> free_local_port();

}  // namespace baton::exec
