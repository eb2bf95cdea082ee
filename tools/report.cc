#include "tools/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace baton::cli {

std::string human_bytes(Bytes bytes) {
  const double value = static_cast<double>(bytes.value);
  const double magnitude = std::fabs(value);
  if (magnitude >= double(int64_t{1} << 30)) return fmt::format("{:.2f} GiB", value / double(int64_t{1} << 30));
  if (magnitude >= double(1 << 20)) return fmt::format("{:.1f} MiB", value / double(1 << 20));
  if (magnitude >= double(1 << 10)) return fmt::format("{:.1f} KiB", value / double(1 << 10));
  return fmt::format("{} B", bytes.value);
}

std::string human_seconds(Seconds time) {
  const double magnitude = std::fabs(time.value);
  if (magnitude >= 1.0) return fmt::format("{:.3f} s", time.value);
  if (magnitude >= 1e-3) return fmt::format("{:.3f} ms", time.ms());
  return fmt::format("{:.1f} us", time.us());
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

std::string render_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      line += c == 0 ? fmt::format("{:<{}}", row[c], widths[c]) : fmt::format("{:>{}}", row[c], widths[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string render_markdown_table(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return {};
  const size_t columns = rows.front().size();
  const auto line = [columns](const std::vector<std::string>& row) {
    std::string out = "|";
    for (size_t c = 0; c < columns; ++c) {
      std::string cell = c < row.size() ? row[c] : std::string();
      for (size_t at = cell.find('|'); at != std::string::npos; at = cell.find('|', at + 2)) cell.replace(at, 1, "\\|");
      out += " " + cell + " |";
    }
    return out + "\n";
  };
  std::string out = line(rows.front()) + "|";
  for (size_t c = 0; c < columns; ++c) out += c == 0 ? " --- |" : " ---: |";
  out += "\n";
  for (size_t r = 1; r < rows.size(); ++r) out += line(rows[r]);
  return out;
}

}  // namespace baton::cli
