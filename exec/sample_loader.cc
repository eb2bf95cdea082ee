#include "exec/sample_loader.h"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace baton::exec {

SampleLoader::SampleLoader(const ModelDef& model, uint64_t seed, int64_t microbatch_size, int batches,
                           at::Device device, bool ahead)
    : model_(&model),
      seed_(seed),
      microbatch_size_(microbatch_size),
      batches_(batches),
      device_(device),
      ahead_(ahead) {}

SampleLoader::~SampleLoader() {
  if (next_.valid()) next_.wait();
}

Sample SampleLoader::make(int step, int microbatch) const {
  return model_->sample(seed_, (static_cast<int64_t>(step) * batches_ + microbatch) * microbatch_size_,
                        microbatch_size_);
}

std::vector<Sample> SampleLoader::make_step(int step) const {
  std::vector<Sample> samples;
  samples.reserve(static_cast<size_t>(batches_));
  for (int k = 0; k < batches_; ++k) {
    const Sample sample = make(step, k);
    samples.push_back(Sample{sample.input.pin_memory(), sample.target.pin_memory()});
  }
  return samples;
}

void SampleLoader::begin_iteration(int step) {
  step_ = step;
  if (!ahead_) return;
  if (next_.valid() && next_step_ == step) {
    current_ = next_.get();
  } else {
    if (next_.valid()) next_.wait();  // another step's: not used
    current_ = make_step(step);
  }
  next_step_ = step + 1;
  next_ = std::async(std::launch::async, [this, next = next_step_] { return make_step(next); });
}

const Sample& SampleLoader::sample(int microbatch) {
  if (microbatch < 0 || microbatch >= static_cast<int>(current_.size()))
    throw std::logic_error(fmt::format("sample loader: microbatch {} of step {} was not loaded", microbatch, step_));
  return current_[static_cast<size_t>(microbatch)];
}

at::Tensor SampleLoader::input(int microbatch) {
  if (!ahead_) return make(step_, microbatch).input.to(device_);
  return sample(microbatch).input.to(device_, /*non_blocking=*/true);
}

at::Tensor SampleLoader::target(int microbatch) {
  if (!ahead_) return make(step_, microbatch).target.to(device_);
  return sample(microbatch).target.to(device_, /*non_blocking=*/true);
}

}  // namespace baton::exec
