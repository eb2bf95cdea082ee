// What sim/megatron_arguments.cc (the layout's arguments) and
// sim/megatron_architecture_arguments.cc (the architecture's) share: the
// strict readers of a named choice and of a flag, and the architecture's keys
// written into Megatron's arguments. Internal to sim/; thread safety: pure
// functions.
#pragma once

#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/gpt_model.h"
#include "sim/json_fields.h"
#include "sim/result.h"

namespace baton::megatron_arguments_detail {

// `name`'s text read by `parse` (a name to std::optional<T>); an error
// saying it must be one of `choices` otherwise.
template <typename Parse>
auto read_named(const nlohmann::json& arguments, const json_fields::FieldPath& at, const char* name, Parse parse,
                const char* choices) -> Result<typename std::invoke_result_t<Parse, std::string_view>::value_type> {
  auto text = json_fields::read_string(arguments, at, name);
  if (!text) return text.error();
  const auto value = parse(*text);
  if (!value) return at.field(name).error(fmt::format("must be {}", choices), *text);
  return *value;
}

inline Result<bool> read_flag(const nlohmann::json& object, const json_fields::FieldPath& at, const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) return at.field(name).error("is missing");
  if (!it->is_boolean()) return at.field(name).error("must be true or false", *it);
  return it->get<bool>();
}

// The architecture's keys (sim/megatron_arguments.h's kGptArchitectureKeys)
// of a model beyond GPT-3's, written into `arguments`.
void write_gpt_architecture(const GptModel& model, nlohmann::json& arguments);

}  // namespace baton::megatron_arguments_detail
