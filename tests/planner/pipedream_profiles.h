// PipeDream's own profiles for the opt-in tests: the folder that
// BATON_PIPEDREAM_PROFILES names (holding <model>/graph.txt; the profiles are
// not part of this repository), and one profile imported from it.
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "planner/pipedream_import.h"
#include "tests/catch_compat.h"

namespace baton::pipedream_testing {

// The folder, or nothing when the variable is unset or empty.
inline std::optional<std::string> profiles_folder() {
  const char* folder = std::getenv("BATON_PIPEDREAM_PROFILES");
  if (folder == nullptr || *folder == '\0') return std::nullopt;
  return std::string(folder);
}

// <folder>/<model>/graph.txt imported, named `model`; a test failure when it
// cannot be read or imported.
inline Profile load(const std::string& folder, const std::string& model) {
  const std::string path = folder + "/" + model + "/graph.txt";
  std::ifstream file(path);
  REQUIRE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  auto profile = import_pipedream_graph(text.str(), path);
  INFO((profile ? std::string() : profile.error().message));
  REQUIRE(profile.ok());
  profile->model = model;
  return *profile;
}

}  // namespace baton::pipedream_testing
