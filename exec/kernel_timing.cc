// measure_kernels (exec/executor.h): single kernels timed on one device.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "exec/device.h"
#include "exec/errors.h"
#include "exec/executor.h"
#include "sim/stats.h"

namespace baton::exec {

namespace {

Result<at::ScalarType> scalar_type(const std::string& dtype) {
  if (dtype == "bf16") return at::kBFloat16;
  if (dtype == "fp16") return at::kHalf;
  if (dtype == "fp32") return at::kFloat;
  return Error{fmt::format("kernels: dtype must be bf16, fp16 or fp32, got '{}'", dtype)};
}

// The median time of `call` over `repeats` calls after `warmup`, each between
// two marks of `device` (the device is idle before each).
template <typename F>
Seconds median_time(WorkerDevice& device, int warmup, int repeats, F&& call) {
  std::vector<double> times;
  for (int r = 0; r < warmup + repeats; ++r) {
    device.begin(device.origin());
    const int start = device.mark();
    call();
    const int end = device.mark();
    if (Status settled = device.settle(); !settled) throw std::runtime_error(settled.error().message);
    if (r >= warmup) times.push_back(device.seconds(end).value - device.seconds(start).value);
  }
  return Seconds(quantile(std::move(times), 0.5));
}

}  // namespace

Result<MeasuredKernels> measure_kernels(const KernelOptions& options) {
  if (options.warmup < 0 || options.repeats < 1) return Error{"kernels: warmup must be >= 0 and repeats >= 1"};
  if (options.gemms.empty() || options.stream_bytes.empty()) return Error{"kernels: no GEMM shape or stream size"};
  for (const GemmShape& s : options.gemms)
    if (s.m < 1 || s.n < 1 || s.k < 1 || s.count < 1)
      return Error{fmt::format("kernels: GEMM {}x{}x{}x{} has a dimension below 1", s.m, s.n, s.k, s.count)};
  auto type = scalar_type(options.dtype);
  if (!type) return type.error();
  auto made = make_worker_device(options.device);
  if (!made) return made.error();
  WorkerDevice& device = **made;
  device.bind_thread();
  struct Unbind {
    WorkerDevice& device;
    ~Unbind() { device.unbind_thread(); }
  } unbind{device};
  const at::TensorOptions tensor = at::TensorOptions().dtype(*type).device(device.device());
  MeasuredKernels out;
  out.device = device.describe();
  out.dtype = options.dtype;
  try {
    for (const GemmShape& s : options.gemms) {
      const bool batched = s.count > 1;
      const at::Tensor a = batched ? at::randn({s.count, s.m, s.k}, tensor) : at::randn({s.m, s.k}, tensor);
      const at::Tensor b = batched ? at::randn({s.count, s.k, s.n}, tensor) : at::randn({s.k, s.n}, tensor);
      at::Tensor c = batched ? at::empty({s.count, s.m, s.n}, tensor) : at::empty({s.m, s.n}, tensor);
      const Seconds time = median_time(device, options.warmup, options.repeats, [&] {
        if (batched) {
          at::bmm_out(c, a, b);
        } else {
          at::mm_out(c, a, b);
        }
      });
      out.gemms.push_back({s, time});
      if (options.progress)
        options.progress(fmt::format("GEMM {} x {} x {} (x{}): {:.1f} us", s.m, s.n, s.k, s.count, time.value * 1e6));
    }
    const int64_t element = static_cast<int64_t>(c10::elementSize(*type));
    for (const int64_t bytes : options.stream_bytes) {
      const int64_t elements = std::max<int64_t>(1, bytes / 2 / element);
      const at::Tensor source = at::ones({elements}, tensor);
      at::Tensor target = at::empty({elements}, tensor);
      const Seconds time = median_time(device, options.warmup, options.repeats, [&] { target.copy_(source); });
      out.streams.push_back({2 * elements * element, time});
      if (options.progress)
        options.progress(fmt::format("copy of {} bytes: {:.1f} us", 2 * elements * element, time.value * 1e6));
    }
    at::Tensor one = at::zeros({1}, tensor);
    out.tiny_kernel = median_time(device, options.warmup, options.repeats, [&] { one.add_(1); });
  } catch (const std::exception& e) {
    return Error{fmt::format("kernels on {}: {}", out.device, error_text(e))};
  }
  return out;
}

}  // namespace baton::exec
