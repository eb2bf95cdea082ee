// Link calibration's fit (sim/link_fit.h) on data built from known links.
#include <array>
#include <vector>

#include "tests/catch_compat.h"

#include "sim/link_fit.h"
#include "sim/network.h"
#include "tests/sim/test_support.h"

using namespace baton;
using baton::testing::close_rel;

namespace {

// t(s) = latency + s * 8 / (gbps * 1e9), the model the fit assumes.
std::vector<TransferSample> exact_samples(double latency_us, double gbps) {
  std::vector<TransferSample> samples;
  for (int64_t size : {int64_t{4}, int64_t{1} << 10, int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 22}) {
    samples.push_back({Bytes(size), Seconds::from_us(latency_us) + Seconds(size * 8.0 / (gbps * 1e9))});
  }
  return samples;
}

}  // namespace

TEST_CASE("the fit recovers the latency and bandwidth of exact samples", "[link_fit]") {
  const auto samples = exact_samples(50.0, 8.0);
  auto fit = fit_link(samples);
  REQUIRE(fit.ok());
  CHECK(close_rel(fit->latency.value, 50e-6, 1e-9));
  CHECK(close_rel(fit->bandwidth_gbps, 8.0, 1e-9));
  CHECK(fit->max_relative_residual < 1e-9);
  // predict is the model itself: 1 MiB at 8 Gb/s = 2^20 / 1e9 s, plus 50 us.
  CHECK(close_rel(fit->predict(Bytes(1 << 20)).value, 50e-6 + (1 << 20) / 1e9, 1e-9));
}

TEST_CASE("the fit weighs small and large messages alike (relative residuals)", "[link_fit]") {
  // The 4-byte sample is 10% slow, the others exact: a relative fit keeps the
  // bandwidth within a few percent and puts the latency between 50 and 55 us.
  auto samples = exact_samples(50.0, 8.0);
  samples[0].time = samples[0].time * 1.1;
  auto fit = fit_link(samples);
  REQUIRE(fit.ok());
  CHECK(fit->latency.value > 50e-6);
  CHECK(fit->latency.value < 55e-6);
  CHECK(close_rel(fit->bandwidth_gbps, 8.0, 0.03));
  CHECK(fit->max_relative_residual < 0.1);
}

TEST_CASE("a negative latency is clamped to zero and the slope refitted", "[link_fit]") {
  // t = s / 1 GB/s - 1 us on the large sizes would need a negative intercept.
  const std::array<TransferSample, 2> samples{TransferSample{Bytes(1000000), Seconds(1e-3 - 1e-6)},
                                              TransferSample{Bytes(2000000), Seconds(2e-3 - 1e-6)}};
  auto fit = fit_link(samples);
  REQUIRE(fit.ok());
  CHECK(fit->latency.value == 0.0);
  // Slope b minimizing sum (b s_i / t_i - 1)^2 = sum x_i / sum x_i^2 with x_i = s_i / t_i.
  const double x1 = 1000000 / (1e-3 - 1e-6);
  const double x2 = 2000000 / (2e-3 - 1e-6);
  const double b = (x1 + x2) / (x1 * x1 + x2 * x2);
  CHECK(close_rel(fit->bandwidth_gbps, 8.0 / b / 1e9, 1e-12));
}

TEST_CASE("the fit refuses samples it cannot fit", "[link_fit]") {
  const std::array<TransferSample, 2> one_size{TransferSample{Bytes(64), Seconds(1e-5)},
                                               TransferSample{Bytes(64), Seconds(2e-5)}};
  auto fit = fit_link(one_size);
  REQUIRE_FALSE(fit.ok());
  CHECK(fit.error().message.find("two different sizes") != std::string::npos);
  const std::array<TransferSample, 2> zero_time{TransferSample{Bytes(64), Seconds(0)},
                                                TransferSample{Bytes(128), Seconds(2e-5)}};
  REQUIRE_FALSE(fit_link(zero_time).ok());
  const std::array<TransferSample, 2> shrinking{TransferSample{Bytes(64), Seconds(2e-5)},
                                                TransferSample{Bytes(1 << 20), Seconds(1e-5)}};
  auto bad = fit_link(shrinking);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("does not grow") != std::string::npos);
}

TEST_CASE("ring_allreduce_time is the simulator's all-reduce on one level", "[link_fit]") {
  const LinkFit link{Seconds::from_us(20), 16.0, 0.0};
  for (int n : {2, 3, 4}) {
    const Topology flat = make_flat_topology(n, link.bandwidth_gbps, link.latency);
    const Network network(flat);
    std::vector<int> devices;
    for (int d = 0; d < n; ++d) devices.push_back(d);
    const Bytes size(3 << 20);
    // 2 (n-1)/n * size / (2 GB/s) + 2 (n-1) * 20 us.
    const double expected = 2.0 * (n - 1.0) / n * (3 << 20) / 2e9 + 2.0 * (n - 1.0) * 20e-6;
    CHECK(close_rel(ring_allreduce_time(n, size, link).value, expected, 1e-12));
    CHECK(close_rel(network.allreduce_time(devices, size).value, expected, 1e-12));
  }
  CHECK(ring_allreduce_time(1, Bytes(1 << 20), link).value == 0.0);
}

TEST_CASE("fit_ring recovers the ring parameters of exact all-reduce times", "[link_fit]") {
  const LinkFit ring{Seconds::from_us(150), 2.0, 0.0};
  for (int n : {2, 4}) {
    std::vector<TransferSample> samples;
    // Sizes divisible by n, so s / n is exact.
    for (int64_t size : {int64_t{4} * n, int64_t{1} << 12, int64_t{1} << 20, int64_t{1} << 22})
      samples.push_back({Bytes(size), ring_allreduce_time(n, Bytes(size), ring)});
    auto fit = fit_ring(samples, n);
    REQUIRE(fit.ok());
    CHECK(close_rel(fit->latency.value, 150e-6, 1e-9));
    CHECK(close_rel(fit->bandwidth_gbps, 2.0, 1e-9));
    CHECK(fit->max_relative_residual < 1e-9);
  }
  REQUIRE_FALSE(fit_ring(exact_samples(1.0, 1.0), 1).ok());
}

TEST_CASE("a level's all-reduce parameters replace its link's in the simulator's ring", "[link_fit]") {
  Topology flat = make_flat_topology(4, 80.0, Seconds::from_us(2));
  flat.levels[0].allreduce_bandwidth_gbps = 8.0;
  flat.levels[0].allreduce_latency = Seconds::from_us(100);
  const Network network(flat);
  const std::vector<int> devices{0, 1, 2, 3};
  // 2 (4 - 1) / 4 * 1e6 B / 1e9 B/s + 2 (4 - 1) * 100 us = 1.5 ms + 0.6 ms.
  CHECK(close_rel(network.allreduce_time(devices, Bytes(1000000)).value, 1.5e-3 + 0.6e-3, 1e-12));
  // Both fields survive the format.
  auto back = topology_from_json(topology_to_json(flat), "round trip");
  REQUIRE(back.ok());
  CHECK(back->levels[0].allreduce_bandwidth_gbps == 8.0);
  CHECK(close_rel(back->levels[0].allreduce_latency->value, 100e-6, 1e-12));
}
