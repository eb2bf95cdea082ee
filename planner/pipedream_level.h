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
// < 0; only for r >= 2 and without straight_pipeline, since a stage on one
// machine has no all-reduce term) and the deficits of the levels below; at
// their scale (4 P / B: 0.04 s for 100 MB at 10 GB/s) they would hide the
// compute bound of straight pipelines altogether. Values already memoised (exact,
// or "at least") serve as bounds too. Splits are first narrowed to a window of
// cum_seconds by the same bounds (all states sorted by cum_seconds, the window
// capped at cum[j] when work grows along the state DAG, cuts whose transfer in
// reaches the cap skipped), then filtered by the subset test for ancestors.
// With a memory limit S, two more bounds cut infeasible prefixes early:
//   - every row: the stashes of the stages of A(i..k, r) add up to
//     stash(i..k), each at most S / copies, so stash(i..k) <= reach(r), the
//     largest such sum over the ways to give r machines to stages;
//   - row 0 (the prefixes the top of every level asks for): whether states
//     0..k can be cut into stages on r machines that pass the memory test at
//     all (exact for that relaxation: the largest stash of a fitting ancestor
//     flows along the state DAG's edges), and, with activation transfers, a
//     floor of A(0..k, r) from the transfer and memory terms alone, where the
//     split states k' range over the states before k in (stash, index) order,
//     a superset of k's ancestors (a sliding window in that order).
//   - row 0 without activation transfers, during root_value_below(L): a
//     relaxed test of "A(0..k, r) <= t" at t = L (again, each time the root's
//     best comes down by 3%): a pass over the state DAG in which, per
//     state and machine count, the largest stash, work and parameters of the
//     ancestors that pass flow along the edges, each maximum on its own (so a
//     necessary condition: the one ancestor a split needs has each at most
//     these); a prefix that fails it has A(0..k, r) > t. With transfers the
//     transfer-and-memory floor above does that job, and the passes cost more
//     than they save (inception_v3, flat-16, 16 GB: 1.3 s with them, 0.7 s
//     without).
// Without these a memory limit that forces an expensive cut (inception_v3,
// flat-16 straight with 16 GB: T = 1.42 s, from a 708 MB activation) leaves
// every compute bound far below the optimum; without transfers, a limit that
// rules out most prefixes that fit otherwise (inception_v3, flat-16, 16 GB)
// made every request scan tens of thousands of prefixes it could not use.
// The top level's requests all come from one root (root_value_below), whose
// limit and best value so far (the ceiling) bound every request's limit; a
// prefix known to reach the ceiling (when its entry is recorded, or when a
// scan finds its entry at or above a ceiling that has come down since) is
// marked in a bitset per machine count, by position in the work order, and
// the scans skip marked positions 64 at a time. Scans test each state's last-stage compute term first, from the
// entry they read in order, before the subset test for ancestors. Bounds and derived limits are loosened by a
// relative 1e-9 of the problem's scale, far above rounding error, and a bound
// estimated with other roundings than the exact formula is recomputed exactly
// whenever it is too close to the value it is compared with, so rounding can
// never exclude the true minimum: the result equals the plain recurrence's,
// value for value (tests/planner checks this).
// Complexity: worst case the reference's O(N^3 M^2) time; in practice tens of
// candidates per entry (see bench/RESULTS.md). Memory: M doubles and flags per
// entry (i, j) requested, in a hash table.
// Thread safety: not thread-safe (memoisation); one solver per planning call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "planner/pipedream_states.h"

namespace baton {

// Every state, sorted by cum_seconds (then by index), with what the split scan
// reads first alongside: the splits of an entry are the ancestor states
// (StateSpace::is_ancestor) in a window of cum_seconds.
class StatesByWork {
 public:
  struct Entry {
    double work;          // cum_seconds
    double params;        // cum_param_bytes
    double output_bytes;  // of the cut after the state
    int state;
  };
  explicit StatesByWork(const StateSpace& states);
  const std::vector<Entry>& entries() const { return entries_; }
  // Where state k is in entries().
  int position(int k) const { return position_[k]; }
  // True when cum_seconds never decreases along an edge of the state DAG (so
  // that an ancestor state never has more work), as non-negative layer times
  // give: sums of a subset of the same non-negative terms round no higher.
  bool work_grows() const { return work_grows_; }

 private:
  std::vector<Entry> entries_;
  std::vector<int> position_;
  bool work_grows_ = true;
};

// The memo of one level: for each requested (i, j), the M values of A(i..j, r)
// (NaN = never requested) and their exactness flags, found through an
// open-addressing hash table, so that memory follows the entries requested
// rather than N^2 M. Blocks are referred to by number: they move when the
// storage grows.
class EntryTable {
 public:
  explicit EntryTable(int slots);
  static constexpr int64_t kAbsent = -1;
  int64_t find(int i, int j) const;
  int64_t find_or_add(int i, int j);
  double& value(int64_t block, int r) { return values_[slot(block, r)]; }
  unsigned char& exact(int64_t block, int r) { return exact_[slot(block, r)]; }
  double value(int64_t block, int r) const { return values_[slot(block, r)]; }
  bool exact(int64_t block, int r) const { return exact_[slot(block, r)] != 0; }
  size_t size() const { return count_; }

