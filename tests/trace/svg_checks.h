// Checks on SVG text shared by the chart tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace baton::testing {

// Checks that tags nest and close, and that text holds no bare '<' or '&'
// other than entities: enough to catch broken markup from the writer.
inline bool well_formed(std::string_view svg, std::string& why) {
  std::vector<std::string> open;
  size_t at = 0;
  while ((at = svg.find('<', at)) != std::string_view::npos) {
    const size_t close = svg.find('>', at);
    if (close == std::string_view::npos) return why = "unterminated tag", false;
    const std::string_view tag = svg.substr(at + 1, close - at - 1);
    if (tag.find('<') != std::string_view::npos) return why = "'<' inside a tag", false;
    const bool closing = tag.front() == '/';
    const bool self_closing = tag.back() == '/';
    const std::string name(tag.substr(closing ? 1 : 0, tag.find_first_of(" />", 1) - (closing ? 1 : 0)));
    if (closing) {
      if (open.empty() || open.back() != name) return why = "mismatched </" + name + ">", false;
      open.pop_back();
    } else if (!self_closing) {
      open.push_back(name);
    }
    at = close + 1;
  }
  if (!open.empty()) return why = "unclosed <" + open.back() + ">", false;
  return true;
}

}  // namespace baton::testing
