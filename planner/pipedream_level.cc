#include "planner/pipedream_level.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace baton::planner {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kNotComputed = std::numeric_limits<double>::quiet_NaN();
// Windows and bounds are widened by this fraction of the problem's scale, far
// above rounding error (~1e-15) and far below any difference that matters.
constexpr double kRelativeSlack = 1e-9;
// An estimate of a term made with other roundings than the exact formula is
// within this fraction of it (a few ulps; no cancellation: all terms >= 0).
constexpr double kEstimateMargin = 1e-12;

// A candidate's term from its estimate: +infinity when it surely reaches `cap`,
// a lower bound when it is surely below, else the exact value from `exact()`
// (+infinity when that reaches `cap`).
template <typename Exact>
double term_bound(double estimate, double cap, Exact&& exact) {
  const double margin = kEstimateMargin * std::abs(estimate);
  if (estimate - margin >= cap) return kInfinity;
  if (estimate + margin < cap) return estimate - margin;
  const double value = exact();
  return value >= cap ? kInfinity : value;
}

double difference(const std::vector<double>& cumulative, int i, int j) {
  return i > 0 ? cumulative[j] - cumulative[i - 1] : cumulative[j];
}

}  // namespace

StatesByWork::StatesByWork(const StateSpace& space) {
  const std::vector<double>& cum = space.cum_seconds;
  std::vector<int> order(space.num_states());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cum[a] < cum[b]; });
  entries_.reserve(order.size());
  for (int k : order) entries_.push_back(Entry{cum[k], space.output_bytes[k], k});
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

LevelSolver::LevelSolver(const StateSpace& space, const StatesByWork& index, LevelParams level,
                         SharedParams shared, LevelSolver* below)
    : states_(space),
      index_(index),
      level_(level),
      shared_(shared),
      below_(below),
      memo_(level.machines) {
  const int n = space.num_states();
  // Smallest parameter total of any state from i on: bounds P(i..k1) from below.
  std::vector<double> suffix_min_params(space.cum_param_bytes);
  for (int i = n - 2; i >= 0; --i)
    suffix_min_params[i] = std::min(suffix_min_params[i], suffix_min_params[i + 1]);
  if (below_ != nullptr) {
    below_deficit_min_ = kInfinity;
    for (int i = 0; i < n; ++i)
      below_deficit_min_ = std::min(below_deficit_min_, below_->deficit(i, below_->machines()));
  }
  row_deficit_.resize(n);
  double min_deficit = 0.0;
  for (int i = 0; i < n; ++i) {
    const double before = i > 0 ? space.cum_param_bytes[i - 1] : 0.0;
    const double params = std::min(0.0, suffix_min_params[i] - before);
    const double first_stage = 4.0 * params / (level_.bandwidth * level_.machines_within);
    const double from_below = below_ != nullptr ? below_->deficit(i, below_->machines()) : 0.0;
    row_deficit_[i] = from_below + level_.devices_per_unit * first_stage;
    min_deficit = std::min(min_deficit, deficit(i, level_.machines));
  }
  total_work_ = *std::max_element(space.cum_seconds.begin(), space.cum_seconds.end()) - min_deficit;
  if (shared_.memory_bytes) set_memory_reach();
  if (shared_.straight_pipeline && below_ == nullptr && index_.work_grows()) set_compute_floor();
}

