// Small SVG writing helpers shared by the Gantt and sweep charts.
// Thread safety: pure functions.
#pragma once

#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace baton {

// Appends formatted text to `out`.
template <typename... Args>
void put(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

// & < > " ' as XML entities.
std::string xml_escape(std::string_view text);

// HSL (hue in degrees, saturation and lightness in [0, 1]) to "#rrggbb".
std::string hsl_hex(double hue, double saturation, double lightness);

// The smallest 1, 2 or 5 x 10^k at least length / target_ticks.
double nice_step(double length, int target_ticks);

// Decimals that show a tick step exactly: 0.5 -> 1, 0.05 -> 2, 20 -> 0.
int step_decimals(double step);

}  // namespace baton
