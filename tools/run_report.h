// What `baton run --report` writes of a run (tools/cmd_run.cc), read back:
// `baton validate` reads its runs' reports with it, tools/replay.h the
// recorded ones.
// Errors name the source. Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/result.h"
#include "sim/units.h"

namespace baton {

struct RunRecord {
  std::vector<Seconds> walls;  // each step's wall time, in step order (at least one)
  // Every worker's compute over the run's steps (summed over workers, divided
  // by the steps).
  Seconds compute_per_step;
  // Per worker: its compute in each step, and its executor overhead per
  // action (its loop's time neither computing nor waiting, over its actions;
  // never below 0). Both empty in reports from before the executor recorded
  // a step's compute (2026-11-28).
  std::vector<std::vector<Seconds>> step_compute;
  std::vector<Seconds> action_overhead;
};

// `text` is the report's JSON; `source` names it in errors.
Result<RunRecord> parse_run_record(const std::string& text, const std::string& source);

}  // namespace baton
