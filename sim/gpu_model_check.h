// The GPU kernel model (sim/gpu_model.h) held against kernels measured on a
// real GPU (sim/kernels_file.h, `baton kernels measure`): each GEMM and stream
// predicted and compared, and the fractions of peak the device reached, to set
// beside the model's fitted gemm_efficiency and memory_efficiency.
//
// The model's constants were fitted to whole A100 iterations (vTrain's rows),
// so its kernel_floor and efficiencies absorb what an iteration adds around
// its kernels; isolated kernels on an idle device are expected to run faster
// than the model says, by about that much. What this check answers is the
// part no iteration time shows: whether another GPU (the H100's constants are
// the A100's fractions, unmeasured) reaches the same fractions of its peaks.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/gpu_model.h"
#include "sim/kernels_file.h"
#include "sim/units.h"

namespace baton {

// The GEMMs of a GPT layer's forward and backward, for hidden sizes 2048 to
// 12288, 2048 and 8192 tokens per micro-batch, tensor parallel 1 and 8, and
// attention's batched products (sequence 2048, head size 128).
std::vector<GemmShape> gpt_gemm_shapes();
// Copies of 1 MiB to 1 GiB (bytes read + written), the memory-bound kernels'
// stand-in.
std::vector<int64_t> stream_sizes_bytes();

struct KernelCheckRow {
  GemmShape shape;    // GEMM rows
  int64_t bytes = 0;  // stream rows
  Seconds measured;
  Seconds predicted;
  double error = 0.0;          // (measured - predicted) / predicted
  double fraction_of_peak = 0.0;  // GEMMs: 2 m n k count / (measured x peak); streams: bytes / (measured x hbm)
};

struct KernelCheck {
  std::vector<KernelCheckRow> gemms;
  std::vector<KernelCheckRow> streams;
  double gemm_mape = 0.0;    // mean |error| over the GEMMs
  double stream_mape = 0.0;  // over the streams
  // The median fraction of peak of the GEMMs that fill at least 4 waves of
  // 128 x 128 tiles, against the model's gemm_efficiency; the median fraction
  // of HBM bandwidth of the streams of 64 MiB and more, against its
  // memory_efficiency. 0 where no row qualifies.
  double large_gemm_fraction = 0.0;
  double large_stream_fraction = 0.0;
  Seconds tiny_kernel;  // measured, against the model's kernel_floor
};

KernelCheck check_kernels(const GpuModel& model, const MeasuredKernels& measured);

// The check as Markdown: a summary and one table per kind.
std::string kernel_check_markdown(const KernelCheck& check, const GpuModel& model, const MeasuredKernels& measured);

}  // namespace baton
