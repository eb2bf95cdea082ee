// The NCCL core of the GPU transport (exec/gpu/nccl_comm.h) on one GPU: a
// one-rank communicator sends a buffer to itself inside a group and
// all-reduces it (the sum over one rank is the buffer). Without a CUDA device
// it checks what needs none and exits 77, which ctest reports as skipped.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "exec/gpu/nccl_comm.h"

namespace {

using baton::exec::gpu::NcclComm;

int failures = 0;

void expect(bool condition, const std::string& what) {
  if (condition) return;
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  ++failures;
}

template <typename T>
T must(baton::Result<T> result, const char* what) {
  if (!result) {
    std::fprintf(stderr, "FAILED: %s: %s\n", what, result.error().message.c_str());
    std::exit(1);
  }
  return std::move(result).value();
}

void must(const baton::Status& status, const char* what) {
  if (!status) {
    std::fprintf(stderr, "FAILED: %s: %s\n", what, status.error().message.c_str());
    std::exit(1);
  }
}

void self_send_and_allreduce() {
  constexpr size_t kCount = 1 << 16;
  std::vector<float> host(kCount);
  for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>(i % 1000) * 0.5f;
  if (cudaSetDevice(0) != cudaSuccess) {
    expect(false, "cudaSetDevice(0)");
    return;
  }
  auto comm = must(NcclComm::create(0, 1, must(baton::exec::gpu::make_unique_id(), "unique id")), "communicator");
  float* source = nullptr;
  float* target = nullptr;
  expect(cudaMalloc(&source, kCount * sizeof(float)) == cudaSuccess, "cudaMalloc source");
  expect(cudaMalloc(&target, kCount * sizeof(float)) == cudaSuccess, "cudaMalloc target");
  cudaMemcpy(source, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(target, 0, kCount * sizeof(float));
  must(comm->group_begin(), "group begin");
  must(comm->send(source, kCount, 0), "send to self");
  must(comm->recv(target, kCount, 0), "receive from self");
  must(comm->group_end(), "group end");
  must(comm->allreduce_sum(target, kCount), "all-reduce");
  must(comm->synchronize(), "synchronize");
  std::vector<float> back(kCount, -1.0f);
  cudaMemcpy(back.data(), target, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  expect(back == host, "the received and all-reduced buffer equals the one sent (sum over one rank)");
  cudaFree(source);
  cudaFree(target);
}

}  // namespace

int main() {
  // Needs no device: a rank outside the communicator is refused before any CUDA call.
  auto refused = NcclComm::create(1, 1, ncclUniqueId{});
  expect(!refused.ok(), "rank 1 of a 1-rank communicator is refused");
  if (!refused.ok())
    expect(refused.error().message == "NCCL communicator: rank 1 is outside [0, 1)", refused.error().message);
  if (baton::exec::gpu::device_count() == 0) {
    std::printf("no CUDA device: the NCCL self-send is skipped\n");
    return failures == 0 ? 77 : 1;
  }
  self_send_and_allreduce();
  if (failures == 0) std::printf("NCCL self-send and all-reduce on one GPU: ok\n");
  return failures == 0 ? 0 : 1;
}
