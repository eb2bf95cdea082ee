// The commands that run the LibTorch executor (run, calibrate, validate,
// profile measure, kernels measure) are carried out by a second binary,
// baton-exec, which CMake builds beside baton when it finds LibTorch. Loading
// LibTorch costs a process about 0.3 s and 160 MB before main (its operator
// registrations), which plan, simulate, sweep, check and compare never use:
// baton does not link it. baton parses an executor command with the same
// options baton-exec has (the same sources), so --help and flag errors come
// from baton itself; then it replaces itself with baton-exec, run with the
// same arguments, which checks the inputs and does the work.
#pragma once

#include <string_view>

namespace baton::cli {

// The name of the executor's binary, beside baton.
inline constexpr std::string_view kExecutorBinary = "baton-exec";

// Replaces this process with baton-exec (the file of that name in the folder
// of this process's executable) and this process's arguments. Returns only by
// throwing UsageError: this build has no executor (`command` names what needed
// it), or baton-exec is missing or cannot be started.
[[noreturn]] void hand_to_executor(std::string_view command);

}  // namespace baton::cli
