#include "sim/zb_heuristic.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace baton {

namespace {

struct Choice {
  bool allow_bubble_before_first_i;
  bool prioritize_i;
  bool greedy_w;
};

// One attempt of the greedy layout for one choice of the flags.
class Layout {
 public:
  Layout(const ZbHeuristicInput& in, Choice choice)
      : in_(in),
        choice_(choice),
        stages_(static_cast<int>(in.forward.size())),
        m_(in.microbatches),
        done_(static_cast<size_t>(stages_), std::vector<std::vector<double>>(2, std::vector<double>(m_, 0.0))),
        count_(static_cast<size_t>(stages_), {0, 0, 0}),
        free_at_(static_cast<size_t>(stages_), 0.0),
        memory_(static_cast<size_t>(stages_), 0.0),
        bubble_(static_cast<size_t>(stages_), 0.0),
        order_(static_cast<size_t>(stages_)) {}

  // The order, or nullopt when a stage cannot make room in its memory.
  std::optional<ZbHeuristicOrder> run() {
    for (int i = 0; i < m_; ++i) {
      if (i == 0 ? !first_microbatch() : !next_microbatch(i)) return std::nullopt;
    }
    for (int s = 0; s < stages_; ++s)
      while (count(s, ZbPass::kW) < m_) put(s, ZbPass::kW);
    ZbHeuristicOrder out;
    for (int s = 0; s < stages_; ++s) {
      const std::vector<ZbStep>& steps = order_[static_cast<size_t>(s)];
      out.span = std::max(out.span, steps.back().end - steps.front().start);
    }
    out.stages = std::move(order_);
    out.choice = fmt::format("{} bubble before the first I, {} I, {} W", choice_.allow_bubble_before_first_i ? "a" : "no",
                             choice_.prioritize_i ? "prioritized" : "plain", choice_.greedy_w ? "greedy" : "sparing");
    return out;
  }

 private:
  static int index(ZbPass pass) { return pass == ZbPass::kF ? 0 : pass == ZbPass::kI ? 1 : 2; }
  int& count(int s, ZbPass pass) { return count_[static_cast<size_t>(s)][static_cast<size_t>(index(pass))]; }
  double cost(int s, ZbPass pass) const {
    const size_t i = static_cast<size_t>(s);
    return pass == ZbPass::kF ? in_.forward[i] : pass == ZbPass::kI ? in_.input[i] : in_.weight[i];
  }
  double mem(int s, ZbPass pass) const {
    const size_t i = static_cast<size_t>(s);
    return pass == ZbPass::kF ? in_.mem_forward[i] : pass == ZbPass::kI ? in_.mem_input[i] : in_.mem_weight[i];
  }
  double limit(int s) const { return in_.limit[static_cast<size_t>(s)]; }
  double& free_at(int s) { return free_at_[static_cast<size_t>(s)]; }
  double& memory(int s) { return memory_[static_cast<size_t>(s)]; }
  // When stage s's pass of microbatch k ends (F: 0, I: 1).
  double& done(int s, int pass, int k) {
    return done_[static_cast<size_t>(s)][static_cast<size_t>(pass)][static_cast<size_t>(k)];
  }
  double largest_bubble() const { return *std::max_element(bubble_.begin(), bubble_.end()); }
  bool w_pending(int s) { return count(s, ZbPass::kW) < count(s, ZbPass::kI); }

  // Runs stage s's next pass of that kind as early as its inputs allow.
  void put(int s, ZbPass pass) {
    const int k = count(s, pass);
    const double c = cost(s, pass);
    double start = free_at(s);
    if (pass == ZbPass::kF && s > 0) start = std::max(start, done(s - 1, 0, k) + in_.comm);
    if (pass == ZbPass::kI && s + 1 < stages_) start = std::max(start, done(s + 1, 1, k) + in_.comm);
    if (pass == ZbPass::kI && s + 1 == stages_) start = std::max(start, done(s, 0, k));
    if (count(s, ZbPass::kF) > 0) bubble_[static_cast<size_t>(s)] += start - free_at(s);
    free_at(s) = start + c;
    if (pass != ZbPass::kW) done(s, index(pass), k) = start + c;
    memory(s) += mem(s, pass);
    ++count(s, pass);
    order_[static_cast<size_t>(s)].push_back({pass, k, start, start + c});
  }

