#include "planner/pipedream_level.h"
#include "planner/pipedream_level_detail.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

namespace baton {

using detail::difference;
using detail::kInfinity;
using detail::kRelativeSlack;

namespace {

// An estimate of a term made with other roundings than the exact formula is
// within this fraction of it (a few ulps; no cancellation: all terms >= 0).
constexpr double kEstimateMargin = 1e-12;
// The root narrows the relaxed test (LevelSolver::set_within) again when its
// ceiling has come down by this fraction since the last time.
constexpr double kNarrowing = 0.03;

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

}  // namespace

LevelSolver::LevelSolver(const StateSpace& space, const StatesByWork& index, LevelParams level, SharedParams shared,
                         LevelSolver* below)
    : states_(space), index_(index), level_(level), shared_(shared), below_(below), memo_(level.machines) {
  const int n = space.num_states();
  // Smallest parameter total of any state from i on: bounds P(i..k1) from below.
  std::vector<double> suffix_min_params(space.cum_param_bytes);
  for (int i = n - 2; i >= 0; --i) suffix_min_params[i] = std::min(suffix_min_params[i], suffix_min_params[i + 1]);
  if (below_ != nullptr) {
    below_deficit_min_ = kInfinity;
    for (int i = 0; i < n; ++i)
      below_deficit_min_ = std::min(below_deficit_min_, below_->deficit(i, below_->machines()));
  }
  row_deficit_.resize(n);
  first_stage_deficit_.assign(n, 0.0);
  double min_deficit = 0.0;
  for (int i = 0; i < n; ++i) {
    // A first stage with r >= 2 replicas may have P(i..k1) < 0; its all-reduce
    // term, 4 (r - 1) P / (r B W), is then at least 4 P / (B W). A stage on
    // one machine (every stage of a straight pipeline) has none.
    if (!shared_.straight_pipeline) {
      const double before = i > 0 ? space.cum_param_bytes[i - 1] : 0.0;
      const double params = std::min(0.0, suffix_min_params[i] - before);
      first_stage_deficit_[i] = level_.devices_per_unit * 4.0 * params / (level_.bandwidth * level_.machines_within);
    }
    row_deficit_[i] = below_ != nullptr ? below_->deficit(i, below_->machines()) : 0.0;
    min_deficit = std::min(min_deficit, deficit(i, level_.machines));
  }
  total_work_ = *std::max_element(space.cum_seconds.begin(), space.cum_seconds.end()) - min_deficit;
  if (shared_.memory_bytes) set_memory_reach();
  if (shared_.straight_pipeline && below_ == nullptr && index_.work_grows()) set_compute_floor();
}

double LevelSolver::deficit(int i, int r) const {
  return row_deficit_[i] + (r >= 2 ? first_stage_deficit_[i] : 0.0) + (r - 1) * below_deficit_min_;
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
  const double stashed =
      difference(states_.cum_activation_bytes, first, last) + difference(states_.cum_param_bytes, first, last);
  const double copies = std::ceil(static_cast<double>(level_.machines - r_total) / static_cast<double>(r_stage));
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

LevelSolver::Window LevelSolver::make_window(int i, int j, int r_first, int r_last, double cap) const {
  Window w;
  w.r_first = r_first;
  w.r_last = r_last;
  w.transfer_out = transfer_out(j, r_last);
  w.tolerance = slack(cap);
  w.first_offset = deficit(i, r_first) - (i > 0 ? states_.cum_seconds[i - 1] : 0.0);
  w.first_scale = 1.0 / (static_cast<double>(level_.devices_per_unit) * r_first);
  if (shared_.compression) w.transfer_scale = 2.0 / (level_.bandwidth * r_last) / *shared_.compression;
  w.all_reduce_scale = 4.0 * (r_last - 1) / (level_.bandwidth * r_last);
  w.inverse_last = 1.0 / r_last;
  return w;
}

// A lower bound of the split's candidate, or +infinity when the split is
// rejected (memory) or cannot be below `cap`. Terms are first estimated with
// products by reciprocals; only an estimate too close to `cap` to decide is
// recomputed exactly as the candidate is, so exact ties are cut before any
// recursion (ties are common: a bottleneck layer bounds many candidates).
double LevelSolver::split_bound(int i, const Split& split, int j, const Window& w, double cap) const {
  const int k = split.k;
  double bound = w.transfer_out;
  if (shared_.compression) {
    const double in =
        term_bound(states_.output_bytes[k] * w.transfer_scale, cap, [&] { return transfer_in(k, w.r_last); });
    bound = std::max(bound, in);
  }
  if (bound >= cap) return kInfinity;
  // The terms in O(1) first, the memo's (a hash probe) last: the result is
  // their maximum whatever the order.
  const double params = states_.cum_param_bytes[j] - states_.cum_param_bytes[k];
  if (below_ == nullptr) {  // the last stage costs O(1) here
    const double estimate = (work(k + 1, j) + params * w.all_reduce_scale) * w.inverse_last;
    bound = std::max(bound, term_bound(estimate, cap,
                                       [&] { return (work(k + 1, j) + all_reduce_last(k, j, w.r_last)) / w.r_last; }));
    if (bound >= cap) return kInfinity;
  }
  bound = std::max(bound, (states_.cum_seconds[k] + w.first_offset) * w.first_scale - w.tolerance);
  if (bound >= cap || memory_rejects(k + 1, j, w.r_last, w.r_first + w.r_last) || memory_excludes(i, k, w.r_first))
    return kInfinity;
  if (i == 0) bound = std::max(bound, prefix_floor(k, w.r_first));
  if (bound >= cap) return kInfinity;
  bound = std::max(bound, known_bound(i, k, w.r_first));
  if (below_ == nullptr) return bound;
  bool below_exact = false;
  const double below_known = below_->known(k + 1, j, below_->machines(), below_exact);
  if (below_exact) {
    const double estimate = (below_known + params * w.all_reduce_scale) * w.inverse_last;
    const double last =
        term_bound(estimate, cap, [&] { return (below_known + all_reduce_last(k, j, w.r_last)) / w.r_last; });
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

// consider(p) for every position p in [begin, end) of index_, skipping at row
// 0 the prefixes on r_first machines known to reach the ceiling, 64 a word.
template <typename Consider>
void LevelSolver::scan_window(int i, int r_first, size_t begin, size_t end, Consider&& consider) {
  if (i != 0 || reached_.empty()) {
    for (size_t p = begin; p < end; ++p) consider(p);
    return;
  }
  const uint64_t* reached = reached_.data() + static_cast<size_t>(r_first - 1) * words_;
  for (size_t p = begin; p < end;) {
    const uint64_t open = ~reached[p / 64] >> (p % 64);
    if (open == 0) {
      p = (p / 64 + 1) * 64;
      continue;
    }
    p += static_cast<size_t>(std::countr_zero(open));
    if (p < end) consider(p);
    ++p;
  }
}

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
    const double max_out = shared_.compression ? cap / window.transfer_scale * (1.0 + kRelativeSlack) : kInfinity;
    const auto less = [](const StatesByWork::Entry& e, double w) { return e.work < w; };
    const auto first = std::lower_bound(by_work.begin(), by_work.end(), low, less);
    const auto last = std::upper_bound(by_work.begin(), by_work.end(), high,
                                       [](double w, const StatesByWork::Entry& e) { return w < e.work; });
    if (last <= first) continue;
    // The last stage's compute term first, from the entry (in scan order):
    // what it rejects surely reaches cap (split_bound's first test of it).
    const bool innermost = below_ == nullptr;
    const double last_from = states_.cum_seconds[j] + window.all_reduce_scale * states_.cum_param_bytes[j];
    const auto consider = [&](size_t p) {
      const StatesByWork::Entry& e = by_work[p];
      if (innermost) {
        const double estimate = (last_from - e.work - window.all_reduce_scale * e.params) * window.inverse_last;
        const double margin = kEstimateMargin * (std::abs(estimate) + std::abs(last_from));
        if (estimate - margin >= cap) return;
      }
      const int k = e.state;
      if (k < i || k >= j || e.output_bytes > max_out || !states_.is_ancestor(k, j)) return;
      if (i == 0 && !reached_.empty() && ceiling_ < kInfinity && known_bound(0, k, r_first) >= ceiling_) {
        mark_reached(k, r_first);  // known before the ceiling came down to it
        return;
      }
      Split split{0.0, k, r_last};
      split.bound = split_bound(i, split, j, window, cap);
      if (split.bound < cap) stack_.push_back(split);
    };
    const auto begin_p = static_cast<size_t>(first - by_work.begin());
    const auto end_p = static_cast<size_t>(last - by_work.begin());
    scan_window(i, r_first, begin_p, end_p, consider);
  }
  std::make_heap(stack_.begin() + static_cast<std::ptrdiff_t>(begin), stack_.end(), comes_later);
  return begin;
}

// Takes the next split, in (bound, k, r_last) order, off the heap in
// stack_[begin, end). Most requests stop after a few, so a heap beats sorting.
LevelSolver::Split LevelSolver::pop_split(size_t begin, size_t& end) {
  std::pop_heap(stack_.begin() + static_cast<std::ptrdiff_t>(begin), stack_.begin() + static_cast<std::ptrdiff_t>(end),
                comes_later);
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

double LevelSolver::root_value_below(double limit) {
  rooted_ = true;
  ceiling_ = limit;
  words_ = (static_cast<size_t>(states_.num_states()) + 63) / 64;
  reached_.assign(words_ * static_cast<size_t>(level_.machines), 0);
  if (shared_.memory_bytes && !shared_.compression && std::isfinite(limit)) narrow_within(limit);
  const double found = value_below(0, states_.num_states() - 1, level_.machines, limit);
  rooted_ = false;
  ceiling_ = kInfinity;
  reached_ = std::vector<uint64_t>();  // within_ stays: its floors hold for any request
  return found;
}

double LevelSolver::root_lower_bound() const {
  const int last = states_.num_states() - 1;
  return std::max(lower_bound(0, last), prefix_floor(last, level_.machines));
}

// set_within(t) and every prefix it rules out marked as reaching the ceiling
// (t >= ceiling).
void LevelSolver::narrow_within(double t) {
  set_within(t);
  const int n = states_.num_states();
  for (int k = 0; k < n; ++k)
    for (int r = 1; r <= level_.machines; ++r)
      if (within_[static_cast<size_t>(k) * level_.machines + static_cast<size_t>(r) - 1] == 0) mark_reached(k, r);
}

// What row 0's tables know of A(0..k, r) from below: -infinity if nothing.
double LevelSolver::prefix_floor(int k, int r) const {
  const size_t at = static_cast<size_t>(k) * level_.machines + static_cast<size_t>(r) - 1;
  double floor = prefix_floor_.empty() ? -kInfinity : prefix_floor_[at];
  if (!within_.empty() && within_[at] == 0) floor = std::max(floor, within_limit_);
  return floor;
}

void LevelSolver::mark_reached(int k, int r) {
  if (reached_.empty()) return;
  const auto p = static_cast<size_t>(index_.position(k));
  reached_[static_cast<size_t>(r - 1) * words_ + p / 64] |= uint64_t{1} << (p % 64);
}

double LevelSolver::value_below(int i, int j, int r, double limit) {
  // The block number stays valid while requests below add entries.
  const int64_t block = memo_.find_or_add(i, j);
  if (memo_.exact(block, r) || memo_.value(block, r) >= limit)
    return memo_.value(block, r);  // NaN (never requested) fails the test
  if (memory_excludes(i, j, r)) {
    memo_.exact(block, r) = 1;
    memo_.value(block, r) = kInfinity;
    if (i == 0) mark_reached(j, r);
    return kInfinity;
  }
  if (i == 0) {
    const double floor = prefix_floor(j, r);
    if (floor >= limit) {
      memo_.value(block, r) = floor;  // known: A(0..j, r) >= floor
      if (floor >= ceiling_) mark_reached(j, r);
      return floor;
    }
  }
  double best = single_stage(i, j, r, limit);
  const bool root = is_root(i, j, r);
  if (root) ceiling_ = std::min(ceiling_, best);
  if (r >= 2 && j > i) {
    // Evaluation recurses and may grow stack_ past `end`, never below it.
    const size_t begin = collect_splits(i, j, r, std::min(best, limit));
    for (size_t end = stack_.size(); end > begin;) {
      const double cap = std::min(best, limit);
      const Split split = pop_split(begin, end);
      if (split.bound >= cap) break;
      if (!may_beat(i, split, j, r, cap)) continue;
      best = std::min(best, evaluate_split(i, split, j, r, cap));
      if (root && best < ceiling_) {
        ceiling_ = best;
        if (!within_.empty() && ceiling_ < within_limit_ * (1.0 - kNarrowing)) narrow_within(ceiling_);
      }
    }
    stack_.resize(begin);
  }
  if (best < limit) {
    memo_.exact(block, r) = 1;
    memo_.value(block, r) = best;
    return best;
  }
  memo_.value(block, r) = limit;  // known: A(i..j, r) >= limit
  if (i == 0 && limit >= ceiling_) mark_reached(j, r);
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

}  // namespace baton
