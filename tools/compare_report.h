// A prediction against a measurement of the same Program, figure by figure
// (used by `baton compare` and `baton validate`).
//
// Spans pair up by (worker, action_index) when their actions are equal.
// Figures, each with its relative error (measured - predicted) / predicted
// ("n/a" where the prediction is 0):
// - iteration time: each trace's makespan (last span end - first span start);
// - per stage: compute time (F, B, I, W, STEP spans) per worker of the stage,
//   summed over the paired spans and averaged over the stage's workers;
// - per action kind: mean duration of the paired spans of that kind.
// Thread safety: pure functions.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/trace.h"

namespace baton::cli {

struct Figure {
  double predicted = 0.0;  // seconds
  double measured = 0.0;
  int count = 0;
  bool has_error() const { return predicted > 0.0; }
  double error() const { return has_error() ? (measured - predicted) / predicted : 0.0; }
};

struct Comparison {
  int paired = 0;
  int only_predicted = 0;
  int only_measured = 0;
  Figure iteration;
  std::map<int, Figure> stages;         // stage -> compute time per worker
  std::map<std::string, Figure> kinds;  // kind name -> mean duration
};

Seconds makespan(const Trace& trace);
Comparison compare_traces(const Trace& predicted, const Trace& measured);

// "+3.4%"
std::string signed_percent(double fraction);
// The iteration, per-stage and per-kind tables (plain text, or Markdown tables).
std::string comparison_tables(const Comparison& c, bool markdown);
nlohmann::json comparison_json(const Comparison& c);

}  // namespace baton::cli
