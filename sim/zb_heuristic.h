// The Zero Bubble authors' greedy scheduler (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, section 3.1 and their Megatron-LM fork's
// automatic scheduling): the per-stage order of F, I (the input gradient, "B"
// in the paper) and W passes for one iteration of a flush schedule, built from
// the stages' measured or modelled times and a memory limit per stage, where
// baton's ZB-H1 and ZB-H2 are fixed orders that assume equal times.
//
// The order is laid out on a clock, stage by stage, one microbatch i at a time:
// - i = 0: every stage runs F0; then each stage, from the last up, takes as
//   many more F's as fit its memory and end before the first I reaches it from
//   below (`allow_bubble_before_first_i`: or start before it does), kept
//   strictly fewer than the stage above; then every stage runs I0, last first.
// - i > 0, forwards: a stage that has not run all its F's runs one more,
//   unless (`prioritize_i`, when it is two or more F's ahead of the stage
//   below) that F would delay the I coming from below and the wait it would
//   save is not worth the stage's share of the largest bubble so far; a stage
//   runs its F only when the stage below does too. Before the F: W's until the
//   F fits in memory, W's that end before the F's input arrives, and one more
//   W into a shorter gap when the gap is worth it against the largest bubble
//   (`greedy_w` decides when it is not).
// - i > 0, input gradients: every stage, last first, runs I_i, before it W's as
//   for the F (memory, gaps until the gradient arrives from below); stage 0
//   runs all its pending W's once its forwards are done.
// - at the end, each stage's W's that are left.
// A pass starts when its stage is free and its input has arrived (an F's
// activation from the stage above, an I's gradient from the stage below, both
// `comm` after they were made). The eight choices of the three flags are
// tried and the order whose longest stage span (first F's start to last W's
// end) is least is kept. The fork refines this order with an integer program;
// baton does not.
//
// Memory is counted in the caller's units: an F adds mem_forward[s], an I
// mem_input[s] and a W mem_weight[s] (the two backward halves release what the
// F took: the three sum to 0); a stage never holds more than limit[s].
//
// Thread safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "sim/result.h"

namespace baton {

struct ZbHeuristicInput {
  int microbatches = 0;
  std::vector<double> forward, input, weight;  // seconds per microbatch, per stage
  double comm = 0.0;                           // seconds from a stage to its neighbour
  std::vector<double> mem_forward, mem_input, mem_weight, limit;
};

// `stages` equal stages: each F, I and W of the given times, an F taking one
// unit of memory, its I releasing all but `weight_share` of it and its W the
// rest, `limit` units per stage.
ZbHeuristicInput zb_equal_stages(int stages, int microbatches, double forward, double input, double weight,
                                 double comm, double limit, double weight_share);

enum class ZbPass : char { kF = 'F', kI = 'I', kW = 'W' };

struct ZbStep {
  ZbPass pass;
  int microbatch;
  double start, end;  // on the heuristic's clock
  bool operator==(const ZbStep&) const = default;
};

struct ZbHeuristicOrder {
  std::vector<std::vector<ZbStep>> stages;  // each stage's passes in order
  double span = 0.0;                        // the longest stage span
  std::string choice;                       // the flags that won, for the record
};

// An Error when no choice of the flags fits the limits (a stage's limit below
// one F, for one).
Result<ZbHeuristicOrder> zb_heuristic_order(const ZbHeuristicInput& input);

}  // namespace baton
