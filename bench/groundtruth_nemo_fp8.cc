// Predicts NVIDIA's published FP8 pre-training throughput on DGX-H100 (NeMo
// 24.07 and 24.03.01, Megatron-Bridge 25.11; data/groundtruth/nemo_h100_fp8)
// with `simulate`'s Megatron path and its FP8 model (sim/megatron_fp8.h), and
// prints, in Markdown for bench/RESULTS.md, each row's published and
// predicted tokens per second per GPU, the error, whether baton's memory
// model has it fit, and the mean absolute percentage error per table.
//
// The GPU model's constants are the A100 fit's (data/groundtruth/vtrain) at
// the H100's datasheet peaks, FP8's GEMMs at the FP8 peak with the same
// efficiency, but one: the H100's tensor_share (the share of its tensor-core
// peaks it sustains), which these rows and Megatron-LM's published bf16 rows
// (bench/groundtruth_megatron_h100) fixed together (bench/fit_hopper_share.sh;
// docs/TRANSFORMERS.md). These rows check the H100's figures and the FP8
// estimate at once, on runs no one here made.
//
// Every row runs as data/groundtruth/nemo_h100_fp8/README.md says: the
// models' shapes, bf16 with FP8 hybrid (delayed scaling in Tables A and B,
// current scaling with the first and last blocks in bf16 in Table C) and FP8
// parameters, sequence parallelism with t > 1, the
// distributed optimizer, overlapped gradient reduction, FlashAttention, no
// recomputation, VP chunks per pipeline rank; Table C with what
// Megatron-Bridge's performance recipes of that release set beyond its
// columns (bridge_recipe). A row whose run used a parallelism baton does not
// model (Table C's FSDP row) is shown but left out of the means and --check.
//
// Usage: groundtruth_nemo_fp8 [--check] [--tensor-share X] [FILE]
//   (default data/groundtruth/nemo_h100_fp8/nemo_fp8.md, from the repository
//   root; topologies/h100_32x8.json up to 256 GPUs, bench/topologies/
//   h100_128x8.json above). --check: exit 1 when the mean absolute error
//   over the rows is above kMaxMape or a row is worse than kMaxRow.
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

