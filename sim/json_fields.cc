#include "sim/json_fields.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace baton::json_fields {

namespace {

std::string short_dump(const Json& value) {
  std::string text = value.dump();
  constexpr size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

const Json* find_field(const Json& object, std::string_view name) {
  auto it = object.find(std::string(name));
  return it == object.end() ? nullptr : &*it;
}

}  // namespace

FieldPath FieldPath::field(std::string_view name) const {
  return FieldPath(source_, path_.empty() ? std::string(name) : fmt::format("{}.{}", path_, name));
}

FieldPath FieldPath::index(size_t i) const { return FieldPath(source_, fmt::format("{}[{}]", path_, i)); }

Error FieldPath::error(std::string_view what, const Json& got) const {
  return Error{fmt::format("{}: {} {}, got {}", source_, path_.empty() ? "document" : path_, what, short_dump(got))};
}

Error FieldPath::error(std::string_view what) const {
  return Error{fmt::format("{}: {} {}", source_, path_.empty() ? "document" : path_, what)};
}

Result<Json> parse_json_text(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    return Error{fmt::format("{}: not valid JSON (byte {}): {}", source, e.byte, e.what())};
  } catch (const Json::exception& e) {
    // The parser also throws out_of_range, for a number too large for a double ("1e999").
    return Error{fmt::format("{}: not valid JSON: {}", source, e.what())};
  }
}

Status check_object(const Json& value, const FieldPath& at) {
  if (!value.is_object()) return at.error("must be a JSON object", value);
  return ok_status();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j]: distance between the first i characters of a and the first j of b.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string_view> closest_key(std::string_view key, std::initializer_list<std::string_view> known) {
  std::optional<std::string_view> best;
  size_t best_distance = kMaxTypoDistance + 1;
  for (std::string_view candidate : known) {
    const size_t distance = edit_distance(key, candidate);
    if (distance < best_distance && 2 * distance <= candidate.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

Status check_known_keys(const Json& object, const FieldPath& at, std::initializer_list<std::string_view> known) {
  if (!object.is_object()) return ok_status();
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const std::string quoted = Json(key).dump();
    if (auto near = closest_key(key, known))
      return at.error(fmt::format("has an unknown key {} (did you mean \"{}\"?)", quoted, *near));
    return at.error(fmt::format("has an unknown key {} (expected one of: {})", quoted, fmt::join(known, ", ")));
  }
  return ok_status();
}

Result<std::string> read_string(const Json& object, const FieldPath& at, std::string_view name) {
  const Json* value = find_field(object, name);
  if (value == nullptr) return at.field(name).error("is missing");
  if (!value->is_string()) return at.field(name).error("must be a string", *value);
  return value->get<std::string>();
}

Result<std::string> read_string_or(const Json& object, const FieldPath& at, std::string_view name,
                                   std::string fallback) {
  if (find_field(object, name) == nullptr) return fallback;
  return read_string(object, at, name);
}

Result<double> read_number(const Json& object, const FieldPath& at, std::string_view name, double min_value,
                           bool strict) {
  const Json* value = find_field(object, name);
  const FieldPath here = at.field(name);
  if (value == nullptr) return here.error("is missing");
  if (!value->is_number()) return here.error("must be a number", *value);
  const double number = value->get<double>();
  if (!std::isfinite(number)) return here.error("must be finite", *value);
  if (strict && !(number > min_value)) return here.error(fmt::format("must be > {}", min_value), *value);
  if (!strict && !(number >= min_value)) return here.error(fmt::format("must be >= {}", min_value), *value);
  return number;
}

Result<double> read_number_or(const Json& object, const FieldPath& at, std::string_view name, double min_value,
                              bool strict, double fallback) {
  if (find_field(object, name) == nullptr) return fallback;
  return read_number(object, at, name, min_value, strict);
}

Result<int64_t> read_integer(const Json& object, const FieldPath& at, std::string_view name, int64_t min_value,
                             int64_t max_value) {
  const Json* value = find_field(object, name);
  const FieldPath here = at.field(name);
  if (value == nullptr) return here.error("is missing");
  if (value->is_number_float()) {
    const double d = value->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9.0e15)
      return here.error("must be a whole number", *value);
  } else if (!value->is_number_integer()) {
    return here.error("must be a whole number", *value);
  } else if (value->is_number_unsigned() && value->get<uint64_t>() > uint64_t(INT64_MAX)) {
    // Read as int64_t it would wrap to a negative number.
    return here.error(fmt::format("is too large (at most {})", INT64_MAX), *value);
  }
  const int64_t number = value->is_number_float() ? static_cast<int64_t>(value->get<double>()) : value->get<int64_t>();
  if (number < min_value) return here.error(fmt::format("must be >= {}", min_value), *value);
  if (number > max_value) return here.error(fmt::format("must be at most {}", max_value), *value);
  return number;
}

Result<int64_t> read_integer_or(const Json& object, const FieldPath& at, std::string_view name, int64_t min_value,
                                int64_t fallback, int64_t max_value) {
  if (find_field(object, name) == nullptr) return fallback;
  return read_integer(object, at, name, min_value, max_value);
}

Result<const Json*> read_array(const Json& object, const FieldPath& at, std::string_view name, bool non_empty) {
  const Json* value = find_field(object, name);
  const FieldPath here = at.field(name);
  if (value == nullptr) return here.error("is missing");
  if (!value->is_array()) return here.error("must be an array", *value);
  if (non_empty && value->empty()) return here.error("must not be empty", *value);
  return value;
}

Result<std::vector<double>> read_number_list(const Json& value, const FieldPath& at, bool positive) {
  const char* what = positive ? "a number > 0" : "a finite number";
  if (!value.is_array() || value.empty())
    return at.error(fmt::format("must be a non-empty array, each {}", what), value);
  std::vector<double> numbers;
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& number = value[i];
    if (!number.is_number() || !std::isfinite(number.get<double>()) || (positive && !(number.get<double>() > 0.0)))
      return at.index(i).error(fmt::format("must be {}", what), number);
    numbers.push_back(number.get<double>());
  }
  return numbers;
}

Status check_format(const Json& object, const FieldPath& at, std::string_view expected) {
  auto format = read_string(object, at, "format");
  if (!format) return format.error();
  if (*format != expected) return at.field("format").error(fmt::format("must be \"{}\"", expected), Json(*format));
  return ok_status();
}

}  // namespace baton::json_fields
