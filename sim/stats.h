// Order statistics of measurements (profiles, measured step times).
// Thread safety: pure functions.
#pragma once

#include <vector>

namespace baton {

// The q-quantile (0 <= q <= 1) of `values` by linear interpolation between
// order statistics: with the values sorted, position q (n - 1), so q = 0.5 is
// the median (the mean of the middle two when n is even), q = 0 the minimum
// and q = 1 the maximum. `values` must not be empty.
double quantile(std::vector<double> values, double q);

}  // namespace baton
