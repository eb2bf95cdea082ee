// Large state spaces: the ancestor test, the solver against the plain
// recurrence on wide-branch DAGs with binding memory limits, and the solver
// against an independent decision procedure on tens of thousands of states and
// (opt-in, BATON_PIPEDREAM_PROFILES) on inception_v3's 221,564.
#include "tests/catch_compat.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/bitset.h"
#include "planner/pipedream_dp.h"
#include "planner/pipedream_import.h"
#include "planner/pipedream_states.h"
#include "tests/planner/pipedream_profiles.h"
#include "tests/planner/plain_pipedream_dp.h"

using namespace baton;
using pipedream_testing::load;
using pipedream_testing::profiles_folder;

namespace {

Layer make_layer(int index, std::mt19937& rng, std::vector<int> inputs) {
  std::uniform_real_distribution<double> ms(0.1, 10.0);
  std::uniform_int_distribution<int64_t> bytes(0, 50'000'000);
  Layer l;
  l.name = fmt::format("l{}", index);
  l.description = "op";
  l.forward = Seconds::from_ms(ms(rng));
  l.backward = Seconds::from_ms(ms(rng));
  l.param_bytes = Bytes(bytes(rng));
  l.output_bytes = Bytes(bytes(rng));
  l.inputs = std::move(inputs);
  return l;
}

// Modules in series, as in Inception: each module's source feeds parallel
// chains of the given lengths, joined by one layer. States grow with the
// product of (length + 1) over a module's branches.
Profile wide_branches(std::mt19937& rng, const std::vector<std::vector<int>>& modules) {
  Profile p;
  p.model = "wide";
  p.layers.push_back(make_layer(0, rng, {}));
  for (const std::vector<int>& branches : modules) {
    const int source = p.num_layers() - 1;
    std::vector<int> ends;
    for (int length : branches) {
      int previous = source;
      for (int step = 0; step < length; ++step) {
        p.layers.push_back(make_layer(p.num_layers(), rng, {previous}));
        previous = p.num_layers() - 1;
      }
      ends.push_back(previous);
    }
    p.layers.push_back(make_layer(p.num_layers(), rng, ends));
  }
  return p;
}

// Each layer after the first reads one or two earlier layers.
Profile random_dag(std::mt19937& rng, int layers) {
  Profile p;
  p.model = "random";
  for (int i = 0; i < layers; ++i) {
    std::vector<int> inputs;
    if (i >= 1) {
      std::uniform_int_distribution<int> pick(0, i - 1);
      inputs.push_back(i == 1 ? 0 : pick(rng));
      if (i >= 2 && rng() % 2 == 0) {
        const int second = pick(rng);
        if (second != inputs[0]) inputs.push_back(second);
      }
    }
    p.layers.push_back(make_layer(i, rng, std::move(inputs)));
  }
  return p;
}

StateSpace states_of(const Profile& profile) {
  auto space = build_state_space(profile, 2'000'000);
  INFO((space ? std::string() : space.error().message));
  REQUIRE(space.ok());
  return *space;
}

// Reachability in the state DAG (the reference's "ancestor states") against
// the subset test of closures.
void check_ancestors(const StateSpace& s) {
  const int n = s.num_states();
  std::vector<std::vector<int>> predecessors(n);
  int backward = 0;  // edges against the order, which is topological
  for (const auto& [from, to] : s.edges) {
    if (from >= to) ++backward;
    predecessors[to].push_back(from);
  }
  CHECK(backward == 0);
  std::vector<Bitset> reach(n, Bitset(n));
  int mismatches = 0;
  for (int j = 0; j < n; ++j) {
    for (int p : predecessors[j]) {
      reach[j] |= reach[p];
      reach[j].set(p);
    }
    for (int k = 0; k < n; ++k)
      if (reach[j].test(k) != s.is_ancestor(k, j)) ++mismatches;
  }
  CHECK(mismatches == 0);
}

double total_stash(const StateSpace& s) { return s.cum_activation_bytes.back() + s.cum_param_bytes.back(); }

// The independent check. For one level (M machines, bandwidth B, no memory
// limit) the reference's objective is
//   T* = min over chains of states k1 < k2 < ... < km = N-1 (each an ancestor
//        state of the next) and replicas r1 + ... + rm = M (all 1 when
//        straight) of the largest stage term,
// where stage t covers k(t-1)+1..kt (k0 = -1: cum = 0) and has the terms
//   compute (C + a_r P) / r, a_r = 4 (r - 1) / (r B), and, for t > 1 with a
//   ratio R, 2 out[k(t-1)] / (B r) / R and (kt not last) 2 out[kt] / (B r) / R:
// unrolling A(0..N-1, M) gives exactly this (the first stage is the single
// stage, which has no transfer terms). So T* <= t iff some chain has every term
// <= t. For the compute term, C + a_r P <= r t reads
//   v_r(k') = cum[k'] + a_r par[k'] >= cum[k] + a_r par[k] - r t,
// a condition on one number of the earlier state k'; the transfer terms are
// conditions on one state each. Hence fits(k, R) ("0..k on exactly R machines
// within t") needs, per (R', r), only the largest v_r(k') over the ancestors
// k' of k with fits(k', R') and an admissible transfer in, and that maximum
// flows along the state DAG's edges (the ancestors of k are the states that
// reach it). One pass in topological order, O((states + edges) M^2), decides
// T* <= t; no bound, memo or pruning of the solver is involved, ancestors come
// from the edges rather than the subset test, and the compute term is
// compared in another arrangement. The solver's T is then exact to 1e-9 when
// T* <= T (1 + 1e-9) and not T* <= T (1 - 1e-9).
bool within(const StateSpace& s, int machines, double bandwidth, bool straight, std::optional<double> ratio, double t) {
  const int n = s.num_states();
  const int m = machines;
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  auto a = [&](int r) { return 4.0 * (r - 1) / (r * bandwidth); };
  auto transfer_ok = [&](int k, int r) { return !ratio || (2.0 * s.output_bytes[k]) / (bandwidth * r) / *ratio <= t; };
  const int max_r = straight ? 1 : m - 1;
  // best[k][(R' - 1) * max_r + r - 1]
  const size_t stride = static_cast<size_t>(m) * max_r;
  std::vector<double> best(static_cast<size_t>(n) * stride, minus_infinity);
  std::vector<char> fits(static_cast<size_t>(n) * m, 0);
  std::vector<std::vector<int>> successors(n);
  for (const auto& [from, to] : s.edges) successors[from].push_back(to);
  for (int k = 0; k < n; ++k) {
    double* mine = &best[static_cast<size_t>(k) * stride];
    for (int total = 1; total <= m; ++total) {
      bool ok = false;
      if (!straight || total == 1) ok = s.cum_seconds[k] + a(total) * s.cum_param_bytes[k] <= total * t;
      for (int r = 1; r <= std::min(max_r, total - 1) && !ok; ++r) {
        if (k != n - 1 && !transfer_ok(k, r)) continue;
        const double needed = s.cum_seconds[k] + a(r) * s.cum_param_bytes[k] - r * t;
        ok = mine[(total - r - 1) * max_r + r - 1] >= needed;
      }
      fits[static_cast<size_t>(k) * m + total - 1] = ok;
    }
    for (int next : successors[k]) {
      double* theirs = &best[static_cast<size_t>(next) * stride];
      for (int before = 1; before < m; ++before)
        for (int r = 1; r <= std::min(max_r, m - before); ++r) {
          double& slot = theirs[(before - 1) * max_r + r - 1];
          slot = std::max(slot, mine[(before - 1) * max_r + r - 1]);
          if (fits[static_cast<size_t>(k) * m + before - 1] && transfer_ok(k, r))
            slot = std::max(slot, s.cum_seconds[k] + a(r) * s.cum_param_bytes[k]);
        }
    }
  }
  return fits[static_cast<size_t>(n - 1) * m + m - 1] != 0;
}

void check_by_decision(const StateSpace& s, const Profile& profile, int machines, double bandwidth, bool straight,
                       std::optional<double> ratio) {
  PipeDreamOptions options;
  options.levels = {{machines, Bandwidth{bandwidth}}};
  options.straight_pipeline = straight;
  options.activation_compression = ratio;
  auto plan = plan_pipedream(profile, options);
  INFO(profile.model << " M " << machines << " straight " << straight << " ratio " << ratio.value_or(0.0));
  if (!within(s, machines, bandwidth, straight, ratio, 1e300)) {
    CHECK_FALSE(plan.ok());
    return;
  }
  REQUIRE(plan.ok());
  const double t = plan->time_per_minibatch.value;
  INFO("T " << fmt::format("{:.17g}", t));
  CHECK(within(s, machines, bandwidth, straight, ratio, t * (1 + 1e-9)));
  CHECK_FALSE(within(s, machines, bandwidth, straight, ratio, t * (1 - 1e-9)));
  CHECK(testing::replay_one_level(s, *plan, options) == t);
}

}  // namespace

