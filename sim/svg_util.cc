#include "sim/svg_util.h"

#include <algorithm>
#include <cmath>

namespace baton {

std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string hsl_hex(double hue, double saturation, double lightness) {
  const double chroma = (1 - std::abs(2 * lightness - 1)) * saturation;
  const double h = hue / 60.0;
  const double second = chroma * (1 - std::abs(std::fmod(h, 2.0) - 1));
  double rgb[3] = {0, 0, 0};
  const int sector = static_cast<int>(h) % 6;
  const int first_channel[6] = {0, 1, 1, 2, 2, 0};
  const int second_channel[6] = {1, 0, 2, 1, 0, 2};
  rgb[first_channel[sector]] = chroma;
  rgb[second_channel[sector]] = second;
  const double base = lightness - chroma / 2;
  auto channel = [&](int i) { return static_cast<int>(std::lround((rgb[i] + base) * 255)); };
  return fmt::format("#{:02x}{:02x}{:02x}", channel(0), channel(1), channel(2));
}

double nice_step(double length, int target_ticks) {
  const double raw = length / std::max(target_ticks, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  }
  return 10 * magnitude;
}

int step_decimals(double step) { return std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9))); }

}  // namespace baton
