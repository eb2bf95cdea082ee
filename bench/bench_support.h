// Helpers shared by the benchmark programs.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace baton::bench {

// The whole file, or "" when it cannot be read (the loaders then say so).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace baton::bench