TEST_CASE("ancestor states are the states whose closure is a strict subset", "[planner][pipedream][states]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) check_ancestors(states_of(random_dag(rng, 4 + trial % 20)));
  check_ancestors(states_of(wide_branches(rng, {{2, 3, 4}, {1, 5}, {3, 3, 2, 1}})));
  const auto folder = profiles_folder();
  if (!folder) return;
  for (const char* model : {"alexnet", "vgg16", "resnet18", "resnet50", "squeezenet1_0", "gnmt", "densenet121",
                            "resnext101", "gnmt_large"}) {
    INFO(model);
    check_ancestors(states_of(load(*folder, model)));
  }
}

TEST_CASE("the fast solver equals the plain recurrence on wide branches with memory limits",
          "[planner][pipedream][dp]") {
  std::mt19937 rng(20240611);
  // Eight machines on one level: the top level's root search (rising limits,
  // the ceiling's bitsets, and without transfers the relaxed test of
  // LevelSolver::set_within) has room to prune there.
  const std::vector<std::vector<PipeDreamLevel>> layouts = {{{4, Bandwidth{1e9}}},
                                                            {{8, Bandwidth{1e9}}},
                                                            {{3, Bandwidth{1e10}}},
                                                            {{2, Bandwidth{1e10}}, {2, Bandwidth{1e9}}},
                                                            {{3, Bandwidth{2.5e10}}, {2, Bandwidth{3e9}}}};
  for (int trial = 0; trial < 8; ++trial) {
    const Profile p = trial % 2 == 0 ? wide_branches(rng, {{2, 3, 3}, {1, 2}}) : random_dag(rng, 8 + trial / 2);
    const StateSpace space = states_of(p);
    if (space.num_states() > 120) continue;  // the plain recurrence is cubic
    for (const auto& levels : layouts) {
      for (int variant = 0; variant < 12; ++variant) {
        PipeDreamOptions options;
        options.levels = levels;
        options.straight_pipeline = variant % 2 == 1;
        if (variant % 4 >= 2) options.activation_compression = 1.0;
        // Limits from loose to infeasible, relative to all the stash.
        const double fraction = std::array<double, 3>{0.0, 0.5, 0.15}[variant / 4];
        if (fraction > 0.0) options.memory_size = Bytes(int64_t(fraction * total_stash(space)));
        const double plain = testing::plain_pipedream_objective(space, options);
        auto plan = plan_pipedream(p, options);
        INFO("trial " << trial << " states " << space.num_states() << " levels " << levels.size() << " variant "
                      << variant);
        if (std::isinf(plain)) {
          CHECK_FALSE(plan.ok());
          continue;
        }
        REQUIRE(plan.ok());
        CHECK(plan->time_per_minibatch.value == Approx(plain).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("the fast solver equals a decision procedure on tens of thousands of states", "[planner][pipedream][dp]") {
  std::mt19937 rng(1256);
  // A chain, a module of four branches (11 x 12 x 13 x 14 cuts), a chain.
  const Profile p = wide_branches(rng, {{1}, {2}, {10, 11, 12, 13}, {1}, {2}});
  const StateSpace space = states_of(p);
  CHECK(space.num_states() > 20000);
  check_by_decision(space, p, 16, 1e9, true, 1.0);
  check_by_decision(space, p, 16, 1e9, true, std::nullopt);
  check_by_decision(space, p, 4, 1e10, false, 1.0);
  check_by_decision(space, p, 4, 1e10, false, std::nullopt);
  check_by_decision(space, p, 4, 1e10, true, 1.0);
}

TEST_CASE("inception_v3 plans exactly under every layout", "[planner][pipedream][reference]") {
  const auto folder = profiles_folder();
  if (!folder) {
    WARN("BATON_PIPEDREAM_PROFILES is not set: inception_v3 skipped");
    return;
  }
  const Profile profile = load(*folder, "inception_v3");
  const StateSpace space = states_of(profile);
  CHECK(space.num_states() == 221564);
  // One level: the objective against the decision procedure.
  check_by_decision(space, profile, 16, 1e9, true, 1.0);
  check_by_decision(space, profile, 16, 1e9, true, std::nullopt);
  check_by_decision(space, profile, 4, 1e10, false, 1.0);
  check_by_decision(space, profile, 4, 1e10, false, std::nullopt);
  check_by_decision(space, profile, 4, 1e10, true, 1.0);
  // Every layout of the benchmark, straight or not, with and without the
  // memory limit of the reference tests: a plan on all the devices, and the
  // stages' last states a chain of ancestor states ending at the last state.
  const std::vector<std::vector<PipeDreamLevel>> layouts = {{{16, {1e9}}},
                                                            {{4, {1e10}}},
                                                            {{4, {1e10}}, {4, {1.25e9}}},
                                                            {{8, {2.5e10}}, {2, {3.125e9}}},
                                                            {{4, {1e10}}, {3, {1.25e9}}}};
  for (const auto& levels : layouts) {
    for (int variant = 0; variant < 4; ++variant) {
      PipeDreamOptions options;
      options.levels = levels;
      options.straight_pipeline = variant % 2 == 1;
      options.activation_compression = 1.0;
      if (variant >= 2) options.memory_size = Bytes(16'000'000'000);
      const auto start = std::chrono::steady_clock::now();
      auto plan = plan_pipedream(profile, options);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      INFO("levels " << levels.size() << " M " << levels.back().machines << " variant " << variant << " took "
                     << seconds << " s");
      REQUIRE(plan.ok());
      CHECK(std::isfinite(plan->time_per_minibatch.value));
      int devices = 1;
      for (const auto& level : levels) devices *= level.machines;
      int used = 0;
      for (const auto& stage : plan->stages) used += stage.replicas;
      CHECK(used == devices);
      CHECK(plan->stages.back().last_state == space.num_states() - 1);
      for (size_t s = 1; s < plan->stages.size(); ++s) {
        CHECK(plan->stages[s].first_state == plan->stages[s - 1].last_state + 1);
        CHECK(space.is_ancestor(plan->stages[s - 1].last_state, plan->stages[s].last_state));
      }
    }
  }
}
