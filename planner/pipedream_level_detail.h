// What planner/pipedream_level.cc and planner/pipedream_floors.cc share: the
// solver's constants and the range sums of cumulative arrays.
#pragma once

#include <limits>
#include <vector>

namespace baton::detail {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Windows and bounds are widened by this fraction of the problem's scale, far
// above rounding error (~1e-15) and far below any difference that matters.
inline constexpr double kRelativeSlack = 1e-9;

// X(i..j) = cum[j] - cum[i-1] (cum[j] for i = 0).
inline double difference(const std::vector<double>& cumulative, int i, int j) {
  return i > 0 ? cumulative[j] - cumulative[i - 1] : cumulative[j];
}

}  // namespace baton::detail