// memory_reach_[R] = the most a range on R machines can stash: the largest
// sum of S / ceil((M - R_t) / r_t) over the stages t of a composition of R
// (R_t = machines up to stage t, r_t its own, r_t = 1 for a straight pipeline);
// +infinity for R = M, where the last stage keeps no copy.
void LevelSolver::set_memory_reach() {
  const int m = level_.machines;
  const double limit = *shared_.memory_bytes;
  memory_reach_.assign(static_cast<size_t>(m) + 1, 0.0);
  memory_reach_[m] = kInfinity;
  double largest = 0.0;
  for (int total = 1; total < m; ++total) {
    double best = 0.0;
    const int max_stage = shared_.straight_pipeline ? 1 : total;
    for (int r_stage = 1; r_stage <= max_stage; ++r_stage) {
      const double copies = std::ceil(static_cast<double>(m - total) / r_stage);
      best = std::max(best, memory_reach_[total - r_stage] + limit / copies);
    }
    memory_reach_[total] = best;
    largest = best;
  }
  const double stash_total =
      std::abs(states_.cum_activation_bytes.back()) + std::abs(states_.cum_param_bytes.back());
  // Covers rounding in the stages' tests and in the sums (both ~1e-15 relative).
  memory_slack_ = kRelativeSlack * (stash_total + largest + limit);
  set_prefix_fits();
  if (shared_.compression) set_prefix_floor();
}

// prefix_fits_[k M + R - 1]: whether states 0..k can be cut into stages on R
// machines that pass the memory test, ignoring every other term. A split needs
// an ancestor state k' with 0..k' fitting on R - r_last machines and k'+1..k
// passing on r_last: stash[k] - stash[k'] <= S / copies. So it is enough to
// know, per state and machine count, the largest stash of a fitting strict
// ancestor, which flows along the state DAG's edges (ancestor = reachable).
// O(edges x M + states x M^2).
void LevelSolver::set_prefix_fits() {
  const int n = states_.num_states();
  const int m = level_.machines;
  const double limit = *shared_.memory_bytes;
  const bool straight = shared_.straight_pipeline;
  std::vector<int> first_edge(static_cast<size_t>(n) + 1, 0);
  for (const auto& edge : states_.edges) ++first_edge[static_cast<size_t>(edge.first) + 1];
  for (int k = 0; k < n; ++k) first_edge[k + 1] += first_edge[k];
  std::vector<int> successors(states_.edges.size());
  std::vector<int> fill(first_edge.begin(), first_edge.end() - 1);
  for (const auto& [from, to] : states_.edges) successors[fill[from]++] = to;
  auto stash = [&](int k) {
    return states_.cum_activation_bytes[k] + states_.cum_param_bytes[k];
  };
  // best[k M + R - 1]: largest stash of a strict ancestor fitting on R machines.
  std::vector<double> best(static_cast<size_t>(n) * m, -kInfinity);
  prefix_fits_.assign(static_cast<size_t>(n) * m, 0);
  for (int k = 0; k < n; ++k) {
    const size_t row = static_cast<size_t>(k) * m;
    for (int total = 1; total <= m; ++total) {
      bool fits = false;
      if (!straight || total == 1) {
        const double copies = std::ceil(static_cast<double>(m - total) / total);
        fits = stash(k) * copies <= limit + memory_slack_;
      }
      const int max_last = straight ? std::min(1, total - 1) : total - 1;
      for (int r_last = 1; r_last <= max_last && !fits; ++r_last) {
        const double before = best[row + static_cast<size_t>(total - r_last) - 1];
        if (before == -kInfinity) continue;
        const double copies = std::ceil(static_cast<double>(m - total) / r_last);
        fits = copies == 0.0 || stash(k) - before <= limit / copies + memory_slack_;
      }
      prefix_fits_[row + static_cast<size_t>(total) - 1] = fits ? 1 : 0;
    }
    for (int e = first_edge[k]; e < first_edge[k + 1]; ++e) {
      const size_t next = static_cast<size_t>(successors[e]) * m;
      for (int total = 1; total <= m; ++total) {
        const size_t at = static_cast<size_t>(total) - 1;
        double carried = best[row + at];
        if (prefix_fits_[row + at]) carried = std::max(carried, stash(k));
        best[next + at] = std::max(best[next + at], carried);
      }
    }
  }
}

