// Fault injection for tests: a run can be told, through the environment
// variable BATON_INJECT_FAULT (documented in exec/executor.h), to make one
// worker fail at the start of one step, so tests can check what the other
// ranks do and that a run resumes from its checkpoint.
//
//   BATON_INJECT_FAULT="rank=1,step=3,kind=crash"
//
// rank: the worker (= gloo rank) that fails; step: the 0-based step at whose
// start it fails, before its first action; kind: crash (SIGKILL on its own
// process: no message, no cleanup), exit (_exit(3): the process ends without
// unwinding) or hang (sleeps for ever: its peers must time out; gloo only, as
// a hung thread of the threads backend could never be joined).
// Torch-free. Thread safety: parse_fault is pure; inject_fault ends or stops
// the calling process or thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sim/result.h"

namespace baton::exec {

enum class FaultKind { kCrash, kExit, kHang };

struct InjectedFault {
  int rank = 0;
  int step = 0;
  FaultKind kind = FaultKind::kCrash;
};

inline constexpr const char* kFaultVariable = "BATON_INJECT_FAULT";

// Parses "rank=R,step=S,kind=crash|exit|hang" (keys in any order, each once).
Result<InjectedFault> parse_fault(std::string_view text);

// The fault BATON_INJECT_FAULT asks for; nullopt when it is unset or empty.
Result<std::optional<InjectedFault>> fault_from_environment();

// Carries the fault out; never returns.
[[noreturn]] void inject_fault(const InjectedFault& fault);

}  // namespace baton::exec
