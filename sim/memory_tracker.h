// MemoryTracker: one worker's memory, followed action by action while simulating.
//
// Accounting (bytes held by one worker at one instant):
//   weights     = params x versions held, where the versions held are the live
//                 version plus every older version still referenced by an
//                 in-flight microbatch (weight stashing: a microbatch's backward
//                 needs the version its forward used);
//   gradients   = params (one accumulation buffer);
//   optimizer   = params x optimizer_factor (SGD 0, momentum 1, Adam 2);
//   activations = in-flight microbatches x stash bytes of the stage
//                 (allocated when a forward starts, freed when its backward ends);
//                 a worker that runs several chunks gives each forward and
//                 backward its chunk's stash, and `params` is all its chunks'.
// `peak()` is the largest sum seen; the component figures are their own peaks.
// Thread safety: none (one per worker per simulation).
#pragma once

#include <utility>
#include <vector>

#include "sim/units.h"

namespace baton {

class MemoryTracker {
 public:
  MemoryTracker(Bytes params, Bytes stash_per_microbatch, double optimizer_factor);

  // A forward starts using weight version `version`.
  void forward(int version) { forward(version, stash_); }
  // The backward of a microbatch whose forward used `version` finished.
  void backward(int version) { backward(version, stash_); }
  // The same, for a chunk whose stash per microbatch is `stash`.
  void forward(int version, Bytes stash);
  void backward(int version, Bytes stash);
  // The optimizer produced a new live version.
  void step() {
    ++live_version_;
    update();
  }

  int live_version() const { return live_version_; }
  // What is held now: weight versions (live one included) and in-flight microbatches.
  int versions_held() const;
  int inflight() const { return inflight_; }
  Bytes activations() const { return activations_; }
  // The sum above, now (peak() is its largest value so far).
  Bytes held() const;
  Bytes peak() const { return peak_; }
  int peak_versions() const { return peak_versions_; }
  Bytes peak_activations() const { return peak_activations_; }
  int peak_inflight() const { return peak_inflight_; }
  Bytes params() const { return params_; }
  Bytes optimizer_bytes() const { return optimizer_; }

 private:
  void update();

  Bytes params_;
  Bytes stash_;
  Bytes optimizer_;
  int live_version_ = 0;
  int inflight_ = 0;
  Bytes activations_;
  std::vector<std::pair<int, int>> version_refs_;  // (version, in-flight count), few entries
  Bytes peak_;
  int peak_versions_ = 1;
  Bytes peak_activations_;
  int peak_inflight_ = 0;
};

}  // namespace baton
