// Helpers shared by the benchmark programs.
#pragma once

#include <errno.h>  // program_invocation_short_name

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "sim/result.h"
#include "sim/topology.h"

namespace baton::bench {

// The whole file, or "" when it cannot be read (the loaders then say so).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value, or the error on stderr under the program's name and exit 2.
template <typename T>
T must(Result<T> result) {
  if (!result) {
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, result.error().message.c_str());
    std::exit(2);
  }
  return std::move(*result);
}

// The file's text; "cannot read PATH" on stderr under the program's name
// and exit 2 when it cannot be read (or is empty).
inline std::string must_read(const std::string& path) {
  std::string text = read_text(path);
  if (text.empty()) {
    std::fprintf(stderr, "%s: cannot read %s\n", program_invocation_short_name, path.c_str());
    std::exit(2);
  }
  return text;
}

// The topology in the file, or the loader's error and exit 2 (as must).
inline Topology must_topology(const std::string& path) { return must(parse_topology(must_read(path), path)); }

}  // namespace baton::bench
