// What planner/baton_search.cc (the program over splits) and
// planner/baton_search_valuation.cc (a found split valued beyond its busiest
// stage: a flush schedule's fill and drain, stages sharing one device) share:
// the search for one number of devices.
#pragma once

#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "planner/baton_search.h"
#include "planner/search_tables.h"
#include "planner/stage_demand.h"
#include "sim/network.h"

namespace baton::search_detail {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// What a run of the program minimizes (baton_search.h).
struct Objective {
  enum Kind {
    kBottleneck,  // the busiest stage's time per microbatch, or its busiest cut
    kMemory,      // the largest stage's peak memory (when nothing fits)
    kFill,        // the sum of the stages' latencies, each stage's period and cut within `ceiling`
  };
  Kind kind = kBottleneck;
  double ceiling = kInfinity;
};

// A stage's device time per microbatch (its period, what bounds the rate) and
// the time one microbatch spends in it, forward and backward on one replica
// (what the fill and drain of a flush schedule add up).
struct StageTerm {
  double period = 0.0;
  double latency = 0.0;
};

// The search for one number of devices D; fills `found` with (value, plan).
class Search {
 public:
  Search(const Profile& profile, const Topology& topology, const SearchOptions& options, const RangeTables& tables,
         const std::vector<int>& replicas)
      : profile_(profile),
        topology_(topology),
        options_(options),
        tables_(tables),
        replicas_(replicas),
        network_(topology),
        cut_memo_(static_cast<size_t>(topology.num_devices()) * replicas.size() * replicas.size(),
                  std::numeric_limits<double>::quiet_NaN()),
        allreduce_memo_(static_cast<size_t>(topology.num_devices()) * replicas.size()),
        demands_(options.schedule, options.microbatches, optimizer_state_factor(options.optimizer)),
        demand_table_(static_cast<size_t>(topology.num_devices() + 1) * replicas.size(), nullptr) {
    size_t slots = 0;
    for (int level = 0; level < topology.num_levels(); ++level) {
      const size_t links = static_cast<size_t>(topology.num_devices() / topology.devices_per_unit(level - 1)) *
                           static_cast<size_t>(topology.levels[level].rails);
      for (int direction = 0; direction < 2; ++direction) {
        link_offset_.push_back(slots);
        slots += links;
      }
    }
    link_load_.assign(slots, 0.0);
    cut_alignment_ = topology.devices_per_unit(topology.num_levels() - 2);
  }

  // kFill's found values are the flush estimate of each plan (fill_estimate).
  void run(int devices, Objective objective, std::vector<std::pair<double, Plan>>& found);
  // One microbatch's forward and backward through the whole model on one
  // device, one call each: no split's latency is less.
  double whole_latency() const { return compute(0, profile_.num_layers()); }

 private:
  size_t index(int j, int u, int ri) const {
    return (static_cast<size_t>(j) * (devices_ + 1) + u) * (replicas_.size() + 1) + ri;
  }
  // Forward and backward of layers [i, j) on one device, each pass one call.
  double compute(int i, int j) const;
  StageTerm stage_term(int i, int j, int start, int ri, const StageDemand& demand, double* memory) const;
  double cut_seconds_per_byte(int start, int ri, int next_ri);
  // One microbatch's activation there and its gradient back across the cut
  // after a stage at `start` with ri's replicas, its first device to the next
  // stage's first on one rail of the level they meet at: per byte of the
  // activation (RangeTables::out) and fixed.
  std::pair<double, double> cut_latency(int start, int ri) const;
  double fill_estimate(int ri);
  // A stage's busiest worker's time per iteration beyond one microbatch's latency.
  double steady(const StageTerm& term) const { return options_.microbatches * term.period - term.latency; }

  // all-reduce time over devices [start, start + r) = per_byte x bytes + fixed.
  std::pair<double, double> allreduce_coefficients(int start, int ri) const;
  // Calls visit(i, j, ri, next_ri, start) for each stage [i, j) of the split
  // whose first stage has replica index ri, in order (next_ri: none at the last).
  template <typename Visit>
  void walk(int ri, Visit&& visit) const;
  Plan rebuild(int ri) const;
  double shared_bottleneck(int ri);

  const Profile& profile_;
  const Topology& topology_;
  const SearchOptions& options_;
  const RangeTables& tables_;
  const std::vector<int>& replicas_;
  Network network_;
  int devices_ = 0;
  std::vector<double> best_;
  std::vector<int> next_j_;
  std::vector<int> next_ri_;
  // Memos indexed densely by device position and replica-count indices (the
  // search reads them in its innermost loops); NaN / unset until computed.
  size_t cut_index(int start, int ri, int next_ri) const {
    return (static_cast<size_t>(start) * replicas_.size() + ri) * replicas_.size() + next_ri;
  }
  std::vector<double> cut_memo_;
  // One slot per (level, direction, child unit, rail): link_offset_[2 level +
  // direction] + child x rails + rail; the loads of one cut, zero between cuts.
  size_t link_index(int level, int device, int direction) const {
    const int per_child = topology_.devices_per_unit(level - 1);
    const int rails = topology_.levels[level].rails;
    return link_offset_[static_cast<size_t>(2 * level + direction)] + static_cast<size_t>(device / per_child) * rails +
           topology_.rail_of(device, level);
  }
  int cut_alignment_ = 1;  // devices of a unit of the level below the top
  std::vector<size_t> link_offset_;
  std::vector<double> link_load_;
  std::vector<size_t> touched_;
  mutable std::vector<std::optional<std::pair<double, double>>> allreduce_memo_;
  StageDemands demands_;
  // [downstream x replica index], filled on use; a schedule that sees the
  // workers upstream (devices_ - downstream) starts it afresh in every run.
  std::vector<const StageDemand*> demand_table_;
  const StageDemand& demand(int ri, int downstream) {
    const StageDemand*& entry = demand_table_[static_cast<size_t>(downstream) * replicas_.size() + ri];
    if (!entry) entry = &demands_.of(replicas_[ri], downstream, devices_ - downstream);
    return *entry;
  }
};

template <typename Visit>
void Search::walk(int ri, Visit&& visit) const {
  int i = 0, u = devices_;
  const int none = static_cast<int>(replicas_.size());
  while (ri != none && i < profile_.num_layers()) {
    const int j = next_j_[index(i, u, ri)];
    const int next = next_ri_[index(i, u, ri)];
    visit(i, j, ri, next, devices_ - u);
    u -= replicas_[ri];
    i = j;
    ri = next;
  }
}

using Found = std::vector<std::pair<double, Plan>>;

// Adds to `candidates` the splits of least fill and drain under ceilings on
// their steady part (planner/baton_search_valuation.cc says how), at most
// options.max_candidates, none already there; `bottleneck` is the least
// busiest-stage time found.
void add_fill_candidates(Search& search, const std::vector<int>& device_counts, const SearchOptions& options,
                         double bottleneck, std::vector<Plan>& candidates);

}  // namespace baton::search_detail
