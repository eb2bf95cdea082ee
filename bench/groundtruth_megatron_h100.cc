// Predicts the throughput Megatron-LM's README published in July 2024 for GPT
// models of 1.7 to 462 billion parameters on 48 to 6,144 H100 GPUs
// (data/groundtruth/megatron_h100) with `simulate`'s Megatron path
// (sim/megatron_sim.h), and prints, in Markdown for bench/RESULTS.md, each
// row's published and predicted teraFLOP/s per GPU (Megatron-LM's
// num_floating_point_operations, as baton's model_tflops_per_gpu counts it
// without recomputation), the iteration times they imply, and the mean
// absolute percentage error.
//
// The GPU model's constants are the A100 fit's (data/groundtruth/vtrain) at
// the H100's datasheet peaks, but one: the H100's tensor_share (the share of
// its tensor-core peak it sustains), which these rows and NVIDIA's published
// FP8 rows (bench/groundtruth_nemo_fp8) fixed together
// (bench/fit_hopper_share.sh; docs/TRANSFORMERS.md). These rows also check
// the overlaps the source names (--overlap-grad-reduce,
// --overlap-param-gather, --tp-comm-overlap), on runs no one here made.
//
// Every row runs as data/groundtruth/megatron_h100/README.md says: vocabulary
// 131,072, sequence 4,096, untied output layer, fused attention, bf16, the
// distributed optimizer with both data-parallel overlaps, sequence
// parallelism with the tensor-parallel overlap when t > 1. The source gives
// no micro-batch size, recomputation or interleaving (the authors tune
// them), so each row is predicted at micro-batch 1, 2 and 4, without and
// with selective recomputation, and with p > 1 without interleaving and at
// each number of layers per virtual stage that divides a stage's; the best
// that fits the memory is held against the published figure.
//
// Usage: groundtruth_megatron_h100 [--check] [--all] [--tensor-share X] [FILE [TOPOLOGY]]
//   (defaults: data/groundtruth/megatron_h100/megatron_lm_h100.md and
//   bench/topologies/h100_768x8.json, from the repository root).
//   --all: print every layout tried, not only each row's best.
//   --tensor-share X: the H100's GpuModel::tensor_share in place of the
//   model's (bench/fit_hopper_share.sh scans it).
//   --check: exit 1 when the mean absolute error is above kMaxMape or a row
//   is worse than kMaxRow.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_support.h"
#include "bench/markdown_tables.h"
#include "sim/megatron_sim.h"

