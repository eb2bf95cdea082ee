// Predicts the measured figures of the Zero Bubble paper (Qi et al., ICLR
// 2024; data/groundtruth/zero_bubble) with the transformer model of
// sim/megatron_sim.h and prints, in Markdown for bench/RESULTS.md:
// - Table 6: the per-stage times T_F, T_B (input gradient), T_W (weight
//   gradient) and T_comm of a middle stage, against the GPU kernel model's
//   (the profile of `baton profile analytic --arch gpt`);
// - Table 5: the bubble rates the authors computed from Table 6's times,
//   against the simulator's schedules run on those same times (p equal
//   stages, each transfer T_comm): a check of the schedules alone;
// - Table 4: the iteration time (from samples per GPU per second) and the
//   peak memory of every schedule, against `simulate`'s prediction of the
//   same layout in Megatron's flags.
//
// Every row is run as the paper states it: pipeline parallelism only (t 1,
// d 1, GPUs = p), sequence 1024, GPT-2's vocabulary, no recomputation, fp16
// (the loss's passes in half precision, --fp16-lm-cross-entropy, which the
// paper does not state: its last stage's measured time leaves no room for the
// fp32 passes of Megatron's default; --fp32-loss runs those),
// the embedding and the loss counted as layers of the split (the first and
// last stage hold one block fewer: --account-for-embedding-in-pipeline-split
// --account-for-loss-in-pipeline-split). The schedules: 1F1B and 1F1B-I
// (Megatron's interleaved 1F1B, one layer per chunk) are baton's own; ZB-1p
// and ZB-2p are the authors' automatically searched schedules under a memory
// limit of p and 2p microbatches, with the optimizer step's synchronization
// bypassed, which baton does not model: they are held against its
// handcrafted ZB-H1 and ZB-H2 (the same memory limits, synchronous step), and
// against the authors' greedy scheduler on baton's stage times
// (--zero-bubble-heuristic, sim/zb_heuristic.h: their search without its
// integer program), each group reported apart.
//
// Usage: groundtruth_zero_bubble [FILE [TOPOLOGY]]
//   (defaults: data/groundtruth/zero_bubble/zero_bubble.md and
//   topologies/a100_4x8.json, from the repository root). The tables are found
//   by their column names, so a file of the same form with more rows will do.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_support.h"
#include "bench/markdown_tables.h"
#include "sim/megatron_sim.h"
#include "sim/simulator.h"
#include "sim/zb_heuristic.h"