namespace {

constexpr const char* kProgram = "groundtruth_nemo_fp8";
constexpr double kMaxMape = 10.0;  // percent, over every predicted row
constexpr double kMaxRow = 25.0;   // percent

using baton::GptModel;
using baton::bench::MarkdownTable;

// --tensor-share: the H100's GpuModel::tensor_share in place of the model's
// (0: the model's).
double tensor_share = 0.0;

// Meta's model cards and NeMo's GPT-3 configurations (README.md); the
// sequence is the row's.
GptModel llama(int64_t layers, int64_t hidden, int64_t heads, int64_t groups, int64_t ffn, int64_t vocab) {
  return baton::llama_style(layers, hidden, heads, groups, ffn, vocab, 0);
}

std::optional<GptModel> model_named(const std::string& name) {
  const std::map<std::string, GptModel> known = {{"GPT3-5B", GptModel{24, 4096, 32, 0, 50257}},
                                                 {"GPT3-20B", GptModel{44, 6144, 48, 0, 50257}},
                                                 {"GPT3-175B", GptModel{96, 12288, 96, 0, 50257}},
                                                 {"LLAMA2-7B", llama(32, 4096, 32, 32, 11008, 32000)},
                                                 {"LLAMA2-13B", llama(40, 5120, 40, 40, 13824, 32000)},
                                                 {"LLAMA2-70B", llama(80, 8192, 64, 8, 28672, 32000)},
                                                 {"LLAMA3-8B", llama(32, 4096, 32, 8, 14336, 128256)},
                                                 {"LLAMA3-70B", llama(80, 8192, 64, 8, 28672, 128256)},
                                                 {"LLAMA3.1-405B", llama(126, 16384, 128, 8, 53248, 128256)}};
  std::string key = name;
  for (char& c : key)
    if (c == '_') c = '-';  // Megatron-Bridge spells LLAMA3_70B
  const auto it = known.find(key);
  if (it == known.end()) return std::nullopt;
  GptModel model = it->second;
  model.flash_attention = true;
  return model;
}

struct Row {
  std::string table, name;
  GptModel model;
  baton::MegatronLayout layout;
  double published = 0.0;  // tokens per second per GPU
  double predicted = 0.0;
  bool fits = false;
  // False where the run used a parallelism baton does not model (Table C's
  // FSDP row): shown, but left out of the means and --check.
  bool counted = true;
  double error() const { return 100.0 * (predicted - published) / published; }
};

int whole(const MarkdownTable& t, const std::vector<std::string>& row, const char* column) {
  if (row[t.column(column)] == "n/a") return 1;
  return baton::bench::cell_whole(t, row, column);
}

// The layout the row states, with what README.md fills in.
baton::MegatronLayout layout_of(const GptModel& model, int gpus, int gbs, int mbs, int tp, int pp, int cp, int vp) {
  baton::MegatronLayout l = baton::megatron_layout(tp, pp, gpus / (tp * pp * cp), mbs, gbs);
  l.context = cp;
  l.bf16 = true;
  l.sequence_parallel = tp > 1;
  l.distributed_optimizer = true;
  l.overlap_grad_reduce = true;
  if (vp > 1) {
    const bool even = model.layers % (pp * vp) == 0;
    l.embedding_in_split = l.loss_in_split = !even;  // 126 layers: (126 + 2) / 64
    l.layers_per_virtual_stage = static_cast<int>(l.split_layers(model) / (pp * vp));
  }
  return l;
}

// Table C: what Megatron-Bridge's performance recipes of the 25.11 release
// (its v0.2.1 tag: scripts/performance/configs/llama3 and llama31, and the
// Llama recipes they start from) set beyond the table's columns, where baton
// models it: gradients reduced in bf16 (grad_reduce_in_fp32 False for every
// Llama run), Transformer Engine's overlap of the tensor-parallel
// communication (the 70B and 405B recipes' tp_comm_overlap; the 8B runs t 1),
// and for the Llama 3 8B run on H100 in FP8-CS full recomputation of the
// first 5 blocks (recompute_method block, recompute_num_layers 5), and
// Transformer Engine's fused cross entropy (GPTModelProvider's
// cross_entropy_loss_fusion True, and scripts/performance/utils/helpers.py's
// cross_entropy_fusion_impl te for every performance run; Megatron-LM's
// training refuses the pair, Megatron-core takes it). Not modelled: the 8B
// run's FSDP (README.md).
void bridge_recipe(Row& row) {
  row.model.cross_entropy_fusion = true;
  row.model.te_cross_entropy = true;
  row.layout.grad_reduce_in_bf16 = true;
  row.layout.tp_comm_overlap = row.layout.tensor > 1;
  if (row.name == "LLAMA3_8B") {
    row.layout.recompute = baton::Recompute::kFull;
    row.layout.recompute_block = true;
    row.layout.recompute_layers = 5;
  }
}

// Predicts `row` on the topology its GPUs need; false (the reason on
// stderr) when baton refuses it.
bool predict(Row& row, const baton::Topology& small, const baton::Topology& large) {
  const baton::Topology& topology = row.layout.gpus() <= small.num_devices() ? small : large;
  baton::GpuModel gpu = baton::bench::must(baton::gpu_model(topology.device.name));
  if (tensor_share > 0.0) gpu.tensor_share = tensor_share;
  auto p = baton::predict_megatron(row.model, row.layout, topology, false, &gpu, false);
  if (!p) {
    std::fprintf(stderr, "%s: %s %s: %s\n", kProgram, row.table.c_str(), row.name.c_str(), p.error().message.c_str());
    return false;
  }
  const double tokens = static_cast<double>(row.layout.global_batch) * static_cast<double>(row.model.sequence);
  row.predicted = tokens / (p->iteration_time.value * row.layout.gpus());
  row.fits = p->memory.fits();
  return true;
}

// Tables A and C (a model column); B is LLAMA2-7B at the sequence in K.
std::vector<Row> rows_of(const MarkdownTable& t, const std::string& table, baton::Fp8Recipe recipe,
                         const baton::Topology& small, const baton::Topology& large) {
  std::vector<Row> out;
  for (const auto& r : t.rows) {
    Row row;
    row.table = table;
    const bool long_sequences = t.has("sequence K");
    row.name = long_sequences ? "LLAMA2-7B " + r[t.column("sequence K")] + "K" : r[t.column("model")];
    const std::optional<GptModel> model = model_named(long_sequences ? "LLAMA2-7B" : row.name);
    if (!model) {
      std::fprintf(stderr, "%s: %s %s: not a model baton has (skipped)\n", kProgram, table.c_str(), row.name.c_str());
      continue;
    }
    row.model = *model;
    row.model.sequence =
        long_sequences ? 1024 * static_cast<int64_t>(whole(t, r, "sequence K")) : whole(t, r, "sequence");
    row.model.fp8 = baton::Fp8Format::kHybrid;
    row.model.fp8_recipe = recipe;
    // NeMo's and Megatron-Bridge's FP8 precision recipes: FP8 parameters, and
    // with current scaling the first and the last block in bf16.
    row.model.fp8_param_gather = true;
    if (recipe == baton::Fp8Recipe::kTensorwise) row.model.bf16_first_blocks = row.model.bf16_last_blocks = 1;
    row.layout = layout_of(row.model, whole(t, r, "GPUs"), whole(t, r, "GBS"), whole(t, r, "MBS"), whole(t, r, "TP"),
                           whole(t, r, "PP"), whole(t, r, "CP"), whole(t, r, "VP"));
    if (table == "C") bridge_recipe(row);
    row.counted = !t.has("FSDP") || r[t.column("FSDP")] == "0";
    row.published = baton::bench::cell_number(r[t.column("tokens/s per GPU")], kProgram);
    if (predict(row, small, large)) out.push_back(row);
  }
  return out;
}

std::string layout_text(const baton::MegatronLayout& l) {
  std::string text =
      fmt::format("t{} p{} c{} d{} b{} B{}", l.tensor, l.pipeline, l.context, l.data, l.micro_batch, l.global_batch);
  if (l.layers_per_virtual_stage > 0) text += fmt::format(" {} layers a chunk", l.layers_per_virtual_stage);
  if (l.recompute == baton::Recompute::kFull && l.recompute_block)
    text += fmt::format(" recompute {} blocks", l.recompute_layers);
  if (l.tp_comm_overlap) text += " TP overlap";
  return text;
}

// The counted rows.
std::vector<Row> counted(const std::vector<Row>& rows) {
  std::vector<Row> out;
  for (const Row& r : rows)
    if (r.counted) out.push_back(r);
  return out;
}

double mape(const std::vector<Row>& rows) {
  double sum = 0.0;
  for (const Row& r : rows) sum += std::abs(r.error());
  return rows.empty() ? 0.0 : sum / static_cast<double>(rows.size());
}

double worst(const std::vector<Row>& rows) {
  double w = 0.0;
  for (const Row& r : rows) w = std::max(w, std::abs(r.error()));
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false;
  std::string path = "data/groundtruth/nemo_h100_fp8/nemo_fp8.md";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::puts(
          "usage: groundtruth_nemo_fp8 [--check] [--tensor-share X] [FILE]\n"
          "  FILE: the published tables in Markdown (default data/groundtruth/nemo_h100_fp8/nemo_fp8.md)\n"
          "  --tensor-share X: the H100's sustained share of its tensor-core peak in place of its model's\n"
          "    (GpuModel::tensor_share; bench/fit_hopper_share.sh scans it)\n"
          "  --check: exit 1 when the mean absolute error is over 10% or a row is worse than 25%");
      return 0;
    }
    if (arg == "--check") {
      check = true;
    } else if (arg == "--tensor-share" && i + 1 < argc) {
      tensor_share = baton::bench::cell_number(argv[++i], kProgram);
      if (!(tensor_share > 0.0 && tensor_share <= 2.0)) {
        std::fprintf(stderr, "%s: --tensor-share must be in (0, 2], got %s\n", kProgram, argv[i]);
        return 2;
      }
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "%s: unknown option %s (see --help)\n", kProgram, arg.c_str());
      return 2;
    } else {
      path = arg;
    }
  }
  const std::string text = baton::bench::must_read(path);
  const baton::Topology small = baton::bench::must_topology("topologies/h100_32x8.json");
  const baton::Topology large = baton::bench::must_topology("bench/topologies/h100_128x8.json");
  const auto tables = baton::bench::markdown_tables(text, kProgram);
  const auto& a =
      baton::bench::table_with(tables, {"model", "sequence", "VP", "tokens/s per GPU"}, kProgram, "Table A");
  const auto& b = baton::bench::table_with(tables, {"sequence K", "DP", "tokens/s per GPU"}, kProgram, "Table B");
  const auto& c = baton::bench::table_with(tables, {"model", "FSDP", "GA", "tokens/s per GPU"}, kProgram, "Table C");
  const struct {
    std::string name;
    std::vector<Row> rows;
  } groups[] = {{"A (NeMo 24.07, FP8)", rows_of(a, "A", baton::Fp8Recipe::kDelayed, small, large)},
                {"B (NeMo 24.03.01, FP8, long sequences)", rows_of(b, "B", baton::Fp8Recipe::kDelayed, small, large)},
                {"C (Megatron-Bridge 25.11, FP8-CS)", rows_of(c, "C", baton::Fp8Recipe::kTensorwise, small, large)}};

  std::printf("| table | model | GPUs | layout | published tokens/s/GPU | predicted | error | fits (baton) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::vector<Row> all;
  for (const auto& g : groups)
    for (const Row& r : g.rows) {
      std::printf("| %s | %s%s | %d | %s | %.0f | %.0f | %+.1f%%%s | %s |\n", r.table.c_str(), r.name.c_str(),
                  r.counted ? "" : " (FSDP)", r.layout.gpus(), layout_text(r.layout).c_str(), r.published, r.predicted,
                  r.error(), r.counted ? "" : " (not counted)", r.fits ? "yes" : "no");
      if (r.counted) all.push_back(r);
    }
  std::printf("\n| rows | count | MAPE | worst |\n|---|---|---|---|\n");
  for (const auto& g : groups) {
    const std::vector<Row> rows = counted(g.rows);
    std::printf("| %s | %zu | %.2f%% | %.1f%% |\n", g.name.c_str(), rows.size(), mape(rows), worst(rows));
  }
  std::printf("| all | %zu | %.2f%% | %.1f%% |\n", all.size(), mape(all), worst(all));
  if (!check) return 0;
  int status = 0;
  if (all.empty() || mape(all) > kMaxMape) {
    std::fprintf(stderr, "%s --check: MAPE %.2f%% over %zu rows, the bound is %.0f%%\n", kProgram, mape(all),
                 all.size(), kMaxMape);
    status = 1;
  }
  if (worst(all) > kMaxRow) {
    std::fprintf(stderr, "%s --check: a row is %.1f%% off, worse than %.0f%%\n", kProgram, worst(all), kMaxRow);
    status = 1;
  }
  return status;
}
