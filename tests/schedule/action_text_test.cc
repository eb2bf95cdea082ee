// The short text form of actions: every kind round-trips, malformed text is
// rejected with a message that quotes it.
#include "tests/catch_compat.h"

#include "sim/program.h"

namespace baton {
namespace {

TEST_CASE("kind names are the documented ones", "[text]") {
  CHECK(kind_name(ActionKind::kForward) == "F");
  CHECK(kind_name(ActionKind::kBackward) == "B");
  CHECK(kind_name(ActionKind::kBackwardInput) == "I");
  CHECK(kind_name(ActionKind::kBackwardWeight) == "W");
  CHECK(kind_name(ActionKind::kSendAct) == "SEND_ACT");
  CHECK(kind_name(ActionKind::kRecvAct) == "RECV_ACT");
  CHECK(kind_name(ActionKind::kSendGrad) == "SEND_GRAD");
  CHECK(kind_name(ActionKind::kRecvGrad) == "RECV_GRAD");
  CHECK(kind_name(ActionKind::kAllReduce) == "ALLREDUCE");
  CHECK(kind_name(ActionKind::kStep) == "STEP");
}

TEST_CASE("every action kind round-trips through its text form", "[text]") {
  const std::vector<std::pair<std::string, Action>> cases = {
      {"s2:F7", {ActionKind::kForward, false, 2, 7, -1}},
      {"s2:B7", {ActionKind::kBackward, false, 2, 7, -1}},
      {"s2:I7", {ActionKind::kBackwardInput, false, 2, 7, -1}},
      {"s2:W7", {ActionKind::kBackwardWeight, false, 2, 7, -1}},
      {"s2:SEND_ACT7>w5", {ActionKind::kSendAct, false, 2, 7, 5}},
      {"s2:RECV_ACT7<w3", {ActionKind::kRecvAct, false, 2, 7, 3}},
      {"s2:SEND_GRAD7>w1", {ActionKind::kSendGrad, false, 2, 7, 1}},
      {"s2:RECV_GRAD7<w5", {ActionKind::kRecvGrad, false, 2, 7, 5}},
      {"s2:ALLREDUCE3", {ActionKind::kAllReduce, false, 2, 3, -1}},
      {"s2:STEP3", {ActionKind::kStep, false, 2, 3, -1}},
      {"s0:F0", {ActionKind::kForward, false, 0, 0, -1}},
      {"s123:RECV_GRAD456789<w1011", {ActionKind::kRecvGrad, false, 123, 456789, 1011}},
      {"s1:F4&", {ActionKind::kForward, true, 1, 4, -1}},
      {"s3:B0&", {ActionKind::kBackward, true, 3, 0, -1}},
      {"s3:I2&", {ActionKind::kBackwardInput, true, 3, 2, -1}},
  };
  for (const auto& [text, action] : cases) {
    INFO(text);
    auto parsed = parse_action(text);
    REQUIRE(parsed.ok());
    CHECK(*parsed == action);
    CHECK(to_string(action) == text);
  }
}

TEST_CASE("malformed action text is rejected with a message quoting it", "[text]") {
  const std::vector<std::string> bad = {
      "",                  // empty
      "F7",                // no stage
      "s:F7",              // stage without number
      "s2F7",              // no colon
      "s2:X7",             // unknown kind
      "s2:f7",             // kinds are upper case
      "s2:F",              // no number
      "s2:F-1",            // negative number
      "s2:F7>w5",          // compute with a peer
      "s2:SEND_ACT7",      // send without peer
      "s2:SEND_ACT7<w5",   // send with the receive arrow
      "s2:RECV_GRAD7>w5",  // receive with the send arrow
      "s2:RECV_ACT7<5",    // peer without "w"
      "s2:RECV_ACT7<w",    // peer without number
      "s2:STEP3 ",         // trailing space
      "s2:F99999999999",   // out of range
      "s-1:F0",            // negative stage
      "s2:W7&",            // only F, B and I open an overlapped pair
      "s2:STEP3&",         // likewise
      "s2:SEND_ACT7>w5&",  // likewise
      "s2:F7&&",           // one mark
  };
  for (const std::string& text : bad) {
    INFO("\"" << text << "\"");
    auto parsed = parse_action(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK_THAT(parsed.error().message, Catch::Contains("bad action \"" + text + "\""));
  }
  CHECK_THAT(parse_action("s2:X7").error().message, Catch::Contains("unknown kind \"X\""));
  CHECK_THAT(parse_action("s2:W7&").error().message, Catch::Contains("only F, B and I open an overlapped pair"));
}

TEST_CASE("action lists parse with any whitespace and name the bad item", "[text]") {
  auto list = parse_action_list("  s0:F0 s0:F1\ts0:B0\n s0:STEP0 ");
  REQUIRE(list.ok());
  REQUIRE(list->size() == 4);
  CHECK((*list)[2] == make_action(ActionKind::kBackward, 0, 0));
  CHECK((*list)[3] == make_action(ActionKind::kStep, 0, 0));

  auto empty = parse_action_list("   ");
  REQUIRE(empty.ok());
  CHECK(empty->empty());

  auto bad = parse_action_list("s0:F0 s0:F1 s0:Q2");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("action 3 of the list"));
  CHECK_THAT(bad.error().message, Catch::Contains("s0:Q2"));
}

}  // namespace
}  // namespace baton