// prefix_floor_[k M + R - 1] <= A(0..k, R) from the transfer and memory terms
// alone (see the header). States are taken in (stash, index) order, in which
// every ancestor state of k comes before k (it has no more stash, and a smaller
// index); the candidates k' of a split (R, r_last) are the states before k with
// stash >= stash[k] - S / copies: a window sliding forward with k, kept as a
// monotone queue of max(floor(k', R - r_last), transfer in after k').
// O(states x M^2).
void LevelSolver::set_prefix_floor() {
  const int n = states_.num_states();
  const int m = level_.machines;
  const double limit = *shared_.memory_bytes;
  const bool straight = shared_.straight_pipeline;
  auto stash = [&](int k) {
    return states_.cum_activation_bytes[k] + states_.cum_param_bytes[k];
  };
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> stashes(n);
  for (int k = 0; k < n; ++k) stashes[k] = stash(k);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return stashes[a] != stashes[b] ? stashes[a] < stashes[b] : a < b;
  });
  struct Candidate {
    double stash;
    double value;
  };
  struct Queue {
    std::vector<Candidate> items;
    size_t head = 0;
  };
  // queues[(R - 1) M + r_last - 1]
  std::vector<Queue> queues(static_cast<size_t>(m) * m);
  prefix_floor_.assign(static_cast<size_t>(n) * m, kInfinity);
  for (int k : order) {
    const size_t row = static_cast<size_t>(k) * m;
    for (int total = 1; total <= m; ++total) {
      double floor = kInfinity;
      if (!straight || total == 1) {
        const double copies = std::ceil(static_cast<double>(m - total) / total);
        if (stashes[k] * copies <= limit + memory_slack_) floor = 0.0;
      }
      const int max_last = straight ? std::min(1, total - 1) : total - 1;
      for (int r_last = 1; r_last <= max_last && floor > 0.0; ++r_last) {
        Queue& queue = queues[static_cast<size_t>(total - 1) * m + r_last - 1];
        const double copies = std::ceil(static_cast<double>(m - total) / r_last);
        const double low =
            copies == 0.0 ? -kInfinity : stashes[k] - limit / copies - memory_slack_;
        while (queue.head < queue.items.size() && queue.items[queue.head].stash < low) ++queue.head;
        if (queue.head == queue.items.size()) continue;
        floor = std::min(floor, std::max(queue.items[queue.head].value, transfer_out(k, r_last)));
      }
      prefix_floor_[row + static_cast<size_t>(total) - 1] = floor;
    }
    for (int total = 2; total <= m; ++total) {
      const int max_last = straight ? 1 : total - 1;
      for (int r_last = 1; r_last <= max_last; ++r_last) {
        const double value = std::max(prefix_floor_[row + static_cast<size_t>(total - r_last) - 1],
                                      transfer_in(k, r_last));
        if (value == kInfinity) continue;
        Queue& queue = queues[static_cast<size_t>(total - 1) * m + r_last - 1];
        while (queue.items.size() > queue.head && queue.items.back().value >= value)
          queue.items.pop_back();
        if (queue.head > 4096 && 2 * queue.head > queue.items.size()) {
          const auto consumed = static_cast<std::ptrdiff_t>(queue.head);
          queue.items.erase(queue.items.begin(), queue.items.begin() + consumed);
          queue.head = 0;
        }
        queue.items.push_back(Candidate{stashes[k], value});
      }
    }
  }
}

// Straight stages at the innermost level: prefix_floor_ also holds the best
// split of 0..k into at most R stages (each costs C exactly: r = 1) when any
// state before k in (cum_seconds, index) order may end a stage, a superset of
// the chains of ancestor states when work grows. That 1-D problem's value F(p,
// R) (p = position in that order) does not decrease with p, so the best last
// cut for p is where F(q, R - 1) meets cum[p] - cum[q], and it moves forward
// with p: O(states x M).
void LevelSolver::set_compute_floor() {
  const int n = states_.num_states();
  const int m = level_.machines;
  const std::vector<StatesByWork::Entry>& order = index_.entries();
  if (prefix_floor_.empty()) prefix_floor_.assign(static_cast<size_t>(n) * m, 0.0);
  std::vector<double> previous(n), current(n);  // F(., R - 1), F(., R) by position
  for (int p = 0; p < n; ++p) previous[p] = order[p].work;
  for (int total = 1; total <= m; ++total) {
    if (total > 1) {
      int q = 0;  // first position with F(q, R - 1) >= cum[p] - cum[q], or p
      for (int p = 0; p < n; ++p) {
        q = std::min(q, p);
        while (q < p && previous[q] < order[p].work - order[q].work) ++q;
        double best = previous[p];  // fewer stages
        if (q < p) best = std::min(best, std::max(previous[q], order[p].work - order[q].work));
        if (q > 0)
          best = std::min(best, std::max(previous[q - 1], order[p].work - order[q - 1].work));
        current[p] = best;
      }
      previous.swap(current);
    }
    for (int p = 0; p < n; ++p) {
      double& floor =
          prefix_floor_[static_cast<size_t>(order[p].state) * m + static_cast<size_t>(total) - 1];
      floor = std::max(floor, previous[p]);
    }
  }
}

