// States (cuts) of PipeDream's optimizer on hand-enumerated graphs.
#include "tests/catch_compat.h"

#include <fmt/format.h>

#include "planner/pipedream_states.h"

using namespace baton;
using namespace baton;

namespace {

// A layer of `f + b` milliseconds, `out` bytes of activation, `params` bytes.
Layer layer(const std::string& name, double ms, int64_t out, int64_t params, std::vector<int> inputs,
            const std::string& description = "op") {
  Layer l;
  l.name = name;
  l.description = description;
  l.forward = Seconds::from_ms(ms / 2);
  l.backward = Seconds::from_ms(ms / 2);
  l.output_bytes = Bytes(out);
  l.param_bytes = Bytes(params);
  l.inputs = std::move(inputs);
  return l;
}

// The ancestor states of j, by the subset test.
std::vector<int> ancestors_of(const StateSpace& s, int j) {
  std::vector<int> out;
  for (int k = 0; k < s.num_states(); ++k)
    if (s.is_ancestor(k, j)) out.push_back(k);
  return out;
}

StateSpace states_ok(const Profile& profile) {
  auto space = build_state_space(profile, 1000);
  INFO((space ? std::string() : space.error().message));
  REQUIRE(space.ok());
  return *space;
}

}  // namespace

TEST_CASE("a chain of N layers gives N states with prefix sums", "[planner][pipedream][states]") {
  Profile p;
  p.layers = {layer("a", 1, 10, 100, {}), layer("b", 2, 20, 200, {0}), layer("c", 4, 40, 400, {1})};
  const StateSpace s = states_ok(p);
  REQUIRE(s.num_states() == 3);
  CHECK(s.cum_seconds[0] == Approx(1e-3));
  CHECK(s.cum_seconds[1] == Approx(3e-3));
  CHECK(s.cum_seconds[2] == Approx(7e-3));
  CHECK(s.cum_param_bytes[2] == 700);
  CHECK(s.cum_activation_bytes[1] == 30);
  // The cut after state j carries layer j's output.
  CHECK(s.output_bytes == std::vector<double>{10, 20, 40});
  CHECK(ancestors_of(s, 2) == std::vector<int>{0, 1});
  CHECK(ancestors_of(s, 0).empty());
}

TEST_CASE("a diamond gives five states in depth-first order", "[planner][pipedream][states]") {
  //   a -> b -> d,  a -> c -> d
  Profile p;
  p.layers = {layer("a", 1, 1, 0, {}), layer("b", 2, 10, 0, {0}), layer("c", 4, 100, 0, {0}),
              layer("d", 8, 1000, 0, {1, 2})};
  const StateSpace s = states_ok(p);
  // Antichains found: {a}, {b}, {c}, {b,c}, {d}. Depth first from {a}, taking
  // successors in the order found ({b} before {c}), reversed post-order is
  // {a}, {c}, {b}, {b,c}, {d}.
  REQUIRE(s.num_states() == 5);
  CHECK(s.cum_seconds[0] == Approx(1e-3));   // {a}
  CHECK(s.cum_seconds[1] == Approx(5e-3));   // {c}: a + c
  CHECK(s.cum_seconds[2] == Approx(3e-3));   // {b}: a + b
  CHECK(s.cum_seconds[3] == Approx(7e-3));   // {b,c}
  CHECK(s.cum_seconds[4] == Approx(15e-3));  // {d}: everything
  // out = activations of the augmented antichain: a stays while c is pending,
  // and the reference keeps it in {b,c}'s augmented antichain too.
  CHECK(s.output_bytes == std::vector<double>{1, 1 + 100, 1 + 10, 1 + 10 + 100, 1000});
  CHECK(ancestors_of(s, 1) == std::vector<int>{0});
  CHECK(ancestors_of(s, 2) == std::vector<int>{0});
  CHECK(ancestors_of(s, 3) == std::vector<int>{0, 1, 2});
  CHECK(ancestors_of(s, 4) == std::vector<int>{0, 1, 2, 3});
  CHECK(s.closure(3).members() == std::vector<int>{0, 1, 2});
}

TEST_CASE("Input sources and unused __getitem__ sinks are not nodes", "[planner][pipedream][states]") {
  Profile p;
  p.layers = {layer("in", 50, 5, 0, {}, "Input0"), layer("lstm", 2, 7, 9, {0}),
              layer("g0", 0, 3, 0, {1}, "__getitem__(0)"), layer("g1", 0, 4, 0, {1}, "__getitem__(1)"),
              layer("fc", 4, 2, 1, {2})};
  const StateSpace s = states_ok(p);
  CHECK(s.node_layer == std::vector<int>{1, 2, 4});
  REQUIRE(s.num_states() == 3);
  CHECK(s.cum_seconds[2] == Approx(6e-3));  // the Input's 50 ms is not counted
  CHECK(s.role[3] == LayerRole::kDroppedSink);
}

TEST_CASE("the first state is the source of smallest index", "[planner][pipedream][states]") {
  // Two sources feeding one node; enumeration starts at {s0} and s1 joins the
  // closure when the join node is reached.
  Profile p;
  p.layers = {layer("s0", 1, 1, 0, {}), layer("s1", 2, 1, 0, {}), layer("j", 4, 1, 0, {0, 1})};
  const StateSpace s = states_ok(p);
  REQUIRE(s.num_states() == 2);
  CHECK(s.cum_seconds[0] == Approx(1e-3));
  CHECK(s.cum_seconds[1] == Approx(7e-3));
}

TEST_CASE("state enumeration refuses graphs beyond the state limit", "[planner][pipedream][states]") {
  // Two parallel chains of 6 give 7 x 7 - ... states, more than 20.
  Profile p;
  p.layers.push_back(layer("src", 1, 1, 0, {}));
  for (int branch = 0; branch < 2; ++branch)
    for (int k = 0; k < 6; ++k)
      p.layers.push_back(layer(fmt::format("b{}_{}", branch, k), 1, 1, 0, {k == 0 ? 0 : p.num_layers() - 1}));
  p.layers.push_back(layer("sink", 1, 1, 0, {6, 12}));
  auto limited = build_state_space(p, 20);
  REQUIRE_FALSE(limited.ok());
  CHECK_THAT(limited.error().message, Catch::Contains("more than 20 states"));
  CHECK(build_state_space(p, 1000).ok());
}
