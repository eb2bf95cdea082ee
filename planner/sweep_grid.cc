#include "planner/sweep_grid.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/format.h>

namespace baton {

std::optional<double> parse_number(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

Status GivenAxes::add(const std::string& key, const std::string& as_given) {
  const auto [earlier, added] = as_given_.emplace(key, as_given);
  if (added) return ok_status();
  if (earlier->second == as_given) return Error{fmt::format("--vary: axis {} given twice", as_given)};
  return Error{fmt::format("--vary: axis {} given twice (as {} and {})", key, earlier->second, as_given)};
}

std::optional<int64_t> parse_whole(const std::string& text, int64_t least) {
  if (text.empty() || text.size() > 18 || !std::all_of(text.begin(), text.end(), ::isdigit)) return std::nullopt;
  const int64_t value = std::stoll(text);
  return value >= least ? std::optional<int64_t>(value) : std::nullopt;
}

namespace {

// A whole number >= `least` that fits a shard's int, or -1.
int whole(const std::string& text, int least) {
  const std::optional<int64_t> value = parse_whole(text, least);
  return value && *value <= (1 << 30) ? static_cast<int>(*value) : -1;
}

Result<Shard> slurm_shard(const std::function<const char*(const char*)>& getenv) {
  const char* id = getenv("SLURM_ARRAY_TASK_ID");
  const char* count = getenv("SLURM_ARRAY_TASK_COUNT");
  const char* min = getenv("SLURM_ARRAY_TASK_MIN");
  if (id == nullptr || count == nullptr) {
    const std::string missing = id == nullptr && count == nullptr ? "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT are"
                                : id == nullptr                   ? "SLURM_ARRAY_TASK_ID is"
                                                                  : "SLURM_ARRAY_TASK_COUNT is";
    return Error{fmt::format("--shard slurm: {} not set (run it as a job array: sbatch --array=0-N-1)", missing)};
  }
  const auto k = whole(id, 0), n = whole(count, 1), first = whole(min ? min : "0", 0);
  if (k < 0 || n < 0 || first < 0 || k < first || k - first >= n)
    return Error{fmt::format(
        "--shard slurm: SLURM_ARRAY_TASK_ID={} SLURM_ARRAY_TASK_MIN={} SLURM_ARRAY_TASK_COUNT={} is not a task of "
        "the array",
        id, min ? min : "(unset)", count)};
  return Shard{k - first, n};
}

}  // namespace

Result<Shard> parse_shard(const std::string& text, const std::function<const char*(const char*)>& getenv) {
  if (text == "slurm") return slurm_shard(getenv);
  const auto slash = text.find('/');
  const auto k = whole(text.substr(0, slash), 1);
  const int n = slash == std::string::npos ? -1 : whole(text.substr(slash + 1), 1);
  if (k < 0 || n < 0 || k > n)
    return Error{
        fmt::format("--shard: expected K/N with 1 <= K <= N (the K-th of N slices) or slurm, got \"{}\"", text)};
  return Shard{k - 1, n};
}

PointRange shard_range(size_t total, const Shard& shard) {
  // floor(total k / N) without overflow: total = q N + r.
  const size_t n = static_cast<size_t>(shard.count), q = total / n, r = total % n;
  const auto at = [&](int k) { return q * k + r * k / n; };
  return PointRange{at(shard.index), at(shard.index + 1)};
}

std::vector<size_t> grid_digits(size_t index, const std::vector<size_t>& sizes) {
  std::vector<size_t> digits(sizes.size(), 0);
  for (size_t a = sizes.size(); a-- > 0;) {
    digits[a] = index % sizes[a];
    index /= sizes[a];
  }
  return digits;
}

void run_points(PointRange range, int threads, const std::function<void(size_t)>& work,
                const std::function<void(size_t, size_t)>& progress) {
  const size_t total = range.size();
  std::atomic<size_t> next{range.begin}, done{0};
  // The last point wakes the caller at once: a run shorter than the progress
  // period does not wait out the period.
  std::mutex mutex;
  std::condition_variable all_done;
  const auto worker = [&] {
    for (size_t i = next++; i < range.end; i = next++) {
      work(i);
      if (++done == total) {
        const std::lock_guard<std::mutex> lock(mutex);
        all_done.notify_all();
      }
    }
  };
  // No more threads than points; where the system grants fewer than asked,
  // those it granted share the points.
  std::vector<std::thread> pool;
  const size_t wanted = std::min<size_t>(std::max(threads, 1), std::max<size_t>(total, 1));
  for (size_t t = 0; t < wanted; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      if (pool.empty()) throw;
      break;
    }
  }
  std::unique_lock<std::mutex> lock(mutex);
  while (done.load() < total) {
    lock.unlock();
    progress(done.load(), total);
    lock.lock();
    all_done.wait_for(lock, std::chrono::milliseconds(100), [&] { return done.load() == total; });
  }
  lock.unlock();
  for (std::thread& thread : pool) thread.join();
  progress(total, total);
}

}  // namespace baton
