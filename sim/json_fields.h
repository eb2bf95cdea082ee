// Checked reads of JSON fields for the loaders (profile, topology, plan,
// check cases, traces).
//
// Contract: every reader names the source (usually a file path), the field's
// full path (`levels[1].bandwidth_gbps`) and the offending value in its Error,
// so that a user can fix the file without reading code. Nothing here throws:
// nlohmann's exceptions are caught at the parse boundary (`parse_json_text`).
// Loaders are strict: every object they read is first given to
// `check_known_keys` with every key its format allows, so a misspelled key is
// refused instead of read as absent.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/result.h"

namespace baton::json_fields {

using Json = nlohmann::json;

// Where a value sits: "file.json: layers[3].forward_ms".
class FieldPath {
 public:
  FieldPath(std::string source, std::string path = {}) : source_(std::move(source)), path_(std::move(path)) {}
  FieldPath field(std::string_view name) const;
  FieldPath index(size_t i) const;
  const std::string& path() const { return path_; }
  // "source: path <what>, got <value>"
  Error error(std::string_view what, const Json& got) const;
  Error error(std::string_view what) const;

 private:
  std::string source_;
  std::string path_;
};

// Parses text into JSON; a syntax error names the source and byte offset.
Result<Json> parse_json_text(std::string_view text, const std::string& source);

// Readers: `object` must be a JSON object. Required fields must be present and
// of the right type; optional ones return `fallback` when absent but are
// still type- and range-checked when present (no silent fallback on a bad value).
Result<std::string> read_string(const Json& object, const FieldPath& at, std::string_view name);
Result<std::string> read_string_or(const Json& object, const FieldPath& at, std::string_view name,
                                   std::string fallback);
// A finite number >= `min_value` (inclusive) or > it when `strict`.
Result<double> read_number(const Json& object, const FieldPath& at, std::string_view name, double min_value,
                           bool strict);
Result<double> read_number_or(const Json& object, const FieldPath& at, std::string_view name, double min_value,
                              bool strict, double fallback);
// A whole number in [min_value, max_value] ("must be at most N" above it).
Result<int64_t> read_integer(const Json& object, const FieldPath& at, std::string_view name, int64_t min_value,
                             int64_t max_value = INT64_MAX);
Result<int64_t> read_integer_or(const Json& object, const FieldPath& at, std::string_view name, int64_t min_value,
                                int64_t fallback, int64_t max_value = INT64_MAX);
// The field must be an array (possibly empty unless `non_empty`).
Result<const Json*> read_array(const Json& object, const FieldPath& at, std::string_view name, bool non_empty);
// `value` (the field at `at`) must be a non-empty array of finite numbers,
// each > 0 when `positive`.
Result<std::vector<double>> read_number_list(const Json& value, const FieldPath& at, bool positive);
// The `format` field must equal `expected` exactly.
Status check_format(const Json& object, const FieldPath& at, std::string_view expected);
// `value` must be a JSON object.
Status check_object(const Json& value, const FieldPath& at);
// Every key of `object` (a JSON object) must be one of `known`. The first
// unknown key (in nlohmann's order, alphabetical) is refused, naming the
// object's path and the key, with the closest known key when one is near:
//   `a.json: levels[1] has an unknown key "bandwith_gbps" (did you mean "bandwidth_gbps"?)`
// and otherwise the keys the object may hold:
//   `a.json: levels[1] has an unknown key "speed" (expected one of: name, size)`.
Status check_known_keys(const Json& object, const FieldPath& at, std::initializer_list<std::string_view> known);

// Edit distance between `a` and `b`: the fewest insertions, deletions,
// substitutions of one character and swaps of two neighbours (optimal string
// alignment, a restricted Damerau-Levenshtein distance). "forwrd_ms" ->
// "forward_ms" is 1, "szie" -> "size" is 1.
size_t edit_distance(std::string_view a, std::string_view b);
// The entry of `known` closest to `key` if it is near enough to be a typo of
// it: at most kMaxTypoDistance edits, and at most half the entry's length (so
// that "x" suggests nothing for "ts"). Ties go to the earlier entry.
constexpr size_t kMaxTypoDistance = 2;
std::optional<std::string_view> closest_key(std::string_view key, std::initializer_list<std::string_view> known);

}  // namespace baton::json_fields
