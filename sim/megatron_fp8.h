// FP8 training as Megatron-core runs it through Transformer Engine
// (--fp8-format e4m3|hybrid, --fp8-recipe), for the transformer model of
// sim/megatron.h. What baton models (sim/megatron_block.h has the terms):
// - The GEMMs of the blocks' linear layers (QKV and the projection, or
//   multi-latent attention's down and up projections; the MLP's, the
//   experts', the shared expert's; multi-token prediction's eh_proj) take
//   FP8 operands and run at the GPU's FP8 tensor-core peak with the same
//   fitted efficiency (GpuModel::gemm with one byte per operand). The
//   attention core, the router and the output layer stay in bf16/fp16, as
//   Megatron-core's defaults leave them.
// - Each forward and input-gradient GEMM first quantizes its activation
//   operand (the forward's input, the backward's output gradient): one
//   memory-bound kernel reading 2 bytes and writing the FP8 value and its
//   transpose (the weight gradient's operand), 4 bytes a value; the
//   per-tensor current scaling of `tensorwise` first reads it once more for
//   its maximum (a second kernel). The weight-gradient GEMM takes the kept
//   FP8 operands. The weights are quantized (value and transpose) once per
//   iteration, at the first microbatch (Transformer Engine's weight cache,
//   which Megatron's is_first_microbatch drives): 4 bytes a weight, charged
//   with the optimizer step.
// - Memory: the cached FP8 weights and their transposes, 2 bytes per linear
//   weight of the blocks; what the linears keep for the backward is their
//   FP8 input (1 byte a value where bf16 keeps 2).
// - Tensor-parallel collectives with sequence parallelism: the all-gathers
//   before the column-parallel linears (the forward's inputs, the backward's
//   output gradients) move FP8 values, the reduce-scatters bf16.
// - The first and last blocks kept in bf16 (--first-last-layers-bf16 with
//   --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16): their
//   GEMMs, quantizations and activations as without FP8.
// - --fp8-param-gather (with the distributed optimizer): the weights'
//   all-gather moves 1 byte a weight of the FP8 blocks.
// Not modelled: delayed scaling's amax reductions, FP8 attention
// (--fp8-dot-product-attention); blockwise and mxfp8 (Blackwell's) scaling
// are refused. Checked against NVIDIA's published FP8
// throughput on DGX-H100 (bench/groundtruth_nemo_fp8), not fitted to it.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string_view>

#include "sim/result.h"

namespace baton {

struct GptModel;
struct MegatronLayout;
struct GpuModel;

// Megatron-core's --fp8-format: none (bf16/fp16 GEMMs), e4m3 (every FP8
// tensor in E4M3), hybrid (E4M3 forward, the gradients in E5M2). Both take
// the same time and memory.
enum class Fp8Format { kNone, kE4M3, kHybrid };
// Megatron-core's --fp8-recipe: delayed scaling (the default: each tensor's
// scale from the maxima of earlier iterations), tensorwise (current scaling:
// each tensor's maximum taken before it is quantized); blockwise, mxfp8 and
// custom are parsed and refused by check_fp8.
enum class Fp8Recipe { kDelayed, kTensorwise, kBlockwise, kMxfp8, kCustom };

const char* fp8_format_name(Fp8Format format);  // "none", "e4m3", "hybrid"
const char* fp8_recipe_name(Fp8Recipe recipe);  // "delayed", "tensorwise", "blockwise", "mxfp8", "custom"
// The names back; nothing for any other text.
std::optional<Fp8Format> parse_fp8_format(std::string_view name);
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view name);

// The FP8 flags against the model and layout (check_megatron_layout's part;
// the error names the flag): a recipe other than delayed only with
// --fp8-format; delayed or tensorwise; and Transformer Engine's shapes for an
// FP8 GEMM (assert_dim_for_fp8_exec): every activation and weight operand's
// rows (all but the last dimension) a multiple of 8 and its width a
// multiple of 16: the rank's tokens (split over t with sequence
// parallelism), h, the attention's widths per rank, the MLP's (the
// experts') width per rank.
Status check_fp8(const GptModel& model, const MegatronLayout& layout);
// Whether `gpu` runs FP8 GEMMs (Hopper's H100 and H200); an Error naming
// --fp8-format and the GPU otherwise.
Status check_fp8_gpu(const GptModel& model, const GpuModel& gpu);

}  // namespace baton
