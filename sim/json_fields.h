// Checked reads of JSON fields for the loaders (profile, topology, plan).
//
// Contract: every reader names the source (usually a file path), the field's
// full path (`levels[1].bandwidth_gbps`) and the offending value in its Error,
// so that a user can fix the file without reading code. Nothing here throws:
// nlohmann's exceptions are caught at the parse boundary (`parse_json_text`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/result.h"

namespace baton::json_fields {

using Json = nlohmann::json;

// Where a value sits: "file.json: layers[3].forward_ms".
class FieldPath {
 public:
  FieldPath(std::string source, std::string path = {})
      : source_(std::move(source)), path_(std::move(path)) {}
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
Result<double> read_number(const Json& object, const FieldPath& at, std::string_view name,
                           double min_value, bool strict);
Result<double> read_number_or(const Json& object, const FieldPath& at, std::string_view name,
                              double min_value, bool strict, double fallback);
// A whole number >= min_value.
Result<int64_t> read_integer(const Json& object, const FieldPath& at, std::string_view name,
                             int64_t min_value);
Result<int64_t> read_integer_or(const Json& object, const FieldPath& at, std::string_view name,
                                int64_t min_value, int64_t fallback);
// The field must be an array (possibly empty unless `non_empty`).
Result<const Json*> read_array(const Json& object, const FieldPath& at, std::string_view name,
                               bool non_empty);
// The `format` field must equal `expected` exactly.
Status check_format(const Json& object, const FieldPath& at, std::string_view expected);
// `value` must be a JSON object.
Status check_object(const Json& value, const FieldPath& at);

}  // namespace baton::json_fields
