// The Megatron layout search (planner/megatron_search.h): exact over what it
// enumerates, pruning by its lower bound never loses the best, pinned axes
// stay pinned.
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "tests/catch_compat.h"

#include "tests/megatron/megatron_test_support.h"

#include "planner/megatron_search.h"

namespace baton {
namespace {

Topology shipped(const std::string& name) { return testing::shipped_topology(name); }

const GptModel kModel{16, 2048, 16, 1024, 50257};

TEST_CASE("megatron search: the bound prunes without losing the fastest layout", "[planner][megatron]") {
  const Topology topology = shipped("a100_4x8.json");
  const auto pruned = search_megatron_layouts(kModel, 64, false, {}, topology, 3);
  // Keeping every layout: nothing can be pruned, every fitting layout is simulated.
  const auto all = search_megatron_layouts(kModel, 64, false, {}, topology, 1000000);
  REQUIRE(pruned.ok());
  REQUIRE(all.ok());
  CHECK(all->pruned == 0);
  CHECK(all->simulated == all->enumerated - all->not_fitting);
  CHECK(pruned->pruned > 0);
  CHECK(pruned->simulated < all->simulated);
  REQUIRE(pruned->best.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(pruned->best[i].iteration_time == all->best[i].iteration_time);
  // Every simulated time is at least its bound.
  for (const MegatronCandidate& c : all->best) CHECK(c.iteration_time.value >= c.lower_bound.value * (1 - 1e-12));
  // And the chosen one is the simulator's figure for that layout.
  const auto again = predict_megatron(kModel, pruned->best.front().layout, topology, false);
  REQUIRE(again.ok());
  CHECK(again->iteration_time == pruned->best.front().iteration_time);
}

TEST_CASE("megatron search: pinned axes stay pinned, tensor parallelism stays inside a server", "[planner][megatron]") {
  const Topology topology = shipped("a100_4x8.json");
  MegatronAxes fixed;
  fixed.tensor = 4;
  fixed.recompute = Recompute::kFull;
  const auto found = search_megatron_layouts(kModel, 64, false, fixed, topology, 1000000);
  REQUIRE(found.ok());
  for (const MegatronCandidate& c : found->best) {
    CHECK(c.layout.tensor == 4);
    CHECK(c.layout.recompute == Recompute::kFull);
    CHECK(c.layout.gpus() == 32);
  }
  const auto free = search_megatron_layouts(kModel, 64, false, {}, topology, 1000000);
  REQUIRE(free.ok());
  for (const MegatronCandidate& c : free->best) CHECK(8 % c.layout.tensor == 0);
}

TEST_CASE("megatron search: nothing fits, said so", "[planner][megatron]") {
  // GPT-3 175B on 32 A100s: 16 bytes per parameter over at most t p = 32 GPUs
  // is 87 GB per GPU before any activation (d = 1 leaves no optimizer to shard).
  const Topology topology = shipped("a100_4x8.json");
  const auto found = search_megatron_layouts(GptModel{96, 12288, 96, 2048, 50257}, 32, false, {}, topology);
  REQUIRE_FALSE(found.ok());
  const std::string& message = found.error().message;
  CHECK(message.find("fits the 80 GiB") != std::string::npos);
  // It names the least memory that would fit a layout: with that much (to the
  // 0.1 GiB it prints, rounded up) one fits; with 0.2 GiB less none does.
  const std::string marker = "the least peak of any is ";
  const size_t at = message.find(marker);
  REQUIRE(at != std::string::npos);
  const double least = std::stod(message.substr(at + marker.size()));
  CHECK(least > 80.0);
  Topology bigger = topology;
  bigger.device.memory = Bytes::from_gib(least + 0.05);
  CHECK(search_megatron_layouts(GptModel{96, 12288, 96, 2048, 50257}, 32, false, {}, bigger).ok());
  bigger.device.memory = Bytes::from_gib(least - 0.2);
  CHECK_FALSE(search_megatron_layouts(GptModel{96, 12288, 96, 2048, 50257}, 32, false, {}, bigger).ok());
}

TEST_CASE("megatron search: a GPU count no layout uses is said so, with the largest count below that has one",
          "[planner][megatron]") {
  // 10 layers, 2 heads, batch 15 on 32 GPUs: d must divide 15 and 32, so d
  // 1 and t p = 32 with t in {1, 2}: p 16 or 32, more stages than layers. 30
  // GPUs have one (t 2, p 1, d 15); 31 none (d 1 and t p = 31).
  const Topology topology = shipped("a100_4x8.json");
  const GptModel model{10, 2048, 2, 1024, 50257};
  const auto found = search_megatron_layouts(model, 15, false, {}, topology);
  REQUIRE_FALSE(found.ok());
  const std::string& message = found.error().message;
  CHECK(message.find("no layout uses 32 GPUs") != std::string::npos);
  const std::string marker = "--gpus ";
  const size_t at = message.find(marker);
  REQUIRE(at != std::string::npos);
  const int suggested = std::stoi(message.substr(at + marker.size()));
  // The suggestion has a layout, and no count between it and 32 has one.
  MegatronAxes fixed;
  fixed.gpus = suggested;
  const auto there = search_megatron_layouts(model, 15, false, fixed, topology);
  REQUIRE(there.ok());
  for (const MegatronCandidate& c : there->best) CHECK(c.layout.gpus() == suggested);
  for (int count = suggested + 1; count < 32; ++count) {
    fixed.gpus = count;
    const auto none = search_megatron_layouts(model, 15, false, fixed, topology);
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().message.find(fmt::format("no layout uses {} GPUs", count)) != std::string::npos);
  }
  fixed.gpus = 33;
  const auto over = search_megatron_layouts(model, 15, false, fixed, topology);
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().message.find("has 32") != std::string::npos);
}

TEST_CASE("megatron search: d pinned takes any t x p within the topology", "[planner][megatron]") {
  const Topology topology = shipped("a100_4x8.json");
  MegatronAxes fixed;
  fixed.data = 3;  // 3 does not divide 32: layouts of 3, 6, ... 30 GPUs
  const auto found = search_megatron_layouts(kModel, 48, false, fixed, topology, 1000000);
  REQUIRE(found.ok());
  std::set<int> counts;
  for (const MegatronCandidate& c : found->best) {
    CHECK(c.layout.data == 3);
    CHECK(c.layout.gpus() <= 32);
    counts.insert(c.layout.gpus());
  }
  CHECK(counts.size() > 1);
  // Each is what the search finds with that GPU count pinned.
  for (int count : counts) {
    MegatronAxes exact;
    exact.gpus = count;
    exact.data = 3;
    const auto same = search_megatron_layouts(kModel, 48, false, exact, topology, 1);
    REQUIRE(same.ok());
    CHECK(same->best.front().layout.gpus() == count);
  }
}

TEST_CASE("megatron search: at sequence 8192 a 39B model fits 32 A100s only with recomputation",
          "[planner][megatron]") {
  // The "must recompute" case of tests/planner_cases: 48 layers, h 8192, 64
  // heads, s 8192, batch 512. Without recomputation every layout's activations
  // overflow 80 GB (Korthikanti: s b h (10 + 24/t + 5 a s / (h t)) bytes per
  // layer, the 5 a s / h = 320 term alone 21 GB per layer at t 1).
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  const GptModel model{48, 8192, 64, 8192, 50257};
  MegatronAxes none;
  none.recompute = Recompute::kNone;
  const auto without = search_megatron_layouts(model, 512, false, none, topology, 1);
  REQUIRE_FALSE(without.ok());
  CHECK(without.error().message.find("no layout") != std::string::npos);
  const auto free = search_megatron_layouts(model, 512, false, {}, topology, 1);
  REQUIRE(free.ok());
  CHECK(free->best.front().layout.recompute != Recompute::kNone);
  CHECK(free->best.front().peak_memory <= topology.device.memory);
}

TEST_CASE("megatron search: the zero-bubble schedules are searched and can be pinned either way",
          "[planner][megatron]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  const auto all = search_megatron_layouts(kModel, 64, false, {}, topology, 1000000);
  REQUIRE(all.ok());
  int zero_bubble = 0;
  for (const MegatronCandidate& c : all->best) {
    if (c.layout.zero_bubble == 0) continue;
    ++zero_bubble;
    CHECK(c.layout.pipeline >= 2);
    CHECK(c.layout.layers_per_virtual_stage == 0);
  }
  CHECK(zero_bubble > 0);
  // Pinned on p 4 (the layouts of every p simulated once above suffice).
  for (int pin : {0, 2}) {
    MegatronAxes fixed;
    fixed.pipeline = 4;
    fixed.zero_bubble = pin;
    const auto pinned = search_megatron_layouts(kModel, 64, false, fixed, topology, 1000000);
    REQUIRE(pinned.ok());
    for (const MegatronCandidate& c : pinned->best) CHECK(c.layout.zero_bubble == pin);
  }
}

TEST_CASE("megatron search: ZB-V is searched where 2p chunks and 2p microbatches fit, and a V can be pinned either way",
          "[planner][megatron]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  const auto all = search_megatron_layouts(kModel, 64, false, {}, topology, 1000000);
  REQUIRE(all.ok());
  std::set<VSchedule> seen;
  for (const MegatronCandidate& c : all->best) {
    if (c.layout.v_schedule == VSchedule::kNone) continue;
    seen.insert(c.layout.v_schedule);
    CHECK(c.layout.pipeline >= 2);
    CHECK(c.layout.layers_per_virtual_stage == 0);
    CHECK(c.layout.zero_bubble == 0);
    CHECK(c.layout.microbatches() >= 2 * c.layout.pipeline);
    CHECK(c.layout.split_layers(kModel) % (2 * c.layout.pipeline) == 0);
  }
  // DualPipeV only when pinned: no Megatron-LM runs it, and the search emits launch flags.
  CHECK(seen == std::set<VSchedule>{VSchedule::kZbV});
  for (VSchedule pin : {VSchedule::kNone, VSchedule::kDualPipeV}) {  // on p 4, as above
    MegatronAxes fixed;
    fixed.pipeline = 4;
    fixed.v_schedule = pin;
    const auto pinned = search_megatron_layouts(kModel, 64, false, fixed, topology, 1000000);
    REQUIRE(pinned.ok());
    REQUIRE_FALSE(pinned->best.empty());
    for (const MegatronCandidate& c : pinned->best) CHECK(c.layout.v_schedule == pin);
  }
}

TEST_CASE("megatron search: layers that p does not divide are split unevenly, first and last stages lighter",
          "[planner][megatron]") {
  // 30 blocks on p 4: (7, 8, 8, 7), (6, 8, 8, 8) or (8, 8, 8, 6): m = (30 + k_f + k_l) / 4 with k_f + k_l = 2.
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  const GptModel model{30, 2048, 16, 1024, 50257};
  MegatronAxes fixed;
  fixed.pipeline = 4;
  const auto found = search_megatron_layouts(model, 64, false, fixed, topology, 1000000);
  REQUIRE(found.ok());
  std::set<std::vector<int>> splits, chunks, v_chunks;
  for (const MegatronCandidate& c : found->best) {
    const std::vector<int> blocks = c.layout.stage_layers(model);
    CHECK(std::accumulate(blocks.begin(), blocks.end(), 0) == 30);
    const bool v = c.layout.v_schedule != VSchedule::kNone;
    (v ? v_chunks : c.layout.layers_per_virtual_stage > 0 ? chunks : splits).insert(blocks);
    // Interleaving and the V need p (2p) to divide the layers they cut: 30 +
    // 2 counted (the embedding and the loss), never the 30 blocks alone.
    if (v || c.layout.layers_per_virtual_stage > 0) CHECK((c.layout.embedding_in_split && c.layout.loss_in_split));
  }
  CHECK(splits == std::set<std::vector<int>>{{7, 8, 8, 7}, {6, 8, 8, 8}, {8, 8, 8, 6}});
  // 32 counted layers on p 4 are 8 per GPU: chunks of 4, 2 or 1 counted layers
  // (v = 2, 4, 8), the first and last chunk a block fewer.
  const auto accounted = [](int per, int v) {
    std::vector<int> blocks(static_cast<size_t>(4 * v), per);
    blocks.front() -= 1;
    blocks.back() -= 1;
    return blocks;
  };
  CHECK(chunks == std::set<std::vector<int>>{accounted(4, 2), accounted(2, 4), accounted(1, 8)});
  // The V: 2p = 8 chunks of 4 counted layers.
  CHECK(v_chunks == std::set<std::vector<int>>{accounted(4, 2)});
}

TEST_CASE("megatron search: every tensor x pipeline family says its best time or why it has none",
          "[planner][megatron]") {
  const Topology topology = testing::shipped_topology("a100_4x8.json");
  const auto found = search_megatron_layouts(kModel, 64, false, {}, topology, 3);
  REQUIRE(found.ok());
  int enumerated = 0, simulated = 0, pruned = 0, not_fitting = 0;
  bool across_servers = false;
  for (const MegatronFamily& f : found->families) {
    INFO("t " << f.tensor << " p " << f.pipeline << ": " << f.reason);
    enumerated += f.enumerated;
    simulated += f.simulated;
    pruned += f.pruned;
    not_fitting += f.not_fitting;
    CHECK(f.enumerated == f.not_fitting + f.pruned + f.simulated);
    if (f.simulated > 0) {
      CHECK(f.reason.empty());
      CHECK(f.best_time.value > 0.0);
    } else {
      CHECK_FALSE(f.reason.empty());
    }
    // 16 heads: t 16 would span two 8-GPU servers.
    if (f.tensor == 16) {
      across_servers = true;
      CHECK(f.pipeline == 0);
      CHECK(f.reason == "tensor parallelism across servers (8 GPUs per server)");
    }
  }
  CHECK(across_servers);
  CHECK(enumerated == found->enumerated);
  CHECK(simulated == found->simulated);
  CHECK(pruned == found->pruned);
  CHECK(not_fitting == found->not_fitting);
  // The chosen layout's family holds its time.
  const MegatronLayout& best = found->best.front().layout;
  for (const MegatronFamily& f : found->families)
    if (f.tensor == best.tensor && f.pipeline == best.pipeline)
      CHECK(f.best_time == found->best.front().iteration_time);
}

TEST_CASE("context parallel: the search splits the sequence only with FlashAttention, and its bound holds",
          "[planner][megatron][context]") {
  const Topology topology = shipped("a100_4x8.json");
  GptModel m{8, 2048, 16, 16384, 50257};
  m.flash_attention = true;
  // The axes context parallelism adds (c and its type) free over t, p, d,
  // interleaving and sequence parallelism; the others pinned, so that every
  // layout can be simulated in a test's time.
  MegatronAxes base;
  base.micro_batch = 1;
  base.recompute = Recompute::kNone;
  base.distributed_optimizer = true;
  base.zero_bubble = 0;
  base.v_schedule = VSchedule::kNone;
  const auto all = search_megatron_layouts(m, 16, true, base, topology, 1000000);
  REQUIRE(all.ok());
  CHECK(all->pruned == 0);
  CHECK(all->simulated == all->enumerated - all->not_fitting);
  bool split = false;
  std::set<ContextComm> types;
  for (const MegatronCandidate& c : all->best) {
    split = split || c.layout.context > 1;
    CHECK(c.layout.gpus() == 32);
    CHECK(c.iteration_time.value >= c.lower_bound.value * (1 - 1e-12));
    if (c.layout.context < 2) continue;
    // The communication types are searched, and a2a only where each rank keeps whole heads.
    types.insert(c.layout.context_comm);
    if (c.layout.context_comm == ContextComm::kAllToAll) CHECK((16 / c.layout.tensor) % c.layout.context == 0);
  }
  CHECK(split);
  CHECK(types.size() == 3);
  const auto pruned = search_megatron_layouts(m, 16, true, base, topology, 3);
  REQUIRE(pruned.ok());
  CHECK(pruned->pruned > 0);
  REQUIRE(pruned->best.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(pruned->best[i].iteration_time == all->best[i].iteration_time);
  // Without FlashAttention's core, c stays 1; pinned, c and the type stay pinned.
  m.flash_attention = false;
  const auto plain = search_megatron_layouts(m, 16, true, base, topology, 1000000);
  REQUIRE(plain.ok());
  for (const MegatronCandidate& c : plain->best) CHECK(c.layout.context == 1);
  m.flash_attention = true;
  MegatronAxes fixed = base;
  fixed.context = 4;
  fixed.context_comm = ContextComm::kAllGather;
  const auto pinned = search_megatron_layouts(m, 16, true, fixed, topology, 1000000);
  REQUIRE(pinned.ok());
  REQUIRE_FALSE(pinned->best.empty());
  for (const MegatronCandidate& c : pinned->best) {
    CHECK(c.layout.context == 4);
    CHECK(c.layout.context_comm == ContextComm::kAllGather);
  }
}

}  // namespace
}  // namespace baton
