// A prediction against a measurement of the same Program, rendered (used by
// `baton compare` and `baton validate`): the figures of sim/trace_compare.h as
// plain-text or Markdown tables and as JSON. Times in the tables are
// human-readable, in JSON seconds; an error is "n/a" (JSON null) where the
// prediction is 0.
// Thread safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/trace_compare.h"

namespace baton::cli {

// "+3.4%"
std::string signed_percent(double fraction);
// The iteration, per-stage and per-kind tables (plain text, or Markdown tables).
std::string comparison_tables(const TraceComparison& c, bool markdown);
nlohmann::json comparison_json(const TraceComparison& c);

}  // namespace baton::cli
