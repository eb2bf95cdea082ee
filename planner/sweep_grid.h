// The grid of a sweep, its shards, and the points of a shard run on threads
// (used by both sweeps: profile + schedules, and GPT layouts).
//
// A grid of T points is numbered 0 .. T-1 in a fixed order (each sweep says
// which). A shard K of N (0-based here; `--shard K/N` is 1-based) is the
// contiguous slice [floor(K T / N), floor((K+1) T / N)): the N slices are
// disjoint and cover the grid, so N array jobs each compute one and
// `baton sweep merge` puts their CSVs back together.
// Thread safety: pure functions; run_points runs `work` on several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/result.h"

namespace baton {

// A value's text as a finite number, spelled whole ("10", "0.5", "1e3"), or nothing.
std::optional<double> parse_number(const std::string& text);
// A whole number >= `least`, digits only (at most 18), or nothing.
std::optional<int64_t> parse_whole(const std::string& text, int64_t least);

// The axes of one sweep, by what each varies (`key`: an alias and its name, a
// level's name and its index, are one key) and as the user gave it. add()
// refuses a key given before, naming both spellings where they differ.
class GivenAxes {
 public:
  Status add(const std::string& key, const std::string& as_given);

 private:
  std::map<std::string, std::string> as_given_;  // key -> as first given
};

struct Shard {
  int index = 0;  // 0-based
  int count = 1;
};

// "K/N" (1 <= K <= N), or "slurm": the array task of Slurm's environment,
// K = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN (0 when unset), N =
// SLURM_ARRAY_TASK_COUNT. `getenv` reads the environment (tests pass their own).
Result<Shard> parse_shard(const std::string& text, const std::function<const char*(const char*)>& getenv);

struct PointRange {
  size_t begin = 0;
  size_t end = 0;  // one past the last
  size_t size() const { return end - begin; }
};
PointRange shard_range(size_t total, const Shard& shard);

// The digits of point `index` in a grid whose axes have `sizes` values, the
// last axis fastest: index = ((d0 * s1 + d1) * s2 + d2) ...
std::vector<size_t> grid_digits(size_t index, const std::vector<size_t>& sizes);

// Runs work(i) for every i in `range` on `threads` threads (any order);
// `progress(done, total)` is called from the calling thread about ten times a
// second and once at the end.
void run_points(PointRange range, int threads, const std::function<void(size_t)>& work,
                const std::function<void(size_t, size_t)>& progress);

}  // namespace baton