 private:
  struct Bucket {
    uint64_t key;
    int64_t block;
  };
  static uint64_t key(int i, int j) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(i)) << 32) | static_cast<uint32_t>(j);
  }
  size_t bucket_of(uint64_t key) const;
  size_t slot(int64_t block, int r) const {
    return static_cast<size_t>(block) * static_cast<size_t>(slots_) + static_cast<size_t>(r - 1);
  }
  void grow();

  int slots_;
  size_t count_ = 0;
  int shift_ = 64;
  std::vector<Bucket> buckets_;  // key kEmpty = free
  std::vector<double> values_;
  std::vector<unsigned char> exact_;
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
  LevelSolver(const StateSpace& states, const StatesByWork& index, LevelParams level, SharedParams shared,
              LevelSolver* below);

  int machines() const { return level_.machines; }
  // A(i..j, r), 0 <= i <= j < N, 1 <= r <= M; +infinity when infeasible.
  double value(int i, int j, int r);
  // A(0..N-1, M) when it is below `limit`, otherwise some value >= limit, as
  // the root of every request of this level (the top level): no request of
  // row 0 then has a limit above min(limit, the best value the root has
  // found so far), the ceiling, so row-0 scans skip (64 a word) the prefixes
  // already known to reach it.
  double root_value_below(double limit);
  // A lower bound of A(0..N-1, M): the mediant bound, or the prefix floors'.
  double root_lower_bound() const;
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
  // Both at once: known_bound, with `exact` set to known_exactly.
  double known(int i, int j, int r, bool& exact) const;
  // Entries (i, j) with at least one value requested, for measurements.
  size_t entries() const { return memo_.size(); }

  // A split (k, r_last) of an entry with a lower bound of its candidate.
  struct Split {
    double bound;
    int k;
    int r_last;
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
  void set_memory_reach();
  void set_prefix_fits();
  void set_prefix_floor();
  void set_compute_floor();
  void set_within(double t);
  void set_successors();
  double stash(int k) const;  // activations + parameters of states 0..k
  bool fits_alone(double stashed, int total) const;
  void narrow_within(double t);
  double prefix_floor(int k, int r) const;
  bool memory_excludes(int i, int k, int r) const;
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
  size_t collect_splits(int i, int j, int r, double cap);
  template <typename Consider>
  void scan_window(int i, int r_first, size_t begin, size_t end, Consider&& consider);
  Split pop_split(size_t begin, size_t& end);
  bool may_beat(int i, const Split& split, int j, int r, double cap) const;
  double evaluate_split(int i, const Split& split, int j, int r, double cap);

  const StateSpace& states_;
  const StatesByWork& index_;
  const LevelParams level_;
  const SharedParams shared_;
  LevelSolver* const below_;
  std::vector<double> row_deficit_;          // deficit(i, 1): the level below's
  std::vector<double> first_stage_deficit_;  // added for r >= 2: a first stage's all-reduce
  double below_deficit_min_ = 0.0;           // min over rows of the below level's deficit(i, M_below)
  double total_work_ = 0.0;
  std::vector<double> memory_reach_;  // by machines; empty without a memory limit
  double memory_slack_ = 0.0;
  std::vector<int> first_successor_, successors_;  // the state DAG's edges by source (memory limit only)
  std::vector<unsigned char> prefix_fits_;         // by state and machines, row 0
  std::vector<double> prefix_floor_;               // by state and machines, row 0
  // By state and machines, row 0: 0 when A(0..k, r) > within_limit_ surely.
  std::vector<unsigned char> within_;
  double within_limit_ = 0.0;
  // Per requested (i, j): an exact value of A(i..j, r), or a lower bound (the
  // largest limit it could not beat) flagged not exact.
  EntryTable memo_;
  // During root_value_below: the ceiling G, and reached_[(r - 1) words + p / 64]
  // bit p set when A(0..k, r) >= G is known, k the state at position p of index_.
  bool rooted_ = false;
  double ceiling_ = std::numeric_limits<double>::infinity();
  std::vector<uint64_t> reached_;
  size_t words_ = 0;
  void mark_reached(int k, int r);
  bool is_root(int i, int j, int r) const {
    return rooted_ && i == 0 && j == states_.num_states() - 1 && r == level_.machines;
  }
  std::vector<Split> stack_;  // gathered splits of the requests in progress
};

}  // namespace baton
