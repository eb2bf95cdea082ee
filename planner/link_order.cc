#include "planner/link_order.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

namespace baton {

namespace {

// A transfer instance the links served, in serving order.
struct Served {
  int transfer = 0;
  int64_t period = 0;
  double issue = 0.0;
};

// Transfers wait in issue order: (issue on the grid, sender worker, period, transfer).
using IssueKey = std::tuple<int64_t, int, int64_t, int>;

// The instances of periods [first_, last_) of every node, played forward.
class Run {
 public:
  Run(const PlanEventGraph& base, int64_t periods, double grid);
  void play();
  RunOrder repeating_order(int max_repeat) const;

 private:
  int64_t id(int v, int64_t p) const { return (p - first_) * n_ + v; }
  bool exists(int v, int64_t p) const { return p >= base_.start_up.first_period[v] && p < last_; }
  void ready(int v, int64_t p);
  void finish(int64_t instance);
  void serve(const IssueKey& key);
  std::vector<std::vector<Served>> complete_sequences() const;
  bool repeats(const std::vector<std::vector<Served>>& served, int repeat, int max_repeat) const;
  LinkOrder order_of(const std::vector<std::vector<Served>>& served, int repeat) const;

  const PlanEventGraph& base_;
  const int n_;
  int64_t first_ = 0, last_ = 0;
  double grid_;
  std::vector<std::vector<TimedEdge>> out_;  // per node: graph and start-up edges leaving it
  std::vector<int> transfer_of_;             // per node: its transfer, -1 for the others
  std::vector<int> per_link_;                // transfers per period on each link
  std::vector<double> time_;                 // per instance
  std::vector<int> missing_;                 // per instance: predecessors not yet final
  std::vector<double> link_free_;
  std::vector<std::vector<Served>> served_;  // per link
  std::priority_queue<IssueKey, std::vector<IssueKey>, std::greater<IssueKey>> waiting_;
};

Run::Run(const PlanEventGraph& base, int64_t periods, double grid)
    : base_(base), n_(base.graph.num_nodes), grid_(grid) {
  const StartUp& start = base.start_up;
  first_ = n_ > 0 ? *std::min_element(start.first_period.begin(), start.first_period.end()) : 0;
  last_ = first_ + periods;
  out_.resize(static_cast<size_t>(n_));
  for (const TimedEdge& e : base.graph.edges) out_[e.from].push_back(e);
  for (const TimedEdge& e : start.edges) out_[e.from].push_back(e);
  transfer_of_.assign(static_cast<size_t>(n_), -1);
  per_link_.assign(static_cast<size_t>(base.num_links), 0);
  for (int i = 0; i < static_cast<int>(base.transfers.size()); ++i) {
    transfer_of_[base.transfers[i].node] = i;
    for (int link : base.transfers[i].links) ++per_link_[link];
  }
  const size_t instances = static_cast<size_t>(periods) * static_cast<size_t>(n_);
  time_.assign(instances, -std::numeric_limits<double>::infinity());
  missing_.assign(instances, 0);
  link_free_.assign(static_cast<size_t>(base.num_links), 0.0);
  served_.resize(static_cast<size_t>(base.num_links));
}

void Run::play() {
  for (int64_t p = first_; p < last_; ++p)
    for (int v = 0; v < n_; ++v) {
      if (!exists(v, p)) continue;
      time_[id(v, p)] = base_.start_up.release[v];
      for (const TimedEdge& e : out_[v])
        if (exists(e.to, p + e.tokens)) ++missing_[id(e.to, p + e.tokens)];
    }
  std::vector<std::pair<int, int64_t>> sources;  // collected first: ready() lowers missing_ further on
  for (int64_t p = first_; p < last_; ++p)
    for (int v = 0; v < n_; ++v)
      if (exists(v, p) && missing_[id(v, p)] == 0) sources.emplace_back(v, p);
  for (const auto& [v, p] : sources) ready(v, p);
  while (!waiting_.empty()) {
    const IssueKey key = waiting_.top();
    waiting_.pop();
    serve(key);
  }
}

// A transfer waits for its turn; any other instance is final once its
// predecessors are (all weights are >= 0, so nothing still waiting ends earlier).
void Run::ready(int v, int64_t p) {
  const int t = transfer_of_[v];
  if (t < 0) {
    finish(id(v, p));
    return;
  }
  const double issue = time_[id(base_.transfers[t].sender, p)];
  waiting_.emplace(std::llround(issue / grid_), base_.transfers[t].sender_worker, p, t);
}

void Run::finish(int64_t instance) {
  std::vector<int64_t> stack{instance};
  while (!stack.empty()) {
    const int64_t x = stack.back();
    stack.pop_back();
    const int v = static_cast<int>(x % n_);
    const int64_t p = first_ + x / n_;
    for (const TimedEdge& e : out_[v]) {
      const int64_t q = p + e.tokens;
      if (!exists(e.to, q)) continue;
      const int64_t y = id(e.to, q);
      time_[y] = std::max(time_[y], time_[x] + e.weight);
      if (--missing_[y] > 0) continue;
      if (transfer_of_[e.to] >= 0) ready(e.to, q);
      else stack.push_back(y);
    }
  }
}

void Run::serve(const IssueKey& key) {
  const auto [grid_issue, worker, p, t] = key;
  const TransferEvent& transfer = base_.transfers[t];
  const double issue = time_[id(transfer.sender, p)];
  double& up = link_free_[transfer.links[0]];
  double& down = link_free_[transfer.links[1]];
  const double end = std::max(issue, std::max(up, down)) + transfer.wire.value;
  up = end;
  down = end;
  time_[id(transfer.node, p)] = end;
  for (int link : transfer.links) served_[link].push_back(Served{t, p, issue});
  finish(id(transfer.node, p));
}

// Each link's served sequence up to the first issue of the last period: up to
// there no transfer of a later period (not played) could have come first,
// since a worker issues its instances of one transfer in period order.
std::vector<std::vector<Served>> Run::complete_sequences() const {
  double cut = std::numeric_limits<double>::infinity();
  for (const TransferEvent& t : base_.transfers)
    if (exists(t.sender, last_ - 1)) cut = std::min(cut, time_[id(t.sender, last_ - 1)]);
  std::vector<std::vector<Served>> served = served_;
  for (std::vector<Served>& sequence : served) {
    const auto late = std::find_if(sequence.begin(), sequence.end(), [&](const Served& s) { return s.issue >= cut; });
    sequence.erase(late, sequence.end());
  }
  return served;
}

// The serving order of the last `checked` periods is the one `repeat` periods
// before, checked = max(2 repeat, max_repeat): a shorter check could take a
// stretch of a longer pattern for a repeat (a sequence that repeats every K'
// periods and matches itself shifted by K over K' periods repeats every K).
bool Run::repeats(const std::vector<std::vector<Served>>& served, int repeat, int max_repeat) const {
  const size_t checked = static_cast<size_t>(std::max(2 * repeat, max_repeat));
  for (size_t link = 0; link < served.size(); ++link) {
    const std::vector<Served>& sequence = served[link];
    const size_t span = static_cast<size_t>(per_link_[link]) * static_cast<size_t>(repeat);
    const size_t compared = static_cast<size_t>(per_link_[link]) * checked;
    if (span == 0) continue;
    if (sequence.size() < span + compared) return false;
    for (size_t i = sequence.size() - span - compared; i + span < sequence.size(); ++i) {
      const Served& now = sequence[i];
      const Served& later = sequence[i + span];
      if (later.transfer != now.transfer || later.period != now.period + repeat) return false;
    }
  }
  return true;
}

LinkOrder Run::order_of(const std::vector<std::vector<Served>>& served, int repeat) const {
  const int transfers = static_cast<int>(base_.transfers.size());
  LinkOrder order(served.size());
  for (size_t link = 0; link < served.size(); ++link) {
    const size_t span = static_cast<size_t>(per_link_[link]) * static_cast<size_t>(repeat);
    for (size_t i = served[link].size() - span; i < served[link].size(); ++i) {
      const Served& s = served[link][i];
      const int64_t copy = s.period - floor_div(s.period, repeat) * repeat;
      order[link].push_back(LinkSlot{static_cast<int>(copy) * transfers + s.transfer, -floor_div(s.period, repeat)});
    }
  }
  return order;
}

RunOrder Run::repeating_order(int max_repeat) const {
  const std::vector<std::vector<Served>> served = complete_sequences();
  for (int repeat = 1; repeat <= max_repeat; ++repeat) {
    if (!repeats(served, repeat, max_repeat)) continue;
    RunOrder found{repeat, order_of(served, repeat)};
    if (each_once(found.order)) return found;
  }
  return RunOrder{};
}

}  // namespace

bool each_once(const LinkOrder& order) {
  for (const std::vector<LinkSlot>& slots : order) {
    std::vector<int> transfers;
    for (const LinkSlot& slot : slots) transfers.push_back(slot.transfer);
    std::sort(transfers.begin(), transfers.end());
    if (std::adjacent_find(transfers.begin(), transfers.end()) != transfers.end()) return false;
  }
  return true;
}

RunOrder follow_run(const PlanEventGraph& base, int64_t periods, int max_repeat, double grid) {
  Run run(base, periods, grid);
  run.play();
  return run.repeating_order(max_repeat);
}

}  // namespace baton
