#include "sim/link_fit.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include <fmt/format.h>

namespace baton {

namespace {

// Seconds per byte for a given latency: minimizes sum ((a + b s - t) / t)^2 in b.
double slope_for(std::span<const TransferSample> samples, double latency) {
  double num = 0.0;
  double den = 0.0;
  for (const TransferSample& s : samples) {
    const double x = static_cast<double>(s.size.value) / s.time.value;
    num += x * (1.0 - latency / s.time.value);
    den += x * x;
  }
  return den > 0.0 ? num / den : 0.0;
}

}  // namespace

Seconds LinkFit::predict(Bytes size) const {
  return latency + transfer_time(size, Bandwidth::from_gbps(bandwidth_gbps));
}

Result<LinkFit> fit_link(std::span<const TransferSample> samples) {
  std::set<int64_t> sizes;
  for (const TransferSample& s : samples) {
    if (!(s.time.value > 0.0) || s.size.value < 0)
      return Error{
          fmt::format("link fit: a sample of {} bytes took {} s; times must be > 0", s.size.value, s.time.value)};
    sizes.insert(s.size.value);
  }
  if (sizes.size() < 2) return Error{"link fit: needs samples of at least two different sizes"};
  // Normal equations of the relative least squares in (a, b).
  double s11 = 0.0, s12 = 0.0, s22 = 0.0, r1 = 0.0, r2 = 0.0;
  for (const TransferSample& s : samples) {
    const double x1 = 1.0 / s.time.value;
    const double x2 = static_cast<double>(s.size.value) / s.time.value;
    s11 += x1 * x1;
    s12 += x1 * x2;
    s22 += x2 * x2;
    r1 += x1;
    r2 += x2;
  }
  const double det = s11 * s22 - s12 * s12;
  double a = det != 0.0 ? (r1 * s22 - r2 * s12) / det : 0.0;
  double b = det != 0.0 ? (s11 * r2 - s12 * r1) / det : 0.0;
  if (a < 0.0 || det == 0.0) {
    a = 0.0;
    b = slope_for(samples, 0.0);
  }
  if (!(b > 0.0)) {
    return Error{"link fit: the measured time does not grow with the message size; measure larger messages"};
  }
  LinkFit fit{Seconds(a), 8.0 / b / 1e9, 0.0};
  for (const TransferSample& s : samples) {
    fit.max_relative_residual =
        std::max(fit.max_relative_residual, std::abs(fit.predict(s.size).value - s.time.value) / s.time.value);
  }
  return fit;
}

Seconds ring_allreduce_time(int devices, Bytes size, const LinkFit& link) {
  if (devices <= 1) return Seconds(0);
  const double n = devices;
  return transfer_time(size, Bandwidth::from_gbps(link.bandwidth_gbps)) * (2.0 * (n - 1.0) / n) +
         link.latency * (2.0 * (n - 1.0));
}

Result<LinkFit> fit_ring(std::span<const TransferSample> samples, int devices) {
  if (devices < 2) return Error{fmt::format("ring fit: needs >= 2 devices, got {}", devices)};
  const double n = devices;
  std::vector<TransferSample> scaled;
  for (const TransferSample& s : samples)
    scaled.push_back({Bytes(static_cast<int64_t>(std::llround(static_cast<double>(s.size.value) / n))),
                      s.time * (1.0 / (2.0 * (n - 1.0)))});
  auto fit = fit_link(scaled);
  if (!fit) return fit.error();
  fit->max_relative_residual = 0.0;
  for (const TransferSample& s : samples) {
    fit->max_relative_residual =
        std::max(fit->max_relative_residual,
                 std::abs(ring_allreduce_time(devices, s.size, *fit).value - s.time.value) / s.time.value);
  }
  return fit;
}

}  // namespace baton
