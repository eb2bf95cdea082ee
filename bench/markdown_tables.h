// Published tables transcribed in Markdown (data/groundtruth/*/*.md), read by
// the benchmark programs that predict them: every table of a text, its
// columns found by name, so a file of the same form with more rows (or its
// columns in another order) will do.
//
// Errors in the file exit 2 with the program's name and what is wrong (a
// missing table or column, a cell that is not a number): these are inputs a
// person wrote by hand.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace baton::bench {

struct MarkdownTable {
  const char* program = "";
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  bool has(const std::string& name) const { return std::find(header.begin(), header.end(), name) != header.end(); }
  // The column's index; exits 2 naming the column when there is none.
  size_t column(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      std::fprintf(stderr, "%s: a table has no column '%s'\n", program, name.c_str());
      std::exit(2);
    }
    return static_cast<size_t>(it - header.begin());
  }
};

inline std::string trim_cell(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

// "| a | b |" -> {"a", "b"}.
inline std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> out;
  size_t at = line.find('|');
  while (at != std::string::npos) {
    const size_t next = line.find('|', at + 1);
    if (next == std::string::npos) break;
    out.push_back(trim_cell(line.substr(at + 1, next - at - 1)));
    at = next;
  }
  return out;
}

// Every Markdown table of the text: a header line, a |---| line, rows.
inline std::vector<MarkdownTable> markdown_tables(const std::string& text, const char* program) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::vector<MarkdownTable> tables;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    const std::string head = trim_cell(lines[i]);
    if (head.empty() || head[0] != '|' || trim_cell(lines[i + 1]).rfind("|---", 0) != 0) continue;
    MarkdownTable table;
    table.program = program;
    table.header = table_cells(head);
    size_t j = i + 2;
    for (; j < lines.size() && !trim_cell(lines[j]).empty() && trim_cell(lines[j])[0] == '|'; ++j)
      table.rows.push_back(table_cells(trim_cell(lines[j])));
    tables.push_back(table);
    i = j;
  }
  return tables;
}

// The first table with all these columns; exits 2 naming `what` when none has.
inline const MarkdownTable& table_with(const std::vector<MarkdownTable>& tables,
                                       const std::vector<std::string>& columns, const char* program, const char* what) {
  for (const MarkdownTable& t : tables)
    if (std::all_of(columns.begin(), columns.end(), [&](const std::string& c) { return t.has(c); })) return t;
  std::fprintf(stderr, "%s: no table of %s (columns %s ...)\n", program, what, columns.front().c_str());
  std::exit(2);
}

// The cell as a number; exits 2 quoting it when it is not one.
inline double cell_number(const std::string& cell, const char* program) {
  try {
    size_t used = 0;
    const double value = std::stod(cell, &used);
    if (trim_cell(cell.substr(used)).empty()) return value;
  } catch (const std::exception&) {
  }
  std::fprintf(stderr, "%s: '%s' is not a number\n", program, cell.c_str());
  std::exit(2);
}

// The row's cell in `column` as a positive whole number; exits 2 naming the
// column and quoting the cell when it is not one.
inline int cell_whole(const MarkdownTable& t, const std::vector<std::string>& row, const char* column) {
  const std::string& cell = row[t.column(column)];
  const double value = cell_number(cell, t.program);
  if (value != std::floor(value) || value < 1) {
    std::fprintf(stderr, "%s: column '%s' holds %s, not a positive whole number\n", t.program, column, cell.c_str());
    std::exit(2);
  }
  return static_cast<int>(value);
}

}  // namespace baton::bench
