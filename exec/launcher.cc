#include "exec/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

extern char** environ;

namespace baton::exec {

namespace {

using Clock = std::chrono::steady_clock;

// This process's environment without the variables the launcher sets.
std::vector<std::string> child_environment(const LaunchSpec& spec, int port, int rank) {
  static constexpr const char* kOwned[] = {
      "MASTER_ADDR=", "MASTER_PORT=", "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE="};
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const bool owned = std::any_of(std::begin(kOwned), std::end(kOwned),
                                   [&](const char* prefix) { return entry.rfind(prefix, 0) == 0; });
    const bool given = std::any_of(spec.environment.begin(), spec.environment.end(), [&](const std::string& set) {
      return entry.rfind(set.substr(0, set.find('=') + 1), 0) == 0;
    });
    if (!owned && !given) env.push_back(entry);
  }
  env.insert(env.end(), spec.environment.begin(), spec.environment.end());
  env.push_back("MASTER_ADDR=" + spec.master_addr);
  env.push_back(fmt::format("MASTER_PORT={}", port));
  env.push_back(fmt::format("RANK={}", rank));
  env.push_back(fmt::format("WORLD_SIZE={}", spec.nproc));
  env.push_back(fmt::format("LOCAL_RANK={}", rank));
  env.push_back(fmt::format("LOCAL_WORLD_SIZE={}", spec.nproc));
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Result<pid_t> spawn_rank(const LaunchSpec& spec, int port, int rank) {
  std::vector<std::string> argv{spec.executable};
  argv.insert(argv.end(), spec.arguments.begin(), spec.arguments.end());
  std::vector<std::string> env = child_environment(spec, port, rank);
  std::vector<char*> argv_ptrs = pointers(argv);
  std::vector<char*> env_ptrs = pointers(env);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, spec.executable.c_str(), nullptr, nullptr, argv_ptrs.data(), env_ptrs.data());
  if (rc != 0) return Error{fmt::format("cannot start rank {} ({}): {}", rank, spec.executable, std::strerror(rc))};
  return pid;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// How one rank ended, from its entry in LaunchOutcome::exit_codes.
std::string how_it_ended(int code, const LaunchSpec& spec, bool after_failure) {
  if (code == -1 && after_failure)
    return fmt::format("killed by the launcher, still running {:g} s after the first failure", spec.grace.value);
  if (code == -1) return "killed by the launcher at the deadline";
  if (code > 128) return fmt::format("killed by signal {} ({})", code - 128, strsignal(code - 128));
  return fmt::format("exit code {}", code);
}

// Waits for every child; kills the survivors `grace` after a failure or at the deadline.
void wait_all(const LaunchSpec& spec, std::vector<pid_t>& pids, LaunchOutcome& outcome) {
  std::vector<int>& codes = outcome.exit_codes;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec.timeout.value));
  Clock::time_point kill_at = deadline;
  size_t running = pids.size();
  while (running > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      codes[r] = exit_code_of(status);
      pids[r] = 0;
      --running;
      if (codes[r] != 0) {
        if (outcome.first_failure < 0) outcome.first_failure = static_cast<int>(r);
        kill_at = std::min(kill_at, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(spec.grace.value)));
      }
    }
    if (running > 0 && Clock::now() >= kill_at) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        pids[r] = 0;
        codes[r] = -1;
      }
      running = 0;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

bool LaunchOutcome::ok() const {
  return std::all_of(exit_codes.begin(), exit_codes.end(), [](int code) { return code == 0; });
}

Result<int> free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Error{fmt::format("socket: {}", std::strerror(errno))};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return Error{"cannot find a free port: " + reason};
  }
  close(fd);
  return static_cast<int>(ntohs(address.sin_port));
}

std::vector<std::vector<int>> rank_cpus(const std::vector<int>& allowed, int nproc) {
  if (nproc < 1 || static_cast<int>(allowed.size()) < nproc) return {};
  const size_t share = allowed.size() / static_cast<size_t>(nproc);
  std::vector<std::vector<int>> out(static_cast<size_t>(nproc));
  for (size_t r = 0; r < out.size(); ++r)
    out[r].assign(allowed.begin() + static_cast<std::ptrdiff_t>(r * share),
                  allowed.begin() + static_cast<std::ptrdiff_t>((r + 1) * share));
  return out;
}

Result<LaunchOutcome> launch_local_ranks(const LaunchSpec& spec) {
  if (spec.nproc < 1) return Error{fmt::format("--nproc must be >= 1, got {}", spec.nproc)};
  if (spec.nproc > kMaxLocalRanks)
    return Error{fmt::format("--nproc {}: at most {} ranks start on one machine", spec.nproc, kMaxLocalRanks)};
  LaunchOutcome outcome;
  outcome.master_port = spec.master_port;
  if (outcome.master_port == 0) {
    auto port = free_local_port();
    if (!port) return port.error();
    outcome.master_port = *port;
  }
  std::vector<pid_t> pids;
  outcome.exit_codes.assign(static_cast<size_t>(spec.nproc), -1);
  // A spawned process inherits the calling thread's affinity: set it per rank, then restore it.
  cpu_set_t own;
  const bool pinning = spec.pin && sched_getaffinity(0, sizeof own, &own) == 0;
  std::vector<std::vector<int>> cpus;
  if (pinning) {
    std::vector<int> allowed;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &own)) allowed.push_back(cpu);
    cpus = rank_cpus(allowed, spec.nproc);
  }
  for (int rank = 0; rank < spec.nproc; ++rank) {
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int cpu : cpus[static_cast<size_t>(rank)]) CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof set, &set);
    }
    auto pid = spawn_rank(spec, outcome.master_port, rank);
    if (!cpus.empty()) sched_setaffinity(0, sizeof own, &own);
    if (!pid) {
      for (pid_t started : pids) {
        kill(started, SIGKILL);
        waitpid(started, nullptr, 0);
      }
      return pid.error();
    }
    pids.push_back(*pid);
  }
  wait_all(spec, pids, outcome);
  return outcome;
}

std::string describe_failure(const LaunchOutcome& outcome, const LaunchSpec& spec) {
  const bool after_failure = outcome.first_failure >= 0;
  std::string text;
  if (after_failure) {
    const int first = outcome.first_failure;
    text = fmt::format("rank {} failed first: {}", first,
                       how_it_ended(outcome.exit_codes[static_cast<size_t>(first)], spec, false));
  } else {
    text = fmt::format("no rank failed before the run's deadline of {:g} s", spec.timeout.value);
  }
  for (size_t r = 0; r < outcome.exit_codes.size(); ++r) {
    if (static_cast<int>(r) == outcome.first_failure || outcome.exit_codes[r] == 0) continue;
    text += fmt::format("; rank {}: {}", r, how_it_ended(outcome.exit_codes[r], spec, after_failure));
  }
  return text;
}

}  // namespace baton::exec