// True when A(i..k, r) is surely infeasible under the memory limit. Rows
// other than 0: its stages' stashes add up to stash(i..k) (the differences
// telescope), and each is at most S / copies.
bool LevelSolver::memory_excludes(int i, int k, int r) const {
  if (memory_reach_.empty()) return false;
  if (i == 0) return prefix_fits_[static_cast<size_t>(k) * level_.machines + r - 1] == 0;
  const double stashed = difference(states_.cum_activation_bytes, i, k) +
                         difference(states_.cum_param_bytes, i, k);
  return stashed > memory_reach_[r] + memory_slack_;
}

double LevelSolver::deficit(int i, int r) const {
  return row_deficit_[i] + (r - 1) * below_deficit_min_;
}

// An infinite magnitude (no cap yet) adds nothing: the quantities compared are
// sums and differences of cumulative values and deficits, of the problem's
// scale, whatever they are compared with.
double LevelSolver::slack(double magnitude) const {
  const double extra = std::isfinite(magnitude) ? std::abs(magnitude) : 0.0;
  return kRelativeSlack * (std::abs(total_work_) + extra);
}

double LevelSolver::work(int i, int j) const { return difference(states_.cum_seconds, i, j); }

double LevelSolver::below_value_below(int i, int j, double limit) {
  if (below_ == nullptr) return work(i, j);
  return below_->value_below(i, j, below_->machines(), limit);
}

double LevelSolver::below_lower(int i, int j) const {
  return below_ != nullptr ? below_->lower_bound(i, j) : work(i, j);
}

double LevelSolver::lower_bound(int i, int j) const {
  const double units = static_cast<double>(level_.devices_per_unit) * level_.machines;
  return (work(i, j) + deficit(i, level_.machines)) / units;
}

bool LevelSolver::memory_rejects(int first, int last, int r_stage, int r_total) const {
  if (!shared_.memory_bytes) return false;
  const double stashed = difference(states_.cum_activation_bytes, first, last) +
                         difference(states_.cum_param_bytes, first, last);
  const double copies =
      std::ceil(static_cast<double>(level_.machines - r_total) / static_cast<double>(r_stage));
  return stashed * copies > *shared_.memory_bytes;
}

// (T + all_reduce) / r, computed only when it can be below `limit`.
double LevelSolver::single_stage(int i, int j, int r, double limit) {
  if (shared_.straight_pipeline && r > 1) return kInfinity;
  if (memory_rejects(i, j, r, r)) return kInfinity;
  const double params = difference(states_.cum_param_bytes, i, j);
  double all_reduce = (4.0 * (r - 1) * params) / (level_.bandwidth * r);
  all_reduce /= level_.machines_within;
  const double below_limit = limit * r - all_reduce + slack(limit * r);
  const double below = below_value_below(i, j, below_limit);
  if (below >= below_limit) return kInfinity;
  return (below + all_reduce) / r;
}

double LevelSolver::all_reduce_last(int k, int j, int r_last) const {
  const double params = difference(states_.cum_param_bytes, k + 1, j);
  return (4.0 * (r_last - 1) * params) / (level_.bandwidth * r_last);
}

