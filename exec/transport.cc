#include "exec/transport.h"

namespace baton::exec {

namespace {

// The default: nothing is posted; `wait` is the blocking receive (with the
// transport's own timeout).
class DeferredRecv final : public PostedRecv {
 public:
  DeferredRecv(Transport* transport, MessageKey key, std::vector<int64_t> shape, at::ScalarType dtype)
      : transport_(transport), key_(key), shape_(std::move(shape)), dtype_(dtype) {}
  Result<at::Tensor> wait(Seconds) override { return transport_->recv(key_, shape_, dtype_); }

 private:
  Transport* transport_;
  MessageKey key_;
  std::vector<int64_t> shape_;
  at::ScalarType dtype_;
};

}  // namespace

Result<PostedRecvPtr> Transport::post_recv(const MessageKey& key, const std::vector<int64_t>& shape,
                                           at::ScalarType dtype) {
  return PostedRecvPtr(std::make_unique<DeferredRecv>(this, key, shape, dtype));
}

}  // namespace baton::exec
