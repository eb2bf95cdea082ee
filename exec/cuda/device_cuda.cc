// exec/device.h on a GPU: a stream from c10's pool per worker, CUDA events
// for marks and hand-overs. Built only against a LibTorch with CUDA.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "exec/cuda/cuda_event.h"
#include "exec/cuda/device_cuda.h"

namespace baton::exec::cuda {

namespace {

cudaDeviceProp properties_of(int index) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) std::snprintf(properties.name, 16, "unknown GPU");
  return properties;
}

class CudaDevice final : public WorkerDevice {
 public:
  explicit CudaDevice(c10::DeviceIndex index)
      : index_(index), stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index)) {}

  at::Device device() const override { return at::Device(at::kCUDA, index_); }
  std::string describe() const override { return fmt::format("cuda:{} ({})", index_, properties_of(index_).name); }
  int64_t memory_bytes() const override { return static_cast<int64_t>(properties_of(index_).totalGlobalMem); }

  void bind_thread() override {
    c10::cuda::set_device(index_);
    previous_ = c10::cuda::getCurrentCUDAStream(index_);
    c10::cuda::setCurrentCUDAStream(stream_);
  }
  void unbind_thread() override {
    if (previous_) c10::cuda::setCurrentCUDAStream(*previous_);
    previous_.reset();
  }

  Origin origin() override {
    // This worker's stream only: a device-wide synchronisation would also wait
    // for receives already posted on NCCL's streams (exec/cuda/nccl_links.h),
    // whose data come only once every rank has passed this point.
    stream_.synchronize();
    auto event = std::make_shared<CudaEvent>(cudaEventDefault);
    event->event.record(stream_);
    return Origin{Clock::now(), std::move(event)};
  }
  void begin(const Origin& origin) override {
    origin_ = std::dynamic_pointer_cast<CudaEvent>(origin.device);
    used_ = 0;
    seconds_.clear();
  }
  int mark() override {
    if (used_ == marks_.size()) marks_.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    marks_[used_]->record(stream_);
    return static_cast<int>(used_++);
  }
  Status settle() override {
    if (!origin_) return Error{"the iteration has no CUDA origin event"};
    try {
      stream_.synchronize();
      seconds_.resize(used_);
      for (size_t m = 0; m < used_; ++m) seconds_[m] = Seconds(origin_->event.elapsed_time(*marks_[m]) / 1e3);
    } catch (const std::exception& e) {
      return Error{fmt::format("cuda:{}: {}", index_, e.what())};
    }
    return ok_status();
  }
  Seconds seconds(int m) const override { return seconds_[static_cast<size_t>(m)]; }

  EventPtr ready() override {
    auto event = std::make_shared<CudaEvent>(cudaEventDisableTiming);
    event->event.record(stream_);
    return event;
  }
  void await(const EventPtr& event) override {
    if (auto* cuda_event = dynamic_cast<CudaEvent*>(event.get())) cuda_event->event.block(stream_);
  }
  at::Tensor accept(const at::Tensor& tensor, const EventPtr& event) override {
    await(event);
    // The source's memory belongs to the sender's stream: keep it from being
    // reused before this stream has copied it.
    tensor.record_stream(stream_);
    const c10::cuda::CUDAStreamGuard guard(stream_);
    return tensor.clone();
  }

 private:
  c10::DeviceIndex index_;
  c10::cuda::CUDAStream stream_;
  std::optional<c10::cuda::CUDAStream> previous_;
  std::shared_ptr<CudaEvent> origin_;
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> marks_;  // reused from iteration to iteration
  size_t used_ = 0;
  std::vector<Seconds> seconds_;
};

}  // namespace

bool built() { return true; }

int device_count() { return c10::cuda::device_count(); }

Result<WorkerDevicePtr> make_device(int index) {
  const int count = c10::cuda::device_count();
  if (count == 0) {
    return Error{
        fmt::format("device cuda:{}: no CUDA GPU is visible (driver missing, no GPU, or "
                    "CUDA_VISIBLE_DEVICES hides them)",
                    index)};
  }
  if (index >= count) return Error{fmt::format("device cuda:{}: only {} GPU(s) are visible", index, count)};
  try {
    // fp32 as on the CPU, without TensorFloat-32 in cuBLAS and cuDNN: runs are
    // held against references to 1e-5, and profiles describe fp32 work.
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
    return WorkerDevicePtr(std::make_unique<CudaDevice>(static_cast<c10::DeviceIndex>(index)));
  } catch (const std::exception& e) {
    return Error{fmt::format("device cuda:{}: {}", index, e.what())};
  }
}

}  // namespace baton::exec::cuda
