#include "exec/device.h"

#include <vector>

#include <fmt/format.h>

#include "exec/cuda/device_cuda.h"
#include "exec/executor.h"

namespace baton::exec {

namespace {

class CpuDevice final : public WorkerDevice {
 public:
  at::Device device() const override { return at::Device(at::kCPU); }
  std::string describe() const override { return "cpu"; }
  int64_t memory_bytes() const override { return 0; }
  void bind_thread() override {}
  void unbind_thread() override {}
  Origin origin() override { return Origin{Clock::now(), nullptr}; }
  void begin(const Origin& origin) override {
    origin_ = origin.host;
    marks_.clear();
  }
  int mark() override {
    marks_.push_back(Clock::now());
    return static_cast<int>(marks_.size()) - 1;
  }
  Status settle() override { return ok_status(); }
  Seconds seconds(int m) const override {
    return Seconds(std::chrono::duration<double>(marks_[static_cast<size_t>(m)] - origin_).count());
  }
  EventPtr ready() override { return nullptr; }
  void await(const EventPtr&) override {}
  at::Tensor accept(const at::Tensor& tensor, const EventPtr&) override { return tensor; }

 private:
  Clock::time_point origin_;
  std::vector<Clock::time_point> marks_;
};

}  // namespace

bool built_with_cuda() { return cuda::built(); }

int cuda_device_count() { return cuda::device_count(); }

Result<DeviceInfo> device_info(const std::string& name) {
  auto device = make_worker_device(name);
  if (!device) return device.error();
  return DeviceInfo{(*device)->describe(), (*device)->memory_bytes()};
}

Result<WorkerDevicePtr> make_worker_device(const std::string& name) {
  if (name == "cpu") return WorkerDevicePtr(std::make_unique<CpuDevice>());
  int index = -1;
  if (name == "cuda") {
    index = 0;
  } else if (name.starts_with("cuda:")) {
    const std::string number = name.substr(5);
    if (!number.empty() && number.size() < 4 && number.find_first_not_of("0123456789") == std::string::npos)
      index = std::stoi(number);
  }
  if (index < 0) return Error{fmt::format("unknown device '{}' (cpu, cuda or cuda:N)", name)};
  return cuda::make_device(index);
}

}  // namespace baton::exec