  // W's until `extra` more fits in stage s's memory; false when none is left.
  bool make_room(int s, double extra) {
    while (memory(s) + extra > limit(s)) {
      if (!w_pending(s)) return false;
      put(s, ZbPass::kW);
    }
    return true;
  }

  // W's into the gap before `arrival` (when stage s's next F or I can start):
  // all that end by then, and one more that overruns it when the gap is large
  // against the largest bubble, or always with greedy_w.
  void fill_gap(int s, double arrival) {
    while (w_pending(s) && free_at(s) + cost(s, ZbPass::kW) <= arrival) put(s, ZbPass::kW);
    if (!w_pending(s) || free_at(s) >= arrival) return;
    const bool affordable = arrival - free_at(s) <= largest_bubble() - bubble_[static_cast<size_t>(s)];
    if (!affordable || choice_.greedy_w) put(s, ZbPass::kW);
  }

  bool first_microbatch() {
    for (int s = 0; s < stages_; ++s) {
      if (memory(s) + mem(s, ZbPass::kF) > limit(s)) return false;
      put(s, ZbPass::kF);
    }
    // Extra warm-up forwards, from the last stage up, while the first I has
    // not reached the stage.
    std::vector<int> extra(static_cast<size_t>(stages_), 0);
    double i_arrives = 0.0;  // when I0 reaches the stage below (its end)
    for (int s = stages_ - 1; s >= 0; --s) {
      if (s == stages_ - 1) {
        i_arrives = done(s, 0, 0) + cost(s, ZbPass::kI);
        continue;
      }
      double held = memory(s), clock = free_at(s);
      int& more = extra[static_cast<size_t>(s)];
      while (count(s, ZbPass::kF) + more < m_ && held + mem(s, ZbPass::kF) <= limit(s)) {
        const double due = i_arrives + in_.comm;
        if (choice_.allow_bubble_before_first_i ? clock + cost(s, ZbPass::kF) > due : clock >= due) break;
        held += mem(s, ZbPass::kF);
        clock += cost(s, ZbPass::kF);
        ++more;
      }
      i_arrives = std::max(clock, i_arrives + in_.comm) + cost(s, ZbPass::kI);
    }
    // Each stage strictly fewer than the one above (or all it has).
    for (int s = 1; s < stages_; ++s) {
      int& more = extra[static_cast<size_t>(s)];
      while (more > 0 && more >= extra[static_cast<size_t>(s - 1)] && count(s, ZbPass::kF) + more < m_) --more;
    }
    for (int s = 0; s < stages_; ++s)
      for (int j = 0; j < extra[static_cast<size_t>(s)]; ++j) put(s, ZbPass::kF);
    for (int s = stages_ - 1; s >= 0; --s) {
      if (!make_room(s, mem(s, ZbPass::kI))) return false;
      put(s, ZbPass::kI);
    }
    return true;
  }

  // Whether stage s runs a forward in microbatch i's round.
  bool wants_forward(int s) {
    if (count(s, ZbPass::kF) >= m_) return false;
    if (!choice_.prioritize_i || s + 1 >= stages_ || count(s, ZbPass::kF) < count(s + 1, ZbPass::kF) + 2) return true;
    // The stage below's next F and I and the way back: when this stage's
    // gradient can come at the earliest.
    const double gradient = free_at(s + 1) + cost(s + 1, ZbPass::kF) + cost(s + 1, ZbPass::kI) + in_.comm;
    if (free_at(s) >= gradient) return false;
    double w_time = 0.0, held = memory(s) + mem(s, ZbPass::kF);
    for (int w = count(s, ZbPass::kW); held > limit(s) && w < count(s, ZbPass::kI); ++w) {
      w_time += cost(s, ZbPass::kW);
      held += mem(s, ZbPass::kW);
    }
    if (free_at(s) + cost(s, ZbPass::kF) + w_time <= gradient) return true;
    return gradient - free_at(s) > largest_bubble() - bubble_[static_cast<size_t>(s)];
  }

