#include "sim/megatron_rope.h"

#include <array>

namespace baton::megatron_detail {

namespace {

constexpr std::array<double, 6> kForwardBytes{2.0, 4.0, 4.0, 4.0, 6.0, 4.0};
constexpr std::array<double, 5> kBackwardBytes{4.0, 4.0, 2.0, 4.0, 6.0};
// cos, times the scale, to half precision; sin likewise: fp32 in, the last
// one writing half precision.
constexpr std::array<double, 6> kTableBytes{8.0, 8.0, 6.0, 8.0, 8.0, 6.0};

template <size_t N>
Seconds passes(const GpuModel& gpu, const std::array<double, N>& bytes_per_value, double values) {
  Seconds time;
  for (const double bytes : bytes_per_value) time += gpu.memory_bound(bytes * values);
  return time;
}

}  // namespace

UnfusedRope unfused_rope(const GpuModel& gpu, const BlockShape& x) {
  UnfusedRope out;
  if (!x.rope || x.rope_fusion || x.mla) return out;
  const double table = x.s * x.head_qk;  // the s x d frequencies
  for (const double width : {x.q, x.kv}) {
    const double values = x.tokens * width / x.t;
    out.forward += passes(gpu, kForwardBytes, values) + passes(gpu, kTableBytes, table);
    out.backward += passes(gpu, kBackwardBytes, values);
    out.forward_kernels += static_cast<int>(kForwardBytes.size() + kTableBytes.size());
    out.backward_kernels += static_cast<int>(kBackwardBytes.size());
  }
  return out;
}

}  // namespace baton::megatron_detail
