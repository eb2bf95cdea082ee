// The solver's two tables (planner/pipedream_level.h): the states ordered by
// cumulative work, and the open-addressing table of (i, j) entries.
#include "planner/pipedream_level.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace baton {

namespace {

constexpr double kNotComputed = std::numeric_limits<double>::quiet_NaN();

}  // namespace

StatesByWork::StatesByWork(const StateSpace& space) {
  const std::vector<double>& cum = space.cum_seconds;
  std::vector<int> order(space.num_states());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cum[a] < cum[b]; });
  entries_.reserve(order.size());
  position_.resize(order.size());
  for (int k : order) {
    position_[k] = static_cast<int>(entries_.size());
    entries_.push_back(Entry{cum[k], space.cum_param_bytes[k], space.output_bytes[k], k});
  }
  for (const auto& [from, to] : space.edges)
    if (!(cum[from] <= cum[to])) work_grows_ = false;
}

namespace {

constexpr uint64_t kEmptyKey = ~uint64_t{0};

}  // namespace

EntryTable::EntryTable(int slots) : slots_(slots) {
  shift_ = 64 - 10;
  buckets_.assign(size_t{1} << 10, Bucket{kEmptyKey, kAbsent});
}

size_t EntryTable::bucket_of(uint64_t key) const {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
}

int64_t EntryTable::find(int i, int j) const {
  const uint64_t wanted = key(i, j);
  const size_t mask = buckets_.size() - 1;
  for (size_t b = bucket_of(wanted);; b = (b + 1) & mask) {
    const Bucket& bucket = buckets_[b];
    if (bucket.key == wanted) return bucket.block;
    if (bucket.key == kEmptyKey) return kAbsent;
  }
}

int64_t EntryTable::find_or_add(int i, int j) {
  const uint64_t wanted = key(i, j);
  const size_t mask = buckets_.size() - 1;
  size_t b = bucket_of(wanted);
  for (; buckets_[b].key != kEmptyKey; b = (b + 1) & mask)
    if (buckets_[b].key == wanted) return buckets_[b].block;
  const auto block = static_cast<int64_t>(count_++);
  buckets_[b] = Bucket{wanted, block};
  values_.resize(values_.size() + static_cast<size_t>(slots_), kNotComputed);
  exact_.resize(exact_.size() + static_cast<size_t>(slots_), 0);
  if (2 * count_ > buckets_.size()) grow();  // load at most 1/2
  return block;
}

void EntryTable::grow() {
  std::vector<Bucket> old(buckets_.size() * 2, Bucket{kEmptyKey, kAbsent});
  old.swap(buckets_);
  --shift_;
  const size_t mask = buckets_.size() - 1;
  for (const Bucket& bucket : old) {
    if (bucket.key == kEmptyKey) continue;
    size_t b = bucket_of(bucket.key);
    while (buckets_[b].key != kEmptyKey) b = (b + 1) & mask;
    buckets_[b] = bucket;
  }
}

}  // namespace baton