  bool next_microbatch(int i) {
    std::vector<int> forward(static_cast<size_t>(stages_), 0);
    for (int s = 0; s < stages_; ++s) forward[static_cast<size_t>(s)] = wants_forward(s) ? 1 : 0;
    for (int s = stages_ - 2; s >= 0; --s)
      forward[static_cast<size_t>(s)] = std::min(forward[static_cast<size_t>(s)], forward[static_cast<size_t>(s + 1)]);
    for (int s = 0; s < stages_; ++s) {
      if (!forward[static_cast<size_t>(s)]) continue;
      if (!make_room(s, mem(s, ZbPass::kF))) return false;
      if (s > 0) fill_gap(s, done(s - 1, 0, count(s, ZbPass::kF)) + in_.comm);
      put(s, ZbPass::kF);
    }
    for (int s = stages_ - 1; s >= 0; --s) {
      if (count(s, ZbPass::kI) != i) return false;  // a forward it needed did not run
      if (!make_room(s, mem(s, ZbPass::kI))) return false;
      if (s + 1 < stages_) fill_gap(s, done(s + 1, 1, i) + in_.comm);
      if (s == 0 && count(s, ZbPass::kF) == m_)
        while (w_pending(s)) put(s, ZbPass::kW);
      put(s, ZbPass::kI);
    }
    return true;
  }

  const ZbHeuristicInput& in_;
  Choice choice_;
  int stages_;
  int m_;
  std::vector<std::vector<std::vector<double>>> done_;
  std::vector<std::vector<int>> count_;
  std::vector<double> free_at_;
  std::vector<double> memory_;
  std::vector<double> bubble_;
  std::vector<std::vector<ZbStep>> order_;
};

}  // namespace

ZbHeuristicInput zb_equal_stages(int stages, int microbatches, double forward, double input, double weight,
                                 double comm, double limit, double weight_share) {
  const size_t n = static_cast<size_t>(std::max(stages, 0));
  ZbHeuristicInput in;
  in.microbatches = microbatches;
  in.forward.assign(n, forward);
  in.input.assign(n, input);
  in.weight.assign(n, weight);
  in.comm = comm;
  in.mem_forward.assign(n, 1.0);
  in.mem_input.assign(n, weight_share - 1.0);
  in.mem_weight.assign(n, -weight_share);
  in.limit.assign(n, limit);
  return in;
}

Result<ZbHeuristicOrder> zb_heuristic_order(const ZbHeuristicInput& in) {
  const size_t stages = in.forward.size();
  if (stages == 0 || in.microbatches < 1) return Error{"the zero-bubble heuristic needs stages and microbatches"};
  for (const std::vector<double>* v :
       {&in.input, &in.weight, &in.mem_forward, &in.mem_input, &in.mem_weight, &in.limit})
    if (v->size() != stages) return Error{"the zero-bubble heuristic's inputs differ in their number of stages"};
  std::optional<ZbHeuristicOrder> best;
  for (bool allow : {true, false})
    for (bool prioritize : {true, false})
      for (bool greedy : {true, false}) {
        auto order = Layout(in, {allow, prioritize, greedy}).run();
        if (order && (!best || order->span < best->span)) best = std::move(order);
      }
  if (!best)
    return Error{fmt::format(
        "the zero-bubble heuristic cannot lay out {} microbatches within the stages' memory limits (each stage's limit "
        "must hold at least one forward's activations)",
        in.microbatches)};
  return *best;
}

}  // namespace baton