// The last stage k+1..j on r_last machines (no division by W, as the
// reference), computed only when it can be below `limit`.
double LevelSolver::last_stage(int k, int j, int r_last, double limit) {
  const double all_reduce = all_reduce_last(k, j, r_last);
  const double below_limit = limit * r_last - all_reduce + slack(limit * r_last);
  const double below = below_value_below(k + 1, j, below_limit);
  if (below >= below_limit) return kInfinity;
  return (below + all_reduce) / r_last;
}

// The activation terms, or -infinity when they are not counted: into the
// last stage (after state k) and out of it (after state j, unless j is last).
double LevelSolver::transfer_out(int j, int r_last) const {
  if (!shared_.compression || j == states_.num_states() - 1) return -kInfinity;
  return (2.0 * states_.output_bytes[j]) / (level_.bandwidth * r_last) / *shared_.compression;
}

double LevelSolver::transfer_in(int k, int r_last) const {
  if (!shared_.compression) return -kInfinity;
  return (2.0 * states_.output_bytes[k]) / (level_.bandwidth * r_last) / *shared_.compression;
}

double LevelSolver::transfer(int k, int j, int r_last) const {
  return std::max(transfer_in(k, r_last), transfer_out(j, r_last));
}

LevelSolver::Window LevelSolver::make_window(int i, int j, int r_first, int r_last,
                                             double cap) const {
  Window w;
  w.r_first = r_first;
  w.r_last = r_last;
  w.transfer_out = transfer_out(j, r_last);
  w.tolerance = slack(cap);
  w.first_offset = deficit(i, r_first) - (i > 0 ? states_.cum_seconds[i - 1] : 0.0);
  w.first_scale = 1.0 / (static_cast<double>(level_.devices_per_unit) * r_first);
  if (shared_.compression)
    w.transfer_scale = 2.0 / (level_.bandwidth * r_last) / *shared_.compression;
  w.all_reduce_scale = 4.0 * (r_last - 1) / (level_.bandwidth * r_last);
  w.inverse_last = 1.0 / r_last;
  return w;
}

// A lower bound of the split's candidate, or +infinity when the split is
// rejected (memory) or cannot be below `cap`. Terms are first estimated with
// products by reciprocals; only an estimate too close to `cap` to decide is
// recomputed exactly as the candidate is, so exact ties are cut before any
// recursion (ties are common: a bottleneck layer bounds many candidates).
double LevelSolver::split_bound(int i, const Split& split, int j, const Window& w,
                                double cap) const {
  const int k = split.k;
  double bound = w.transfer_out;
  if (shared_.compression) {
    const double in = term_bound(states_.output_bytes[k] * w.transfer_scale, cap,
                                 [&] { return transfer_in(k, w.r_last); });
    bound = std::max(bound, in);
  }
  if (bound >= cap) return kInfinity;
  // The terms in O(1) first, the memo's (a hash probe) last: the result is
  // their maximum whatever the order.
  const double params = states_.cum_param_bytes[j] - states_.cum_param_bytes[k];
  if (below_ == nullptr) {  // the last stage costs O(1) here
    const double estimate = (work(k + 1, j) + params * w.all_reduce_scale) * w.inverse_last;
    bound = std::max(bound, term_bound(estimate, cap, [&] {
                       return (work(k + 1, j) + all_reduce_last(k, j, w.r_last)) / w.r_last;
                     }));
    if (bound >= cap) return kInfinity;
  }
  bound = std::max(bound, (states_.cum_seconds[k] + w.first_offset) * w.first_scale - w.tolerance);
  if (bound >= cap || memory_rejects(k + 1, j, w.r_last, w.r_first + w.r_last) ||
      memory_excludes(i, k, w.r_first))
    return kInfinity;
  if (i == 0 && !prefix_floor_.empty())
    bound = std::max(bound,
                     prefix_floor_[static_cast<size_t>(k) * level_.machines + w.r_first - 1]);
  if (bound >= cap) return kInfinity;
  bound = std::max(bound, known_bound(i, k, w.r_first));
  if (below_ == nullptr) return bound;
  bool below_exact = false;
  const double below_known = below_->known(k + 1, j, below_->machines(), below_exact);
  if (below_exact) {
    const double estimate = (below_known + params * w.all_reduce_scale) * w.inverse_last;
    const double last = term_bound(
        estimate, cap, [&] { return (below_known + all_reduce_last(k, j, w.r_last)) / w.r_last; });
    return last >= cap ? kInfinity : std::max(bound, last);
  }
  // The last stage's all-reduce term is >= 0 (k is an ancestor of j).
  return std::max(bound, std::max(below_lower(k + 1, j) - w.tolerance, below_known) / w.r_last);
}

