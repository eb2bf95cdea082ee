// Human-readable formatting for the command line: sizes, times, tables.
#pragma once

#include <string>
#include <vector>

#include "sim/units.h"

namespace baton::cli {

std::string human_bytes(Bytes bytes);     // "1.25 GiB", "512.0 MiB", "3.0 KiB"
std::string human_seconds(Seconds time);  // "12.345 ms", "1.234 s", "56.7 us"
std::string percent(double fraction);     // "12.3%"

// A plain text table: first row is the header; columns right-aligned except
// the first. Rows may be shorter than the header.
std::string render_table(const std::vector<std::vector<std::string>>& rows);
// The same table in GitHub Markdown (header, separator row, body; first
// column left-aligned, the others right-aligned). "|" in cells is escaped.
std::string render_markdown_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace baton::cli
