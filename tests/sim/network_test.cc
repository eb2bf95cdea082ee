// The link-sharing model of sim/network.h, checked on hand-derived cases.
#include <array>

#include "tests/catch_compat.h"

#include "sim/network.h"
#include "tests/sim/test_support.h"

using namespace baton;
using baton::testing::close_rel;

namespace {

// 2 servers x 4 devices: 80 Gb/s (10 GB/s) inside, 8 Gb/s (1 GB/s) across.
Topology two_level() {
  Topology t;
  t.name = "2x4";
  t.device = DeviceType{"gpu", Bytes::from_gib(16), 1.0, {}, {}, {}, {}};
  t.levels = {Level{"pcie", 4, 80.0, Seconds::from_us(2), {}, {}}, Level{"eth", 2, 8.0, Seconds::from_us(50), {}, {}}};
  return t;
}

constexpr double kGB = 1e9;

}  // namespace

TEST_CASE("topology numbering and common level", "[network]") {
  const Topology t = two_level();
  CHECK(t.num_devices() == 8);
  CHECK(t.common_level(0, 0) == -1);
  CHECK(t.common_level(0, 3) == 0);
  CHECK(t.common_level(3, 4) == 1);
  CHECK(t.child_of(5, 0) == 5);
  CHECK(t.child_of(5, 1) == 1);
}

