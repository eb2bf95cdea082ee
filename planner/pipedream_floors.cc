// The solver's memory reach and floors for prefixes (the bounds are stated in
// planner/pipedream_level.h): tables made once per level, before any request.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "planner/pipedream_level.h"
#include "planner/pipedream_level_detail.h"

namespace baton {

using detail::difference;
using detail::kInfinity;
using detail::kRelativeSlack;

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
  const double stash_total = std::abs(states_.cum_activation_bytes.back()) + std::abs(states_.cum_param_bytes.back());
  // Covers rounding in the stages' tests and in the sums (both ~1e-15 relative).
  memory_slack_ = kRelativeSlack * (stash_total + largest + limit);
  set_successors();
  set_prefix_fits();
  if (shared_.compression) set_prefix_floor();
}

// The state DAG's edges by source, for the passes below: successors_[
// first_successor_[k] .. first_successor_[k + 1]).
void LevelSolver::set_successors() {
  const int n = states_.num_states();
  first_successor_.assign(static_cast<size_t>(n) + 1, 0);
  for (const auto& edge : states_.edges) ++first_successor_[static_cast<size_t>(edge.first) + 1];
  for (int k = 0; k < n; ++k) first_successor_[k + 1] += first_successor_[k];
  successors_.resize(states_.edges.size());
  std::vector<int> fill(first_successor_.begin(), first_successor_.end() - 1);
  for (const auto& [from, to] : states_.edges) successors_[fill[from]++] = to;
}

double LevelSolver::stash(int k) const { return states_.cum_activation_bytes[k] + states_.cum_param_bytes[k]; }

// Whether a prefix that stashes `stashed` bytes passes the memory test as one stage on
// `total` machines (one only, for a straight pipeline).
bool LevelSolver::fits_alone(double stashed, int total) const {
  if (shared_.straight_pipeline && total != 1) return false;
  const double copies = std::ceil(static_cast<double>(level_.machines - total) / total);
  return stashed * copies <= *shared_.memory_bytes + memory_slack_;
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
  // best[k M + R - 1]: largest stash of a strict ancestor fitting on R machines.
  std::vector<double> best(static_cast<size_t>(n) * m, -kInfinity);
  prefix_fits_.assign(static_cast<size_t>(n) * m, 0);
  for (int k = 0; k < n; ++k) {
    const size_t row = static_cast<size_t>(k) * m;
    for (int total = 1; total <= m; ++total) {
      bool fits = fits_alone(stash(k), total);
      const int max_last = straight ? std::min(1, total - 1) : total - 1;
      for (int r_last = 1; r_last <= max_last && !fits; ++r_last) {
        const double before = best[row + static_cast<size_t>(total - r_last) - 1];
        if (before == -kInfinity) continue;
        const double copies = std::ceil(static_cast<double>(m - total) / r_last);
        fits = copies == 0.0 || stash(k) - before <= limit / copies + memory_slack_;
      }
      prefix_fits_[row + static_cast<size_t>(total) - 1] = fits ? 1 : 0;
    }
    for (int e = first_successor_[k]; e < first_successor_[k + 1]; ++e) {
      const size_t next = static_cast<size_t>(successors_[e]) * m;
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
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> stashes(n);
  for (int k = 0; k < n; ++k) stashes[k] = stash(k);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return stashes[a] != stashes[b] ? stashes[a] < stashes[b] : a < b; });
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
      double floor = fits_alone(stashes[k], total) ? 0.0 : kInfinity;
      const int max_last = straight ? std::min(1, total - 1) : total - 1;
      for (int r_last = 1; r_last <= max_last && floor > 0.0; ++r_last) {
        Queue& queue = queues[static_cast<size_t>(total - 1) * m + r_last - 1];
        const double copies = std::ceil(static_cast<double>(m - total) / r_last);
        const double low = copies == 0.0 ? -kInfinity : stashes[k] - limit / copies - memory_slack_;
        while (queue.head < queue.items.size() && queue.items[queue.head].stash < low) ++queue.head;
        if (queue.head == queue.items.size()) continue;
        floor = std::min(floor, std::max(queue.items[queue.head].value, transfer_out(k, r_last)));
      }
      prefix_floor_[row + static_cast<size_t>(total) - 1] = floor;
    }
    for (int total = 2; total <= m; ++total) {
      const int max_last = straight ? 1 : total - 1;
      for (int r_last = 1; r_last <= max_last; ++r_last) {
        const double value =
            std::max(prefix_floor_[row + static_cast<size_t>(total - r_last) - 1], transfer_in(k, r_last));
        if (value == kInfinity) continue;
        Queue& queue = queues[static_cast<size_t>(total - 1) * m + r_last - 1];
        while (queue.items.size() > queue.head && queue.items.back().value >= value) queue.items.pop_back();
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
        if (q > 0) best = std::min(best, std::max(previous[q - 1], order[p].work - order[q - 1].work));
        current[p] = best;
      }
      previous.swap(current);
    }
    for (int p = 0; p < n; ++p) {
      double& floor = prefix_floor_[static_cast<size_t>(order[p].state) * m + static_cast<size_t>(total) - 1];
      floor = std::max(floor, previous[p]);
    }
  }
}