double LevelSolver::known(int i, int j, int r, bool& exact) const {
  const int64_t block = memo_.find(i, j);
  if (block == EntryTable::kAbsent) {
    exact = false;
    return -kInfinity;
  }
  exact = memo_.exact(block, r);
  const double known = memo_.value(block, r);
  return std::isnan(known) ? -kInfinity : known;
}

bool LevelSolver::known_exactly(int i, int j, int r) const {
  bool exact = false;
  known(i, j, r, exact);
  return exact;
}

double LevelSolver::known_bound(int i, int j, int r) const {
  bool exact = false;
  return known(i, j, r, exact);
}

namespace {

// Heap order: true when split a is to be taken after split b.
bool comes_later(const LevelSolver::Split& a, const LevelSolver::Split& b) {
  if (a.bound != b.bound) return a.bound > b.bound;
  return a.k != b.k ? a.k > b.k : a.r_last > b.r_last;
}

}  // namespace

// Pushes the splits of A(i..j, r) whose bound is below `cap` onto stack_, as a
// heap for pop_split; returns where they begin.
size_t LevelSolver::collect_splits(int i, int j, int r, double cap) {
  const size_t begin = stack_.size();
  const std::vector<StatesByWork::Entry>& by_work = index_.entries();
  const int max_last = shared_.straight_pipeline ? 1 : r - 1;
  const double unit = level_.devices_per_unit;
  const double before = i > 0 ? states_.cum_seconds[i - 1] : 0.0;
  for (int r_last = 1; r_last <= max_last; ++r_last) {
    const int r_first = r - r_last;
    const Window window = make_window(i, j, r_first, r_last, cap);
    if (window.transfer_out >= cap) continue;
    // Window: last stage >= (C(k+1..j) + deficit below) / (unit r_last) and
    // first part >= (C(i..k) + deficit(i, r_first)) / (unit r_first), both < cap;
    // and an ancestor state has no more work than j when work grows.
    const double reach_last = unit * r_last * cap;
    const double reach_first = unit * r_first * cap;
    const double low = states_.cum_seconds[j] + below_deficit_min_ - reach_last - slack(reach_last);
    double high = before - deficit(i, r_first) + reach_first + slack(reach_first);
    if (index_.work_grows()) high = std::min(high, states_.cum_seconds[j]);
    // A cut whose transfer in surely reaches cap is left out before the subset
    // test (split_bound would reject it: this threshold is looser).
    const double max_out = shared_.compression
                               ? cap / window.transfer_scale * (1.0 + kRelativeSlack)
                               : kInfinity;
    auto p = std::lower_bound(by_work.begin(), by_work.end(), low,
                              [](const StatesByWork::Entry& e, double w) { return e.work < w; });
    for (; p != by_work.end() && p->work <= high; ++p) {
      const int k = p->state;
      if (k < i || k >= j || p->output_bytes > max_out || !states_.is_ancestor(k, j)) continue;
      Split split{0.0, k, r_last};
      split.bound = split_bound(i, split, j, window, cap);
      if (split.bound < cap) stack_.push_back(split);
    }
  }
  std::make_heap(stack_.begin() + static_cast<std::ptrdiff_t>(begin), stack_.end(), comes_later);
  return begin;
}

