#include "planner/sweep_table.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "planner/sweep_grid.h"

namespace baton {

int SweepTable::column(std::string_view name) const {
  const auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : static_cast<int>(it - header.begin());
}

std::vector<int> SweepTable::axis_columns() const {
  std::vector<int> axes;
  for (size_t c = sweep_lead_columns().size(); c < header.size(); ++c) {
    if (header[c] == "schedule" || header[c] == "tensor_model_parallel_size") break;
    axes.push_back(static_cast<int>(c));
  }
  return axes;
}

namespace {

std::string csv_field(const std::string& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// One record from `at`; advances `at` past its line end.
Result<std::vector<std::string>> read_record(std::string_view text, size_t& at, const std::string& where) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (; at < text.size(); ++at) {
    const char c = text[at];
    if (quoted) {
      if (c != '"') {
        fields.back() += c;
      } else if (at + 1 < text.size() && text[at + 1] == '"') {
        fields.back() += '"';
        ++at;
      } else {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      ++at;
      return fields;
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (quoted) return Error{fmt::format("{}: a quoted field is not closed", where)};
  return fields;
}

Result<size_t> whole_field(const std::string& text, const std::string& where) {
  const std::optional<int64_t> value = parse_whole(text, 0);
  if (!value) return Error{fmt::format("{}: expected a whole number, got \"{}\"", where, text)};
  return static_cast<size_t>(*value);
}

}  // namespace

std::string sweep_csv(const SweepTable& table) {
  std::string out;
  const auto line = [&](const std::vector<std::string>& fields) {
    for (size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
    out += '\n';
  };
  line(table.header);
  for (const auto& row : table.rows) line(row);
  return out;
}

Result<SweepTable> parse_sweep_csv(std::string_view text, const std::string& source) {
  SweepTable table;
  size_t at = 0;
  auto header = read_record(text, at, source + ": line 1");
  if (!header) return header.error();
  table.header = std::move(*header);
  const auto& lead = sweep_lead_columns();
  if (table.header.size() < lead.size() || !std::equal(lead.begin(), lead.end(), table.header.begin()))
    return Error{
        fmt::format("{}: not a baton sweep CSV (its header does not start with {})", source, fmt::join(lead, ","))};
  for (int line = 2; at < text.size(); ++line) {
    auto row = read_record(text, at, fmt::format("{}: line {}", source, line));
    if (!row) return row.error();
    if (row->size() != table.header.size())
      return Error{
          fmt::format("{}: line {} has {} fields, the header {}", source, line, row->size(), table.header.size())};
    table.rows.push_back(std::move(*row));
  }
  return table;
}

Result<SweepTable> merge_sweep_tables(const std::vector<SweepPart>& parts) {
  if (parts.empty()) return Error{"sweep merge: no CSV given"};
  SweepTable merged{parts.front().table.header, {}};
  std::map<size_t, std::pair<const std::vector<std::string>*, std::string>> by_point;
  size_t grid = 0;
  // What every row of one sweep has alike: its model (the topology may be an
  // axis). Held against the first row read.
  const std::vector<std::string>* first_row = nullptr;
  std::string first_source;
  for (const SweepPart& part : parts) {
    if (part.table.header != merged.header)
      return Error{fmt::format("sweep merge: {} has other columns than {} (not shards of one sweep)", part.source,
                               parts.front().source)};
    for (const auto& row : part.table.rows) {
      auto point = whole_field(row[0], part.source + ": point");
      auto points = whole_field(row[1], part.source + ": grid_points");
      if (!point) return point.error();
      if (!points) return points.error();
      if (grid != 0 && *points != grid)
        return Error{
            fmt::format("sweep merge: {} is from a grid of {} points, the others {}", part.source, *points, grid)};
      grid = *points;
      if (first_row == nullptr) {
        first_row = &row;
        first_source = part.source;
      }
      if (row.size() > 2 && row[2] != (*first_row)[2])  // the model column (sweep_lead_columns)
        return Error{fmt::format("sweep merge: {} swept model \"{}\", {} \"{}\" (not shards of one sweep)", part.source,
                                 row[2], first_source, (*first_row)[2])};
      if (*point >= grid) return Error{fmt::format("sweep merge: {}: point {} of {}", part.source, *point, grid)};
      auto [it, added] = by_point.emplace(*point, std::make_pair(&row, part.source));
      if (!added)
        return Error{fmt::format("sweep merge: point {} is in {} and in {} (a shard given twice?)", *point,
                                 it->second.second, part.source)};
    }
  }
  if (by_point.size() != grid) {
    size_t missing = 0;
    while (by_point.count(missing)) ++missing;
    return Error{
        fmt::format("sweep merge: {} of the grid's {} points are missing, the first is point {} (a shard "
                    "not given, or one that failed?)",
                    grid - by_point.size(), grid, missing)};
  }
  for (const auto& [point, row] : by_point) merged.rows.push_back(*row.first);
  return merged;
}

}  // namespace baton
