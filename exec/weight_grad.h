// The zero-bubble split of a backward at the level of the matrix products: a
// linear layer y = x W^T + b whose weight gradient can be put off.
//
// `linear` is at::linear with its own backward. Normally that backward
// computes the gradients of x, W and b as autograd asks. While a
// DeferWeightGrads scope is open on the calling thread (the executor's I
// pass), it computes x's gradient only and records (x, dy, W, b) in the
// scope's store; WeightGradStore::apply later (the W pass) computes
// dW = dy^T x and db = sum(dy) for every record. The products are the same
// either way, so I + W does the work of one fused backward: the gradient of x
// once, of W once. Parameters of other operators (layer norms, embeddings,
// convolutions) get their gradients in I.
// Thread safety: a store and its scope belong to one thread.
#pragma once

#include <vector>

#include "exec/pch.h"

namespace baton::exec {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

class WeightGradStore {
 public:
  struct Record {
    at::Tensor input;        // x, as the forward saw it
    at::Tensor grad_output;  // dy
    at::Tensor weight;       // the parameter tensors, to find their gradient slots
    at::Tensor bias;
  };

  bool empty() const { return records_.empty(); }
  size_t size() const { return records_.size(); }
  void add(Record record) { records_.push_back(std::move(record)); }
  // Adds every record's dW and db to the gradient of the parameter it belongs
  // to: `params[i]`'s gradient is `grads[i]` (same shapes). Records whose
  // parameters are not among `params` are an error (returns false). Clears.
  bool apply(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads);

 private:
  std::vector<Record> records_;
};

// While alive, `linear`'s backward on this thread records into `store`.
class DeferWeightGrads {
 public:
  explicit DeferWeightGrads(WeightGradStore& store);
  ~DeferWeightGrads();
  DeferWeightGrads(const DeferWeightGrads&) = delete;
  DeferWeightGrads& operator=(const DeferWeightGrads&) = delete;

 private:
  WeightGradStore* previous_;
};

}  // namespace baton::exec