namespace {

constexpr const char* kProgram = "groundtruth_megatron_h100";
constexpr double kMaxMape = 10.0;  // percent
constexpr double kMaxRow = 20.0;   // percent
constexpr int kSequence = 4096;
constexpr int kVocab = 131072;

using baton::GptModel;
using baton::MegatronLayout;
using baton::bench::cell_whole;
using baton::bench::MarkdownTable;

struct Tried {
  MegatronLayout layout;
  double tflops = 0.0;
  double seconds = 0.0;
  double peak_gib = 0.0;
  bool fits = false;
};

struct Outcome {
  std::string params;
  double published = 0.0;  // teraFLOP/s per GPU
  Tried best;
  std::vector<Tried> tried;
  double error() const { return 100.0 * (best.tflops - published) / published; }
  // The iteration time the published figure implies.
  double published_s() const { return best.seconds * best.tflops / published; }
};

std::string layout_text(const MegatronLayout& l) {
  std::string text = fmt::format("t{} p{} d{} b{} B{}", l.tensor, l.pipeline, l.data, l.micro_batch, l.global_batch);
  if (l.layers_per_virtual_stage > 0) text += fmt::format(" {} layers a chunk", l.layers_per_virtual_stage);
  if (l.recompute != baton::Recompute::kNone) text += fmt::format(", {} recompute", recompute_name(l.recompute));
  return text;
}

// The layouts a row is tried at (the file's header says which).
std::vector<MegatronLayout> candidates(const GptModel& model, int t, int p, int d, int batch) {
  std::vector<int> chunks = {0};
  if (p > 1)
    for (int per = 1; per < model.layers / p; ++per)
      if ((model.layers / p) % per == 0) chunks.push_back(per);
  std::vector<MegatronLayout> out;
  for (int micro : {1, 2, 4})
    for (baton::Recompute recompute : {baton::Recompute::kNone, baton::Recompute::kSelective})
      for (int per : chunks) {
        MegatronLayout l = baton::megatron_layout(t, p, d, micro, batch);
        l.bf16 = true;
        l.sequence_parallel = l.tp_comm_overlap = t > 1;
        l.distributed_optimizer = l.overlap_grad_reduce = l.overlap_param_gather = true;
        l.recompute = recompute;
        l.layers_per_virtual_stage = per;
        out.push_back(l);
      }
  return out;
}

std::vector<Outcome> predict_rows(const MarkdownTable& t, const baton::Topology& topology, const baton::GpuModel& gpu) {
  std::vector<Outcome> out;
  for (const auto& r : t.rows) {
    GptModel model{cell_whole(t, r, "layers"), cell_whole(t, r, "hidden"), cell_whole(t, r, "heads"), kSequence,
                   kVocab};
    model.tied_output = false;
    model.flash_attention = true;
    const int tensor = cell_whole(t, r, "t"), pipeline = cell_whole(t, r, "p"), data = cell_whole(t, r, "d");
    Outcome o;
    o.params = r[t.column("params")] + "B";
    o.published = baton::bench::cell_number(r[t.column("teraFLOP/s per GPU")], kProgram);
    if (cell_whole(t, r, "GPUs") != tensor * pipeline * data) {
      std::fprintf(stderr, "%s: %s: GPUs is not t x p x d\n", kProgram, o.params.c_str());
      std::exit(2);
    }
    for (const MegatronLayout& layout : candidates(model, tensor, pipeline, data, cell_whole(t, r, "batch"))) {
      if (!baton::check_megatron_layout(model, layout, topology.num_devices())) continue;
      auto p = baton::predict_megatron(model, layout, topology, false, &gpu, false);
      if (!p) {
        std::fprintf(stderr, "%s: %s %s: %s\n", kProgram, o.params.c_str(), layout_text(layout).c_str(),
                     p.error().message.c_str());
        std::exit(1);
      }
      const Tried tried{layout, p->model_tflops_per_gpu, p->iteration_time.value, p->memory.peak().gib(),
                        p->memory.fits()};
      o.tried.push_back(tried);
      if (tried.fits && tried.tflops > o.best.tflops) o.best = tried;
    }
    if (o.best.tflops <= 0.0) {
      std::fprintf(stderr, "%s: %s: no layout tried fits\n", kProgram, o.params.c_str());
      std::exit(1);
    }
    out.push_back(o);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  bool check = false, all = false;
  double share = 0.0;  // 0: the GPU model's own tensor_share
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tensor-share" && i + 1 < argc) {
      share = baton::bench::cell_number(argv[++i], kProgram);
      if (!(share > 0.0 && share <= 2.0)) {
        std::fprintf(stderr, "%s: --tensor-share must be in (0, 2], got %s\n", kProgram, argv[i]);
        return 2;
      }
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::puts(
          "usage: groundtruth_megatron_h100 [--check] [--all] [--tensor-share X] [FILE [TOPOLOGY]]\n"
          "  FILE: the table in Markdown (default data/groundtruth/megatron_h100/megatron_lm_h100.md)\n"
          "  TOPOLOGY: the cluster (default bench/topologies/h100_768x8.json)\n"
          "  --all: every layout tried for each row, not only its best\n"
          "  --tensor-share X: the GPU's sustained share of its tensor-core peak in place of its model's\n"
          "    (GpuModel::tensor_share; bench/fit_hopper_share.sh scans it)\n"
          "  --check: exit 1 when the mean absolute error is over 10% or a row is worse than 20%");
      return 0;
    }
    if (arg == "--check" || arg == "--all") {
      (arg == "--check" ? check : all) = true;
      continue;
    }
    if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "%s: unknown option %s (see --help)\n", kProgram, arg.c_str());
      return 2;
    }
    positional.push_back(arg);
  }
  const std::string path = positional.size() > 0 ? positional[0] : "data/groundtruth/megatron_h100/megatron_lm_h100.md";
  const std::string topology_path = positional.size() > 1 ? positional[1] : "bench/topologies/h100_768x8.json";
  const std::string text = baton::bench::must_read(path);
  const baton::Topology topology = baton::bench::must_topology(topology_path);
  baton::GpuModel gpu = baton::bench::must(baton::gpu_model(topology.device.name));
  if (share > 0.0) gpu.tensor_share = share;
  const auto tables = baton::bench::markdown_tables(text, kProgram);
  const MarkdownTable& table = baton::bench::table_with(
      tables, {"params", "t", "p", "d", "GPUs", "batch", "teraFLOP/s per GPU"}, kProgram, "weak scaling");
  const std::vector<Outcome> rows = predict_rows(table, topology, gpu);

  std::printf("On %s (%s, tensor_share %.3f); each row's best layout that fits of those tried\n\n",
              topology.name.c_str(), gpu.name.c_str(), gpu.tensor_share);
  std::printf(
      "| params | GPUs | best layout | published TFLOP/s | predicted | error | iteration s (published) | predicted s "
      "| peak GiB | tried (fit) |\n|---|---|---|---|---|---|---|---|---|---|\n");
  double sum = 0.0, worst = 0.0;
  for (const Outcome& o : rows) {
    size_t fitting = 0;
    for (const Tried& tried : o.tried) fitting += tried.fits ? 1 : 0;
    std::printf("| %s | %d | %s | %.1f | %.1f | %+.1f%% | %.2f | %.2f | %.1f | %zu (%zu) |\n", o.params.c_str(),
                o.best.layout.gpus(), layout_text(o.best.layout).c_str(), o.published, o.best.tflops, o.error(),
                o.published_s(), o.best.seconds, o.best.peak_gib, o.tried.size(), fitting);
    sum += std::abs(o.error());
    worst = std::max(worst, std::abs(o.error()));
  }
  const double mape = rows.empty() ? 0.0 : sum / static_cast<double>(rows.size());
  std::printf("\n| rows | MAPE | worst |\n|---|---|---|\n| %zu | %.2f%% | %.1f%% |\n", rows.size(), mape, worst);
  if (all) {
    std::printf("\n| params | layout | TFLOP/s | error | peak GiB | fits |\n|---|---|---|---|---|---|\n");
    for (const Outcome& o : rows)
      for (const Tried& tried : o.tried)
        std::printf("| %s | %s | %.1f | %+.1f%% | %.1f | %s |\n", o.params.c_str(), layout_text(tried.layout).c_str(),
                    tried.tflops, 100.0 * (tried.tflops - o.published) / o.published, tried.peak_gib,
                    tried.fits ? "yes" : "no");
  }
  if (!check) return 0;
  int status = 0;
  if (rows.empty() || mape > kMaxMape) {
    std::fprintf(stderr, "%s --check: MAPE %.2f%% over %zu rows is over %.0f%%\n", kProgram, mape, rows.size(),
                 kMaxMape);
    status = 1;
  }
  if (worst > kMaxRow) {
    std::fprintf(stderr, "%s --check: a row is %.1f%% off, worse than %.0f%%\n", kProgram, worst, kMaxRow);
    status = 1;
  }
  return status;
}
