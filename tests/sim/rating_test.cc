// rate_plan and find_repeat (sim/rating.h): a plan's time from its simulated
// Program; a steady state read off stage-0 completions once they repeat.
#include "tests/catch_compat.h"

#include "sim/rating.h"
#include "tests/sim/test_support.h"

using namespace baton;
using namespace baton::testing;

namespace {

// c_k = k x step for k >= start, with a start-up of `start` irregular values.
std::vector<Seconds> completions(int count, int start, double step, double jitter_period = 0.0) {
  std::vector<Seconds> c;
  for (int k = 0; k < count; ++k) {
    double value = k < start ? 0.3 * k : 0.3 * start + (k - start) * step;
    if (jitter_period > 0 && k >= start && (k - start) % 2 == 1) value += jitter_period;
    c.push_back(Seconds(value));
  }
  return c;
}

}  // namespace

TEST_CASE("find_repeat: an arithmetic tail repeats every period", "[sim][rating]") {
  const auto repeat = find_repeat(completions(100, 10, 2.0), 1, 5);
  REQUIRE(repeat);
  CHECK(repeat->minibatches == 1);
  CHECK(close_rel(repeat->per_minibatch.value, 2.0));
}

TEST_CASE("find_repeat: a run that repeats every second period gives K = 2", "[sim][rating]") {
  // Odd minibatches end 0.5 later: c_{k+1} - c_k alternates 2.5, 1.5; c_{k+2} - c_k = 4.
  const auto repeat = find_repeat(completions(100, 10, 2.0, 0.5), 1, 5);
  REQUIRE(repeat);
  CHECK(repeat->minibatches == 2);
  CHECK(close_rel(repeat->per_minibatch.value, 2.0));
}

TEST_CASE("find_repeat: a run still speeding up does not repeat", "[sim][rating]") {
  std::vector<Seconds> c;
  for (int k = 0; k < 100; ++k) c.push_back(Seconds(k * 2.0 + 10.0 / (k + 1)));
  CHECK_FALSE(find_repeat(c, 1, 5));
}

TEST_CASE("rate_plan: a flush schedule's iteration, (M + S - 1)(tF + tB)", "[sim][rating]") {
  const Profile profile = make_uniform_profile(3, Seconds::from_ms(1), Seconds::from_ms(2), Bytes(0), Bytes(0));
  const Topology topology = make_flat_topology(3, 100.0, Seconds(0.0));
  const Plan plan = make_plan(one_layer_per_stage(3), Schedule::kOneFOneB, 8, topology);
  const auto rating = rate_plan(plan, profile, topology, Optimizer::kAdam);
  REQUIRE(rating.ok());
  CHECK(rating->exact);
  CHECK(close_rel(rating->iteration_time.ms(), (8 + 3 - 1) * 3.0));
  CHECK(close_rel(rating->throughput_samples_per_s, 8 / ((8 + 3 - 1) * 3e-3)));
}

TEST_CASE("rate_plan: pipedream's steady state is the slowest stage's tF + tB, exactly", "[sim][rating]") {
  // Uniform stages, free communication: max_s (tF_s + tB_s) / r_s = 3 ms.
  const Profile profile = make_uniform_profile(4, Seconds::from_ms(1), Seconds::from_ms(2), Bytes(0), Bytes(0));
  const Topology topology = make_flat_topology(4, 100.0, Seconds(0.0));
  const Plan plan = make_plan(one_layer_per_stage(4), Schedule::kPipeDream, 1, topology);
  const auto rating = rate_plan(plan, profile, topology, Optimizer::kAdam);
  REQUIRE(rating.ok());
  CHECK(rating->exact);
  CHECK(rating->repeat_minibatches >= 1);
  CHECK(close_rel(rating->iteration_time.ms(), 3.0));
  CHECK(rating->simulated_minibatches == 4 * pipedream_minibatches(plan));
}
