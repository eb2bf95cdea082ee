// Fuzzes parse_action and parse_action_list (the schedule IR's text form).
//
// Properties: no crash; to_string of a parsed action parses back to the same
// Action; a parsed list written back space-separated parses to the same list;
// one token without whitespace parses as a list exactly when it parses as an
// action.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.h"
#include "sim/program.h"

namespace {

using baton::Action;
using baton::fuzz::fail;

void check_round_trip(const Action& action) {
  const std::string text = baton::to_string(action);
  auto again = baton::parse_action(text);
  if (!again) fail("to_string(action) parses back", text + "\n" + again.error().message);
  if (!(*again == action)) fail("round trip gives the same action", text);
}

bool has_space(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = baton::fuzz::as_text(data, size);
  auto action = baton::parse_action(text);
  if (action) check_round_trip(*action);
  auto list = baton::parse_action_list(text);
  if (!text.empty() && !has_space(text) && list.ok() != action.ok())
    fail("one token parses as a list exactly when it parses as an action", text);
  if (!list) return 0;
  std::string written;
  for (const Action& a : *list) {
    check_round_trip(a);
    if (!written.empty()) written += ' ';
    written += baton::to_string(a);
  }
  auto again = baton::parse_action_list(written);
  if (!again) fail("the written list parses back", written + "\n" + again.error().message);
  if (*again != *list) fail("list round trip gives the same actions", written);
  return 0;
}