// Takes the next split, in (bound, k, r_last) order, off the heap in
// stack_[begin, end). Most requests stop after a few, so a heap beats sorting.
LevelSolver::Split LevelSolver::pop_split(size_t begin, size_t& end) {
  std::pop_heap(stack_.begin() + static_cast<std::ptrdiff_t>(begin),
                stack_.begin() + static_cast<std::ptrdiff_t>(end), comes_later);
  return stack_[--end];
}

// False when the split's candidate surely reaches `cap`. Its bound was made
// against an older, larger cap; when it is within estimate error of the new
// one, the bound is made again so that exact ties are cut before recursing.
bool LevelSolver::may_beat(int i, const Split& split, int j, int r, double cap) const {
  if (split.bound + kEstimateMargin * std::abs(split.bound) < cap) return true;
  const Window window = make_window(i, j, r - split.r_last, split.r_last, cap);
  return split_bound(i, split, j, window, cap) < cap;
}

// The split's candidate when it is below `cap`; otherwise some value >= cap.
double LevelSolver::evaluate_split(int i, const Split& split, int j, int r, double cap) {
  const double prefix = value_below(i, split.k, r - split.r_last, cap);
  if (prefix >= cap) return kInfinity;
  const double last = last_stage(split.k, j, split.r_last, cap);
  if (last >= cap) return kInfinity;
  return std::max(std::max(prefix, last), transfer(split.k, j, split.r_last));
}

double LevelSolver::value(int i, int j, int r) { return value_below(i, j, r, kInfinity); }

double LevelSolver::value_below(int i, int j, int r, double limit) {
  // The block number stays valid while requests below add entries.
  const int64_t block = memo_.find_or_add(i, j);
  if (memo_.exact(block, r) || memo_.value(block, r) >= limit)
    return memo_.value(block, r);  // NaN (never requested) fails the test
  if (memory_excludes(i, j, r)) {
    memo_.exact(block, r) = 1;
    memo_.value(block, r) = kInfinity;
    return kInfinity;
  }
  if (i == 0 && !prefix_floor_.empty()) {
    const double floor = prefix_floor_[static_cast<size_t>(j) * level_.machines + r - 1];
    if (floor >= limit) {
      memo_.value(block, r) = floor;  // known: A(0..j, r) >= floor
      return floor;
    }
  }
  double best = single_stage(i, j, r, limit);
  if (r >= 2 && j > i) {
    // Evaluation recurses and may grow stack_ past `end`, never below it.
    const size_t begin = collect_splits(i, j, r, std::min(best, limit));
    for (size_t end = stack_.size(); end > begin;) {
      const double cap = std::min(best, limit);
      const Split split = pop_split(begin, end);
      if (split.bound >= cap) break;
      if (!may_beat(i, split, j, r, cap)) continue;
      best = std::min(best, evaluate_split(i, split, j, r, cap));
    }
    stack_.resize(begin);
  }
  if (best < limit) {
    memo_.exact(block, r) = 1;
    memo_.value(block, r) = best;
    return best;
  }
  memo_.value(block, r) = limit;  // known: A(i..j, r) >= limit
  return limit;
}

LevelDecision LevelSolver::decision(int i, int j, int r) {
  const double target = value(i, j, r);
  if (single_stage(i, j, r, kInfinity) == target) return LevelDecision{true, -1, r};
  // A feasible entry's value is attained by some split; should rounding ever
  // disagree, reporting the single stage keeps the read-back well formed.
  LevelDecision found{true, -1, r};
  // Candidates equal to the target are below this cap.
  const double cap = std::nextafter(target, kInfinity);
  const size_t begin = collect_splits(i, j, r, cap);
  for (size_t end = stack_.size(); end > begin;) {
    const Split split = pop_split(begin, end);
    if (split.bound >= cap) break;
    if (evaluate_split(i, split, j, r, cap) == target) {
      found = LevelDecision{false, split.k, split.r_last};
      break;
    }
  }
  stack_.resize(begin);
  return found;
}

}  // namespace baton::planner
