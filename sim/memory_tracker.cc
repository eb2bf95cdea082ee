#include "sim/memory_tracker.h"

#include <algorithm>
#include <cmath>

namespace baton {

MemoryTracker::MemoryTracker(Bytes params, Bytes stash_per_microbatch, double optimizer_factor)
    : params_(params),
      stash_(stash_per_microbatch),
      optimizer_(Bytes::rounded(static_cast<double>(params.value) * optimizer_factor)) {
  update();
}

void MemoryTracker::forward(int version, Bytes stash) {
  ++inflight_;
  activations_ += stash;
  auto it = std::find_if(version_refs_.begin(), version_refs_.end(),
                         [&](const auto& entry) { return entry.first == version; });
  if (it == version_refs_.end()) {
    version_refs_.emplace_back(version, 1);
  } else {
    ++it->second;
  }
  update();
}

void MemoryTracker::backward(int version, Bytes stash) {
  --inflight_;
  activations_ -= stash;
  auto it = std::find_if(version_refs_.begin(), version_refs_.end(),
                         [&](const auto& entry) { return entry.first == version; });
  if (it != version_refs_.end() && --it->second == 0) version_refs_.erase(it);
  update();
}

int MemoryTracker::versions_held() const {
  int held = static_cast<int>(version_refs_.size());
  const bool live_referenced = std::any_of(version_refs_.begin(), version_refs_.end(),
                                           [&](const auto& entry) { return entry.first == live_version_; });
  return live_referenced ? held : held + 1;
}

Bytes MemoryTracker::held() const { return params_ * versions_held() + params_ + optimizer_ + activations_; }

void MemoryTracker::update() {
  const int versions = versions_held();
  peak_ = max(peak_, held());
  peak_versions_ = std::max(peak_versions_, versions);
  peak_activations_ = max(peak_activations_, activations_);
  peak_inflight_ = std::max(peak_inflight_, inflight_);
}

}  // namespace baton
