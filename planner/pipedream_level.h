// One level of PipeDream's hierarchical dynamic program, evaluated lazily with
// exact pruning.
//
// What it computes (the reference's recurrence, states as in
// planner/pipedream_states.h; C, P, Act are differences of the cumulative
// sums, X(i..j) = cum[j] - cum[i-1]; B = this level's bandwidth; M its machine
// count; W = the machine count of the level below, 1 at the innermost level):
//   T(i..j)   = C(i..j) at the innermost level, else the level below's A(i..j, M_below)
//   A(i..j, r) = min of
//     single stage:  (T(i..j) + 4 (r-1) P(i..j) / (r B) / W) / r
//                    [r = 1 only with straight_pipeline]
//     every split k (k an ancestor state of j with k >= i) and r' in 1..r-1 [1 only
//     with straight_pipeline]:
//       max( A(i..k, r - r'),
//            (T(k+1..j) + 4 (r'-1) P(k+1..j) / (r' B)) / r',
//            2 out[k] / (B r') / R,  2 out[j] / (B r') / R [j not the last state] )
//     [activation terms only when a compression ratio R is given]
//   A candidate stage is rejected (infinite) when memory_bytes is set and
//   (Act + P) x ceil((M - r) / r_stage) > memory_bytes, r = machines of the entry.
//   Infeasible entries are +infinity (the reference's None).
//
// The reference also skips splits k that are ancestors of state i-1; those have
// k < i, where A(i..k, .) is undefined anyway, so "k >= i" is the same set.
//
// How it is fast (branch and bound, exact). Entries are computed on demand
// and memoised, so only entries some caller needs are filled. A request carries
// a limit: "A(i..j, r) if it is below `limit`"; an entry that cannot beat its
// limit is only recorded as ">= limit". Each request gathers the splits whose
// lower bound is below min(single stage, limit), visits them in increasing order
// of that bound and stops at the first bound that reaches the best value found,
// so a split is evaluated (and its prefix requested) only when it could win.
// The bounds are the exact transfer and (innermost) last-stage terms and, from
// the mediant inequality max_s(x_s / r_s) >= (sum x_s) / (sum r_s),
//   A(i..k, r) >= (C(i..k) + deficit(i, r)) / (D r),  D = devices per unit,
// where deficit <= 0 covers all-reduce terms that can be negative (a first
// stage i..k1 whose state i-1 is not an ancestor of k1 has P(i..k1) possibly
// < 0) and the deficits of the levels below; values already memoised (exact,
// or "at least") serve as bounds too. Splits are first narrowed to a window of
// cum_seconds by the same bounds. Bounds and derived limits are loosened by a
// relative 1e-9 of the problem's scale, far above rounding error, and a bound
// estimated with other roundings than the exact formula is recomputed exactly
// whenever it is too close to the value it is compared with, so rounding can
// never exclude the true minimum: the result equals the plain recurrence's,
// value for value (tests/planner checks this).
// Complexity: worst case the reference's O(N^3 M^2) time; in practice tens of
// candidates per entry (see bench/RESULTS.md). Memory: N x M doubles and flags
// for every row that is requested.
// Thread safety: not thread-safe (memoisation); one solver per planning call.
#pragma once

#include <optional>
#include <vector>

#include "planner/pipedream_states.h"

namespace baton::planner {

// Ancestor states of every state, sorted by cum_seconds (then by index), with
// the sorted keys alongside for binary search.
class AncestorsByWork {
 public:
  explicit AncestorsByWork(const StateSpace& states);
  const std::vector<int>& states(int j) const { return states_[j]; }
  const std::vector<double>& work(int j) const { return work_[j]; }

 private:
  std::vector<std::vector<int>> states_;
  std::vector<std::vector<double>> work_;
};

struct LevelParams {
  int machines = 1;          // M
  double bandwidth = 1e9;    // B, bytes per second
  int machines_within = 1;   // W: the level below's machine count (1 innermost)
  int devices_per_unit = 1;  // D: product of the machine counts below
};

struct SharedParams {
  bool straight_pipeline = false;
  std::optional<double> compression;   // R
  std::optional<double> memory_bytes;  // S
};

// How A(i..j, r) is reached: a single stage, or a split after state `split`
// with `last_replicas` machines (units) on the last stage.
struct LevelDecision {
  bool single_stage = true;
  int split = -1;
  int last_replicas = 0;
};

class LevelSolver {
 public:
  // `below` is the next level inward (nullptr at the innermost level); it must
  // outlive this solver.
  LevelSolver(const StateSpace& states, const AncestorsByWork& index, LevelParams level,
              SharedParams shared, LevelSolver* below);