namespace {

using baton::GptModel;
using baton::MegatronLayout;

constexpr const char* kProgram = "groundtruth_zero_bubble";
using Table = baton::bench::MarkdownTable;

const Table& table_with(const std::vector<Table>& tables, const std::vector<std::string>& columns, const char* what) {
  return baton::bench::table_with(tables, columns, kProgram, what);
}

double number(const std::string& cell) { return baton::bench::cell_number(cell, kProgram); }

// Table 3: a model and the p and micro-batch size it ran with.
struct Setup {
  GptModel model;
  int pipeline = 0;
  int micro_batch = 0;
};

// `half_loss`: the loss in half precision (Megatron's --fp16-lm-cross-entropy).
std::map<std::string, Setup> read_setups(const Table& t, bool half_loss) {
  std::map<std::string, Setup> out;
  for (const auto& r : t.rows) {
    Setup s;
    s.model = GptModel{
        static_cast<int64_t>(number(r[t.column("layers")])), static_cast<int64_t>(number(r[t.column("hidden")])),
        static_cast<int64_t>(number(r[t.column("heads")])), static_cast<int64_t>(number(r[t.column("seq")])), 50257};
    s.model.half_loss = half_loss;
    s.pipeline = static_cast<int>(number(r[t.column("p")]));
    s.micro_batch = static_cast<int>(number(r[t.column("microbatch size")]));
    out[r[t.column("model")]] = s;
  }
  return out;
}

const Setup& setup_of(const std::map<std::string, Setup>& setups, const std::string& name) {
  const auto it = setups.find(name);
  if (it == setups.end()) {
    std::fprintf(stderr, "groundtruth_zero_bubble: model '%s' is not in Table 3\n", name.c_str());
    std::exit(2);
  }
  return it->second;
}

// The layout as the paper ran it; `schedule` a Table 4 column name.
MegatronLayout layout_of(const Setup& s, int microbatches, const std::string& schedule) {
  MegatronLayout l = baton::megatron_layout(1, s.pipeline, 1, s.micro_batch, microbatches * s.micro_batch);
  l.embedding_in_split = true;
  l.loss_in_split = true;
  if (schedule == "1F1B-I") l.layers_per_virtual_stage = 1;
  if (schedule == "ZB-1p" || schedule == "ZB-H1") l.zero_bubble = 1;
  if (schedule == "ZB-2p" || schedule == "ZB-H2") l.zero_bubble = 2;
  return l;
}

double percent(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

double mean_abs(const std::vector<double>& errors) {
  double sum = 0.0;
  for (double e : errors) sum += std::abs(e);
  return errors.empty() ? 0.0 : sum / static_cast<double>(errors.size());
}

template <typename T>
T take(baton::Result<T> result, const std::string& what) {
  if (!result) {
    std::fprintf(stderr, "groundtruth_zero_bubble: %s: %s\n", what.c_str(), result.error().message.c_str());
    std::exit(1);
  }
  return std::move(*result);
}

// Table 6 against the kernel model: a middle stage's blocks.
void per_stage_times(const Table& t, const std::map<std::string, Setup>& setups, const baton::Topology& topology) {
  std::printf(
      "| model | p | m | blocks | T_F measured | baton | T_B measured | baton | T_W measured | baton | "
      "F+B+W measured | baton | T_comm measured | baton "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<double> f_errors, b_errors, w_errors, sum_errors;
  for (const auto& r : t.rows) {
    const Setup& s = setup_of(setups, r[t.column("model")]);
    const int m = static_cast<int>(number(r[t.column("m")]));
    const MegatronLayout layout = layout_of(s, m, "1F1B");
    const std::string name = fmt::format("{} m {}", r[t.column("model")], m);
    if (auto ok = baton::check_megatron_layout(s.model, layout, topology.num_devices()); !ok) {
      std::fprintf(stderr, "groundtruth_zero_bubble: %s: %s\n", name.c_str(), ok.error().message.c_str());
      std::exit(1);
    }
    const baton::MegatronProfile profile = take(baton::megatron_profile_on(s.model, layout, topology), name);
    const baton::Layer& block = profile.profile.layers[1];
    const double blocks = static_cast<double>(layout.split_layers(s.model) / layout.pipeline);
    const double f = blocks * block.forward.value * 1e3;
    const double b = blocks * block.backward_input.value_or(block.backward).value * 1e3;
    const double w = blocks * block.backward_weight.value_or(baton::Seconds(0.0)).value * 1e3;
    // One activation between neighbours inside a server (b s h fp16 values).
    const baton::Level& inner = topology.levels.front();
    const double comm = (inner.latency + baton::transfer_time(block.output_bytes, inner.bandwidth())).value * 1e3;
    const double mf = number(r[t.column("T_F")]), mb = number(r[t.column("T_B")]), mw = number(r[t.column("T_W")]),
                 mc = number(r[t.column("T_comm")]);
    f_errors.push_back(percent(f, mf));
    b_errors.push_back(percent(b, mb));
    w_errors.push_back(percent(w, mw));
    sum_errors.push_back(percent(f + b + w, mf + mb + mw));
    std::printf(
        "| %s | %d | %d | %.0f | %.3f | %.3f (%+.1f%%) | %.3f | %.3f (%+.1f%%) | %.3f | %.3f (%+.1f%%) | %.3f | %.3f "
        "(%+.1f%%) | %.3f | %.3f |\n",
        r[t.column("model")].c_str(), s.pipeline, m, blocks, mf, f, f_errors.back(), mb, b, b_errors.back(), mw, w,
        w_errors.back(), mf + mb + mw, f + b + w, sum_errors.back(), mc, comm);
  }
  std::printf("\nmean absolute error over %zu rows: T_F %.1f%%, T_B %.1f%%, T_W %.1f%%, F+B+W %.1f%%\n\n",
              sum_errors.size(), mean_abs(f_errors), mean_abs(b_errors), mean_abs(w_errors), mean_abs(sum_errors));
}

// Table 5 against the schedules on Table 6's times: p stages of one layer,
// each F = T_F and a backward of T_B + T_W split into I and W, every
// transfer T_comm (a link's latency). Bubble rate = (cost - m (T_F + T_B +
// T_W)) / cost, cost = the longest, over stages, from a stage's first compute
// to its last (the optimizer step left out).
void bubble_rates(const Table& rates, const Table& stages) {
  std::printf("| model | p | m | schedule | paper | baton | difference |\n|---|---|---|---|---|---|---|\n");
  std::vector<double> differences;
  for (const auto& r : rates.rows) {
    const std::string model = r[rates.column("model")];
    const int p = static_cast<int>(number(r[rates.column("p")]));
    const int m = static_cast<int>(number(r[rates.column("m")]));
    const std::vector<std::string>* times = nullptr;
    for (const auto& row : stages.rows)
      if (row[stages.column("model")] == model && static_cast<int>(number(row[stages.column("m")])) == m &&
          static_cast<int>(number(row[stages.column("p")])) == p)
        times = &row;
    if (!times) {
      std::fprintf(stderr, "groundtruth_zero_bubble: Table 5's %s p %d m %d has no Table 6 row\n", model.c_str(), p, m);
      std::exit(2);
    }
    const double f = number((*times)[stages.column("T_F")]), b = number((*times)[stages.column("T_B")]),
                 w = number((*times)[stages.column("T_W")]), comm = number((*times)[stages.column("T_comm")]);
    baton::Profile profile = baton::make_uniform_profile(p, baton::Seconds::from_ms(f), baton::Seconds::from_ms(b + w),
                                                         baton::Bytes(0), baton::Bytes(0));
    for (baton::Layer& layer : profile.layers) {
      layer.backward_input = baton::Seconds::from_ms(b);
      layer.backward_weight = baton::Seconds::from_ms(w);
    }
    const baton::Topology topology = baton::make_flat_topology(p, 100.0, baton::Seconds::from_ms(comm));
    std::string split;
    for (int s = 0; s < p; ++s) split += (s ? "," : "") + std::to_string(s) + "-" + std::to_string(s + 1);
    for (const auto& [column, schedule] :
         {std::pair{"1F1B", baton::Schedule::kOneFOneB}, std::pair{"ZB-H1", baton::Schedule::kZbH1},
          std::pair{"ZB-H2", baton::Schedule::kZbH2}}) {
      if (!rates.has(column)) continue;
      baton::Plan plan;
      plan.schedule = schedule;
      plan.batches = m;
      plan.stages = take(baton::parse_stages(split), "stages");
      if (auto ok = baton::assign_devices(plan, topology); !ok) {
        std::fprintf(stderr, "groundtruth_zero_bubble: %s\n", ok.error().message.c_str());
        std::exit(1);
      }
      const baton::Simulation sim =
          take(baton::simulate_plan(plan, profile, topology, baton::SimOptions{}), model + " " + column);
      const double cost = baton::longest_compute_span(sim.trace).value;
      const double rate = (cost - m * (f + b + w) * 1e-3) / cost;
      const double paper = number(r[rates.column(column)]);
      differences.push_back(rate - paper);
      std::printf("| %s | %d | %d | %s | %.4f | %.4f | %+.4f |\n", model.c_str(), p, m, column, paper, rate,
                  rate - paper);
    }
  }
  double worst = 0.0;
  for (double d : differences) worst = std::max(worst, std::abs(d));
  std::printf("\n%zu bubble rates, the largest difference %.5f\n\n", differences.size(), worst);
}

// ZB-1p and ZB-2p on Table 6's times by the authors' greedy scheduler
// (sim/zb_heuristic.h; the paper's figures come from that order refined by an
// integer program): p equal stages, each transfer T_comm, memory limits of p
// and 2p microbatches with baton's share of a microbatch's activations that
// waits for the W pass. Against Table 5's columns ZB-1p and ZB-2p where the
// file has them.
void greedy_bubble_rates(const Table& rates, const Table& stages, const std::map<std::string, Setup>& setups) {
  std::printf(
      "| model | p | m | schedule | paper | baton's greedy order | difference |\n|---|---|---|---|---|---|---|\n");
  for (const auto& r : rates.rows) {
    const std::string model = r[rates.column("model")];
    const int p = static_cast<int>(number(r[rates.column("p")]));
    const int m = static_cast<int>(number(r[rates.column("m")]));
    for (const auto& row : stages.rows) {
      if (row[stages.column("model")] != model || static_cast<int>(number(row[stages.column("m")])) != m ||
          static_cast<int>(number(row[stages.column("p")])) != p)
        continue;
      const double f = number(row[stages.column("T_F")]), b = number(row[stages.column("T_B")]),
                   w = number(row[stages.column("T_W")]), comm = number(row[stages.column("T_comm")]);
      const Setup& setup = setup_of(setups, model);
      const double share = baton::weight_pass_share(setup.model, layout_of(setup, m, "ZB-1p"));
      for (int factor : {1, 2}) {
        const baton::ZbHeuristicInput in = baton::zb_equal_stages(p, m, f, b, w, comm, factor * p, share);
        const baton::ZbHeuristicOrder order = take(baton::zb_heuristic_order(in), model + " greedy");
        const double rate = (order.span - m * (f + b + w)) / order.span;
        const std::string column = fmt::format("ZB-{}p", factor);
        if (rates.has(column)) {
          const double paper = number(r[rates.column(column)]);
          std::printf("| %s | %d | %d | %s | %.4f | %.4f | %+.4f |\n", model.c_str(), p, m, column.c_str(), paper, rate,
                      rate - paper);
        } else {
          std::printf("| %s | %d | %d | %s | - | %.4f | - |\n", model.c_str(), p, m, column.c_str(), rate);
        }
      }
    }
  }
  std::printf("\n");
}

// Table 4 against simulate: every schedule column it has.
void iteration_times(const Table& t, const std::map<std::string, Setup>& setups, const baton::Topology& topology) {
  std::printf(
      "| model | m | schedule (paper) | baton | measured ms | predicted ms | error | memory measured GB | predicted "
      "GiB | error |\n|---|---|---|---|---|---|---|---|---|---|\n");
  std::map<std::string, std::vector<double>> time_errors, memory_errors;
  for (const auto& r : t.rows) {
    const std::string model = r[t.column("model")];
    const Setup& s = setup_of(setups, model);
    const int m = static_cast<int>(number(r[t.column("m")]));
    for (const char* schedule : {"1F1B", "1F1B-I", "ZB-1p", "ZB-2p", "ZB-H1", "ZB-H2"})
      for (bool heuristic : {false, true}) {
        const bool searched = std::string(schedule).rfind("ZB-", 0) == 0 && std::string(schedule).back() == 'p';
        if (!t.has(schedule) || (heuristic && !searched)) continue;
        MegatronLayout layout = layout_of(s, m, schedule);
        layout.zero_bubble_heuristic = heuristic;
        const std::string name = fmt::format("{} m {} {}", model, m, schedule);
        const baton::MegatronPrediction p =
            take(baton::predict_megatron(s.model, layout, topology, false, nullptr, false), name);
        // Samples per GPU per second: the iteration's m b samples on p GPUs.
        const double measured_ms = 1e3 * m * s.micro_batch / (number(r[t.column(schedule)]) * s.pipeline);
        const double predicted_ms = p.iteration_time.value * 1e3;
        const std::string same = heuristic                 ? fmt::format("ZB-{}p, greedy", layout.zero_bubble)
                                 : layout.zero_bubble == 1 ? "ZB-H1"
                                 : layout.zero_bubble == 2 ? "ZB-H2"
                                 : layout.layers_per_virtual_stage > 0
                                     ? fmt::format("interleaved, v {}", layout.virtual_stages(s.model))
                                     : "1F1B";
        const std::string group = heuristic  ? "zero bubble (ZB-1p/2p against the authors' greedy scheduler)"
                                  : searched ? "zero bubble (ZB-1p/2p against ZB-H1/H2)"
                                             : "same schedule";
        time_errors[group].push_back(percent(predicted_ms, measured_ms));
        std::string memory = "| - | - | - |";
        const std::string mem_column = std::string("mem ") + schedule;
        if (t.has(mem_column)) {
          const double measured_gb = number(r[t.column(mem_column)]);
          const double predicted_gib = p.memory.peak().value / double(1 << 30);
          memory_errors[group].push_back(percent(predicted_gib, measured_gb));
          memory =
              fmt::format("| {:.0f} | {:.1f} | {:+.1f}% |", measured_gb, predicted_gib, memory_errors[group].back());
        }
        std::printf("| %s | %d | %s | %s | %.1f | %.1f | %+.1f%% %s\n", model.c_str(), m, schedule, same.c_str(),
                    measured_ms, predicted_ms, time_errors[group].back(), memory.c_str());
      }
  }
  std::printf("\n| rows | count | iteration time MAPE | worst | peak memory MAPE |\n|---|---|---|---|---|\n");
  for (const auto& [group, errors] : time_errors) {
    double worst = 0.0;
    for (double e : errors) worst = std::max(worst, std::abs(e));
    std::printf("| %s | %zu | %.1f%% | %.1f%% | %.1f%% |\n", group.c_str(), errors.size(), mean_abs(errors), worst,
                mean_abs(memory_errors[group]));
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  bool half_loss = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::puts(
          "usage: groundtruth_zero_bubble [--fp32-loss] [FILE [TOPOLOGY]]\n"
          "  FILE: the paper's tables in Markdown (default data/groundtruth/zero_bubble/zero_bubble.md)\n"
          "  TOPOLOGY: the cluster (default topologies/a100_4x8.json)\n"
          "  --fp32-loss: the loss's passes in fp32, Megatron's default (without it: in half precision,\n"
          "    --fp16-lm-cross-entropy, the only loss the measured last stages leave room for)");
      return 0;
    }
    if (arg == "--fp32-loss") {
      half_loss = false;
      continue;
    }
    positional.push_back(arg);
  }
  const std::string path = positional.size() > 0 ? positional[0] : "data/groundtruth/zero_bubble/zero_bubble.md";
  const std::string topology_path = positional.size() > 1 ? positional[1] : "topologies/a100_4x8.json";
  const std::string text = baton::bench::read_text(path);
  if (text.empty()) {
    std::fprintf(stderr, "groundtruth_zero_bubble: cannot read %s\n", path.c_str());
    return 2;
  }
  const baton::Topology topology =
      take(baton::parse_topology(baton::bench::read_text(topology_path), topology_path), topology_path);
  const std::vector<Table> tables = baton::bench::markdown_tables(text, kProgram);
  const auto setups =
      read_setups(table_with(tables, {"model", "layers", "heads", "hidden", "p"}, "models (Table 3)"), half_loss);
  std::printf("Per-stage times of a middle stage, ms (Table 6; baton: the GPU kernel model on %s)\n\n",
              topology.device.name.c_str());
  per_stage_times(table_with(tables, {"model", "T_F", "T_B", "T_W"}, "per-stage times (Table 6)"), setups, topology);
  std::printf("Bubble rates from the measured stage times (Table 5; baton: its schedules on those times)\n\n");
  bubble_rates(table_with(tables, {"model", "p", "m", "1F1B", "ZB-H1"}, "bubble rates (Table 5)"),
               table_with(tables, {"model", "T_F", "T_B", "T_W"}, "per-stage times (Table 6)"));
  std::printf("ZB-1p and ZB-2p on the measured stage times (Table 5; baton: the authors' greedy scheduler)\n\n");
  greedy_bubble_rates(table_with(tables, {"model", "p", "m", "1F1B", "ZB-H1"}, "bubble rates (Table 5)"),
                      table_with(tables, {"model", "T_F", "T_B", "T_W"}, "per-stage times (Table 6)"), setups);
  std::printf("Iteration time and peak memory (Table 4; baton: simulate on %s)\n\n", topology.name.c_str());
  iteration_times(table_with(tables, {"model", "m", "1F1B", "mem 1F1B"}, "throughput (Table 4)"), setups, topology);
  return 0;
}
