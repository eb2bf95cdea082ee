// Golden files: the writers' whole output for a fixed hand-made trace,
// compared byte for byte with tests/golden/. After an intended format change,
// regenerate with BATON_UPDATE_GOLDEN=1 and review the diff.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/catch_compat.h"

#include "sim/trace_writers.h"
#include "tests/trace/trace_fixtures.h"

namespace baton {
namespace {

using testing::small_trace;
using testing::split;

std::string golden_path(const std::string& name) { return std::string(BATON_SOURCE_DIR) + "/tests/golden/" + name; }

bool update_requested() {
  const char* update = std::getenv("BATON_UPDATE_GOLDEN");
  return update != nullptr && std::string(update) == "1";
}

std::string read_file(const std::string& path, bool& found) {
  std::ifstream in(path, std::ios::binary);
  found = static_cast<bool>(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "line 12:\n  expected: ...\n  actual:   ..." for the first line that differs.
std::string first_difference(const std::string& expected, const std::string& actual) {
  const std::vector<std::string> want = split(expected, '\n');
  const std::vector<std::string> got = split(actual, '\n');
  for (size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
    const std::string a = i < want.size() ? want[i] : "<end of file>";
    const std::string b = i < got.size() ? got[i] : "<end of file>";
    if (a != b) {
      return "line " + std::to_string(i + 1) + ":\n  expected: " + a + "\n  actual:   " + b;
    }
  }
  return "no line differs (line endings?)";
}

void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = golden_path(name);
  if (update_requested()) {
    std::ofstream(path, std::ios::binary) << actual;
    WARN("rewrote " << path);
    return;
  }
  bool found = false;
  const std::string expected = read_file(path, found);
  if (!found) FAIL(path << " is missing; run with BATON_UPDATE_GOLDEN=1 to create it");
  if (expected != actual) {
    FAIL(path << " differs at " << first_difference(expected, actual)
              << "\nIf the change is intended, rerun with BATON_UPDATE_GOLDEN=1 and review "
                 "`git diff tests/golden`.");
  }
}

TEST_CASE("golden: chrome json of the small trace") {
  check_golden("trace_small.chrome.json", trace_to_chrome_json(small_trace()));
}

TEST_CASE("golden: csv of the small trace") { check_golden("trace_small.csv", trace_to_csv(small_trace())); }

}  // namespace
}  // namespace baton
