// What the validator's checks share (sim/validate.cc, sim/validate_deadlock.cc):
// the stage table, messages with the program's grid, and the deadlock check.
// Internal to sim/; thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/program.h"
#include "sim/result.h"

namespace baton::validate_detail {

using StageTable = std::vector<std::vector<int>>;  // [stage][replica] -> worker

int num_rows(const Program& program);
int row_length(const Program& program, int worker);
// "invalid program: <what>" followed by the grid marked at (worker, step).
Error fail(const Program& program, int worker, int step, const std::string& what);
// "s1:B3 (w2 step 5)"
std::string describe(const Program& program, int worker, int step);

// Check 7: a symbolic run of the interpreter semantics reaches every action.
// `send_step[w][i]`, for each receive, is the step of its send on the peer.
Status check_deadlock(const Program& program, const StageTable& table, const std::vector<std::vector<int>>& send_step);

}  // namespace baton::validate_detail