TEST_CASE("one transfer costs latency plus bytes over bandwidth of the level it crosses", "[network]") {
  Network network(two_level());
  const Bytes size(1'000'000'000);  // 1 GB
  const TransferTimes inside = network.transfer(0, 1, size, Seconds(1.0));
  CHECK(close_rel(inside.wire_start.value, 1.0));
  CHECK(close_rel(inside.delivered.value, 1.0 + 1e9 / (10 * kGB) + 2e-6));
  const TransferTimes across = network.transfer(2, 6, size, Seconds(1.0));
  CHECK(close_rel(across.delivered.value, 1.0 + 1e9 / (1 * kGB) + 50e-6));
}

TEST_CASE("transfers sharing a link take turns (FIFO)", "[network]") {
  Network network(two_level());
  const Bytes size(500'000'000);  // 0.5 s on the 1 GB/s uplink of server 0
  const TransferTimes first = network.transfer(0, 4, size, Seconds(0.0));
  const TransferTimes second = network.transfer(1, 5, size, Seconds(0.0));  // same server uplink
  CHECK(close_rel(first.delivered.value, 0.5 + 50e-6));
  CHECK(close_rel(second.wire_start.value, 0.5));
  CHECK(close_rel(second.delivered.value, 1.0 + 50e-6));
}

TEST_CASE("links are full duplex: opposite directions do not wait", "[network]") {
  Network network(two_level());
  const Bytes size(500'000'000);
  const TransferTimes forward = network.transfer(0, 4, size, Seconds(0.0));
  const TransferTimes backward = network.transfer(4, 0, size, Seconds(0.0));
  CHECK(close_rel(forward.delivered.value, backward.delivered.value));
  CHECK(backward.wire_start.value == 0.0);
}

TEST_CASE("transfers on different links of one level run together", "[network]") {
  Network network(two_level());
  const Bytes size(1'000'000'000);
  const TransferTimes a = network.transfer(0, 1, size, Seconds(0.0));
  const TransferTimes b = network.transfer(2, 3, size, Seconds(0.0));
  CHECK(a.delivered == b.delivered);
  // A later transfer into device 1 waits for its downlink only.
  const TransferTimes c = network.transfer(2, 1, size, Seconds(0.0));
  CHECK(close_rel(c.wire_start.value, 0.1));  // device 1's downlink busy 1 GB / 10 GB/s; 2's uplink busy too
}

TEST_CASE("same-device transfers are free", "[network]") {
  Network network(two_level());
  const TransferTimes t = network.transfer(3, 3, Bytes(1 << 30), Seconds(2.0));
  CHECK(t.delivered.value == 2.0);
}

TEST_CASE("hierarchical ring all-reduce", "[network][allreduce]") {
  const Topology topology = two_level();
  const Network network(topology);
  const Bytes size(800'000'000);
  const double d = 8e8;
  SECTION("inside one server: 2 (n - 1)/n D / B + 2 (n - 1) latency") {
    const std::array<int, 4> devices{0, 1, 2, 3};
    CHECK(close_rel(network.allreduce_time(devices, size).value, 2.0 * 3 / 4 * d / (10 * kGB) + 2 * 3 * 2e-6));
  }
  SECTION("one device per server: the outer ring only") {
    const std::array<int, 2> devices{1, 5};
    CHECK(close_rel(network.allreduce_time(devices, size).value, 2.0 * 1 / 2 * d / kGB + 2 * 50e-6));
  }
  SECTION("all 8: inner ring on D; the outer ring carries D through each server's one uplink") {
    // Each of a server's 4 members holds D / 4 after the inner reduce-scatter,
    // and all four shards leave through the server's single link: D in all.
    const std::array<int, 8> devices{0, 1, 2, 3, 4, 5, 6, 7};
    const double inner = 2.0 * 3 / 4 * d / (10 * kGB) + 2 * 3 * 2e-6;
    const double outer = 2.0 * 1 / 2 * d / kGB + 2 * 50e-6;
    CHECK(close_rel(network.allreduce_time(devices, size).value, inner + outer));
  }
  SECTION("rails: a server's uplink of 4 rails, used by as many members as there are") {
    Topology railed = topology;
    railed.levels[1].rails = 4;
    const Network with_rails(railed);
    // One member per server: one rail of B / 4.
    const std::array<int, 2> pair{1, 5};
    CHECK(close_rel(with_rails.allreduce_time(pair, size).value, 2.0 * 1 / 2 * d / (kGB / 4) + 2 * 50e-6));
    // Four members per server: all four rails, as without rails.
    const std::array<int, 8> all{0, 1, 2, 3, 4, 5, 6, 7};
    CHECK(close_rel(with_rails.allreduce_time(all, size).value, network.allreduce_time(all, size).value));
    // Two members per server: two of the four rails.
    const std::array<int, 4> two{0, 1, 4, 5};
    const double inner = 2.0 * 1 / 2 * d / (10 * kGB) + 2 * 1 * 2e-6;
    CHECK(close_rel(with_rails.allreduce_time(two, size).value, inner + 2.0 * 1 / 2 * d / (kGB / 2) + 2 * 50e-6));
  }
  SECTION("rails: a device sends on its own rail of B / 4; devices on other rails move side by side") {
    Topology railed = topology;
    railed.levels[1].rails = 4;
    Network with_rails(railed);
    const TransferTimes first = with_rails.transfer(0, 4, Bytes(1'000'000), Seconds(0.0));
    CHECK(first.wire_start.value == 0.0);
    CHECK(close_rel(first.delivered.value, 1e6 / (kGB / 4) + 50e-6));
    // Device 1 is on rail 1 of server 0 and device 5 on rail 1 of server 1: free.
    const TransferTimes second = with_rails.transfer(1, 5, Bytes(1'000'000), Seconds(0.0));
    CHECK(second.wire_start.value == 0.0);
    // Device 0 again: its rail is busy until the first transfer has left.
    const TransferTimes third = with_rails.transfer(0, 6, Bytes(1'000'000), Seconds(0.0));
    CHECK(close_rel(third.wire_start.value, 1e6 / (kGB / 4)));
  }
  SECTION("a single device needs no all-reduce") {
    const std::array<int, 1> devices{6};
    CHECK(network.allreduce_time(devices, size).value == 0.0);
  }
}

TEST_CASE("all-to-all: each member's shares for the other servers leave on its own, not pooled",
          "[network][all-to-all]") {
  const Topology topology = two_level();
  const Network network(topology);
  const Bytes size(800'000'000);
  const double d = 8e8;
  SECTION("inside one server: (n - 1)/n D / B + (n - 1) latency, half the all-reduce") {
    const std::array<int, 4> devices{0, 1, 2, 3};
    const double expected = 3.0 / 4 * d / (10 * kGB) + 3 * 2e-6;
    CHECK(close_rel(network.all_to_all_time(devices, size).value, expected));
    CHECK(close_rel(network.all_to_all_time(devices, size).value, network.allreduce_time(devices, size).value * 0.5));
  }
  SECTION("one device per server: (n - 1)/n D over the outer link, as half the all-reduce") {
    const std::array<int, 2> devices{1, 5};
    CHECK(close_rel(network.all_to_all_time(devices, size).value, 1.0 / 2 * d / kGB + 50e-6));
  }
  SECTION("all 8: a server's 4 members each send 4/8 of D across, 4 x D / 2 through its one uplink") {
    // Inside: each device sends 7/8 D over its own link; across: 2 D per
    // server over 1 GB/s. The links move side by side: the slower one counts.
    const std::array<int, 8> devices{0, 1, 2, 3, 4, 5, 6, 7};
    const double across = 4.0 * 4 / 8 * d / kGB;
    CHECK(close_rel(network.all_to_all_time(devices, size).value, across + 3 * 2e-6 + 50e-6));
    // Half the all-reduce would pool the server's bytes: 4 times faster across.
    CHECK(network.all_to_all_time(devices, size).value > 3.0 * network.allreduce_time(devices, size).value * 0.5);
  }
  SECTION("rails: 4 members per server on 4 rails, 2 members on 2 of them") {
    Topology railed = topology;
    railed.levels[1].rails = 4;
    const Network with_rails(railed);
    const std::array<int, 8> all{0, 1, 2, 3, 4, 5, 6, 7};
    CHECK(close_rel(with_rails.all_to_all_time(all, size).value, network.all_to_all_time(all, size).value));
    // Two members a server: each sends 2/4 D on its own rail of 1/4 GB/s.
    const std::array<int, 4> two{0, 1, 4, 5};
    CHECK(close_rel(with_rails.all_to_all_time(two, size).value, 2.0 / 4 * d / (kGB / 4) + 1 * 2e-6 + 50e-6));
  }
  SECTION("a single device sends nothing") {
    const std::array<int, 1> devices{6};
    CHECK(network.all_to_all_time(devices, size).value == 0.0);
  }
}
