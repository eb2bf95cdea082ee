// Order statistics (sim/stats.h) on hand-computed cases.
#include "tests/catch_compat.h"

#include "sim/stats.h"

using namespace baton;

TEST_CASE("quantile interpolates between order statistics", "[stats]") {
  // Sorted: 1 2 3 4 10. Position q (n - 1) = 4 q.
  const std::vector<double> five{10, 2, 4, 1, 3};
  CHECK(quantile(five, 0.0) == 1.0);
  CHECK(quantile(five, 0.5) == 3.0);  // the middle one
  CHECK(quantile(five, 1.0) == 10.0);
  CHECK(quantile(five, 0.1) == Approx(1.4));  // position 0.4: 1 + 0.4 (2 - 1)
  CHECK(quantile(five, 0.9) == Approx(7.6));  // position 3.6: 4 + 0.6 (10 - 4)
  // Even count: the median is the mean of the middle two.
  CHECK(quantile({4, 1, 3, 2}, 0.5) == 2.5);
  CHECK(quantile({7}, 0.3) == 7.0);
}
