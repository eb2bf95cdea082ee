// receive_order (sim/program.h): a worker's receives in the order their
// senders send them, per peer; what a transport that matches messages in order
// (NCCL point-to-point) posts.
#include <map>
#include <vector>

#include "tests/catch_compat.h"

#include "sim/schedules.h"
#include "tests/schedule/schedule_test_support.h"

namespace baton {
namespace {

using testing::make_plan;

// The index in `sender`'s list of the send that `receive` (of `receiver`) matches, or -1.
int matching_send(const Program& program, int receiver, const Action& receive) {
  const bool activation = receive.kind == ActionKind::kRecvAct;
  const std::vector<Action>& list = program.actions[receive.peer];
  for (size_t j = 0; j < list.size(); ++j) {
    const Action& a = list[j];
    if (a.kind == (activation ? ActionKind::kSendAct : ActionKind::kSendGrad) && a.peer == receiver &&
        a.stage == receive.stage + (activation ? -1 : 1) && a.batch() == receive.batch())
      return static_cast<int>(j);
  }
  return -1;
}

}  // namespace

TEST_CASE("receive order: 1F1B on two stages posts the activations 0, 1, 2 and the gradients 0, 1, 2") {
  const Program program = build_program(make_plan(Schedule::kOneFOneB, {1, 1}, 3));
  std::vector<std::string> received;
  for (int i : receive_order(program, 1)) received.push_back(to_string(program.actions[1][i]));
  CHECK(received == std::vector<std::string>{"s1:RECV_ACT0<w0", "s1:RECV_ACT1<w0", "s1:RECV_ACT2<w0"});
  received.clear();
  for (int i : receive_order(program, 0)) received.push_back(to_string(program.actions[0][i]));
  CHECK(received == std::vector<std::string>{"s0:RECV_GRAD0<w1", "s0:RECV_GRAD1<w1", "s0:RECV_GRAD2<w1"});
}

TEST_CASE("receive order: every receive once, per peer in the order of the peer's sends, for every schedule") {
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB, Schedule::kPipeDream, Schedule::kZbH1,
                            Schedule::kZbH2, Schedule::kInterleaved1F1B, Schedule::kZbV, Schedule::kDualPipeV}) {
    INFO(schedule_name(schedule));
    Plan plan = make_plan(schedule, {1, 2, 1, 1}, 8);
    if (runs_chunks(schedule)) {
      plan = make_plan(schedule, {1, 1, 1, 1}, 8);
      plan.virtual_stages = 2;
      for (int s = 2; s < 4; ++s) plan.stages[s].devices = plan.stages[plan.rank_of(s)].devices;
    }
    const Program program = build_program(plan);
    for (int w = 0; w < program.num_workers(); ++w) {
      INFO("worker " << w);
      const std::vector<int> order = receive_order(program, w);
      int receives = 0;
      for (const Action& a : program.actions[w]) receives += is_recv(a.kind) ? 1 : 0;
      REQUIRE(static_cast<int>(order.size()) == receives);
      std::map<int, int> last_send;  // peer -> index of the previous receive's send
      int previous_peer = -1;
      for (int i : order) {
        const Action& a = program.actions[w][i];
        REQUIRE(is_recv(a.kind));
        CHECK(a.peer >= previous_peer);  // grouped by peer
        previous_peer = a.peer;
        const int send = matching_send(program, w, a);
        REQUIRE(send >= 0);
        if (last_send.count(a.peer) > 0) CHECK(send > last_send[a.peer]);
        last_send[a.peer] = send;
      }
    }
  }
}

}  // namespace baton
