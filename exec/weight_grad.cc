#include "exec/weight_grad.h"

#include <torch/csrc/autograd/custom_function.h>

namespace baton::exec {

namespace {

thread_local WeightGradStore* g_store = nullptr;

// dy and x as matrices of rows: [N, out] and [N, in].
at::Tensor rows(const at::Tensor& t) { return t.reshape({-1, t.size(-1)}); }

class DeferrableLinear : public torch::autograd::Function<DeferrableLinear> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) {
    ctx->save_for_backward({x, weight, bias});
    return at::linear(x, weight, bias);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& bias = saved[2];
    const at::Tensor& dy = grads[0];
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = at::matmul(dy, weight);
    if (g_store != nullptr) {
      g_store->add({x, dy, weight, bias});
    } else {
      if (ctx->needs_input_grad(1)) dw = at::mm(rows(dy).t(), rows(x));
      if (bias.defined() && ctx->needs_input_grad(2)) db = rows(dy).sum(0);
    }
    return {dx, dw, db};
  }
};

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return DeferrableLinear::apply(x, weight, bias);
}

bool WeightGradStore::apply(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) {
  const auto slot = [&](const at::Tensor& p) -> at::Tensor* {
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) return &grads[i];
    return nullptr;
  };
  at::NoGradGuard no_grad;
  for (const Record& r : records_) {
    at::Tensor* dw = slot(r.weight);
    if (dw == nullptr) return false;
    dw->add_(at::mm(rows(r.grad_output).t(), rows(r.input)));
    if (r.bias.defined()) {
      at::Tensor* db = slot(r.bias);
      if (db == nullptr) return false;
      db->add_(rows(r.grad_output).sum(0));
    }
  }
  records_.clear();
  return true;
}

DeferWeightGrads::DeferWeightGrads(WeightGradStore& store) : previous_(g_store) { g_store = &store; }

DeferWeightGrads::~DeferWeightGrads() { g_store = previous_; }

}  // namespace baton::exec
