// GpuModel: the time of one kernel on one GPU, from its shape, for the
// transformer model of sim/megatron.h.
//
// The model, stated once (every constant below is a field of GpuModel):
// - A GEMM [m x k] x [k x n] (or `count` of them batched) is cut into output
//   tiles of tm x tn; the tiles run in waves of `sms` (one tile per
//   streaming multiprocessor at a time), and one tile of depth k takes
//   2 tm tn k / (peak / sms x gemm_efficiency x e) seconds. So
//     time(tile) = ceil(count ceil(m / tm) ceil(n / tn) / sms) x tile time
//   which is peak x gemm_efficiency x e for large shapes and loses what its
//   last, partly filled wave wastes for the others (wave quantization). As a
//   GEMM library picks its kernel per shape, the GEMM takes the least time of
//   five tiles: tile_m x tile_n, twice as tall, twice as wide (e = 1), and half
//   as tall or half as wide (e = half_tile_efficiency: a smaller tile reuses
//   each operand it loads less). A GEMM that moves more bytes than it computes
//   takes its bytes at memory speed instead (roofline: max of the two).
// - A memory-bound kernel (normalization, softmax, dropout, GeLU, residual
//   add, optimizer update) takes bytes / (hbm x memory_efficiency).
// - An FP8 GEMM (one byte per operand: sim/megatron_fp8.h) is cut and timed
//   alike at the FP8 peak, with the same efficiencies (an assumption: no
//   measured FP8 run checks it).
// - Every kernel takes at least kernel_floor (launch and tail of a tiny kernel).
// - The host issues kernels one after another: a pass over a layer takes at
//   least (its kernels) x host_per_kernel, the framework's eager dispatch cost
//   (the GPU idles when the layer's kernels and collectives are shorter than
//   their dispatch).
// - Each pass of a pipeline stage over a microbatch (a forward, a backward)
//   costs the host host_per_pass beyond its kernels: the training loop's own
//   work per microbatch and stage (Megatron's forward_step and backward_step,
//   the autograd call, the point-to-point wrappers, the loss), which the GPU
//   waits for.
//
// Sources: SM counts, tensor-core peaks (dense) and HBM bandwidths are NVIDIA's
// datasheet figures; the tile of 128 x 128 is CUTLASS's and cuBLAS's common
// tile for half precision. gemm_efficiency, half_tile_efficiency and
// memory_efficiency (each held since at the value of an earlier fit),
// kernel_floor, host_per_kernel and host_per_pass were fitted once, for
// the A100, to the measured iteration times shipped in data/groundtruth/vtrain
// (all 850 rows together, by the coordinate search of `bench/groundtruth_vtrain
// --fit`, which says its objective; docs/TRANSFORMERS.md), with the ring-step
// latencies of topologies/a100_vtrain.json; Korthikanti et al.'s per-layer
// times (2022, Table 4) were not used in the fit and check it
// (tests/megatron/megatron_predict_test.cc). The other GPUs take the A100's
// fitted fractions unchanged, but for one figure of the H100 and the H200
// (the same GH100 at 700 W): tensor_share, the share of the datasheet's
// tensor-core peaks they sustain relative to the A100, 0.75, fixed on
// NVIDIA's published H100 throughput, Megatron-LM's bf16 weak-scaling table
// (data/groundtruth/megatron_h100) and NeMo's FP8 tables
// (data/groundtruth/nemo_h100_fp8) together, each source counted once: the
// least mean of their two mean absolute errors over shares 0.66 .. 0.92
// (bench/fit_hopper_share.sh). Each alone would have it 0.70 (bf16) and
// 0.87 (FP8). The V100 takes the A100's unchanged (an assumption, not a
// measurement).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/result.h"
#include "sim/units.h"

namespace baton {

struct GpuModel {
  std::string name;          // the topology's device name: "A100-SXM4-80GB"
  int sms = 0;               // streaming multiprocessors
  double peak_tflops = 0.0;  // dense fp16/bf16 tensor-core peak, 1e12 FLOP/s
  double fp8_tflops = 0.0;   // dense FP8 tensor-core peak; 0: no FP8 tensor cores
  // The dense peak of a GEMM on fp32 operands: TF32's tensor-core peak where
  // the GPU has one (Transformer Engine's cuBLASLt GEMMs compute fp32
  // operands as TF32), its fp32 peak otherwise (the V100).
  double fp32_tflops = 0.0;
  double hbm_gbytes_per_s = 0.0;
  double memory_gib = 0.0;
  int tile_m = 128;
  int tile_n = 128;
  double gemm_efficiency = 0.0;  // fraction of peak a full wave reaches
  // The share of the datasheet's tensor-core peaks this GPU sustains in
  // training, relative to the A100 on whose rows gemm_efficiency was fitted
  // (1 there): a tile runs at peak x tensor_share x gemm_efficiency.
  double tensor_share = 1.0;
  // A half tile's (tile_m x tile_n / 2) fraction of gemm_efficiency.
  double half_tile_efficiency = 1.0;
  double memory_efficiency = 0.0;  // fraction of hbm a streaming kernel reaches
  Seconds kernel_floor;            // shortest kernel
  Seconds host_per_kernel;         // host dispatch per kernel
  Seconds host_per_pass;           // the host's own work per stage pass, beyond its kernels
  std::string source;

  // One GEMM (or `count` independent ones) of [m x k] x [k x n], operands and
  // result at `bytes_per_element`; with 1 (FP8 operands) at fp8_tflops, with
  // 4 (fp32) at fp32_tflops, with the same efficiencies.
  Seconds gemm(double m, double n, double k, double count = 1.0, int bytes_per_element = 2) const;
  // A memory-bound kernel moving `bytes` (reads + writes).
  Seconds memory_bound(double bytes) const;
};

// The GPUs gpu_model() knows, in a stable order.
std::vector<std::string> gpu_models();
// The model of the GPU a topology names ("A100-SXM4-80GB", "H100-SXM5-80GB",
// ...; case-insensitive, also the short "a100", "h100", "v100"). An Error
// listing the known names otherwise.
Result<GpuModel> gpu_model(const std::string& device_name);

}  // namespace baton