  int machines() const { return level_.machines; }
  // A(i..j, r), 0 <= i <= j < N, 1 <= r <= M; +infinity when infeasible.
  double value(int i, int j, int r);
  // A(i..j, r) when it is below `limit`; otherwise some value >= limit.
  double value_below(int i, int j, int r, double limit);
  // The way that reaches value(i, j, r): the single stage if it does, else the
  // split of smallest bound (then smallest k, r_last). Only for feasible entries.
  LevelDecision decision(int i, int j, int r);
  // A lower bound of value(i, j, M), for the level above.
  double lower_bound(int i, int j) const;
  // What the memo knows of A(i..j, r): its value, a lower bound, or -infinity.
  double known_bound(int i, int j, int r) const;
  bool known_exactly(int i, int j, int r) const;

  // A split (k, r_last) of an entry with a lower bound of its candidate.
  struct Split {
    double bound;
    int k;
    int r_last;
    int position;  // of k among j's ancestors in AncestorsByWork order
  };

 private:
  double work(int i, int j) const;  // C(i..j)
  double below_value_below(int i, int j, double limit);
  double below_lower(int i, int j) const;
  double single_stage(int i, int j, int r, double limit);
  double last_stage(int k, int j, int r_last, double limit);
  double all_reduce_last(int k, int j, int r_last) const;
  double transfer(int k, int j, int r_last) const;
  double transfer_in(int k, int r_last) const;
  double transfer_out(int j, int r_last) const;
  bool memory_rejects(int first, int last, int r_stage, int r_total) const;
  double deficit(int i, int r) const;
  double slack(double magnitude) const;
  // Constants of the splits of one entry with a given r_last, for split_bound.
  struct Window {
    int r_first = 0;
    int r_last = 0;
    double transfer_out = 0.0;  // the transfer out of j (exact), or -infinity
    double tolerance = 0.0;     // covers rounding in the first-part bound
    double first_offset = 0.0;  // deficit(i, r_first) - cum[i-1]
    double first_scale = 0.0;   // 1 / (D r_first)
    // Factors for estimates of the transfer in and the last stage.
    double transfer_scale = 0.0;    // 2 / (B r_last) / R
    double all_reduce_scale = 0.0;  // 4 (r_last - 1) / (B r_last)
    double inverse_last = 0.0;      // 1 / r_last
  };
  Window make_window(int i, int j, int r_first, int r_last, double cap) const;
  double split_bound(int i, const Split& split, int j, const Window& window, double cap) const;
  void remember_last(const Split& split, int j);
  size_t collect_splits(int i, int j, int r, double cap);
  Split pop_split(size_t begin, size_t& end);
  bool may_beat(int i, const Split& split, int j, int r, double cap) const;
  double evaluate_split(int i, const Split& split, int j, int r, double cap);
  size_t slot_index(int i, int j, int r) const;
  double* memo(int i, int j, int r);

  const StateSpace& states_;
  const AncestorsByWork& index_;
  const LevelParams level_;
  const SharedParams shared_;
  LevelSolver* const below_;
  std::vector<double> row_deficit_;  // deficit(i, 1)
  double below_deficit_min_ = 0.0;   // min over rows of the below level's deficit(i, M_below)
  double total_work_ = 0.0;
  // Per row i, M x (N - i) slots: an exact value, or a lower bound (the largest
  // limit it could not beat) flagged in exact_ as 0; NaN = never requested.
  std::vector<std::vector<double>> memo_;
  std::vector<std::vector<unsigned char>> exact_;
  std::vector<Split> stack_;  // gathered splits of the requests in progress
  // Above the innermost level: what the level below is known to give for a
  // last stage k+1..j on a whole unit (its memo's value and exactness), by j
  // and k's position among j's ancestors, so that a scan over k reads it in
  // sequence instead of from scattered memo rows.
  std::vector<std::vector<double>> last_known_;
  std::vector<std::vector<unsigned char>> last_exact_;
};

}  // namespace baton::planner
