#include "exec/fault.h"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

namespace baton::exec {

namespace {

Result<int> parse_count(std::string_view key, std::string_view value) {
  int number = -1;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error != std::errc() || end != value.data() + value.size() || number < 0)
    return Error{fmt::format("{} = '{}' is not a number >= 0", key, value)};
  return number;
}

Result<FaultKind> parse_kind(std::string_view value) {
  if (value == "crash") return FaultKind::kCrash;
  if (value == "exit") return FaultKind::kExit;
  if (value == "hang") return FaultKind::kHang;
  return Error{fmt::format("kind = '{}' is not one of crash, exit, hang", value)};
}

// "a=1,b=2" as a map; fails on an item without '=' or a repeated key.
Result<std::map<std::string, std::string, std::less<>>> parse_items(std::string_view text) {
  std::map<std::string, std::string, std::less<>> items;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos) return Error{fmt::format("'{}' is not key=value", item)};
    if (!items.emplace(item.substr(0, equals), item.substr(equals + 1)).second)
      return Error{fmt::format("'{}' is given twice", item.substr(0, equals))};
  }
  return items;
}

}  // namespace

Result<InjectedFault> parse_fault(std::string_view text) {
  const auto fail = [&](const std::string& why) {
    return Error{fmt::format("{}='{}': {} (expected rank=R,step=S,kind=crash|exit|hang)", kFaultVariable, text, why)};
  };
  auto items = parse_items(text);
  if (!items) return fail(items.error().message);
  for (const auto& [key, value] : *items) {
    if (key != "rank" && key != "step" && key != "kind") return fail(fmt::format("unknown key '{}'", key));
  }
  for (const char* key : {"rank", "step", "kind"}) {
    if (items->count(key) == 0) return fail(fmt::format("'{}' is missing", key));
  }
  auto rank = parse_count("rank", items->at("rank"));
  if (!rank) return fail(rank.error().message);
  auto step = parse_count("step", items->at("step"));
  if (!step) return fail(step.error().message);
  auto kind = parse_kind(items->at("kind"));
  if (!kind) return fail(kind.error().message);
  return InjectedFault{*rank, *step, *kind};
}

Result<std::optional<InjectedFault>> fault_from_environment() {
  const char* text = std::getenv(kFaultVariable);
  if (text == nullptr || *text == '\0') return std::optional<InjectedFault>();
  auto fault = parse_fault(text);
  if (!fault) return fault.error();
  return std::optional<InjectedFault>(*fault);
}

void inject_fault(const InjectedFault& fault) {
  switch (fault.kind) {
    case FaultKind::kCrash: raise(SIGKILL); break;
    case FaultKind::kExit: _exit(3);
    case FaultKind::kHang:
      for (;;) pause();
  }
  std::abort();  // SIGKILL cannot be caught: not reached
}

}  // namespace baton::exec