// within_[k M + R - 1] false: A(0..k, R) > t surely (see the header). One
// pass in topological order; per state and machine count, the largest stash,
// work and parameters over the strict ancestors that pass the relaxed test
// flow along the edges, each maximum on its own (so from possibly different
// ancestors: a necessary condition). O(edges x M + states x M^2); 3 doubles
// per state and machine count while it runs.
namespace {

// A state's row of ancestor maxima (one value per machine count) also takes
// the state's own value where it passes on that many machines.
void raise_row(std::vector<float>& best, size_t row, const std::vector<unsigned char>& within, int machines,
               float own) {
  for (size_t at = row; at < row + static_cast<size_t>(machines); ++at)
    if (within[at]) best[at] = std::max(best[at], own);
}

// Hands a state's row of maxima on to a successor's.
void pass_on(std::vector<float>& best, size_t row, size_t next, int machines) {
  for (size_t at = 0; at < static_cast<size_t>(machines); ++at)
    best[next + at] = std::max(best[next + at], best[row + at]);
}

}  // namespace

void LevelSolver::set_within(double t) {
  const int n = states_.num_states();
  const int m = level_.machines;
  const double limit = *shared_.memory_bytes;
  const bool straight = shared_.straight_pipeline;
  const double unit = level_.devices_per_unit;
  const double spread = below_deficit_min_;  // <= 0: what levels below may save
  const std::vector<double>& work = states_.cum_seconds;
  const std::vector<double>& params = states_.cum_param_bytes;
  // a_r of the all-reduce term 4 (r - 1) P / (r B); the single stage's is
  // divided by W (the reference's), so the smaller one serves for both.
  auto all_reduce_factor = [&](int r) {
    return 4.0 * (r - 1) / (static_cast<double>(r) * level_.bandwidth * level_.machines_within);
  };
  const double tolerance = slack(t * m * unit) + kRelativeSlack * std::abs(spread);
  // Per state, M values each: the largest stash, work and parameters of the
  // strict ancestors that pass on R machines (then of the state too, once its
  // row is done, for its successors). Kept as floats rounded up, half the
  // memory traffic: a maximum rounded up keeps every test a necessary
  // condition (each only asks whether some ancestor's value is large enough).
  const size_t size = static_cast<size_t>(n) * m;
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  auto up = [](double x) {
    const auto f = static_cast<float>(x);
    return static_cast<double>(f) >= x ? f : std::nextafter(f, std::numeric_limits<float>::infinity());
  };
  std::vector<float> best_stash(size, kNone), best_work(size, kNone), best_params(size, kNone);
  within_.assign(size, 0);
  within_limit_ = t;
  for (int k = 0; k < n; ++k) {
    const size_t row = static_cast<size_t>(k) * m;
    for (int total = 1; total <= m; ++total) {
      bool fits = false;
      if (fits_alone(stash(k), total)) {
        const double cost = ((work[k] + spread) / unit + all_reduce_factor(total) * params[k]) / total;
        fits = cost <= t + tolerance;
      }
      const int max_last = straight ? std::min(1, total - 1) : total - 1;
      for (int r_last = 1; r_last <= max_last && !fits; ++r_last) {
        const size_t before = row + static_cast<size_t>(total - r_last) - 1;
        if (best_stash[before] == kNone) continue;
        const double copies = std::ceil(static_cast<double>(m - total) / r_last);
        if (copies > 0.0 && stash(k) - best_stash[before] > limit / copies + memory_slack_) continue;
        const double a = all_reduce_factor(r_last);
        // The last stage k'+1..k costs at least
        // ((work[k] - work[k'] + spread) / unit + a (params[k] - params[k'])) / r_last.
        const double needed = (work[k] + spread) / unit + a * params[k] - r_last * t;
        fits = best_work[before] / unit + a * best_params[before] >= needed - tolerance;
      }
      within_[row + static_cast<size_t>(total) - 1] = fits ? 1 : 0;
    }
    raise_row(best_stash, row, within_, m, up(stash(k)));
    raise_row(best_work, row, within_, m, up(work[k]));
    raise_row(best_params, row, within_, m, up(params[k]));
    for (int e = first_successor_[k]; e < first_successor_[k + 1]; ++e) {
      const size_t next = static_cast<size_t>(successors_[e]) * m;
      for (std::vector<float>* best : {&best_stash, &best_work, &best_params}) pass_on(*best, row, next, m);
    }
  }
}

// True when A(i..k, r) is surely infeasible under the memory limit. Rows
// other than 0: its stages' stashes add up to stash(i..k) (the differences
// telescope), and each is at most S / copies.
bool LevelSolver::memory_excludes(int i, int k, int r) const {
  if (memory_reach_.empty()) return false;
  if (i == 0) return prefix_fits_[static_cast<size_t>(k) * level_.machines + r - 1] == 0;
  const double stashed = difference(states_.cum_activation_bytes, i, k) + difference(states_.cum_param_bytes, i, k);
  return stashed > memory_reach_[r] + memory_slack_;
}

}  // namespace baton
