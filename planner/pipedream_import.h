// Import of PipeDream's profile format (`graph.txt`) into a baton Profile.
//
// Input format, one node per line, then one tab-indented line per edge:
//   nodeID -- description -- forward_compute_time=F, backward_compute_time=B,
//             activation_size=A, parameter_size=P[ -- stage_id=S]
//   \tnodeX -- nodeY
// F and B are milliseconds per minibatch at the profiled batch size, A and P are
// bytes; a multi-output node lists its activations as `[a; b; c]`, which count as
// their sum. Nodes and edges may come in any order; blank lines are ignored.
//
// Output contract:
//   - every node becomes one Layer, including PipeDream's `Input*` sources and
//     `__getitem__` sinks: the file is kept whole. The PipeDream-compatible
//     planner (planner/pipedream_dp.h) applies the reference's pre-processing
//     itself, recognising those nodes by their description.
//   - Layer.name = node id, Layer.description = the description text,
//     forward/backward = F, B (ms -> Seconds), output_bytes = A (or the sum of
//     the list), param_bytes = P; byte counts are rounded to whole bytes.
//   - Layer.inputs = the producers of the node's in-edges, in file order.
//   - layers are in a topological order: Kahn's algorithm, taking among the
//     ready nodes the one whose id has the smallest number (`node7` before
//     `node11`; ids without a number after those with one, then by text), so the
//     order is deterministic and independent of the order of lines.
//   - model and device are left empty and microbatch_size is 1: the format does
//     not record them; the caller fills them in.
// Errors (values, never exceptions): a malformed line, a repeated node id, an
// edge naming an unknown node, a repeated edge, a cycle, or an empty file. The
// message names `source`, the line number and the line's text.
// Complexity: O(L log L + E) for L lines and E edges.
#pragma once

#include <string>
#include <string_view>

#include "sim/profile.h"
#include "sim/result.h"

namespace baton {

Result<Profile> import_pipedream_graph(std::string_view text, const std::string& source);

}  // namespace baton
