#include "tools/executor_handoff.h"

#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/cli_support.h"

namespace baton::cli {

void hand_to_executor(std::string_view command) {
#if BATON_EXECUTOR_BUILT
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::filesystem::path executor = self.parent_path() / kExecutorBinary;
  if (error || ::access(executor.c_str(), X_OK) != 0) {
    throw UsageError(
        fmt::format("{}: needs the executor, {} beside this baton, which is missing; it is built with "
                    "baton (cmake --build BUILD --target baton) when LibTorch is found",
                    command, error ? std::string(kExecutorBinary) : executor.string()));
  }
  // argv as this process got it: argv[0] stays what the user typed, so that
  // messages and process lists still say baton.
  std::vector<std::string> arguments = command_line();
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(executor.c_str(), argv.data());
  throw UsageError(fmt::format("{}: cannot start {}: {}", command, executor.string(), std::strerror(errno)));
#else
  throw UsageError(
      fmt::format("{}: this baton was built without LibTorch (the executor); rebuild with BATON_TORCH=ON", command));
#endif
}

}  // namespace baton::cli
