#include "sim/gpu_model_check.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/stats.h"

namespace baton {

namespace {

int bytes_per_element(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

double waves_of_square_tiles(const GpuModel& model, const GemmShape& s) {
  return static_cast<double>(s.count) * std::ceil(static_cast<double>(s.m) / model.tile_m) *
         std::ceil(static_cast<double>(s.n) / model.tile_n) / model.sms;
}

double mean_abs_error(const std::vector<KernelCheckRow>& rows) {
  if (rows.empty()) return 0.0;
  double sum = 0.0;
  for (const KernelCheckRow& row : rows) sum += std::abs(row.error);
  return sum / static_cast<double>(rows.size());
}

double median_or_zero(std::vector<double> values) { return values.empty() ? 0.0 : quantile(values, 0.5); }

}  // namespace

std::vector<GemmShape> gpt_gemm_shapes() {
  std::vector<GemmShape> shapes;
  for (const int64_t h : {2048, 4096, 8192, 12288}) {
    for (const int64_t tokens : {2048, 8192}) {
      for (const int64_t t : {1, 8}) {
        shapes.push_back({tokens, 3 * h / t, h, 1});      // QKV projection
        shapes.push_back({tokens, h, h / t, 1});          // attention's output projection
        shapes.push_back({tokens, 4 * h / t, h, 1});      // MLP up
        shapes.push_back({tokens, h, 4 * h / t, 1});      // MLP down
        shapes.push_back({h, 4 * h / t, tokens, 1});      // MLP up's weight gradient
      }
    }
  }
  // Attention: per (micro-batch sample x head) a [s x d] x [d x s] score and a
  // [s x s] x [s x d] context product, s = 2048, d = 128.
  for (const int64_t heads : {8, 32, 96}) {
    shapes.push_back({2048, 2048, 128, heads});
    shapes.push_back({2048, 128, 2048, heads});
  }
  return shapes;
}

std::vector<int64_t> stream_sizes_bytes() {
  std::vector<int64_t> sizes;
  for (int64_t bytes = int64_t{1} << 20; bytes <= int64_t{1} << 30; bytes *= 4) sizes.push_back(bytes);
  return sizes;
}

KernelCheck check_kernels(const GpuModel& model, const MeasuredKernels& measured) {
  KernelCheck check;
  const int element = bytes_per_element(measured.dtype);
  std::vector<double> large_gemms;
  for (const MeasuredGemm& gemm : measured.gemms) {
    const GemmShape& s = gemm.shape;
    KernelCheckRow row;
    row.shape = s;
    row.measured = gemm.time;
    row.predicted = model.gemm(static_cast<double>(s.m), static_cast<double>(s.n), static_cast<double>(s.k),
                               static_cast<double>(s.count), element);
    row.error = (row.measured.value - row.predicted.value) / row.predicted.value;
    const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) *
                         static_cast<double>(s.count);
    row.fraction_of_peak = flops / (row.measured.value * model.peak_tflops * 1e12);
    if (waves_of_square_tiles(model, s) >= 4.0) large_gemms.push_back(row.fraction_of_peak);
    check.gemms.push_back(row);
  }
  std::vector<double> large_streams;
  for (const MeasuredStream& stream : measured.streams) {
    KernelCheckRow row;
    row.bytes = stream.bytes;
    row.measured = stream.time;
    row.predicted = model.memory_bound(static_cast<double>(stream.bytes));
    row.error = (row.measured.value - row.predicted.value) / row.predicted.value;
    row.fraction_of_peak = static_cast<double>(stream.bytes) / (row.measured.value * model.hbm_gbytes_per_s * 1e9);
    if (stream.bytes >= (int64_t{64} << 20)) large_streams.push_back(row.fraction_of_peak);
    check.streams.push_back(row);
  }
  check.gemm_mape = mean_abs_error(check.gemms);
  check.stream_mape = mean_abs_error(check.streams);
  check.large_gemm_fraction = median_or_zero(large_gemms);
  check.large_stream_fraction = median_or_zero(large_streams);
  check.tiny_kernel = measured.tiny_kernel;
  return check;
}

std::string kernel_check_markdown(const KernelCheck& check, const GpuModel& model, const MeasuredKernels& measured) {
  std::string out = fmt::format("# Kernels of {} ({}) against the model of {}\n\n", measured.device, measured.dtype,
                                model.name);
  out += fmt::format(
      "| | measured | model |\n|---|---:|---:|\n"
      "| GEMMs of 4 waves and more: fraction of peak ({:.0f} TFLOP/s), median | {:.3f} | {:.4f} (gemm_efficiency) |\n"
      "| streams of 64 MiB and more: fraction of HBM ({:.0f} GB/s), median | {:.3f} | {:.4f} (memory_efficiency) |\n"
      "| shortest kernel | {:.1f} us | {:.1f} us (kernel_floor) |\n"
      "| GEMM time, mean absolute error | {:.1f}% | |\n| stream time, mean absolute error | {:.1f}% | |\n\n",
      model.peak_tflops, check.large_gemm_fraction, model.gemm_efficiency, model.hbm_gbytes_per_s,
      check.large_stream_fraction, model.memory_efficiency, check.tiny_kernel.value * 1e6,
      model.kernel_floor.value * 1e6, check.gemm_mape * 100.0, check.stream_mape * 100.0);
  out += "| m | n | k | count | measured | model | error | fraction of peak |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const KernelCheckRow& row : check.gemms)
    out += fmt::format("| {} | {} | {} | {} | {:.1f} us | {:.1f} us | {:+.1f}% | {:.3f} |\n", row.shape.m, row.shape.n,
                       row.shape.k, row.shape.count, row.measured.value * 1e6, row.predicted.value * 1e6,
                       row.error * 100.0, row.fraction_of_peak);
  out += "\n| bytes (read + written) | measured | model | error | fraction of HBM |\n|---:|---:|---:|---:|---:|\n";
  for (const KernelCheckRow& row : check.streams)
    out += fmt::format("| {} | {:.1f} us | {:.1f} us | {:+.1f}% | {:.3f} |\n", row.bytes, row.measured.value * 1e6,
                       row.predicted.value * 1e6, row.error * 100.0, row.fraction_of_peak);
  return out;
}

}  // namespace baton
