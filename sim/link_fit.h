// Link calibration: from measured transfer times to the bandwidth and latency
// of a topology level, under sim/topology.h's link model (a transfer of s bytes
// takes latency + s / bandwidth).
//
// fit_link minimizes the relative residuals sum_i ((a + b s_i - t_i) / t_i)^2
// over latency a >= 0 and seconds per byte b > 0: relative, so that a 4-byte
// message weighs as much as a 4 MiB one and the latency is not lost in the
// noise of the large transfers. It is linear least squares in (a, b) with
// features (1 / t_i, s_i / t_i) and target 1; when the unconstrained optimum
// has a < 0, the fit is redone with a = 0.
//
// ring_allreduce_time states the simulator's all-reduce model for n devices on
// one level (sim/network.cc): 2 (n - 1) / n * bytes / bandwidth + 2 (n - 1) *
// latency, so a calibration can set measured all-reduce times beside it.
// Thread safety: pure functions.
#pragma once

#include <span>
#include <vector>

#include "sim/result.h"
#include "sim/topology.h"
#include "sim/units.h"

namespace baton {

struct TransferSample {
  Bytes size;
  Seconds time;  // one message of `size`, sender to receiver
};

struct LinkFit {
  Seconds latency;
  double bandwidth_gbps = 0.0;
  // max over samples of |fitted - measured| / measured: how well the model fits.
  double max_relative_residual = 0.0;

  Seconds predict(Bytes size) const;
};

// Needs at least two distinct sizes and positive times.
Result<LinkFit> fit_link(std::span<const TransferSample> samples);

Seconds ring_allreduce_time(int devices, Bytes size, const LinkFit& link);

// The ring parameters (a level's allreduce_latency_us and
// allreduce_bandwidth_gbps) under which ring_allreduce_time fits measured
// all-reduce times on `devices` >= 2 devices: as t = 2 (n - 1) a + 2 (n - 1) / n
// * s / b, this is fit_link on the samples (s / n, t / (2 (n - 1))).
Result<LinkFit> fit_ring(std::span<const TransferSample> samples, int devices);

}  // namespace baton
