// The Program validator: checks a Program before anyone interprets it.
//
// `validate_program` accepts a Program only if all of these hold:
//  1. shape: one action list per worker, num_stages >= 1, every worker's stage
//     in [0, num_stages), the replicas of each stage numbered 0..r-1 once each,
//     every stage has a worker;
//  2. fields: every action's stage is its worker's stage; F/B/I/W and the
//     transfers name a microbatch in [0, microbatches); ALLREDUCE and STEP carry
//     a round >= 0; sends and receives name a peer worker of the adjacent stage
//     they talk to (SEND_ACT / RECV_GRAD: stage + 1; RECV_ACT / SEND_GRAD:
//     stage - 1); other actions have no peer (-1);
//  3. per worker and microbatch: no action kind twice; a forward F exists and
//     comes before its backward, which is either one B or one I followed by one
//     W; on stage s > 0 a RECV_ACT precedes F and a SEND_GRAD follows the B/I;
//     on stage s < S - 1 a SEND_ACT follows F and a RECV_GRAD precedes the B/I;
//  4. every stage forwards every microbatch 0..microbatches-1 exactly once;
//  5. every SEND is matched by exactly one RECV of the same kind and
//     microbatch at its peer naming the sender, and vice versa;
//  6. on each worker the n-th ALLREDUCE and the n-th STEP carry round n, and
//     all replicas of a stage run the same number of ALLREDUCEs;
//  7. no deadlock, under the interpreter semantics of sim/program.h: sends and
//     ALLREDUCE never block; a RECV waits for its matching SEND to have been
//     issued; a STEP waits until every replica of its stage has issued as many
//     ALLREDUCEs as this worker has. Executed symbolically; if every
//     unfinished worker is blocked, the program deadlocks.
// The first violation found is returned as an Error whose message names the
// problem and the action, followed by the worker x step grid (program_grid)
// with the offending cell marked; for a deadlock, the first stuck worker's next
// action. For programs longer than 40 steps per worker the grid is cut to the
// steps around the mark.
//
// Cost: O(actions + num_stages * microbatches) time and memory.
// Thread safety: a pure function.
#pragma once

#include "sim/program.h"
#include "sim/result.h"

namespace baton {

Status validate_program(const Program& program);

}  // namespace baton
