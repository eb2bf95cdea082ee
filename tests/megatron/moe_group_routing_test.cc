// Group-limited routing (--moe-router-num-groups g, --moe-router-group-topk
// K; Megatron-core's group_limited_topk): a token's k experts come from the
// K of g expert groups it scores highest, so DeepEP's flex dispatcher sends
// it to fewer servers (DeepSeek-V3's node-limited routing, arXiv 2412.19437
// section 2.1.2, at most 4 nodes a token) and GPUs (DeepSeek-V2's
// device-limited routing, arXiv 2405.04434 section 2.2.2). Balanced routing:
// the K groups equally likely, then the k experts among theirs.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "sim/megatron_arguments.h"
#include "sim/megatron_sim.h"
#include "sim/network.h"

namespace baton {
namespace {

using testing::flex_layout;
using testing::kNvlink;
using testing::kNvlinkLatency;
using testing::kRail;
using testing::kRailLatency;
using testing::none_of;

GptModel grouped(int64_t experts, int64_t topk, int64_t groups, int64_t group_topk) {
  GptModel m = testing::small_moe(4, experts, topk);
  m.router_groups = groups;
  m.router_group_topk = group_topk;
  return m;
}

// Seconds per byte of a GPU's one copy of its tokens (the latencies apart).
double slope(const CollectiveTime& time) { return (time(2e8) - time(1e8)).value / 1e8; }

// Every r-subset of 0 .. n - 1, in turn.
void for_each_subset(int n, int r, const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> pick(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) pick[static_cast<size_t>(i)] = i;
  while (true) {
    visit(pick);
    int i = r - 1;
    while (i >= 0 && pick[static_cast<size_t>(i)] == n - r + i) --i;
    if (i < 0) return;
    ++pick[static_cast<size_t>(i)];
    for (int j = i + 1; j < r; ++j) pick[static_cast<size_t>(j)] = pick[static_cast<size_t>(j - 1)] + 1;
  }
}

// By enumeration of every routing: the copies of a token that leave its
// child of m GPUs (of G = etp ep, each GPU holding its ep rank's experts),
// averaged over the token's child and over every choice of K groups and k
// experts among theirs, equally likely.
double leaving_by_enumeration(const GptModel& m, int ep, int etp, int child) {
  const int experts = static_cast<int>(m.experts), g = static_cast<int>(m.router_groups);
  const int group_topk = static_cast<int>(m.router_group_topk), k = static_cast<int>(m.router_topk);
  const int size = experts / g, gpus = ep * etp, children = gpus / child;
  const auto child_of = [&](int expert) {  // the children holding an expert (its etp shards' GPUs)
    std::vector<int> out;
    const int rank = expert / (experts / ep);
    for (int gpu = rank * etp; gpu < (rank + 1) * etp; ++gpu) out.push_back(gpu / child);
    return out;
  };
  double total = 0.0, outcomes = 0.0;
  for_each_subset(g, group_topk, [&](const std::vector<int>& groups) {
    std::vector<int> pool;
    for (int j : groups)
      for (int e = j * size; e < (j + 1) * size; ++e) pool.push_back(e);
    for_each_subset(static_cast<int>(pool.size()), k, [&](const std::vector<int>& chosen) {
      std::vector<bool> touched(static_cast<size_t>(children), false);
      for (int i : chosen)
        for (int c : child_of(pool[static_cast<size_t>(i)])) touched[static_cast<size_t>(c)] = true;
      for (int from = 0; from < children; ++from) {
        for (int c = 0; c < children; ++c) total += (c != from && touched[static_cast<size_t>(c)]) ? 1.0 : 0.0;
        outcomes += 1.0;
      }
    });
  });
  return total / outcomes;
}

TEST_CASE("group routing: DeepSeek-V3's node-limited routing over 8 servers, 4 of them a token", "[megatron][moe]") {
  // 256 experts, top 8, ep 64 over 8 servers: a server holds 32 experts, one
  // group of g = 8. Without groups a token reaches 7 (1 - C(224, 8) / C(256,
  // 8)) = 4.6 other servers; with K = 4 another server is untouched when its
  // group is not among the token's 4 (C(7, 4) / C(8, 4) = 1/2) or none of
  // its 8 experts among the 128 of the 4 lands in it.
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel free = testing::small_moe(4, 256, 8), limited = grouped(256, 8, 8, 4);
  const CollectiveTime plain = flex_dispatch_time(topology, free, flex_layout(1, 64, 64));
  const CollectiveTime node_limited = flex_dispatch_time(topology, limited, flex_layout(1, 64, 64));
  REQUIRE(plain);
  REQUIRE(node_limited);
  const double servers = 7 * (1.0 - (0.5 + 0.5 * none_of(128, 8, 32)));
  // A GPU (4 experts, inside its server's group): 63 others, each untouched
  // when its group is not chosen or none of the 8 lands on its 4 of 128.
  const double gpus = 63 * (1.0 - (0.5 + 0.5 * none_of(128, 8, 4)));
  CHECK(servers / kRail > gpus / kNvlink);  // the rails set the pace
  CHECK(slope(node_limited) == Approx(servers / kRail).epsilon(1e-9));
  CHECK(slope(plain) == Approx(7 * (1.0 - none_of(256, 8, 32)) / kRail).epsilon(1e-9));
  CHECK(node_limited(1e8).value == Approx(servers / kRail * 1e8 + kNvlinkLatency + kRailLatency).epsilon(1e-12));
  // About 3.17 servers a token against 4.62: the rails' bytes cut by 31.5%.
  CHECK(slope(node_limited) / slope(plain) == Approx(0.685).margin(0.001));
}

TEST_CASE("group routing: device-limited, a group a GPU, hypergeometric over a server's 8 groups", "[megatron][moe]") {
  // g = ep = 64 groups of 4 experts, K = 4: a GPU is touched only when its
  // group is among the token's 4 (4 / 64), and then by 1 - C(12, 8) / C(16,
  // 8) of the time; a server holding 8 groups by j of them chosen with
  // chance C(8, j) C(56, 4 - j) / C(64, 4), then 1 - C(16 - 4j, 8) / C(16, 8).
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  const GptModel m = grouped(256, 8, 64, 4);
  const CollectiveTime time = flex_dispatch_time(topology, m, flex_layout(1, 64, 64));
  REQUIRE(time);
  const auto choose = [](double n, double r) {
    double c = 1.0;
    for (int i = 0; i < static_cast<int>(r); ++i) c = c * (n - i) / (i + 1);
    return c;
  };
  double server_untouched = 0.0;
  for (int j = 0; j <= 4; ++j)
    server_untouched += choose(8, j) * choose(56, 4 - j) / choose(64, 4) * none_of(16, 8, 4.0 * j);
  const double servers = 7 * (1.0 - server_untouched);
  const double gpus = 63 * (4.0 / 64) * (1.0 - none_of(16, 8, 4));
  CHECK(slope(time) == Approx(std::max(servers / kRail, gpus / kNvlink)).epsilon(1e-9));
  CHECK(servers < 4.0);  // at most 4 groups, so at most 4 servers, the token's own among them at times
}

TEST_CASE("group routing: groups that straddle GPUs and servers, against every routing enumerated", "[megatron][moe]") {
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  SECTION("one server, E 24 in 6 groups of 4, a GPU 3 of them") {
    // GPU 1 holds experts 3 .. 5: one of group 0's, two of group 1's.
    const GptModel m = grouped(24, 2, 6, 2);
    const double leaving = leaving_by_enumeration(m, 8, 1, 1);
    CHECK(slope(flex_dispatch_time(topology, m, flex_layout(1, 8, 8))) == Approx(leaving / kNvlink).epsilon(1e-9));
  }
  SECTION("one server, etp 2: an ep rank's 6 experts a group and a half, on both its GPUs") {
    const GptModel m = grouped(24, 2, 6, 2);
    MegatronLayout l = flex_layout(2, 8, 4);  // etp = t = 2, ep 4: G = 8 GPUs
    const double leaving = leaving_by_enumeration(m, 4, 2, 1);
    CHECK(slope(flex_dispatch_time(topology, m, l)) == Approx(leaving / kNvlink).epsilon(1e-9));
  }
  SECTION("two servers, E 48 in 3 groups of 16: a server a group and a half, k 3 from 2 groups") {
    const GptModel m = grouped(48, 3, 3, 2);
    const double gpus = leaving_by_enumeration(m, 16, 1, 1), servers = leaving_by_enumeration(m, 16, 1, 8);
    CHECK(slope(flex_dispatch_time(topology, m, flex_layout(1, 16, 16))) ==
          Approx(std::max(gpus / kNvlink, servers / kRail)).epsilon(1e-9));
  }
  SECTION("one group of all the experts is routing without groups") {
    const GptModel m = grouped(24, 2, 1, 1);
    CHECK(
        slope(flex_dispatch_time(topology, m, flex_layout(1, 8, 8))) ==
        Approx(slope(flex_dispatch_time(topology, testing::small_moe(4, 24, 2), flex_layout(1, 8, 8)))).epsilon(1e-12));
    CHECK(leaving_by_enumeration(m, 8, 1, 1) == Approx(7 * (1.0 - none_of(24, 2, 3))).epsilon(1e-12));
  }
}

TEST_CASE("group routing: the alltoall and allgather dispatchers move the same bytes with groups or without",
          "[megatron][moe]") {
  // alltoall sends each of the k copies to its expert's rank whatever the
  // groups; allgather gathers every token.
  const Topology topology = testing::shipped_topology("h100_32x8.json");
  for (const MoeDispatcher dispatcher : {MoeDispatcher::kAllToAll, MoeDispatcher::kAllGather}) {
    MegatronLayout l = flex_layout(1, 64, 64);
    l.moe_dispatcher = dispatcher;
    CHECK(expert_dispatch_time(topology, grouped(256, 8, 8, 4), l)(1e8) ==
          expert_dispatch_time(topology, testing::small_moe(4, 256, 8), l)(1e8));
  }
}

TEST_CASE("group routing: refused where Megatron refuses it, or where its top-k could not route",
          "[megatron][moe][bad-input]") {
  const auto refusal = [](const GptModel& model) {
    const Status status = check_megatron_layout(model, flex_layout(1, 8, 8), 64);
    return status.ok() ? std::string("(accepted)") : status.error().message;
  };
  CHECK(refusal(grouped(256, 8, 8, 4)) == "(accepted)");
  CHECK(refusal(grouped(256, 8, 8, 0)) == "(accepted)");  // g alone: Megatron routes without groups
  CHECK(refusal(grouped(256, 8, 0, 4)) ==
        "--moe-router-group-topk needs --moe-router-num-groups, as Megatron requires");
  CHECK(refusal(grouped(256, 8, 6, 4)) ==
        "--num-experts 256 is not divisible by --moe-router-num-groups 6, as Megatron requires");
  CHECK(refusal(grouped(256, 8, 512, 4)) ==
        "--moe-router-num-groups 512 must be at most --num-experts 256: a group holds whole experts");
  CHECK(refusal(grouped(256, 8, 8, 16)) == "--moe-router-group-topk 16 must be at most --moe-router-num-groups 8");
  CHECK(refusal(grouped(256, 2, 8, 4)) ==
        "--moe-router-group-topk 4 must be at most --moe-router-topk 2: Megatron scores a group by its top k / K "
        "experts' scores, none at K > k");
  CHECK(refusal(grouped(256, 8, 128, 2)) ==
        "--moe-router-topk 8 is more than the 4 experts of --moe-router-group-topk 2 groups of 2: a token's experts "
        "come from its groups");
  GptModel dense = testing::llama(4, 2048, 16, 4, 5632, 32000);
  dense.router_groups = 8;
  const Status status = check_megatron_layout(dense, megatron_layout(1, 1, 8, 1, 8), 64);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message == "--moe-router-num-groups needs --num-experts");
}

TEST_CASE("group routing: the plan file carries both flags and reads them back", "[megatron][moe]") {
  const GptModel m = grouped(256, 8, 8, 4);
  const MegatronLayout l = flex_layout(1, 8, 8);
  const nlohmann::json arguments = megatron_arguments(m, l);
  CHECK(arguments["moe_router_num_groups"] == 8);
  CHECK(arguments["moe_router_group_topk"] == 4);
  const auto back = megatron_from_arguments(arguments, "plan.megatron");
  REQUIRE(back.ok());
  CHECK(back->model.router_groups == 8);
  CHECK(back->model.router_group_topk == 4);
  CHECK_FALSE(megatron_arguments(testing::small_moe(4, 256, 8), l).contains("moe_router_num_groups"));
  nlohmann::json none = arguments;
  none["moe_router_group_topk"] = nullptr;  // Megatron's None
  const auto without = megatron_from_arguments(none, "plan.megatron");
  REQUIRE(without.ok());
  CHECK_FALSE(without->model.group_limited());
}

}  // namespace
}  // namespace baton
