// Runs the built `baton` binary and captures what it printed and its exit code.
#pragma once

#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace baton::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ctest runs test cases in parallel processes: scratch folders carry the process id.
inline std::filesystem::path scratch_root() {
  return std::filesystem::path(BATON_BINARY_DIR) / "test-scratch" / std::to_string(::getpid());
}

// Removes `path` and everything under it, if it exists. Not
// std::filesystem::remove_all: PyTorch's pip wheels export their own copy of
// it from libtorch.so, which test binaries linked with such a LibTorch bind
// to, and it crashed there (a null function pointer, PyTorch 2.11 on an H100
// machine); POSIX's nftw is the C library's alone.
inline void remove_tree(const std::filesystem::path& path) {
  const auto remove_entry = [](const char* entry, const struct stat*, int, struct FTW*) { return ::remove(entry); };
  ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = scratch_root() / name;
  remove_tree(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A path quoted for the shell command run_baton builds.
inline std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

// `arguments` is appended to the binary path as is (quote paths yourself: quoted).
// `binary`: another copy of baton to run instead of the built one; `cwd`: the
// directory it runs in (default: the source tree, whose relative paths the
// tests name).
inline CliRun run_baton(const std::string& arguments, const std::string& scratch = "cli",
                        const std::filesystem::path& binary = std::filesystem::path(BATON_BINARY_DIR) / "baton",
                        const std::filesystem::path& cwd = BATON_SOURCE_DIR) {
  const auto dir = scratch_root() / (scratch + "-io");
  std::filesystem::create_directories(dir);
  const auto out = dir / "stdout.txt";
  const auto err = dir / "stderr.txt";
  const std::string command = "cd " + quoted(cwd) + " && " + quoted(binary) + " " + arguments + " >'" + out.string() +
                              "' 2>'" + err.string() + "'";
  const int status = std::system(command.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(out);
  run.err = slurp(err);
  return run;
}

}  // namespace baton::testing

namespace baton::testing {
// Removes this process's scratch folder when the test process ends.
struct ScratchCleaner {
  ~ScratchCleaner() { remove_tree(scratch_root()); }
};
inline const ScratchCleaner kScratchCleaner;
}  // namespace baton::testing
