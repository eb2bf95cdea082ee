// Sweep grids: shards (--shard K/N and Slurm's array variables), their ranges,
// and a point's digits.
#include <map>
#include <string>

#include "tests/catch_compat.h"

#include "planner/sweep_grid.h"

namespace baton {
namespace {

std::function<const char*(const char*)> environment(const std::map<std::string, std::string>& values) {
  return [values](const char* name) -> const char* {
    const auto it = values.find(name);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("sweep grid: --shard K/N is the K-th of N slices, counted from 1") {
  const auto none = environment({});
  const auto shard = parse_shard("3/4", none);
  REQUIRE(shard.ok());
  CHECK(shard->index == 2);
  CHECK(shard->count == 4);
  for (const char* bad : {"0/4", "5/4", "4", "/4", "1/0", "a/b", "1/4x", "-1/4", ""}) {
    INFO(bad);
    const auto refused = parse_shard(bad, none);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message.find("--shard") != std::string::npos);
  }
}

TEST_CASE("sweep grid: --shard slurm reads the array task, counted from the array's first index") {
  const auto plain = parse_shard("slurm", environment({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
  REQUIRE(plain.ok());
  CHECK(plain->index == 2);
  CHECK(plain->count == 4);
  // sbatch --array=1-4: ids 1..4, min 1.
  const auto from_one = parse_shard(
      "slurm",
      environment({{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
  REQUIRE(from_one.ok());
  CHECK(from_one->index == 3);
  CHECK_FALSE(parse_shard("slurm", environment({})).ok());
  CHECK_FALSE(parse_shard("slurm", environment({{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}})).ok());
  const auto outside = parse_shard(
      "slurm",
      environment({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.error().message.find("SLURM_ARRAY_TASK_ID=0") != std::string::npos);
}

TEST_CASE("sweep grid: --shard slurm names the one array variable that is missing") {
  const auto no_count = parse_shard("slurm", environment({{"SLURM_ARRAY_TASK_ID", "0"}}));
  REQUIRE_FALSE(no_count.ok());
  CHECK(no_count.error().message.find("SLURM_ARRAY_TASK_COUNT is not set") != std::string::npos);
  CHECK(no_count.error().message.find("SLURM_ARRAY_TASK_ID") == std::string::npos);
  const auto no_id = parse_shard("slurm", environment({{"SLURM_ARRAY_TASK_COUNT", "4"}}));
  REQUIRE_FALSE(no_id.ok());
  CHECK(no_id.error().message.find("SLURM_ARRAY_TASK_ID is not set") != std::string::npos);
  const auto neither = parse_shard("slurm", environment({}));
  REQUIRE_FALSE(neither.ok());
  CHECK(neither.error().message.find("SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT are not set") !=
        std::string::npos);
}

TEST_CASE(
    "sweep grid: the N shards are disjoint, contiguous and cover the grid, floor(K T / N) to floor((K+1) T / N)") {
  for (size_t total : {0u, 1u, 7u, 18u, 1000u})
    for (int n : {1, 2, 3, 4, 7, 25}) {
      size_t next = 0;
      for (int k = 0; k < n; ++k) {
        const PointRange range = shard_range(total, Shard{k, n});
        INFO("T " << total << " shard " << k << " of " << n);
        CHECK(range.begin == next);
        CHECK(range.begin == total * k / n);
        CHECK(range.end == total * (k + 1) / n);
        next = range.end;
      }
      CHECK(next == total);
    }
}

TEST_CASE("sweep grid: a point's digits put the last axis fastest") {
  // sizes 3 x 2 x 4: index = (d0 * 2 + d1) * 4 + d2
  const std::vector<size_t> sizes = {3, 2, 4};
  for (size_t d0 = 0; d0 < 3; ++d0)
    for (size_t d1 = 0; d1 < 2; ++d1)
      for (size_t d2 = 0; d2 < 4; ++d2)
        CHECK(grid_digits((d0 * 2 + d1) * 4 + d2, sizes) == std::vector<size_t>{d0, d1, d2});
}

TEST_CASE("sweep grid: run_points runs every point of the range once, on any thread count") {
  for (int threads : {1, 3}) {
    std::vector<int> runs(20, 0);
    size_t last_done = 0, last_total = 0;
    run_points(
        PointRange{5, 17}, threads, [&](size_t i) { ++runs[i]; },
        [&](size_t done, size_t total) {
          last_done = done;
          last_total = total;
        });
    for (size_t i = 0; i < runs.size(); ++i) CHECK(runs[i] == (i >= 5 && i < 17 ? 1 : 0));
    CHECK(last_done == 12);
    CHECK(last_total == 12);
  }
}

}  // namespace
}  // namespace baton
