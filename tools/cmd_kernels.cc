// `baton kernels measure`: single kernels timed on a device (GEMMs, copies, the
// shortest kernel) into a baton.kernels.v1 file; `baton kernels check`: such a
// file against the GPU kernel model of the Megatron predictions
// (sim/gpu_model_check.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/gpu_model_check.h"
#include "sim/kernels_file.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/executor_handoff.h"

#if BATON_HAVE_EXEC
#include "exec/executor.h"
#endif

namespace baton::cli {

namespace {

struct KernelArgs {
  std::string device = "cpu";
  std::string dtype = "bf16";
  std::vector<std::string> gemms;  // MxNxK or MxNxKxCOUNT
  std::vector<int64_t> stream_bytes;
  int warmup = 3;
  int repeats = 10;
  std::string output;
  // check
  std::string input;
  std::string gpu;
};

GemmShape parse_gemm(const std::string& text) {
  std::vector<int64_t> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('x', start), text.size());
    const std::string part = text.substr(start, end - start);
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || value < 1)
      throw UsageError(fmt::format("--gemm '{}': expected MxNxK or MxNxKxCOUNT with whole numbers >= 1", text));
    parts.push_back(value);
    start = end + 1;
  }
  if (parts.size() != 3 && parts.size() != 4)
    throw UsageError(fmt::format("--gemm '{}': expected MxNxK or MxNxKxCOUNT with whole numbers >= 1", text));
  return GemmShape{parts[0], parts[1], parts[2], parts.size() == 4 ? parts[3] : 1};
}

#if BATON_HAVE_EXEC

// The measurement, or why it failed on the device (a run's failure, exit 1,
// not a bad request: the flags are checked before).
Result<MeasuredKernels> measure(const KernelArgs& args, std::vector<GemmShape> gemms,
                                std::vector<int64_t> stream_bytes) {
  exec::KernelOptions options;
  options.device = args.device;
  options.dtype = args.dtype;
  options.gemms = std::move(gemms);
  options.stream_bytes = std::move(stream_bytes);
  options.warmup = args.warmup;
  options.repeats = args.repeats;
  options.progress = [](const std::string& line) { std::fprintf(stderr, "kernels: %s\n", line.c_str()); };
  return exec::measure_kernels(options);
}

#else

Result<MeasuredKernels> measure(const KernelArgs&, std::vector<GemmShape>, std::vector<int64_t>) {
  hand_to_executor("kernels measure");
}

#endif

int run_kernels_measure(const KernelArgs& args) {
  std::vector<GemmShape> gemms;
  for (const std::string& gemm : args.gemms) gemms.push_back(parse_gemm(gemm));
  if (gemms.empty()) gemms = gpt_gemm_shapes();
  const Result<MeasuredKernels> measured =
      measure(args, std::move(gemms), args.stream_bytes.empty() ? stream_sizes_bytes() : args.stream_bytes);
  if (!measured) {
    std::fprintf(stderr, "baton: %s\n", measured.error().message.c_str());
    return 1;
  }
  const std::string text = kernels_to_json(*measured).dump(2) + "\n";
  write_output(args.output, text);
  return 0;
}

int run_kernels_check(const KernelArgs& args) {
  const MeasuredKernels measured = take(parse_kernels(read_file(args.input), args.input));
  const auto found = gpu_model(args.gpu);
  if (!found)  // gpu_model's message sends the reader to a topology, which kernels check has none of
    throw UsageError(fmt::format("--gpu {}: no GPU model of that name; known are {} (or a100, h100, h200, v100)",
                                 args.gpu, fmt::join(gpu_models(), ", ")));
  const GpuModel& model = *found;
  const std::string text = kernel_check_markdown(check_kernels(model, measured), model, measured);
  write_output(args.output, text);
  return 0;
}

}  // namespace

void add_kernels_command(CLI::App& app, CommandResult& result) {
  CLI::App* kernels =
      app.add_subcommand("kernels", "Time single GPU kernels, and hold the GPU kernel model against them");
  kernels->require_subcommand(1);
  auto args = std::make_shared<KernelArgs>();

  CLI::App* measure = kernels->add_subcommand("measure", "Time GEMMs, copies and the shortest kernel on a device");
  measure->footer(
      "Times each GEMM shape (at::mm, or at::bmm for a COUNT > 1, into a preallocated result), a copy of\n"
      "each stream size and a one-element add, the median of --repeats calls after --warmup, on a GPU\n"
      "with CUDA events; writes a baton.kernels.v1 file for `baton kernels check`. By default the GEMMs\n"
      "of GPT layers (hidden 2048-12288, 2048 and 8192 tokens, tensor parallel 1 and 8, attention's\n"
      "batched products) and copies of 1 MiB to 1 GiB. Progress goes to stderr.\n"
      "Example: baton kernels measure --device cuda -o out/h100-kernels.json");
  measure->add_option("--device", args->device, "cpu (default), cuda or cuda:N")->check(check_device_name);
  measure->add_option("--dtype", args->dtype, "bf16 (default), fp16 or fp32")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  measure->add_option("--gemm", args->gemms, "a GEMM MxNxK or MxNxKxCOUNT ([m x k] x [k x n]), repeatable");
  measure->add_option("--stream-bytes", args->stream_bytes, "a copy's bytes read + written, repeatable")
      ->check(at_least(1));
  measure->add_option("--warmup", args->warmup, "calls thrown away per kernel (default 3)")->check(at_least(0));
  measure->add_option("--repeats", args->repeats, "calls timed per kernel; the median is kept (default 10)")
      ->check(at_least(1));
  measure->add_option("-o,--output", args->output, "write the measurements here (default: standard output)");
  measure->callback([args, &result] { result.exit_code = run_kernels_measure(*args); });

  CLI::App* check = kernels->add_subcommand("check", "Hold the GPU kernel model against measured kernels");
  check->footer(
      "Predicts every measured GEMM and copy with the kernel model the Megatron predictions use\n"
      "(sim/gpu_model.h) for --gpu, and prints, as Markdown, each row's error and the fractions of the\n"
      "GPU's peaks the device reached beside the model's gemm_efficiency and memory_efficiency. The\n"
      "model was fitted to whole A100 iterations, so isolated kernels run faster than it says; what the\n"
      "check shows is whether a GPU reaches the fractions of its peaks the model assumes for it.\n"
      "Example: baton kernels check out/h100-kernels.json --gpu H100-SXM5-80GB");
  check->add_option("kernels", args->input, "a baton.kernels.v1 file")->required();
  check
      ->add_option("--gpu", args->gpu, "the GPU model: A100-SXM4-80GB, H100-SXM5-80GB, ... (or a100, h100, h200, v100)")
      ->required();
  check->add_option("-o,--output", args->output, "write the Markdown here (default: standard output)");
  check->callback([args, &result] { result.exit_code = run_kernels_check(*args); });
}

}  // namespace baton::cli
