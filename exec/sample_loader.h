// A worker's data loader: the samples its first stage reads as input and its
// last stage compares with (exec/model.h: a sample is a pure function of the
// seed and its number, so where and when it is made changes no result).
//
// On the CPU the samples are made inline, inside the forward that uses them:
// the CPU executor and `profile measure` both time that work as part of the
// forward, and the recorded CPU validations rest on it.
//
// On a GPU they are made ahead, as a DataLoader with workers and pin_memory
// does: a loader thread makes the next iteration's samples in pinned host
// memory while this iteration runs, and a forward only issues their
// asynchronous copy on the worker's stream. Made inline, they kept the GPU
// idle inside the forwards: on an H100, vgg-mini's first layer took 2.03 ms
// per forward of 64 samples (their 196,608 normal numbers drawn on one core)
// and its last layer 1.97 ms (the whole sample drawn again for its labels),
// against 0.07-0.13 ms for the other layers; made ahead, 0.17 and 0.13 ms
// (profile measure in tools/gpu-check; bench/RESULTS.md).
//
// Thread safety: one worker thread calls every method; the loader thread
// only runs ModelDef::sample, which shares nothing.
#pragma once

#include <cstdint>
#include <future>
#include <vector>

#include <ATen/ATen.h>

#include "exec/model.h"

namespace baton::exec {

class SampleLoader {
 public:
  // Microbatches [0, batches) of iteration s are the samples
  // [(s batches + k) microbatch_size, ... + microbatch_size) of `model`.
  // `ahead`: make them on a loader thread, one iteration ahead, pinned (a
  // GPU `device`); otherwise inline.
  SampleLoader(const ModelDef& model, uint64_t seed, int64_t microbatch_size, int batches, at::Device device,
               bool ahead);
  ~SampleLoader();
  SampleLoader(const SampleLoader&) = delete;
  SampleLoader& operator=(const SampleLoader&) = delete;

  // Iteration `step` begins: ahead, its samples are taken (waited for, or
  // made now when the loader made another step's) and the next step's begun.
  void begin_iteration(int step);
  // Microbatch k's input and target on the device (an asynchronous copy on
  // the calling thread's current stream when ahead).
  at::Tensor input(int microbatch);
  at::Tensor target(int microbatch);

  // Whether samples are made ahead on a loader thread for `device`.
  static bool made_ahead_on(at::Device device) { return device.is_cuda(); }

 private:
  // Microbatch k of iteration `step`, made now on the host.
  Sample make(int step, int microbatch) const;
  std::vector<Sample> make_step(int step) const;
  const Sample& sample(int microbatch);

  const ModelDef* model_;
  uint64_t seed_;
  int64_t microbatch_size_;
  int batches_;
  at::Device device_;
  bool ahead_;
  int step_ = 0;
  std::vector<Sample> current_;  // ahead: this iteration's samples, pinned
  int next_step_ = -1;           // the step `next_` makes, -1 when none
  std::future<std::vector<Sample>> next_;
};

}  // namespace baton::exec
