// A fuzz target without libFuzzer: runs its LLVMFuzzerTestOneInput once on
// every file named, or every file of every folder named, in name order, as
// libFuzzer does when it is given files. The normal build links each target
// with this main (fuzz/seeds.cmake), so a target that no longer compiles
// fails the build, and a seed (its corpus holds the crash regressions too)
// that now breaks a property aborts a test, where before either waited for
// the next fuzzing session (tools/fuzz, clang only).
//
// Usage: <target>_seeds PATH...   Exit 0 when every input ran, 2 when a path
// cannot be read; a property that fails aborts (fuzz/fuzz_support.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path path = argv[i];
    std::error_code error;
    if (fs::is_directory(path, error)) {
      for (const fs::directory_entry& entry : fs::directory_iterator(path, error))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else if (fs::is_regular_file(path, error)) {
      inputs.push_back(path);
    } else {
      error = std::make_error_code(std::errc::no_such_file_or_directory);
    }
    if (error) {
      std::fprintf(stderr, "seed replay: %s: not a file or folder (%s)\n", argv[i], error.message().c_str());
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "seed replay: no inputs (usage: %s PATH...)\n", argc > 0 ? argv[0] : "seeds");
    return 2;
  }
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "seed replay: %s: cannot be read\n", input.string().c_str());
      return 2;
    }
    std::printf("%s\n", input.string().c_str());
    std::fflush(stdout);  // the last name printed is the input that aborted
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%zu inputs ran\n", inputs.size());
  return 0;
}
