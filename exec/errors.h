// An exception's message as the executor reports it.
// LibTorch's errors (c10::Error) append a C++ backtrace ("frame #0: ...", 30
// lines and more) to their what(); a user needs the first part only, e.g.
// "DefaultCPUAllocator: can't allocate memory: you tried to allocate
// 25600000000 bytes". Thread safety: pure.
#pragma once

#include <exception>
#include <string>

#include <c10/util/Exception.h>

namespace baton::exec {

inline std::string error_text(const std::exception& e) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) return torch_error->what_without_backtrace();
  return e.what();
}

}  // namespace baton::exec
