#include "tools/rank_launch.h"

#if BATON_HAVE_EXEC

#include <cerrno>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "exec/launcher.h"
#include "tools/cli_support.h"

namespace baton::cli {

std::optional<exec::RankEnv> rank_env_from_environment() {
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  if (rank == nullptr || world == nullptr) return std::nullopt;
  const auto number = [](const char* name, int fallback) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return fallback;
    char* end = nullptr;
    errno = 0;
    const long parsed = std::strtol(value, &end, 10);
    if (*end != '\0') throw UsageError(fmt::format("environment: {}={} is not a number", name, value));
    if (errno == ERANGE || parsed < 0 || parsed > std::numeric_limits<int>::max())
      throw UsageError(fmt::format("environment: {}={} is out of range", name, value));
    return static_cast<int>(parsed);
  };
  exec::RankEnv env;
  env.rank = number("RANK", 0);
  env.world_size = number("WORLD_SIZE", 1);
  env.local_rank = number("LOCAL_RANK", env.rank);
  env.master_port = number("MASTER_PORT", 29500);
  if (env.master_port < 1 || env.master_port > 65535)
    throw UsageError(fmt::format("environment: MASTER_PORT={} is not a TCP port (1 to 65535)", env.master_port));
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') env.master_addr = addr;
  return env;
}

std::vector<std::string> own_arguments() {
  std::vector<std::string> args = command_line();
  if (!args.empty()) args.erase(args.begin());
  return args;
}

Status launch_self_ranks(const std::vector<std::string>& arguments, int nproc, Seconds timeout,
                         const std::optional<MachineLoad>& load) {
  exec::LaunchSpec spec;
  spec.executable = "/proc/self/exe";
  spec.arguments = arguments;
  spec.nproc = nproc;
  spec.timeout = timeout;
  const char* pin = std::getenv("BATON_PIN_RANKS");  // "0": leave the ranks' CPUs to the scheduler
  spec.pin = pin == nullptr || std::string(pin) != "0";
  // The class of the ranks' Gloo I/O threads (exec/transport_gloo.h): idle
  // unless other work keeps the CPUs busy now, or as the environment says.
  if (std::getenv(exec::kGlooIoVariable) == nullptr) {
    const auto now = load ? load : sample_machine_load();
    spec.environment.push_back(fmt::format("{}={}", exec::kGlooIoVariable, now && is_busy(*now) ? "normal" : "idle"));
  }
  auto outcome = exec::launch_local_ranks(spec);
  if (!outcome) return outcome.error();
  if (outcome->ok()) return ok_status();
  std::string failure = exec::describe_failure(*outcome, spec);
  // Ranks that ran out of time on a busy machine were waiting for its CPUs.
  if (outcome->first_failure < 0) {
    if (const auto after = sample_machine_load()) failure += busy_after_deadline(*after);
  }
  return Error{failure};
}

}  // namespace baton::cli

#endif  // BATON_HAVE_EXEC
