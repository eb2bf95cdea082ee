// A sweep's results as a table, its CSV, and shards merged back into one.
//
// Every sweep table starts with the same columns:
//   point        the point's number in the grid (sweep_grid.h)
//   grid_points  how many points the whole grid has
//   model        what was swept (a profile's model, or "GPT L x h")
//   topology     the topology's name at that point
// then one column per --vary axis, in the order given, then the sweep's own
// result columns, the first of which is `schedule` (profile sweeps) or
// `tensor_model_parallel_size` (GPT sweeps): the axes are the columns between.
//
// CSV: one header line and one line per row, "\n" line ends; a field holding
// a comma, a quote or a line end is quoted, with quotes doubled (RFC 4180).
// A shard's table holds its own points only; merge_sweep_tables checks that
// the parts have one header and one grid, that no point is given twice and
// none is missing, and returns the rows in point order: the CSV of 4 shards
// merged is byte for byte the CSV of the whole run.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/result.h"

namespace baton {

struct SweepTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  // The index of a column, or -1.
  int column(std::string_view name) const;
  // The --vary axes' columns (above).
  std::vector<int> axis_columns() const;
};

// The leading columns (above).
inline const std::vector<std::string>& sweep_lead_columns() {
  static const std::vector<std::string> columns = {"point", "grid_points", "model", "topology"};
  return columns;
}

std::string sweep_csv(const SweepTable& table);
// `source` names the text in errors.
Result<SweepTable> parse_sweep_csv(std::string_view text, const std::string& source);

struct SweepPart {
  std::string source;  // a file name, for errors
  SweepTable table;
};
Result<SweepTable> merge_sweep_tables(const std::vector<SweepPart>& parts);

}  // namespace baton
